//! Following a session from elsewhere (ARCHITECTURE.md#following) in every store: each
//! event once, in order, with no gap, resuming where a follower stood; a follower as far
//! away as the store reaches keeping a projection of the inbox; and a session deleted
//! under its follower.

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use inboxlog::store::{Durability, Store, StoreOptions};
use inboxlog::{
    Baseline, Envelope, ErrorKind, Follower, QueueProjection, Session, SessionMeta, Target, ToJson,
};

use crate::{Rng, each_store, msg, stores_with};

#[test]
fn a_follower_yields_committed_events_and_resumes_where_it_stood() {
    each_store(|_, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.append("x/a", "{}", Envelope::default()).unwrap();
        let mut f = Follower::open(store, "s", 0).unwrap();
        assert_eq!(f.session(), "s");
        let first = f.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!((first.seq(), first.ty()), (0, "x/a"));
        assert!(f.next_timeout(Duration::from_millis(30)).unwrap().is_none());
        let writer = thread::spawn({
            let s = Arc::new(s);
            move || {
                for i in 0..50 {
                    s.append("x/b", &format!(r#"{{"i":{i}}}"#), Envelope::default())
                        .unwrap();
                }
                s
            }
        });
        let mut seqs = Vec::new();
        while seqs.len() < 20 {
            seqs.push(
                f.next_timeout(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .seq(),
            );
        }
        let resume = f.next_seq();
        drop(f);
        let s = writer.join().unwrap();
        let mut again = Follower::open(store, "s", resume).unwrap();
        for e in again.next_batch(Duration::from_secs(5)).unwrap() {
            seqs.push(e.seq());
        }
        while seqs.len() < 50 {
            seqs.push(
                again
                    .next_timeout(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .seq(),
            );
        }
        assert_eq!(seqs, (1..=50).collect::<Vec<u64>>());
        // From the middle, and from past the end.
        let mut mid = Follower::open(store, "s", 30).unwrap();
        assert_eq!(mid.next().unwrap().unwrap().seq(), 30);
        let mut late = Follower::open(store, "s", 51).unwrap();
        assert!(
            late.next_timeout(Duration::from_millis(20))
                .unwrap()
                .is_none()
        );
        s.append("x/c", "{}", Envelope::default()).unwrap();
        assert_eq!(late.next().unwrap().unwrap().seq(), 51);
        // A deleted session ends the follow with `not_found`.
        s.close().unwrap();
        store.delete("s").unwrap();
        let err = late.next_timeout(Duration::from_secs(1)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    });
}

/// A follower of a session deleted while events it has not read yet are stored gets
/// `not_found` at its next read, in every store, and none of those events: a delete
/// forgets the log for every reader at once (a JSONL follower could still read the
/// unlinked file, a PostgreSQL or memory one could not), and the follower reports the
/// end rather than a log that no longer exists. What it yielded before had no gap.
#[test]
fn a_follower_of_a_deleted_session_gets_not_found_before_unread_events() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.append("x/a", "{}", Envelope::default()).unwrap();
        let mut f = Follower::open(store, "s", 0).unwrap();
        let first = f.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(first.seq(), 0, "{name}");
        for _ in 0..3 {
            s.append("x/unread", "{}", Envelope::default()).unwrap();
        }
        s.close().unwrap();
        store.delete("s").unwrap();
        let err = f.next_timeout(Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{name}: {err}");
        assert_eq!(err.session(), Some("s"), "{name}");
        assert_eq!(f.next_seq(), 1, "{name}: nothing yielded after the delete");
        // And again: the session stays gone for this follower.
        let err = f.next_timeout(Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{name}: {err}");
    });
}

/// Follows session "s" from seq 0 into a `QueueProjection`, handing `out` the line
/// `at <seq> <baseline JSON>` after every event, until a `test/done` event: the
/// follower of [`a_follower_elsewhere_keeps_a_projection_equal_to_the_inbox`], run in
/// another process (`child.rs`) or on a thread.
pub fn into_projection(store: &dyn Store, out: &mut dyn FnMut(String)) {
    let mut follower = Follower::open(store, "s", 0).unwrap();
    let mut projection = QueueProjection::new(Baseline {
        seq: None,
        next_turn: Vec::new(),
        next_step: Vec::new(),
    })
    .unwrap();
    for (expected, event) in (&mut follower).enumerate() {
        let event = event.unwrap();
        assert_eq!(event.seq(), expected as u64, "skipped or repeated");
        projection.apply(&event).unwrap();
        out(format!(
            "at {} {}",
            event.seq(),
            projection.baseline().to_json()
        ));
        if event.ty() == "test/done" {
            return;
        }
    }
}

/// A follower in another process (a thread with a handle of its own for the memory
/// store) feeding a `QueueProjection` goes through every state the owner's inbox went
/// through, in order, over 1,000 random inbox operations.
#[test]
fn a_follower_elsewhere_keeps_a_projection_equal_to_the_inbox() {
    for b in stores_with(&StoreOptions::durability(Durability::None)) {
        let name = b.name;
        let s = Session::create(&*b.store, "s", SessionMeta::default()).unwrap();
        let kid = b.processes.then(|| b.spawn("follower", ""));
        let (tx, rx) = mpsc::channel();
        let thread = kid.is_none().then(|| {
            let store = b.connect();
            thread::spawn(move || {
                into_projection(&*store, &mut |line| tx.send(line).unwrap());
            })
        });
        let mut rng = Rng(0x5eed);
        // The owner's inbox after each operation, by the seq of its last event.
        let mut states = BTreeMap::new();
        let inbox = s.inbox();
        for i in 0..1_000u64 {
            let target = if rng.below(2) == 0 {
                Target::NextTurn
            } else {
                Target::NextStep
            };
            let len = match target {
                Target::NextTurn => inbox.next_turn().unwrap().len(),
                Target::NextStep => inbox.next_step().unwrap().len(),
            } as u64;
            match rng.below(10) {
                0..=4 => inbox.append(target, msg(&format!("m{i}"))).unwrap(),
                5 => inbox.prepend(target, msg(&format!("m{i}"))).unwrap(),
                6 | 7 => {
                    let at = rng.below(len + 1) as f64;
                    inbox.splice(target, at, 1.0, Vec::new()).map(drop).unwrap();
                }
                8 => {
                    let at = rng.below(len + 1) as f64;
                    inbox
                        .splice(target, at, 2.0, vec![msg(&format!("r{i}"))])
                        .map(drop)
                        .unwrap();
                }
                _ if rng.below(20) == 0 => inbox.clear().unwrap(),
                _ => s
                    .append("x/noise", "{}", Envelope::default())
                    .map(drop)
                    .unwrap(),
            }
            if let Some(seq) = s.last_seq().unwrap() {
                let state = Baseline {
                    seq: Some(seq),
                    next_turn: inbox.next_turn().unwrap(),
                    next_step: inbox.next_step().unwrap(),
                };
                states.insert(seq, state.to_json());
            }
        }
        s.append("test/done", "{}", Envelope::default()).unwrap();
        let last = s.last_seq().unwrap().unwrap();
        let seen: Vec<String> = match (kid, thread) {
            (Some(mut kid), _) => {
                assert!(kid.wait().success(), "{name}: the follower failed");
                kid.lines.iter().collect()
            }
            (None, Some(thread)) => {
                thread.join().unwrap();
                rx.iter().collect()
            }
            (None, None) => unreachable!(),
        };
        let seen: Vec<(u64, &str)> = seen
            .iter()
            .filter_map(|l| l.strip_prefix("at "))
            .map(|l| {
                let (seq, state) = l.split_once(' ').unwrap();
                (seq.parse().unwrap(), state)
            })
            .collect();
        assert_eq!(seen.len() as u64, last + 1, "{name}");
        let mut checked = 0;
        for (seq, state) in seen {
            if let Some(expected) = states.get(&seq) {
                assert_eq!(state, expected, "{name}: at seq {seq}");
                checked += 1;
            }
        }
        // Every state the owner's inbox went through was compared.
        assert_eq!(checked, states.len(), "{name}");
        assert!(checked > 900, "{name}: only {checked} states compared");
    }
}

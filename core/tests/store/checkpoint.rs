//! Checkpoints in every store that keeps them
//! (ARCHITECTURE.md#checkpoints-and-reading-without-owning): a session reopened from
//! its checkpoint is in the state a replay of its whole log gives, opening reads only
//! the events after it, and `verify` agrees. The memory store keeps none and reads
//! every event; `peek` reads what `open` reads, without taking the session. Doctored
//! checkpoints: `core/tests/checkpoint.rs` (JSONL) and
//! `core/tests/pg.rs` (PostgreSQL).

use inboxlog::checkpoint::{Checkpoint, Replay};
use inboxlog::store::{OpenOptions, Store};
use inboxlog::{
    Decision, Envelope, Event, Header, QueueProjection, Session, SessionMeta, StepOutcome, Target,
};

use crate::{Rng, each_store, msg};

/// Some turns, inbox changes and posts, the session closed at the end or not.
fn drive(s: &Session, store: &dyn Store, rng: &mut Rng, round: u64) {
    for i in 0..30 {
        let id = format!("r{round}-{i}");
        match rng.below(6) {
            0 | 1 => s.inbox().append(Target::NextTurn, msg(&id)).unwrap(),
            2 => {
                let _ = s.inbox().remove(&format!("r{round}-{}", rng.below(i + 1)));
            }
            3 => {
                s.append("host/x", &format!("{{\"i\":{i}}}"), Envelope::default())
                    .map(drop)
                    .unwrap();
            }
            4 => {
                store
                    .post(s.id(), Target::NextStep, &msg(&format!("p{id}")))
                    .unwrap();
                s.receive().unwrap();
            }
            _ => {
                if s.inbox().has_pending().unwrap() {
                    s.open_turn().unwrap();
                    let p = s.propose_step().unwrap();
                    s.decide(Decision::Enter(p.messages)).unwrap();
                    s.end_step(StepOutcome::Completed).unwrap();
                    let _ = s.close_turn();
                }
            }
        }
    }
}

/// Asserts the open session `s` holds the inbox a replay of its whole log gives.
fn assert_replayed(name: &str, store: &dyn Store, s: &Session, what: &str) {
    let (header, events) = Session::inspect(store, "s").unwrap();
    let projection = QueueProjection::replay(&events, header.replay_from(), None).unwrap();
    for target in [Target::NextTurn, Target::NextStep] {
        assert_eq!(
            s.with_inbox(|i| i.list(target)).unwrap(),
            projection.inbox().list(target),
            "{name} {what}"
        );
    }
    assert_eq!(
        s.last_seq().unwrap(),
        events.last().map(Event::seq),
        "{name} {what}"
    );
}

/// A replay that resumes, counting what it is given.
#[derive(Default)]
struct Counting {
    checkpoints: u64,
    visits: u64,
}

impl Replay for Counting {
    fn resumes(&self) -> bool {
        true
    }

    fn checkpoint(&mut self, _: Checkpoint) -> inboxlog::Result<()> {
        self.checkpoints += 1;
        Ok(())
    }

    fn visit(&mut self, _: &Header, _: &Event) -> inboxlog::Result<()> {
        self.visits += 1;
        Ok(())
    }
}

#[test]
fn a_session_reopened_from_its_checkpoint_is_in_the_replayed_state() {
    each_store(|name, store| {
        let mut rng = Rng(0xc4ec_4b01);
        let mut s = Session::create(store, "s", SessionMeta::default()).unwrap();
        for round in 0..4 {
            let what = format!("round {round}");
            drive(&s, store, &mut rng, round);
            s.close().unwrap();
            let s2 = Session::open(store, "s").unwrap();
            assert_replayed(name, store, &s2, &what);
            Session::verify(store, "s").unwrap_or_else(|e| panic!("{name} {what}: {e}"));
            drive(&s2, store, &mut rng, round + 100);
            // Dropped, not closed: the checkpoint stays behind the end.
            drop(s2);
            s = Session::open(store, "s").unwrap();
            assert_replayed(name, store, &s, &what);
        }
        s.close().unwrap();
        // Closed: a checkpoint at the end (not in memory), so an open reads nothing
        // after it; then five events and no close: five.
        let total = Session::verify(store, "s").unwrap().events;
        let count = |store: &dyn Store| {
            let mut c = Counting::default();
            drop(store.open("s", &OpenOptions::default(), &mut c).unwrap());
            (c.checkpoints, c.visits)
        };
        let keeps = name != "memory";
        let (cps, visits) = count(store);
        if keeps {
            assert_eq!((cps, visits), (1, 0), "{name}");
        } else {
            assert_eq!((cps, visits), (0, total), "{name}");
        }
        let s = Session::open(store, "s").unwrap();
        for i in 0..5 {
            s.append("host/late", &format!("{{\"i\":{i}}}"), Envelope::default())
                .unwrap();
        }
        drop(s);
        let (cps, visits) = count(store);
        if keeps {
            // PostgreSQL reads the replayed events and the last one: here the last.
            assert_eq!(cps, 1, "{name}");
            assert!((1..=5).contains(&visits), "{name}: {visits} visits");
        } else {
            assert_eq!(visits, total + 5, "{name}");
        }
        let s = Session::open(store, "s").unwrap();
        assert_replayed(name, store, &s, "after the late events");
        s.close().unwrap();
        Session::verify(store, "s").unwrap();
        // Deleted with its session: a new log of the id opens from seq 0.
        store.delete("s").unwrap();
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.append("host/x", "{}", Envelope::default()).unwrap();
        drop(s);
        let (cps, visits) = count(store);
        assert_eq!((cps, visits), (0, 1), "{name}");
        store.delete("s").unwrap();
    });
}

#[test]
fn a_peek_reads_what_open_reads_without_taking_the_session() {
    each_store(|name, store| {
        let mut rng = Rng(0x9ee6_0001);
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        drive(&s, store, &mut rng, 0);
        s.close().unwrap();
        let s = Session::open(store, "s").unwrap();
        drive(&s, store, &mut rng, 1);
        let turn = s.open_turn().unwrap();
        // Held by its writer: the peek is the writer's own state.
        let seen = Session::peek(store, "s").unwrap();
        assert_eq!(seen.baseline, s.baseline(None).unwrap(), "{name}");
        assert_eq!(Some(seen.events - 1), s.last_seq().unwrap(), "{name}");
        assert_eq!(
            (seen.open_turn, seen.open_step),
            (Some(turn), None),
            "{name}"
        );
        // From the checkpoint, as open reads: the events after it only.
        let mut c = Counting::default();
        store.peek("s", &mut c).unwrap();
        if name == "memory" {
            assert_eq!((c.checkpoints, c.visits), (0, seen.events), "{name}");
        } else {
            assert_eq!(c.checkpoints, 1, "{name}");
            assert!(
                c.visits < seen.events,
                "{name}: {} of {}",
                c.visits,
                seen.events
            );
        }
        // It took nothing: the writer goes on and closes.
        s.inbox()
            .append(Target::NextStep, msg("after-peek"))
            .unwrap();
        s.close().unwrap();
        let seen = Session::peek(store, "s").unwrap();
        assert_eq!(
            seen.open_turn,
            Some(turn),
            "{name}: left open, not repaired"
        );
        assert!(
            seen.baseline
                .next_step
                .iter()
                .any(|m| m.id() == "after-peek"),
            "{name}"
        );
        store.delete("s").unwrap();
    });
}

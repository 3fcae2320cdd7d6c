//! `Session::read` and `Session::tail` in every store
//! (ARCHITECTURE.md#checkpoints-and-reading-without-owning): each returns exactly the
//! corresponding slice of what `Session::inspect` returns, with the same header,
//! whether a writer holds the session or not, and without locking or writing. The
//! JSONL reader's own cases (torn tails, damage, version 1, long lines, what it costs)
//! are in `core/tests/jsonl_reads.rs`.

use inboxlog::{Envelope, ErrorKind, Event, Session, SessionMeta, Target};

use crate::{Rng, assert_err, each_store, lines, msg};

/// The types the random logs draw from.
const TYPES: [&str; 3] = ["host/a", "host/b", "host/c"];

/// Appends `n` random host events (and now and then a whole turn) to `s`.
fn fill(s: &Session, rng: &mut Rng, n: u64) {
    for i in 0..n {
        match rng.below(12) {
            0 => {
                s.inbox()
                    .append(Target::NextTurn, msg(&format!("m{i}")))
                    .unwrap();
            }
            _ => {
                let ty = TYPES[rng.below(3) as usize];
                let pad = "x".repeat(rng.below(200) as usize);
                s.append(
                    ty,
                    &format!(r#"{{"i":{i},"pad":"{pad}"}}"#),
                    Envelope::default(),
                )
                .unwrap();
            }
        }
    }
}

/// The last `limit` of `events` of `types` (every type when `None`).
fn last_of(events: &[Event], limit: usize, types: Option<&[&str]>) -> Vec<String> {
    let found: Vec<String> = events
        .iter()
        .filter(|e| types.is_none_or(|t| t.contains(&e.ty())))
        .map(Event::to_json)
        .collect();
    found[found.len().saturating_sub(limit)..].to_vec()
}

fn json(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// Compares every read and tail of `id` with the slices of `inspect`.
fn check(name: &str, store: &dyn inboxlog::store::Store, id: &str, rng: &mut Rng) {
    let (header, all) = Session::inspect(store, id).unwrap();
    let n = all.len() as u64;
    let mut sinces = vec![0, n, n + 1, n + 100, u64::MAX];
    sinces.extend((0..6).map(|_| rng.below(n + 1)));
    for since in sinces {
        let (h, read) = Session::read(store, id, since).unwrap();
        assert_eq!(h, header, "{name} {id} read({since})");
        let from = usize::try_from(since).unwrap_or(usize::MAX).min(all.len());
        assert_eq!(json(&read), json(&all[from..]), "{name} {id} read({since})");
    }
    let filters: [Option<&[&str]>; 5] = [
        None,
        Some(&["host/a"]),
        Some(&["host/b", "turn/start"]),
        Some(&["agent/inbox/spliced"]),
        Some(&["no/such-type"]),
    ];
    let mut limits = vec![0, 1, n as usize, n as usize + 1, usize::MAX];
    limits.extend((0..4).map(|_| rng.below(n + 2) as usize));
    for types in filters {
        for &limit in &limits {
            let (h, tail) = Session::tail(store, id, limit, types).unwrap();
            assert_eq!(h, header, "{name} {id} tail({limit}, {types:?})");
            assert_eq!(
                json(&tail),
                last_of(&all, limit, types),
                "{name} {id} tail({limit}, {types:?})"
            );
        }
    }
}

#[test]
fn read_and_tail_are_slices_of_inspect_on_random_logs() {
    each_store(|name, store| {
        let mut rng = Rng(41);
        for k in 0..8 {
            let id = format!("r{k}");
            let s = Session::create(store, &id, SessionMeta::default()).unwrap();
            let n = [0, 1, 2, 5, 30, 80, 150, 400][k];
            fill(&s, &mut rng, n);
            // Half are read while their writer holds them, half once it is closed.
            if k % 2 == 0 {
                s.close().unwrap();
                check(name, store, &id, &mut rng);
            } else {
                check(name, store, &id, &mut rng);
                s.close().unwrap();
            }
        }
    });
}

#[test]
fn reads_neither_lock_nor_write() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        fill(&s, &mut Rng(7), 20);
        let before = lines(store, "s");
        assert_eq!(
            Session::tail(store, "s", 3, None).unwrap().1.len(),
            3,
            "{name}"
        );
        assert_eq!(
            Session::read(store, "s", 18).unwrap().1.len(),
            before.len() - 18
        );
        // The writer goes on, and a read sees what it appended.
        s.append("host/after", "{}", Envelope::default()).unwrap();
        let (_, last) = Session::tail(store, "s", 1, None).unwrap();
        assert_eq!(last[0].ty(), "host/after", "{name}");
        s.close().unwrap();
        // Nobody holds it now: open works, so the reads left no lock behind.
        let again = Session::open(store, "s").unwrap();
        assert_eq!(lines(store, "s").len(), before.len() + 1, "{name}");
        again.close().unwrap();
    });
}

#[test]
fn a_missing_or_misnamed_session_is_refused() {
    each_store(|name, store| {
        let err = assert_err(
            Session::read(store, "nope", 0),
            ErrorKind::NotFound,
            &["nope"],
        );
        assert_eq!(err.session(), Some("nope"), "{name}");
        let err = assert_err(
            Session::tail(store, "nope", 5, None),
            ErrorKind::NotFound,
            &["nope"],
        );
        assert_eq!(err.session(), Some("nope"), "{name}");
        assert_err(
            Session::tail(store, "nope", 0, None),
            ErrorKind::NotFound,
            &[],
        );
        assert_err(
            Session::read(store, "../x", 0),
            ErrorKind::InvalidInput,
            &[],
        );
        assert_err(
            Session::tail(store, "", 1, None),
            ErrorKind::InvalidInput,
            &[],
        );
    });
}

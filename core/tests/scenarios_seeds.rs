//! Sessions created from a seed (ARCHITECTURE.md#seeds-and-forks): the seed's checks and
//! its `session/end-seed`. Forks, and a seed's inbox replayed from `seedLength` when the
//! session opens, are in the store suite (`core/tests/store/fork.rs`), over every store.

mod scenarios_common;

use inboxlog::store::MemoryStore;
use inboxlog::{ErrorKind, Event, Session, SessionMeta};
use scenarios_common::*;

#[test]
fn create_with_a_seed_appends_end_seed_and_continues_turns() {
    let store = MemoryStore::new();
    let mut seed = vec![pair("host/x", r#"{"k":1}"#), own(INSERT_A)];
    seed.extend(stepped_turn(1, COMPLETED));
    seed.push(ts(2));
    seed.push(te(2, COMPLETED));
    let seed = owned_log(&seed);
    let s = Session::create_seeded(&store, "seeded", SessionMeta::default(), seed.clone(), None)
        .unwrap();
    let events = s.events(0).unwrap();
    assert_eq!(events.len(), seed.len() + 1);
    assert_eq!(&events[..seed.len()], &seed[..]);
    let end = events.last().unwrap();
    assert_eq!(
        (end.ty(), end.seq(), end.data()),
        ("session/end-seed", seed.len() as u64, "{}")
    );
    assert_eq!(s.header().seed_length, None);
    // The seed's splices replay when there is no seedLength: a was inserted, then claimed.
    assert!(!s.inbox().has_pending().unwrap());
    assert_eq!(s.open_turn().unwrap(), 3);
}

#[test]
fn a_seed_that_already_ends_with_end_seed_gets_no_second_one() {
    let store = MemoryStore::new();
    let seed = log(&[("host/x", "{}"), ("session/end-seed", "{}")]);
    let s =
        Session::create_seeded(&store, "s", SessionMeta::default(), seed.clone(), None).unwrap();
    assert_eq!(s.events(0).unwrap(), seed);
    // An empty seed is an empty log.
    let e = Session::create_seeded(&store, "e", SessionMeta::default(), Vec::new(), None).unwrap();
    assert!(e.events(0).unwrap().is_empty());
}

#[test]
fn a_seed_is_validated() {
    let store = MemoryStore::new();
    let gap = vec![
        Event::from_json(r#"{"type":"x","seq":0,"time":0,"data":{}}"#).unwrap(),
        Event::from_json(r#"{"type":"x","seq":2,"time":0,"data":{}}"#).unwrap(),
    ];
    let not_from_zero =
        vec![Event::from_json(r#"{"type":"x","seq":1,"time":0,"data":{}}"#).unwrap()];
    let bad_turn = log(&[("turn/start", r#"{"turn":2}"#)]);
    let bad_step = log(&[
        ("turn/start", r#"{"turn":1}"#),
        ("step/end", r#"{"turn":1,"step":1}"#),
    ]);
    let bad_splice = log(&[CLAIM]);
    for (i, seed) in [gap, not_from_zero, bad_turn, bad_step, bad_splice]
        .into_iter()
        .enumerate()
    {
        let id = format!("bad{i}");
        let err = Session::create_seeded(&store, &id, SessionMeta::default(), seed, None)
            .err()
            .expect("refused");
        assert!(
            matches!(
                err.kind(),
                ErrorKind::InvalidInput | ErrorKind::Corrupt | ErrorKind::InvalidSplice
            ),
            "{i}: {err:?}"
        );
        assert!(err.to_string().contains("seq"), "{i}: {err}");
        // Nothing was created.
        assert_eq!(
            Session::inspect(&store, &id).err().map(|e| e.kind()),
            Some(ErrorKind::NotFound)
        );
    }
    // seedLength past the seed.
    let err = Session::create_seeded(
        &store,
        "past",
        SessionMeta::default(),
        log(&[("x", "{}")]),
        Some(5),
    )
    .err()
    .expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

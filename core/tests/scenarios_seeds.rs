//! Sessions created from a seed, and forks (ARCHITECTURE.md#seeds-and-forks).

mod scenarios_common;

use inboxlog::store::MemoryStore;
use inboxlog::{Decision, ErrorKind, Event, Session, SessionMeta, StepOutcome, Target};
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
fn the_inbox_replays_from_seed_length() {
    let store = MemoryStore::new();
    let seed = log(&[INSERT_A, ("host/x", "{}")]);
    let with = Session::create_seeded(
        &store,
        "with",
        SessionMeta::default(),
        seed.clone(),
        Some(1),
    )
    .unwrap();
    assert_eq!(with.header().seed_length, Some(1));
    assert!(!with.inbox().has_pending().unwrap());
    let without =
        Session::create_seeded(&store, "without", SessionMeta::default(), seed, None).unwrap();
    assert_eq!(lists(&without).0, ["a"]);
    // Reopening replays the same way.
    with.close().unwrap();
    without.close().unwrap();
    assert!(
        !Session::open(&store, "with")
            .unwrap()
            .inbox()
            .has_pending()
            .unwrap()
    );
    assert_eq!(lists(&Session::open(&store, "without").unwrap()).0, ["a"]);
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

/// A parent with one finished turn, one pending message, and turn 2 open mid-step.
fn busy_parent(store: &MemoryStore) -> Session {
    let meta = SessionMeta {
        cwd: Some("/work".into()),
        ..SessionMeta::default()
    };
    let p = Session::create(store, "parent", meta).unwrap();
    p.inbox().append(Target::NextTurn, m("a")).unwrap();
    p.open_turn().unwrap();
    let prop = p.propose_step().unwrap();
    p.decide(Decision::Enter(prop.messages)).unwrap();
    p.end_step(StepOutcome::Completed).unwrap();
    p.close_turn().unwrap();
    p.inbox().append(Target::NextTurn, m("b")).unwrap();
    p.inbox().append(Target::NextTurn, m("c")).unwrap();
    p
}

#[test]
fn fork_copies_up_to_the_open_turn() {
    let store = MemoryStore::new();
    let p = busy_parent(&store);
    let cut = next_seq(&p); // turn 2 starts here
    p.open_turn().unwrap();
    let prop = p.propose_step().unwrap();
    p.decide(Decision::Enter(prop.messages)).unwrap();
    let before = Session::inspect(&store, "parent").unwrap();

    let meta = SessionMeta {
        origin: Some("subagent".into()),
        delegation_depth: Some(1),
        agent_preset: Some("reviewer".into()),
        cwd: None,
    };
    let child = Session::fork(&store, "parent", "child", meta).unwrap();
    let h = child.header();
    assert_eq!(h.parent_session.as_deref(), Some("parent"));
    assert_eq!(h.seed_length, Some(cut));
    assert_eq!(h.cwd.as_deref(), Some("/work"));
    assert_eq!(h.origin.as_deref(), Some("subagent"));
    assert_eq!(h.delegation_depth, Some(1));
    assert_eq!(h.agent_preset.as_deref(), Some("reviewer"));
    let events = child.events(0).unwrap();
    assert_eq!(&events[..cut as usize], &before.1[..cut as usize]);
    assert_eq!(events.len() as u64, cut + 1);
    assert_eq!(events[cut as usize].ty(), "session/end-seed");
    assert_eq!(events[cut as usize].seq(), cut);
    // The child's inbox replays from seedLength: empty, although the parent has pending
    // input in the copied part.
    assert!(!child.inbox().has_pending().unwrap());
    // Turn numbers continue after the copied turns.
    assert_eq!(child.open_turn().unwrap(), 2);
    // The parent is unchanged and still usable.
    let after = Session::inspect(&store, "parent").unwrap();
    assert_eq!(after, before);
    assert!(!p.end_step(StepOutcome::Completed).unwrap());
    assert_eq!(lists(&p).0, ["c"]);
}

#[test]
fn fork_of_an_idle_parent_copies_everything() {
    let store = MemoryStore::new();
    let p = busy_parent(&store);
    let parent_events = p.events(0).unwrap();
    let child = Session::fork(&store, "parent", "child", SessionMeta::default()).unwrap();
    let n = parent_events.len() as u64;
    assert_eq!(child.header().seed_length, Some(n));
    assert_eq!(child.header().cwd.as_deref(), Some("/work"));
    assert_eq!(child.header().origin, None);
    let events = child.events(0).unwrap();
    assert_eq!(&events[..n as usize], &parent_events[..]);
    assert_eq!(written(&child, n), [pair("session/end-seed", "{}")]);
    assert!(!child.inbox().has_pending().unwrap());
    assert_eq!(child.open_turn().unwrap(), 2);
    assert_eq!(p.open_turn().unwrap(), 2);
    // Reopened, the child's inbox is still empty.
    child.close().unwrap();
    let child = Session::open(&store, "child").unwrap();
    assert!(!child.inbox().has_pending().unwrap());
    // A fork cannot take an existing id.
    assert_eq!(
        Session::fork(&store, "parent", "child", SessionMeta::default())
            .err()
            .map(|e| e.kind()),
        Some(ErrorKind::AlreadyExists)
    );
}

//! Forks and seeds in every store (ARCHITECTURE.md#seeds-and-forks): a fork copies its
//! parent's log up to the turn in progress, ends the copy with `session/end-seed`,
//! replays its inbox from there, and is a session of its own; the parent is untouched.

use inboxlog::store::Store;
use inboxlog::{Decision, ErrorKind, Event, Session, SessionMeta, StepOutcome, Target};

use crate::{assert_err, each_store, ids, lines, msg};

/// A parent with one finished turn, two pending messages, and the current directory
/// `/work` in its header.
fn busy_parent(store: &dyn Store) -> Session {
    let meta = SessionMeta {
        cwd: Some("/work".into()),
        ..SessionMeta::default()
    };
    let p = Session::create(store, "parent", meta).unwrap();
    p.inbox().append(Target::NextTurn, msg("a")).unwrap();
    p.open_turn().unwrap();
    let prop = p.propose_step().unwrap();
    p.decide(Decision::Enter(prop.messages)).unwrap();
    p.end_step(StepOutcome::Completed).unwrap();
    p.close_turn().unwrap();
    p.inbox().append(Target::NextTurn, msg("b")).unwrap();
    p.inbox().append(Target::NextTurn, msg("c")).unwrap();
    p
}

#[test]
fn a_fork_copies_the_log_up_to_the_open_turn_and_leaves_the_parent_untouched() {
    each_store(|name, store| {
        let p = busy_parent(store);
        let cut = p.last_seq().unwrap().unwrap() + 1; // turn 2 starts here
        p.open_turn().unwrap();
        let prop = p.propose_step().unwrap();
        p.decide(Decision::Enter(prop.messages)).unwrap();
        let before = lines(store, "parent");

        let meta = SessionMeta {
            origin: Some("subagent".into()),
            delegation_depth: Some(1),
            agent_preset: Some("reviewer".into()),
            cwd: None,
        };
        let child = Session::fork(store, "parent", "child", meta).unwrap();
        let h = child.header();
        assert_eq!(h.parent_session.as_deref(), Some("parent"), "{name}");
        assert_eq!(h.seed_length, Some(cut), "{name}");
        assert_eq!(h.cwd.as_deref(), Some("/work"), "{name}: inherited");
        assert_eq!(h.origin.as_deref(), Some("subagent"), "{name}");
        assert_eq!(h.delegation_depth, Some(1), "{name}");
        assert_eq!(h.agent_preset.as_deref(), Some("reviewer"), "{name}");
        assert_eq!(
            &Session::inspect(store, "child").unwrap().0,
            h,
            "{name}: the header is stored as the child has it"
        );
        let copied = lines(store, "child");
        assert_eq!(copied.len() as u64, cut + 1, "{name}");
        assert_eq!(
            copied[..cut as usize],
            before[..cut as usize],
            "{name}: the prefix is copied as it was stored"
        );
        let end_seed = &copied[cut as usize];
        assert!(
            end_seed.starts_with(&format!(r#"{{"type":"session/end-seed","seq":{cut},"#))
                && end_seed.ends_with(r#","data":{}}"#),
            "{name}: {end_seed}"
        );
        // The child's inbox replays from seedLength: empty, although the parent has
        // pending input in the copied part.
        assert!(!child.inbox().has_pending().unwrap(), "{name}");
        // Turn numbers continue after the copied turns; the child writes a log of its own.
        assert_eq!(child.open_turn().unwrap(), 2, "{name}");
        drop(child);
        let child = Session::open(store, "child").unwrap();
        assert!(!child.inbox().has_pending().unwrap(), "{name}");
        assert_eq!(
            child.open_report().repaired_turn,
            Some(2),
            "{name}: its open turn was interrupted"
        );
        // The parent is unchanged and still usable.
        assert_eq!(lines(store, "parent"), before, "{name}");
        assert!(!p.end_step(StepOutcome::Completed).unwrap(), "{name}");
        assert_eq!(p.inbox().next_turn().unwrap(), [msg("c")], "{name}");
    });
}

#[test]
fn a_fork_of_an_idle_parent_copies_everything_and_outlives_it() {
    each_store(|name, store| {
        let p = busy_parent(store);
        let parent = p.events(0).unwrap();
        let n = parent.len() as u64;
        let child = Session::fork(store, "parent", "child", SessionMeta::default()).unwrap();
        assert_eq!(child.header().seed_length, Some(n), "{name}");
        assert_eq!(child.header().cwd.as_deref(), Some("/work"), "{name}");
        assert_eq!(child.header().origin, None, "{name}");
        let events = child.events(0).unwrap();
        assert_eq!(events[..n as usize], parent[..], "{name}");
        assert_eq!(events.len() as u64, n + 1, "{name}");
        assert_eq!(
            (events[n as usize].ty(), events[n as usize].data()),
            ("session/end-seed", "{}"),
            "{name}"
        );
        assert!(!child.inbox().has_pending().unwrap(), "{name}");
        assert_eq!(child.open_turn().unwrap(), 2, "{name}");
        assert_eq!(p.open_turn().unwrap(), 2, "{name}");
        // A fork cannot take an existing id.
        assert_err(
            Session::fork(store, "parent", "child", SessionMeta::default()),
            ErrorKind::AlreadyExists,
            &["session \"child\" already exists"],
        );
        // The child is a session of its own: it outlives its deleted parent.
        child.close().unwrap();
        p.close().unwrap();
        Session::delete(store, "parent").unwrap();
        assert_eq!(ids(store), ["child"], "{name}");
        let child = Session::open(store, "child").unwrap();
        assert!(!child.inbox().has_pending().unwrap(), "{name}");
        // Its log: the copy, the end of the seed, turn 2 and the repair that closed it.
        assert_eq!(child.events(0).unwrap().len() as u64, n + 3, "{name}");
        assert_eq!(child.open_report().repaired_turn, Some(2), "{name}");
    });
}

#[test]
fn a_seeded_session_replays_its_inbox_from_seed_length_when_it_opens() {
    each_store(|name, store| {
        let seed = vec![
            Event::from_json(
                r#"{"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}}"#,
            )
            .unwrap(),
            Event::from_json(r#"{"type":"host/x","seq":1,"time":2,"data":{}}"#).unwrap(),
        ];
        let with =
            Session::create_seeded(store, "with", SessionMeta::default(), seed.clone(), Some(1))
                .unwrap();
        assert_eq!(with.header().seed_length, Some(1), "{name}");
        assert!(!with.inbox().has_pending().unwrap(), "{name}");
        let without =
            Session::create_seeded(store, "without", SessionMeta::default(), seed, None).unwrap();
        assert_eq!(without.inbox().next_turn().unwrap().len(), 1, "{name}");
        with.close().unwrap();
        without.close().unwrap();
        let with = Session::open(store, "with").unwrap();
        assert_eq!(with.header().seed_length, Some(1), "{name}");
        assert!(!with.inbox().has_pending().unwrap(), "{name}");
        let without = Session::open(store, "without").unwrap();
        let pending = without.inbox().next_turn().unwrap();
        assert_eq!(
            pending
                .iter()
                .map(inboxlog::Message::id)
                .collect::<Vec<_>>(),
            ["a"],
            "{name}"
        );
    });
}

//! Sessions on the JSONL store (ARCHITECTURE.md#replay, ARCHITECTURE.md#seeds-and-forks, ARCHITECTURE.md#opening-a-stored-log): forks on disk, the repair of an
//! interrupted turn, and replay-once of the inbox from the file.

mod jsonl_common;

use inboxlog::store::{Durability, Store};
use inboxlog::{
    Decision, Envelope, Event, QueueProjection, Session, SessionMeta, StepOutcome, Target,
};
use jsonl_common::*;

#[test]
fn a_fork_copies_the_prefix_into_its_own_file_and_leaves_the_parent_untouched() {
    let (_dir, store) = store(Durability::Sync);
    let parent = populated(&store); // seqs 0..=9, turn 1 closed
    parent.inbox().append(Target::NextTurn, msg("p1")).unwrap(); // seq 10
    parent.inbox().append(Target::NextTurn, msg("p2")).unwrap(); // seq 11
    parent.open_turn().unwrap(); // seq 12: turn 2 stays open
    let proposal = parent.propose_step().unwrap();
    parent.decide(Decision::Enter(proposal.messages)).unwrap();
    let parent_path = store.path("s").unwrap();
    let before = bytes(&parent_path);

    let meta = SessionMeta {
        origin: Some("subagent".into()),
        delegation_depth: Some(1),
        ..Default::default()
    };
    let child = Session::fork(&store, "s", "c", meta).unwrap();
    assert_eq!(
        bytes(&parent_path),
        before,
        "the parent file is byte-identical"
    );
    assert!(
        child.inbox().next_turn().unwrap().is_empty()
            && child.inbox().next_step().unwrap().is_empty()
    );

    let child_file = bytes(&store.path("c").unwrap());
    let (pl, cl) = (lines(&before), lines(&child_file));
    assert_eq!(
        cl.len(),
        1 + 12 + 1,
        "header, the 12 events before turn 2, end-seed"
    );
    assert_eq!(&cl[1..13], &pl[1..13], "the prefix is copied byte for byte");
    let end_seed = std::str::from_utf8(cl[13]).unwrap();
    assert!(
        end_seed.starts_with(r#"{"type":"session/end-seed","seq":12,"#)
            && end_seed.ends_with(r#","data":{}}"#),
        "{end_seed}"
    );
    let header = std::str::from_utf8(cl[0]).unwrap();
    assert!(
        header.contains(
            r#""parentSession":"s","seedLength":12,"origin":"subagent","delegationDepth":1"#
        ),
        "{header}"
    );

    // Turn numbers continue after the parent's copied turns; the child is a writer of its own.
    assert_eq!(child.open_turn().unwrap(), 2);
    drop(child);
    let child = Session::open(&store, "c").unwrap();
    assert!(!child.inbox().has_pending().unwrap());
    assert_eq!(
        child.open_report().repaired_turn,
        Some(2),
        "its open turn was interrupted"
    );
    drop(parent);
    assert_eq!(bytes(&parent_path), before);
}

#[test]
fn an_interrupted_turn_is_closed_once_on_open() {
    let (_dir, store) = store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    let last = s
        .append(
            "assistant/message",
            r#"{"text":"partial"}"#,
            Envelope::default(),
        )
        .unwrap();
    drop(s); // the writer dies mid-step
    let path = store.path("s").unwrap();
    let stored = bytes(&path);
    let (_, shown) = store.inspect("s").unwrap();
    assert_eq!(
        shown.last().unwrap().seq(),
        last.seq(),
        "inspection shows the log as stored"
    );

    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(1));
    assert_eq!(s.open_report().torn_bytes, 0);
    let after = bytes(&path);
    assert_eq!(
        &after[..stored.len()],
        &stored[..],
        "events before are never rewritten"
    );
    let added: Vec<&str> = lines(&after[stored.len()..])
        .into_iter()
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    let t = last.time();
    let (a, b) = (last.seq() + 1, last.seq() + 2);
    assert_eq!(
        added,
        [
            format!(r#"{{"type":"step/end","seq":{a},"time":{t},"data":{{"turn":1,"step":1}}}}"#),
            format!(
                r#"{{"type":"turn/end","seq":{b},"time":{t},"data":{{"turn":1,"reason":{{"kind":"interrupted"}}}}}}"#
            ),
        ]
    );
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, None);
    assert_eq!(
        bytes(&path),
        after,
        "opening twice adds nothing the second time"
    );
    // The log goes on with the next turn.
    s.inbox().append(Target::NextTurn, msg("m2")).unwrap();
    assert_eq!(s.open_turn().unwrap(), 2);
}

#[test]
fn the_inbox_is_replayed_once_from_the_file() {
    let (_dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let ib = s.inbox();
    for i in 0..20 {
        ib.append(
            if i % 3 == 0 {
                Target::NextStep
            } else {
                Target::NextTurn
            },
            msg(&format!("m{i}")),
        )
        .unwrap();
    }
    ib.splice(
        Target::NextTurn,
        -3.0,
        2.0,
        vec![msg("x1"), msg("x2"), msg("x3")],
    )
    .unwrap();
    ib.splice(Target::NextTurn, f64::NAN, f64::INFINITY, vec![])
        .unwrap();
    for i in 20..30 {
        ib.prepend(Target::NextTurn, msg(&format!("m{i}"))).unwrap();
    }
    assert!(ib.replace("m25", msg("r25")).unwrap());
    assert!(ib.remove("m3").unwrap());
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    ib.append(Target::NextStep, msg("steer")).unwrap();
    assert!(!s.end_step(StepOutcome::Completed).unwrap() || s.propose_step().is_ok());
    let (turn, step) = (ib.next_turn().unwrap(), ib.next_step().unwrap());
    assert!(!turn.is_empty());
    drop(s);

    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.inbox().next_turn().unwrap(), turn);
    assert_eq!(s.inbox().next_step().unwrap(), step);
    let (header, events) = store.inspect("s").unwrap();
    let projection = QueueProjection::replay(&events, header.replay_from(), None).unwrap();
    assert_eq!(projection.inbox().list(Target::NextTurn), turn);
    assert_eq!(projection.inbox().list(Target::NextStep), step);
}

#[test]
fn a_log_whose_reserved_events_carry_extras_opens_and_round_trips_byte_for_byte() {
    let (_dir, store) = store(Durability::Sync);
    let path = store.path("ref").unwrap();
    // What the reference harness writes: a trigger on turn/start, runtime context as a
    // user/message without an id, and host facts on step and turn events.
    let log = concat!(
        r#"{"format":"inboxlog","version":1,"id":"ref","createdAt":1}"#,
        "\n",
        r#"{"type":"agent/inbox/spliced","seq":0,"time":2,"data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","text":"hi"}]}}"#,
        "\n",
        r#"{"type":"turn/start","seq":1,"time":3,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        "\n",
        r#"{"type":"agent/inbox/spliced","seq":2,"time":3,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}"#,
        "\n",
        r#"{"type":"step/start","seq":3,"time":4,"data":{"turn":1,"step":1,"model":"x"}}"#,
        "\n",
        r#"{"type":"user/message","seq":4,"time":4,"data":{"id":"m1","text":"hi"},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"user/message","seq":5,"time":4,"data":{"text":"<runtime context>"}}"#,
        "\n",
        r#"{"type":"step/end","seq":6,"time":5,"data":{"turn":1,"step":1,"usage":{"out":12345678901234567890}}}"#,
        "\n",
        r#"{"type":"turn/end","seq":7,"time":6,"data":{"turn":1,"reason":{"kind":"completed"},"durationMs":3}}"#,
        "\n",
    );
    std::fs::write(&path, log).unwrap();
    let s = Session::open(&store, "ref").unwrap();
    assert_eq!(s.open_report().repaired_turn, None);
    assert_eq!(bytes(&path), log.as_bytes(), "opening rewrote nothing");
    let stored: Vec<String> = log.lines().skip(1).map(str::to_owned).collect();
    let read: Vec<String> = s.events(0).unwrap().iter().map(Event::to_json).collect();
    assert_eq!(read, stored);
    assert_eq!(s.open_turn().unwrap(), 2, "turn numbers continue");
}

//! Opening a stored log in every store (ARCHITECTURE.md#opening-a-stored-log,
//! ARCHITECTURE.md#replay): a turn its last writer left open is closed as
//! `interrupted`, once, after events that are never rewritten; the inbox is rebuilt
//! from the log; turn numbers go on.

use inboxlog::{Decision, Envelope, QueueProjection, Session, SessionMeta, StepOutcome, Target};

use crate::{each_store, lines, msg};

#[test]
fn an_interrupted_step_is_closed_once_when_the_session_opens() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        for id in ["a", "b", "c"] {
            s.inbox().append(Target::NextTurn, msg(id)).unwrap();
        }
        s.inbox().append(Target::NextStep, msg("st")).unwrap();
        for i in 0..50 {
            s.append(
                "host/chunk",
                &format!(r#"{{"i":{i}}}"#),
                Envelope::default(),
            )
            .unwrap();
        }
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        let last = s
            .append(
                "assistant/chunk",
                r#"{"text":"partial"}"#,
                Envelope::default(),
            )
            .unwrap();
        drop(s); // the writer goes away mid-step
        let stored = lines(store, "s");
        assert_eq!(
            stored.last(),
            Some(&last.to_json()),
            "{name}: inspection shows the log as stored"
        );

        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1), "{name}");
        assert_eq!(s.open_report().torn_bytes, 0, "{name}");
        let after = lines(store, "s");
        assert_eq!(
            after[..stored.len()],
            stored[..],
            "{name}: events before are never rewritten"
        );
        let (t, a, b) = (last.time(), last.seq() + 1, last.seq() + 2);
        assert_eq!(
            after[stored.len()..],
            [
                format!(
                    r#"{{"type":"step/end","seq":{a},"time":{t},"data":{{"turn":1,"step":1}}}}"#
                ),
                format!(
                    r#"{{"type":"turn/end","seq":{b},"time":{t},"data":{{"turn":1,"reason":{{"kind":"interrupted"}}}}}}"#
                ),
            ],
            "{name}: the repair reuses the last event's time"
        );
        assert_eq!(s.turn_open().unwrap(), None, "{name}");
        assert_eq!(
            s.inbox().next_turn().unwrap(),
            [msg("b"), msg("c")],
            "{name}"
        );
        assert!(s.inbox().next_step().unwrap().is_empty(), "{name}");
        drop(s);

        // Opening twice adds nothing; the log goes on with the next turn.
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, None, "{name}: repaired once");
        assert_eq!(lines(store, "s"), after, "{name}");
        assert_eq!(s.open_turn().unwrap(), 2, "{name}");
    });
}

#[test]
fn an_interrupted_turn_without_a_step_gets_its_turn_end_alone() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.open_turn().unwrap();
        s.propose_step().unwrap();
        let n = s.last_seq().unwrap().unwrap() + 1;
        drop(s);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1), "{name}");
        let added: Vec<(String, String)> = s
            .events(n)
            .unwrap()
            .iter()
            .map(|e| (e.ty().to_owned(), e.data().to_owned()))
            .collect();
        assert_eq!(
            added,
            [(
                "turn/end".to_owned(),
                r#"{"turn":1,"reason":{"kind":"interrupted"}}"#.to_owned()
            )],
            "{name}"
        );
        s.close().unwrap();
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, None, "{name}: repaired once");
        assert_eq!(s.last_seq().unwrap(), Some(n), "{name}");
    });
}

#[test]
fn turn_numbers_go_on_after_a_closed_session_opens_again() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.open_turn().unwrap();
        s.propose_step().unwrap();
        s.decide(Decision::Reject).unwrap();
        s.close().unwrap();
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, None, "{name}");
        assert_eq!(s.open_turn().unwrap(), 2, "{name}");
    });
}

#[test]
fn the_inbox_is_rebuilt_from_the_log_when_the_session_opens() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        let ib = s.inbox();
        for i in 0..20 {
            let target = if i % 3 == 0 {
                Target::NextStep
            } else {
                Target::NextTurn
            };
            ib.append(target, msg(&format!("m{i}"))).unwrap();
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
        assert!(s.end_step(StepOutcome::Completed).unwrap());
        let (turn, step) = (ib.next_turn().unwrap(), ib.next_step().unwrap());
        assert!(!turn.is_empty() && !step.is_empty(), "{name}");
        drop(s);

        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.inbox().next_turn().unwrap(), turn, "{name}");
        assert_eq!(s.inbox().next_step().unwrap(), step, "{name}");
        // A replay of the stored log by anyone lands on the same lists.
        let (header, events) = Session::inspect(store, "s").unwrap();
        let projection = QueueProjection::replay(&events, header.replay_from(), None).unwrap();
        assert_eq!(projection.inbox().list(Target::NextTurn), turn, "{name}");
        assert_eq!(projection.inbox().list(Target::NextStep), step, "{name}");
    });
}

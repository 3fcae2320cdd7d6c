//! Unit tests of the session handle.

use super::*;
use crate::header::SessionMeta;
use crate::message::Message;
use crate::splice::Target;
use crate::store::MemoryStore;

fn msg(id: &str) -> Message {
    Message::from_json(&format!(r#"{{"id":"{id}","role":"user"}}"#)).unwrap()
}

fn log_of(s: &Session) -> Vec<String> {
    s.events(0)
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e.ty(), e.data()))
        .collect()
}

#[test]
fn a_whole_claim_takes_next_step_then_all_of_next_turn_at_the_first_step_only() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for id in ["t1", "t2"] {
        s.inbox().append(Target::NextTurn, msg(id)).unwrap();
    }
    s.inbox().append(Target::NextStep, msg("s1")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step_claiming(TurnClaim::Whole).unwrap();
    let ids: Vec<_> = p.messages.iter().map(|m| m.id().to_owned()).collect();
    assert_eq!(ids, ["s1", "t1", "t2"]);
    assert!(!s.inbox().has_pending().unwrap());
    assert!(log_of(&s).ends_with(&[
        r#"agent/inbox/spliced {"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#.to_owned(),
        r#"agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":2,"inserted":[]}"#.to_owned(),
    ]));
    s.decide(Decision::Enter(p.messages)).unwrap();
    assert!(s.end_step(StepOutcome::Continue).unwrap());
    s.inbox().append(Target::NextTurn, msg("t3")).unwrap();
    let second = s.propose_step_claiming(TurnClaim::Whole).unwrap();
    assert!(
        second.messages.is_empty(),
        "later proposals claim next-step only"
    );
    assert_eq!(s.inbox().next_turn().unwrap().len(), 1);
}

#[test]
fn one_prompt_through_a_turn() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
    assert_eq!(s.open_turn().unwrap(), 1);
    let p = s.propose_step().unwrap();
    assert_eq!((p.turn, p.step, p.messages.len()), (1, 1, 1));
    let d = s.decide(Decision::Enter(p.messages)).unwrap();
    assert_eq!(d, Decided::Step { turn: 1, step: 1 });
    assert!(!s.end_step(StepOutcome::Completed).unwrap());
    s.close_turn().unwrap();
    assert_eq!(
        log_of(&s),
        [
            r#"agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user"}]}"#,
            r#"turn/start {"turn":1}"#,
            r#"agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
            r#"step/start {"turn":1,"step":1}"#,
            r#"user/message {"id":"m1","role":"user"}"#,
            r#"step/end {"turn":1,"step":1}"#,
            r#"turn/end {"turn":1,"reason":{"kind":"completed"}}"#,
        ]
    );
    assert!(
        s.events(4).unwrap()[0]
            .to_json()
            .contains(r#""surfaceOp":"append""#)
    );
}

#[test]
fn try_append_appends_at_once_or_does_nothing() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let TryAppend::Done(e) = s.try_append("note", built_a1(), Envelope::default()) else {
        panic!("no other call holds the session");
    };
    let e = e.unwrap();
    assert_eq!((e.seq(), e.data()), (0, r#"{"a":1}"#));
    // Another call holds the session: nothing is done.
    let held = lock(&s.state);
    let busy = s.try_append("note", built_a1(), Envelope::default());
    assert!(
        matches!(&busy, TryAppend::Busy(data, _) if data.as_str() == r#"{"a":1}"#),
        "{busy:?}"
    );
    drop(held);
    assert_eq!(log_of(&s), [r#"note {"a":1}"#]);
    // Refusals are answered at once, as `append` answers them.
    for (ty, envelope) in [
        ("turn/start", Envelope::default()),
        (
            "note",
            Envelope {
                source_event_seqs: Some(vec![0]),
                ..Envelope::default()
            },
        ),
    ] {
        let TryAppend::Done(Err(err)) = s.try_append(ty, built_a1(), envelope) else {
            panic!("{ty} is refused");
        };
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ty}");
    }
    s.close().unwrap();
    let TryAppend::Done(Err(err)) = s.try_append("note", empty(), Envelope::default()) else {
        panic!("a closed session refuses");
    };
    assert_eq!(err.kind(), ErrorKind::Closed);
}

fn built_a1() -> Json {
    let mut b = json::Builder::new();
    b.begin_object().unwrap();
    b.key("a");
    b.int(1);
    b.end();
    b.finish()
}

fn empty() -> Json {
    let mut b = json::Builder::new();
    b.begin_object().unwrap();
    b.end();
    b.finish()
}

#[test]
fn built_data_is_stored_as_it_was_written() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let e = s
        .append_json("note", built_a1(), Envelope::default())
        .unwrap();
    assert_eq!(e.to_json(), s.events(0).unwrap()[0].to_json());
    let err = s
        .append_json("agent/inbox/spliced", empty(), Envelope::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(log_of(&s), [r#"note {"a":1}"#]);
}

#[test]
fn try_append_from_an_observer_is_reentrant() {
    let store = MemoryStore::new();
    let s = Arc::new(Session::create(&store, "s", SessionMeta::default()).unwrap());
    let inner = Arc::downgrade(&s);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    s.on_event(move |_| {
        let s = inner.upgrade().expect("alive");
        let answer = match s.try_append("echo", empty(), Envelope::default()) {
            TryAppend::Done(r) => Some(r.map(|e| e.seq()).map_err(|e| e.kind())),
            TryAppend::Busy(..) => None,
        };
        lock(&record).push(answer);
        Ok(())
    });
    s.append("note", "{}", Envelope::default()).unwrap();
    assert_eq!(*lock(&seen), [Some(Err(ErrorKind::Reentrant))]);
    assert_eq!(log_of(&s), ["note {}"]);
}

#[test]
fn a_baseline_is_the_inbox_at_a_seq_and_refuses_one_past_the_end() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let err = s.baseline(Some(0)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "upto 0 is past the end of the log (0 events, last seq none)"
    );
    s.inbox().append(Target::NextTurn, msg("a")).unwrap();
    s.inbox().append(Target::NextStep, msg("b")).unwrap();
    let at0 = s.baseline(Some(0)).unwrap();
    assert_eq!(
        (at0.seq, at0.next_turn.len(), at0.next_step.len()),
        (Some(0), 1, 0)
    );
    let now = s.baseline(None).unwrap();
    assert_eq!((now.seq, now.next_step), (Some(1), vec![msg("b")]));
    assert_eq!(
        s.baseline(Some(2)).unwrap_err().to_string(),
        "upto 2 is past the end of the log (2 events, last seq 1)"
    );
}

#[test]
fn data_and_messages_at_the_depth_limit_stay_readable() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let deep = format!(
        "{}{}",
        "[".repeat(crate::json::MAX_DEPTH),
        "]".repeat(crate::json::MAX_DEPTH)
    );
    let event = s.append("x/deep", &deep, Envelope::default()).unwrap();
    let nested = format!(r#"{{"id":"m","x":{}}}"#, &deep[2..deep.len() - 2]);
    let m = Message::from_json(&nested).unwrap();
    s.inbox().append(Target::NextTurn, m.clone()).unwrap();
    for e in s.events(0).unwrap() {
        assert_eq!(Event::from_json(&e.to_json()).unwrap(), e);
    }
    assert_eq!(event.data(), deep);
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.inbox().next_turn().unwrap(), vec![m]);
    let too_deep = format!("[{deep}]");
    let err = s
        .append("x/deep", &too_deep, Envelope::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
}

#[test]
fn reopen_replays_and_repairs() {
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("a")).unwrap();
    s.inbox().append(Target::NextTurn, msg("b")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(1));
    assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("b")]);
    let tail = log_of(&s);
    assert_eq!(
        &tail[tail.len() - 2..],
        [
            r#"step/end {"turn":1,"step":1}"#,
            r#"turn/end {"turn":1,"reason":{"kind":"interrupted"}}"#
        ]
    );
    drop(s);
    let again = Session::open(&store, "s").unwrap();
    assert_eq!(again.open_report().repaired_turn, None);
    assert_eq!(again.events(0).unwrap().len(), tail.len());
    assert_eq!(again.open_turn().unwrap(), 2);
}

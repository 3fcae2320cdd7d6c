//! The step-boundary protocol (ARCHITECTURE.md#protocol): every transition with its exact events, and
//! every refusal (a `protocol` error naming the state, nothing written). The repair of
//! an interrupted turn when a log is reopened (ARCHITECTURE.md#opening-a-stored-log) is
//! in the store suite (`core/tests/store/recovery.rs`), over every store.

use inboxlog::store::MemoryStore;
use inboxlog::{
    CancelCause, Decided, Decision, ErrorKind, Event, Extra, Message, Proposal, Session,
    SessionMeta, StepOutcome, Target, TurnEndReason, TurnError,
};

fn m(id: &str) -> Message {
    Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap()
}

fn new(store: &MemoryStore) -> Session {
    Session::create(store, "p", SessionMeta::default()).unwrap()
}

fn next_seq(s: &Session) -> u64 {
    s.last_seq().unwrap().map_or(0, |q| q + 1)
}

/// `(type, data, surfaceOp)` of the events with `seq >= since`.
fn written(s: &Session, since: u64) -> Vec<(String, String, String)> {
    s.events(since)
        .unwrap()
        .iter()
        .map(|e| {
            let op = e.envelope().surface_op.as_ref().map_or("", |r| r.get());
            (e.ty().to_owned(), e.data().to_owned(), op.to_owned())
        })
        .collect()
}

fn ev(ty: &str, data: &str) -> (String, String, String) {
    (ty.to_owned(), data.to_owned(), String::new())
}

fn user(data: &str) -> (String, String, String) {
    (
        "user/message".to_owned(),
        data.to_owned(),
        "\"append\"".to_owned(),
    )
}

fn turn_start(n: u64) -> (String, String, String) {
    ev("turn/start", &format!(r#"{{"turn":{n}}}"#))
}

fn step_start(n: u64, k: u64) -> (String, String, String) {
    ev("step/start", &format!(r#"{{"turn":{n},"step":{k}}}"#))
}

fn step_end(n: u64, k: u64) -> (String, String, String) {
    ev("step/end", &format!(r#"{{"turn":{n},"step":{k}}}"#))
}

fn turn_end(n: u64, reason: &str) -> (String, String, String) {
    ev("turn/end", &format!(r#"{{"turn":{n},"reason":{reason}}}"#))
}

fn claim(target: &str, count: usize) -> (String, String, String) {
    ev(
        "agent/inbox/spliced",
        &format!(r#"{{"target":"{target}","start":0,"removedCount":{count},"inserted":[]}}"#),
    )
}

fn cancel_all(target: &str, count: usize) -> (String, String, String) {
    ev(
        "agent/inbox/spliced",
        &format!(
            r#"{{"target":"{target}","start":0,"removedCount":{count},"inserted":[],"outcome":"canceled"}}"#
        ),
    )
}

/// Runs `call`, which must be refused with a `protocol` error whose message names
/// `state`; checks that nothing was written and the inbox did not change.
fn refused<T: std::fmt::Debug>(
    s: &Session,
    state: &str,
    call: impl FnOnce() -> inboxlog::Result<T>,
) {
    let before = (
        next_seq(s),
        s.inbox().next_turn().unwrap(),
        s.inbox().next_step().unwrap(),
    );
    let err = call().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    assert!(
        err.to_string().contains(state),
        "expected {state:?} in: {err}"
    );
    let after = (
        next_seq(s),
        s.inbox().next_turn().unwrap(),
        s.inbox().next_step().unwrap(),
    );
    assert_eq!(after, before, "a refused call writes nothing");
}

const IDLE: &str = "idle";

fn boom() -> TurnError {
    TurnError::from_json(r#"{"message":"boom","code":"E1"}"#).unwrap()
}

/// Opens a turn and enters step 1 with whatever the proposal claimed.
fn in_step(s: &Session) -> (u64, Proposal) {
    let turn = s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    assert!(matches!(
        s.decide(Decision::Enter(p.messages.clone())).unwrap(),
        Decided::Step { step: 1, .. }
    ));
    (turn, p)
}

// ---------------------------------------------------------------------------------
// Refusals in every state.

#[test]
fn idle_refuses_everything_but_open_turn_and_cancel() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    refused(&s, IDLE, || s.propose_step());
    refused(&s, IDLE, || s.decide(Decision::Reject));
    refused(&s, IDLE, || s.decide(Decision::Enter(vec![m("x")])));
    refused(&s, IDLE, || s.end_step(StepOutcome::Completed));
    refused(&s, IDLE, || s.close_turn());
    refused(&s, IDLE, || s.fail(boom()));
    // Cancel while idle with keep_inbox writes nothing, and is not refused.
    let seq = next_seq(&s);
    s.cancel(CancelCause::User, true).unwrap();
    assert_eq!(next_seq(&s), seq);
}

#[test]
fn a_freshly_opened_turn_refuses_all_but_propose() {
    let store = MemoryStore::new();
    let s = new(&store);
    assert_eq!(s.open_turn().unwrap(), 1);
    assert_eq!(s.turn_open().unwrap(), Some(1));
    refused(&s, "turn 1", || s.open_turn());
    refused(&s, "turn 1", || s.decide(Decision::Reject));
    refused(&s, "turn 1", || s.end_step(StepOutcome::Continue));
    refused(&s, "turn 1", || s.close_turn());
}

#[test]
fn a_pending_proposal_refuses_all_but_decide() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    for call in 0..4 {
        refused(&s, "proposed", || match call {
            0 => s.open_turn().map(drop),
            1 => s.propose_step().map(drop),
            2 => s.end_step(StepOutcome::Completed).map(drop),
            _ => s.close_turn().map(drop),
        });
    }
}

#[test]
fn an_open_step_refuses_all_but_end_step() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    for call in 0..5 {
        refused(&s, "step 1 of turn 1", || match call {
            0 => s.open_turn().map(drop),
            1 => s.propose_step().map(drop),
            2 => s.decide(Decision::Reject).map(drop),
            3 => s.decide(Decision::Enter(vec![])).map(drop),
            _ => s.close_turn().map(drop),
        });
    }
}

#[test]
fn between_steps_refuses_decide_end_step_and_open_turn() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    s.end_step(StepOutcome::Continue).unwrap();
    refused(&s, "turn 1", || s.open_turn());
    refused(&s, "turn 1", || s.decide(Decision::Reject));
    refused(&s, "turn 1", || s.end_step(StepOutcome::Completed));
}

// ---------------------------------------------------------------------------------
// Transitions.

#[test]
fn open_turn_writes_turn_start_before_any_claim() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    assert_eq!(s.open_turn().unwrap(), 1);
    // Opening claims nothing.
    assert_eq!(written(&s, 1), [turn_start(1)]);
    assert_eq!(s.inbox().next_turn().unwrap(), [m("a")]);
}

#[test]
fn the_first_proposal_claims_next_turn_later_ones_next_step() {
    let store = MemoryStore::new();
    let s = new(&store);
    for id in ["t1", "t2"] {
        s.inbox().append(Target::NextTurn, m(id)).unwrap();
    }
    s.inbox().append(Target::NextStep, m("s1")).unwrap();
    s.open_turn().unwrap();
    let since = next_seq(&s);
    let p = s.propose_step().unwrap();
    // All of next-step, then the first of next-turn.
    assert_eq!(
        p,
        Proposal {
            turn: 1,
            step: 1,
            messages: vec![m("s1"), m("t1")]
        }
    );
    assert_eq!(
        written(&s, since),
        [claim("next-step", 1), claim("next-turn", 1)]
    );
    s.decide(Decision::Enter(p.messages)).unwrap();
    assert!(s.end_step(StepOutcome::Continue).unwrap());
    // Input arriving now: a later proposal takes next-step only.
    s.inbox().append(Target::NextStep, m("s2")).unwrap();
    s.inbox().append(Target::NextStep, m("s3")).unwrap();
    let since = next_seq(&s);
    let p = s.propose_step().unwrap();
    assert_eq!((p.turn, p.step), (1, 2));
    assert_eq!(p.messages, [m("s2"), m("s3")]);
    assert_eq!(written(&s, since), [claim("next-step", 2)]);
    assert_eq!(s.inbox().next_turn().unwrap(), [m("t2")]);
    // A later proposal with nothing in next-step claims nothing and writes nothing.
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.end_step(StepOutcome::Continue).unwrap();
    let since = next_seq(&s);
    let p = s.propose_step().unwrap();
    assert_eq!((p.step, p.messages.len()), (3, 0));
    assert_eq!(next_seq(&s), since);
}

#[test]
fn input_after_the_claim_stays_for_a_later_boundary() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.inbox().append(Target::NextStep, m("late")).unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    assert_eq!(s.inbox().next_step().unwrap(), [m("late")]);
    // Steering arrived: the loop must propose again even though the step completed.
    assert!(s.end_step(StepOutcome::Completed).unwrap());
    let p = s.propose_step().unwrap();
    assert_eq!(p.messages, [m("late")]);
}

#[test]
fn reject_ends_the_turn_blocked_and_the_batch_stays_removed() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let since = next_seq(&s);
    assert_eq!(
        s.decide(Decision::Reject).unwrap(),
        Decided::TurnEnded {
            turn: 1,
            reason: TurnEndReason::Blocked
        }
    );
    assert_eq!(written(&s, since), [turn_end(1, r#"{"kind":"blocked"}"#)]);
    assert!(!s.inbox().has_pending().unwrap());
    assert_eq!(s.turn_open().unwrap(), None);
    assert_eq!(s.open_turn().unwrap(), 2);
}

#[test]
fn enter_empty_with_no_step_yet_completes_the_turn() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let since = next_seq(&s);
    // The plugins dropped the whole batch.
    assert_eq!(
        s.decide(Decision::Enter(vec![])).unwrap(),
        Decided::TurnEnded {
            turn: 1,
            reason: TurnEndReason::Completed
        }
    );
    assert_eq!(written(&s, since), [turn_end(1, r#"{"kind":"completed"}"#)]);
    assert_eq!(s.turn_open().unwrap(), None);
}

#[test]
fn enter_writes_step_start_and_one_user_message_per_message() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let since = next_seq(&s);
    // The final batch need not equal the claim: rewritten and extra messages.
    let batch = vec![
        Message::from_json(r#"{"id":"a","content":"rewritten"}"#).unwrap(),
        Message::from_json(r#"{"id":"ctx","role":"system"}"#).unwrap(),
    ];
    assert_eq!(
        s.decide(Decision::Enter(batch)).unwrap(),
        Decided::Step { turn: 1, step: 1 }
    );
    assert_eq!(
        written(&s, since),
        [
            step_start(1, 1),
            user(r#"{"id":"a","content":"rewritten"}"#),
            user(r#"{"id":"ctx","role":"system"}"#),
        ]
    );
    // The entered messages do not return to the inbox.
    assert!(!s.inbox().has_pending().unwrap());
}

#[test]
fn a_full_turn_with_a_continuation_step() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let (turn, _) = in_step(&s);
    // The step owes another model call.
    assert!(s.end_step(StepOutcome::Continue).unwrap());
    refused(&s, "turn 1", || s.close_turn());
    let p = s.propose_step().unwrap();
    assert_eq!((p.step, p.messages.len()), (2, 0));
    // A continuation step may enter with no messages.
    assert_eq!(
        s.decide(Decision::Enter(vec![])).unwrap(),
        Decided::Step { turn, step: 2 }
    );
    assert!(!s.end_step(StepOutcome::Completed).unwrap());
    let since = next_seq(&s);
    assert_eq!(
        s.close_turn().unwrap(),
        Decided::TurnEnded {
            turn,
            reason: TurnEndReason::Completed
        }
    );
    assert_eq!(written(&s, since), [turn_end(1, r#"{"kind":"completed"}"#)]);
    assert_eq!(
        written(&s, 0),
        [
            ev(
                "agent/inbox/spliced",
                r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#
            ),
            turn_start(1),
            claim("next-turn", 1),
            step_start(1, 1),
            user(r#"{"id":"a"}"#),
            step_end(1, 1),
            step_start(1, 2),
            step_end(1, 2),
            turn_end(1, r#"{"kind":"completed"}"#),
        ]
    );
}

#[test]
fn enter_empty_after_a_concluded_step_ends_with_the_concluded_reason() {
    for (outcome, reason) in [
        (StepOutcome::Completed, r#"{"kind":"completed"}"#),
        (StepOutcome::MaxTokens, r#"{"kind":"max-tokens"}"#),
    ] {
        let store = MemoryStore::new();
        let s = new(&store);
        s.inbox().append(Target::NextTurn, m("a")).unwrap();
        in_step(&s);
        s.inbox().append(Target::NextStep, m("steer")).unwrap();
        assert!(s.end_step(outcome).unwrap(), "steering arrived");
        // Steering is pending: close_turn is refused, naming why.
        refused(&s, "turn 1", || s.close_turn());
        let p = s.propose_step().unwrap();
        assert_eq!(p.messages, [m("steer")]);
        let since = next_seq(&s);
        // The plugins dropped the steering: the turn ends as the last step concluded.
        let d = s.decide(Decision::Enter(vec![])).unwrap();
        assert!(matches!(d, Decided::TurnEnded { turn: 1, .. }), "{d:?}");
        assert_eq!(written(&s, since), [turn_end(1, reason)]);
    }
}

#[test]
fn max_tokens_is_sticky() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    s.inbox().append(Target::NextStep, m("b")).unwrap();
    assert!(s.end_step(StepOutcome::MaxTokens).unwrap());
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    // Steering keeps the loop going after max-tokens ...
    s.inbox().append(Target::NextStep, m("c0")).unwrap();
    assert!(s.end_step(StepOutcome::Continue).unwrap());
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    // ... but a continue does not reset it: with next-step empty the turn is done.
    assert!(!s.end_step(StepOutcome::Continue).unwrap());
    let since = next_seq(&s);
    assert_eq!(
        s.close_turn().unwrap(),
        Decided::TurnEnded {
            turn: 1,
            reason: TurnEndReason::MaxTokens
        }
    );
    assert_eq!(
        written(&s, since),
        [turn_end(1, r#"{"kind":"max-tokens"}"#)]
    );
    // The next turn starts fresh.
    s.inbox().append(Target::NextTurn, m("c")).unwrap();
    in_step(&s);
    s.end_step(StepOutcome::Completed).unwrap();
    assert_eq!(
        s.close_turn().unwrap(),
        Decided::TurnEnded {
            turn: 2,
            reason: TurnEndReason::Completed
        }
    );
}

#[test]
fn continue_after_max_tokens_concludes_the_turn_as_max_tokens() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    assert!(!s.end_step(StepOutcome::MaxTokens).unwrap());
    // The host runs one more step anyway (e.g. it asked the model to go on).
    s.propose_step().unwrap();
    s.decide(Decision::Enter(vec![m("go-on")])).unwrap();
    assert!(
        !s.end_step(StepOutcome::Continue).unwrap(),
        "still max-tokens"
    );
    assert_eq!(
        s.close_turn().unwrap(),
        Decided::TurnEnded {
            turn: 1,
            reason: TurnEndReason::MaxTokens
        }
    );
}

#[test]
fn protocol_calls_carry_host_extras_after_the_library_keys() {
    let store = MemoryStore::new();
    let s = new(&store);
    let x = |text: &str| Extra::from_json(text).unwrap();
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let since = next_seq(&s);
    s.open_turn_with(&x(
        r#"{"trigger":{"kind":"message","source":{"kind":"user"}}}"#,
    ))
    .unwrap();
    let p = s.propose_step().unwrap();
    s.decide_with(Decision::Enter(p.messages), &x(r#"{"model":"m1"}"#))
        .unwrap();
    s.end_step_with(StepOutcome::Completed, &x(r#"{"usage":{"out":7}}"#))
        .unwrap();
    s.close_turn_with(&x(r#"{"z":1,"a":2}"#)).unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    s.decide_with(Decision::Reject, &x(r#"{"by":"guard"}"#))
        .unwrap();
    s.open_turn().unwrap();
    s.fail_with(
        TurnError::from_json(r#"{"message":"boom","code":"E"}"#).unwrap(),
        &x(r#"{"attempt":2}"#),
    )
    .unwrap();
    s.open_turn().unwrap();
    s.cancel_with(CancelCause::User, false, &x(r#"{"from":"ui"}"#))
        .unwrap();
    let data: Vec<String> = written(&s, since)
        .into_iter()
        .filter(|(ty, ..)| ty.starts_with("turn/") || ty.starts_with("step/"))
        .map(|(ty, data, _)| format!("{ty} {data}"))
        .collect();
    assert_eq!(
        data,
        [
            r#"turn/start {"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}"#,
            r#"step/start {"turn":1,"step":1,"model":"m1"}"#,
            r#"step/end {"turn":1,"step":1,"usage":{"out":7}}"#,
            r#"turn/end {"turn":1,"reason":{"kind":"completed"},"z":1,"a":2}"#,
            r#"turn/start {"turn":2}"#,
            r#"turn/end {"turn":2,"reason":{"kind":"blocked"},"by":"guard"}"#,
            r#"turn/start {"turn":3}"#,
            r#"turn/end {"turn":3,"reason":{"kind":"error","error":{"message":"boom","code":"E"}},"attempt":2}"#,
            r#"turn/start {"turn":4}"#,
            r#"turn/end {"turn":4,"reason":{"kind":"aborted","reason":{"kind":"user"}},"from":"ui"}"#,
        ]
    );
    // The log with extras reopens to the same events, byte for byte.
    let before: Vec<String> = s.events(0).unwrap().iter().map(Event::to_json).collect();
    drop(s);
    let s = Session::open(&store, "p").unwrap();
    let after: Vec<String> = s.events(0).unwrap().iter().map(Event::to_json).collect();
    assert_eq!(before, after);
    assert_eq!(s.open_turn().unwrap(), 5);
}

#[test]
fn an_extra_naming_a_library_key_is_refused_and_writes_nothing() {
    let store = MemoryStore::new();
    let s = new(&store);
    for key in ["turn", "step", "reason"] {
        let err = Extra::from_json(&format!(r#"{{"{key}":1}}"#)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    assert_eq!(s.last_seq().unwrap(), None);
}

#[test]
fn end_step_returns_whether_another_step_is_due() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    let since = next_seq(&s);
    assert!(s.end_step(StepOutcome::Continue).unwrap(), "owes work");
    assert_eq!(written(&s, since), [step_end(1, 1)]);
    s.propose_step().unwrap();
    s.decide(Decision::Enter(vec![])).unwrap();
    assert!(!s.end_step(StepOutcome::Completed).unwrap(), "concluded");
    // next-turn input is not steering.
    s.inbox().append(Target::NextTurn, m("later")).unwrap();
    let p = s.propose_step().unwrap();
    assert!(p.messages.is_empty());
    s.decide(Decision::Enter(vec![m("x")])).unwrap();
    assert!(!s.end_step(StepOutcome::MaxTokens).unwrap());
    s.close_turn().unwrap();
    assert_eq!(s.inbox().next_turn().unwrap(), [m("later")]);
}

#[test]
fn close_turn_refusals_name_the_state_and_the_reason() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    refused(&s, "turn 1", || s.close_turn()); // nothing ran yet
    let p = s.propose_step().unwrap();
    refused(&s, "proposed", || s.close_turn());
    s.decide(Decision::Enter(p.messages)).unwrap();
    refused(&s, "step 1 of turn 1", || s.close_turn());
    s.end_step(StepOutcome::Continue).unwrap();
    refused(&s, "continue", || s.close_turn());
    s.propose_step().unwrap();
    s.decide(Decision::Enter(vec![])).unwrap();
    s.inbox().append(Target::NextStep, m("steer")).unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    refused(&s, "next-step", || s.close_turn());
    s.inbox().remove("steer").unwrap();
    s.close_turn().unwrap();
    refused(&s, IDLE, || s.close_turn());
}

#[test]
fn cancel_clears_first_then_ends_the_open_step_and_turn() {
    let store = MemoryStore::new();
    let s = new(&store);
    for id in ["a", "b"] {
        s.inbox().append(Target::NextTurn, m(id)).unwrap();
    }
    in_step(&s);
    s.inbox().append(Target::NextStep, m("s")).unwrap();
    let since = next_seq(&s);
    s.cancel(CancelCause::User, false).unwrap();
    assert_eq!(
        written(&s, since),
        [
            cancel_all("next-step", 1),
            cancel_all("next-turn", 1),
            step_end(1, 1),
            turn_end(1, r#"{"kind":"aborted","reason":{"kind":"user"}}"#),
        ]
    );
    assert!(!s.inbox().has_pending().unwrap());
    assert_eq!(s.turn_open().unwrap(), None);
}

#[test]
fn cancel_keeping_the_inbox_only_ends_the_turn() {
    let store = MemoryStore::new();
    let s = new(&store);
    for id in ["a", "b"] {
        s.inbox().append(Target::NextTurn, m(id)).unwrap();
    }
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let since = next_seq(&s);
    // Cancelled while the proposal waits: no step is open, so no step/end.
    s.cancel(CancelCause::Parent, true).unwrap();
    assert_eq!(
        written(&s, since),
        [turn_end(
            1,
            r#"{"kind":"aborted","reason":{"kind":"parent"}}"#
        )]
    );
    assert_eq!(s.inbox().next_turn().unwrap(), [m("b")]);
    // Between steps, with every cause.
    for (turn, cause, json) in [
        (2, CancelCause::Disposed, r#"{"kind":"disposed"}"#),
        (
            3,
            CancelCause::Hook {
                reason: "policy".into(),
            },
            r#"{"kind":"hook","reason":"policy"}"#,
        ),
    ] {
        s.open_turn().unwrap();
        let since = next_seq(&s);
        s.cancel(cause, true).unwrap();
        assert_eq!(
            written(&s, since),
            [turn_end(
                turn,
                &format!(r#"{{"kind":"aborted","reason":{json}}}"#)
            )]
        );
    }
    assert_eq!(s.inbox().next_turn().unwrap(), [m("b")]);
}

#[test]
fn cancel_while_idle() {
    let store = MemoryStore::new();
    let s = new(&store);
    // Nothing pending: nothing written.
    s.cancel(CancelCause::User, false).unwrap();
    assert_eq!(next_seq(&s), 0);
    // Pending input: only the durable cancellations.
    s.inbox().append(Target::NextStep, m("a")).unwrap();
    s.cancel(CancelCause::User, false).unwrap();
    assert_eq!(written(&s, 1), [cancel_all("next-step", 1)]);
}

#[test]
fn fail_in_every_turn_state() {
    let err = r#"{"kind":"error","error":{"message":"boom","code":"E1"}}"#;
    // Just opened.
    let store = MemoryStore::new();
    let s = new(&store);
    s.open_turn().unwrap();
    let since = next_seq(&s);
    s.fail(boom()).unwrap();
    assert_eq!(written(&s, since), [turn_end(1, err)]);
    // Proposed: the claimed batch stays removed.
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let since = next_seq(&s);
    s.fail(boom()).unwrap();
    assert_eq!(written(&s, since), [turn_end(2, err)]);
    assert!(!s.inbox().has_pending().unwrap());
    // Step open.
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    in_step(&s);
    let since = next_seq(&s);
    s.fail(boom()).unwrap();
    assert_eq!(written(&s, since), [step_end(3, 1), turn_end(3, err)]);
    // Between steps; the inbox is kept.
    s.inbox().append(Target::NextTurn, m("c")).unwrap();
    s.inbox().append(Target::NextTurn, m("d")).unwrap();
    in_step(&s);
    s.end_step(StepOutcome::Continue).unwrap();
    let since = next_seq(&s);
    s.fail(boom()).unwrap();
    assert_eq!(written(&s, since), [turn_end(4, err)]);
    assert_eq!(s.inbox().next_turn().unwrap(), [m("d")]);
    // Idle: refused.
    refused(&s, IDLE, || s.fail(boom()));
}

#[test]
fn turn_errors_keep_extra_keys() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.open_turn().unwrap();
    let e = TurnError::from_json(r#"{"message":"m","code":"c","detail":{"retry":true}}"#).unwrap();
    s.fail(e).unwrap();
    assert_eq!(
        written(&s, 1),
        [turn_end(
            1,
            r#"{"kind":"error","error":{"message":"m","code":"c","detail":{"retry":true}}}"#
        )]
    );
}

#[test]
fn user_messages_carry_surface_op_append() {
    let store = MemoryStore::new();
    let s = new(&store);
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    in_step(&s);
    let events = s.events(0).unwrap();
    let user_events: Vec<_> = events.iter().filter(|e| e.ty() == "user/message").collect();
    assert_eq!(user_events.len(), 1);
    assert_eq!(
        user_events[0].to_json(),
        format!(
            r#"{{"type":"user/message","seq":4,"time":{},"data":{{"id":"a"}},"surfaceOp":"append"}}"#,
            user_events[0].time()
        )
    );
    // Every other library event carries no envelope keys.
    for e in events.iter().filter(|e| e.ty() != "user/message") {
        assert!(e.envelope().surface_op.is_none(), "{}", e.to_json());
    }
}

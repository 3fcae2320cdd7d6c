//! Approvals on every store (ARCHITECTURE.md#approvals, SPEC §17): asked in a turn,
//! parked with no process alive for it, decided from another handle exactly once (the
//! first decision taken in wins), and the run handed on by one `turn/resumed`; a call
//! not allowed answered `TOOL_NOT_ALLOWED`; `cancel`, `fail` and the repair of an
//! interrupted turn deciding what is pending `cancelled`.

use inboxlog::store::Store;
use inboxlog::{
    ApprovalOutcome, Decision, Envelope, ErrorKind, Session, SessionMeta, StepOutcome, TurnClaim,
};
use serde_json::{Value, json};

use crate::{assert_err, each_store, msg};

/// The events of `id` after seq `from`, as (type, data).
fn since(store: &dyn Store, id: &str, from: usize) -> Vec<(String, Value)> {
    let (_, events) = Session::inspect(store, id).unwrap();
    events[from..]
        .iter()
        .map(|e| (e.ty().to_owned(), serde_json::from_str(e.data()).unwrap()))
        .collect()
}

fn count(store: &dyn Store, id: &str) -> usize {
    Session::inspect(store, id).unwrap().1.len()
}

/// A session with turn 1, step 1 open, the model's call `c1` of tool `rm` written and
/// dispatched, and approval `a1` asked for it.
fn asked(store: &dyn Store, id: &str) -> Session {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    s.inbox()
        .append(inboxlog::Target::NextTurn, msg("go"))
        .unwrap();
    s.open_turn().unwrap();
    s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
    let call = json!({"turn": 1, "step": 1, "message": {"id": "m1", "role": "assistant",
        "content": [{"type": "tool-call", "id": "c1", "name": "rm", "arguments": "{\"path\":\"/tmp/x\"}"}],
        "source": {"kind": "model", "provider": "p", "model": "m"}}});
    s.append("assistant/message", &call.to_string(), Envelope::default())
        .unwrap();
    let dispatched = json!({"turn": 1, "step": 1, "callId": "c1", "name": "rm", "arguments": "{}"});
    s.append("tool/call", &dispatched.to_string(), Envelope::default())
        .unwrap();
    s.ask_approval(
        "a1",
        "rm",
        Some("c1"),
        Some(r#"{"path": "/tmp/x"}"#),
        Some("deletes a file"),
    )
    .unwrap();
    s
}

fn tool_result(id: &str) -> String {
    json!({"turn": 1, "step": 1, "message": {"id": format!("r-{id}"), "role": "user",
        "content": [{"type": "tool-result", "toolCallId": id, "content": [{"type": "text", "text": "done"}]}],
        "source": {"kind": "tool", "callId": id}}})
    .to_string()
}

#[test]
fn a_parked_turn_survives_close_and_resumes_once_on_another_handle() {
    each_store(|name, store| {
        let s = asked(store, "p");
        let pending = s.pending_approvals().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&pending[0]).unwrap(),
            json!({"id": "a1", "toolName": "rm", "callId": "c1",
                   "arguments": {"path": "/tmp/x"}, "reason": "deletes a file"}),
            "{name}"
        );
        s.park(Some(r#"{"run": [1, 2]}"#)).unwrap();
        // While parked, the run's calls are refused, nothing written.
        let before = count(store, "p");
        assert_err(
            s.end_step(StepOutcome::Continue),
            ErrorKind::Protocol,
            &["parked", "\"a1\""],
        );
        assert_err(
            s.append("host/x", "{}", Envelope::default()),
            ErrorKind::Protocol,
            &["parked"],
        );
        assert_err(s.resume_parked(), ErrorKind::ApprovalsPending, &["\"a1\""]);
        assert!(!s.approvals_ready().unwrap());
        assert_eq!(count(store, "p"), before, "{name}");
        s.close().unwrap();

        // Read from anywhere, without owning it.
        let peek = Session::peek(store, "p").unwrap();
        assert_eq!(peek.approvals.len(), 1);
        let parked = peek.parked.clone().unwrap();
        assert_eq!(
            (parked.turn, parked.approvals.clone(), parked.ready),
            (1, vec!["a1".to_owned()], false)
        );
        let report = Session::verify(store, "p").unwrap();
        assert!(
            report.parked && !report.needs_repair(),
            "{name}: {report:?}"
        );

        // Opening does not interrupt it; a decision posted from elsewhere is taken in.
        let s = Session::open(store, "p").unwrap();
        assert_eq!(s.open_report().repaired_turn, None, "{name}");
        assert_eq!(s.parked().unwrap().unwrap().turn, 1);
        let post = store
            .decide("p", "a1", ApprovalOutcome::AllowedOnce)
            .unwrap();
        assert!(s.approvals_ready().unwrap(), "{name}");
        let resumed = s.resume_parked().unwrap();
        assert_eq!(resumed.turn, 1);
        assert_eq!(
            serde_json::from_str::<Value>(&resumed.parked).unwrap(),
            json!({"turn": 1, "approvals": ["a1"], "state": {"run": [1, 2]}})
        );
        assert_eq!(
            resumed.decisions,
            [("a1".to_owned(), ApprovalOutcome::AllowedOnce)]
        );
        // Handed on once: a second resume is refused.
        assert_err(s.resume_parked(), ErrorKind::Protocol, &["not parked"]);
        // The run goes on: the tool ran, its result, the step and the turn end.
        s.append("tool/result", &tool_result("c1"), Envelope::default())
            .unwrap();
        assert!(s.end_step(StepOutcome::Continue).unwrap());
        s.close().unwrap();
        let tail = since(store, "p", before);
        let types: Vec<&str> = tail.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            [
                "approval/decided",
                "turn/resumed",
                "tool/result",
                "step/end"
            ],
            "{name}"
        );
        assert_eq!(
            tail[0].1,
            json!({"id": "a1", "outcome": "allowed-once", "post": post})
        );
        assert_eq!(tail[1].1, json!({"turn": 1}));
    });
}

#[test]
fn a_call_not_allowed_is_answered_and_the_first_decision_wins() {
    each_store(|name, store| {
        let s = asked(store, "r");
        s.park(None).unwrap();
        s.close().unwrap();
        let before = count(store, "r");
        let first = store.decide("r", "a1", ApprovalOutcome::Rejected).unwrap();
        let second = store
            .decide("r", "a1", ApprovalOutcome::AllowedOnce)
            .unwrap();
        let unknown = store
            .decide("r", "zz", ApprovalOutcome::AllowedOnce)
            .unwrap();
        let s = Session::open(store, "r").unwrap();
        let tail = since(store, "r", before);
        let types: Vec<&str> = tail.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            [
                "approval/decided",
                "tool/result",
                "agent/inbox/rejected",
                "agent/inbox/rejected"
            ],
            "{name}"
        );
        assert_eq!(tail[0].1["post"], json!(first));
        let answer = &tail[1].1;
        assert_eq!(
            answer["error"],
            json!({"name": "ToolNotAllowedError", "code": "TOOL_NOT_ALLOWED"})
        );
        assert_eq!(answer["message"]["content"][0]["toolCallId"], json!("c1"));
        assert_eq!(answer["message"]["content"][0]["isError"], json!(true));
        let (_, events) = Session::inspect(store, "r").unwrap();
        let answer_event = &events[before + 1];
        let call_seq = events.iter().find(|e| e.ty() == "tool/call").unwrap().seq();
        assert_eq!(
            answer_event.envelope().source_event_seqs.as_deref(),
            Some(&[call_seq, events[before].seq()][..]),
            "{name}"
        );
        assert_eq!(
            tail[2].1,
            json!({"decision": {"id": "a1", "outcome": "allowed-once"},
                   "reason": {"code": 20, "kind": "already_decided", "message": "approval \"a1\" was decided already"},
                   "post": second})
        );
        assert_eq!(tail[3].1["reason"]["kind"], json!("not_found"));
        assert_eq!(tail[3].1["post"], json!(unknown));
        // The model sees the call answered; the run resumes with the rejection.
        let messages = s.messages().unwrap();
        assert!(
            messages.last().unwrap().contains("TOOL_NOT_ALLOWED")
                || messages.last().unwrap().contains("rejected"),
            "{name}"
        );
        let resumed = s.resume_parked().unwrap();
        assert_eq!(
            resumed.decisions,
            [("a1".to_owned(), ApprovalOutcome::Rejected)]
        );
        // A local decision of a decided approval is recorded and refused.
        let at = count(store, "r");
        assert_err(
            s.decide_approval("a1", ApprovalOutcome::AllowedOnce),
            ErrorKind::AlreadyDecided,
            &["\"a1\""],
        );
        assert_err(
            s.decide_approval("nope", ApprovalOutcome::Rejected),
            ErrorKind::NotFound,
            &["\"nope\""],
        );
        assert_eq!(count(store, "r"), at + 2, "{name}: both recorded");
        assert!(s.end_step(StepOutcome::Continue).unwrap());
        s.close().unwrap();
        // Every decision posted was settled once: reopening takes none in again (the
        // first reopen only interrupts the turn this worker left open).
        Session::open(store, "r").unwrap().close().unwrap();
        let n = count(store, "r");
        Session::open(store, "r").unwrap().close().unwrap();
        assert_eq!(count(store, "r"), n, "{name}");
        let decided = since(store, "r", 0)
            .iter()
            .filter(|(t, _)| t == "approval/decided")
            .count();
        assert_eq!(decided, 1, "{name}");
    });
}

#[test]
fn pending_approvals_hold_the_step_and_cancel_decides_them() {
    each_store(|name, store| {
        let s = asked(store, "c");
        let before = count(store, "c");
        assert_err(
            s.end_step(StepOutcome::Continue),
            ErrorKind::ApprovalsPending,
            &["\"a1\""],
        );
        assert_err(s.close_turn(), ErrorKind::ApprovalsPending, &["\"a1\""]);
        assert_err(s.resume_parked(), ErrorKind::Protocol, &["not parked"]);
        assert_err(
            s.ask_approval("a1", "rm", None, None, None),
            ErrorKind::InvalidInput,
            &["asked already"],
        );
        assert_err(
            s.ask_approval("a2", "rm", Some("c9"), None, None),
            ErrorKind::InvalidInput,
            &["\"c9\""],
        );
        assert_err(
            s.append(
                "approval/asked",
                r#"{"id":"x","toolName":"t"}"#,
                Envelope::default(),
            ),
            ErrorKind::InvalidInput,
            &["written only by inboxlog"],
        );
        assert_eq!(count(store, "c"), before, "{name}: nothing written");
        s.cancel(inboxlog::CancelCause::User, true).unwrap();
        let tail = since(store, "c", before);
        let types: Vec<&str> = tail.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            ["approval/decided", "tool/result", "step/end", "turn/end"],
            "{name}"
        );
        assert_eq!(tail[0].1, json!({"id": "a1", "outcome": "cancelled"}));
        assert!(tail[1].1.to_string().contains("cancelled while it waited"));
        assert!(s.pending_approvals().unwrap().is_empty());
        // No turn: asking is refused.
        assert_err(
            s.ask_approval("a3", "rm", None, None, None),
            ErrorKind::Protocol,
            &["idle"],
        );
        assert_err(s.park(None), ErrorKind::Protocol, &["idle"]);
        s.close().unwrap();
    });
}

#[test]
fn a_worker_dying_while_it_waits_or_after_it_resumed_leaves_an_interrupted_turn() {
    each_store(|name, store| {
        // Waiting in place (not parked): the next open cancels the approval, answers
        // the call and interrupts the turn.
        let s = asked(store, "w");
        let before = count(store, "w");
        drop(s);
        let s = Session::open(store, "w").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1), "{name}");
        let tail = since(store, "w", before);
        let types: Vec<&str> = tail.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            ["approval/decided", "tool/result", "step/end", "turn/end"],
            "{name}"
        );
        assert_eq!(tail[1].1["error"]["code"], json!("TOOL_NOT_ALLOWED"));
        s.close().unwrap();

        // Parked, decided, resumed, then the worker died: an ordinary open turn.
        let s = asked(store, "x");
        s.park(None).unwrap();
        s.decide_approval("a1", ApprovalOutcome::AllowedOnce)
            .unwrap();
        s.resume_parked().unwrap();
        let before = count(store, "x");
        drop(s);
        let s = Session::open(store, "x").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1), "{name}");
        let tail = since(store, "x", before);
        assert_eq!(
            tail[0].1["error"]["code"],
            json!("TOOL_OUTCOME_UNKNOWN"),
            "{name}"
        );
        s.close().unwrap();
    });
}

#[test]
fn fail_decides_pending_approvals_cancelled_and_a_parked_turn_can_be_cancelled() {
    each_store(|name, store| {
        let s = asked(store, "f");
        s.park(None).unwrap();
        s.close().unwrap();
        let s = Session::open(store, "f").unwrap();
        let before = count(store, "f");
        s.fail(inboxlog::TurnError::from_json(r#"{"message":"boom","code":"E"}"#).unwrap())
            .unwrap();
        let tail = since(store, "f", before);
        let types: Vec<&str> = tail.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            ["approval/decided", "tool/result", "step/end", "turn/end"],
            "{name}"
        );
        assert!(s.parked().unwrap().is_none());
        // A new turn works as usual.
        s.inbox()
            .append(inboxlog::Target::NextTurn, msg("next"))
            .unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.close().unwrap();
    });
}

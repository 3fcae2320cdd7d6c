//! The step-boundary protocol (ARCHITECTURE.md#protocol): open a turn, propose a step (claim input),
//! decide once, end the step, close the turn; cancel and fail. Imports the session
//! handle, nothing else of the C objects.

use std::ffi::{c_char, c_int};

use inboxlog_core::wire::{FromJson, ToJson};
use inboxlog_core::{CancelCause, Decision, Extra, StepOutcome, TurnError};

use crate::boundary::{FfiResult, boundary};
use crate::session::{inboxlog_session, session_string};
use crate::strings::{Out, handle, json_arg, opt_json_arg, str_arg};

/// The host extras of a protocol call: NULL for none, else a JSON object of keys that
/// the written event's data carries after the library's keys (`INVALID_INPUT` for a
/// key the library writes: `turn`, `step`, `reason`).
///
/// # Safety
/// A non-NULL `extra_json` is a NUL-terminated string.
unsafe fn extra_arg(extra_json: *const c_char) -> FfiResult<Extra> {
    // SAFETY: forwarded contract of this function.
    match unsafe { opt_json_arg(extra_json, "extra_json") }? {
        None => Ok(Extra::none()),
        Some(text) => Ok(Extra::from_json(&text)?),
    }
}

/// Opens a turn (idle only; PROTOCOL otherwise): writes turn/start before any claim.
/// *out_turn receives the turn number (the first turn of a log is 1).
///
/// extra_json is optional (NULL: none): a JSON object of host keys for the turn/start
/// data, e.g. {"trigger":{"kind":"message"}}.
///
/// Ownership: *out_turn receives a number; nothing to free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open_turn(
    session: *mut inboxlog_session,
    extra_json: *const c_char,
    out_turn: *mut u64,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let out = unsafe { Out::new(out_turn, "out_turn") }?;
        out.write(s.session.open_turn_with(&extra)?);
        Ok(())
    })
}

/// Proposes the next step: claims all of next-step (and, for the first proposal of
/// the turn, the first message of next-turn). The claimed batch belongs to the turn
/// from now on. The result is {"turn":N,"step":K,"messages":[...]}; pass the final
/// batch to inboxlog_session_decide. PROTOCOL when no turn is open, a step is open or
/// a proposal is pending.
///
/// Ownership: *out_proposal_json receives a new string owned by the caller; free it
/// with inboxlog_string_free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_propose_step(
    session: *mut inboxlog_session,
    out_proposal_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(
            session,
            out_proposal_json,
            "out_proposal_json",
            error,
            |s| Ok(s.session.propose_step()?.to_json()),
        )
    }
}

/// The one pre-step decision for the pending proposal: decision_json is
/// {"kind":"reject"} (the turn ends blocked) or {"kind":"enter","messages":[...]} (the
/// complete final batch; empty ends a turn that has nothing left to do). The result is
/// {"kind":"step","turn":N,"step":K} or {"kind":"turn-end","turn":N,"reason":{...}}.
/// PROTOCOL when no proposal is pending.
///
/// extra_json is optional (NULL: none): a JSON object of host keys for the first event
/// the decision writes (step/start, or turn/end).
///
/// Ownership: *out_decided_json receives a new string owned by the caller; free it
/// with inboxlog_string_free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_decide(
    session: *mut inboxlog_session,
    decision_json: *const c_char,
    extra_json: *const c_char,
    out_decided_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let decision = unsafe { json_arg(decision_json, "decision_json") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let out = unsafe { Out::new(out_decided_json, "out_decided_json") }?;
        let decision = Decision::from_json(&decision)?;
        out.write_string(s.session.decide_with(decision, &extra)?.to_json())
    })
}

/// Ends the open step with outcome: "continue" (the step owes another model call),
/// "completed" or "max-tokens". *out_again receives whether the loop must propose
/// another step (the turn has not concluded, or steering arrived in next-step);
/// otherwise call inboxlog_session_close_turn. PROTOCOL when no step is open.
///
/// extra_json is optional (NULL: none): a JSON object of host keys for the step/end
/// data.
///
/// Ownership: *out_again receives a bool; nothing to free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_end_step(
    session: *mut inboxlog_session,
    outcome: *const c_char,
    extra_json: *const c_char,
    out_again: *mut bool,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let outcome = unsafe { str_arg(outcome, "outcome") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let out = unsafe { Out::new(out_again, "out_again") }?;
        let outcome = StepOutcome::parse(outcome)?;
        out.write(s.session.end_step_with(outcome, &extra)?);
        Ok(())
    })
}

/// Closes a concluded turn (between steps, no steering pending) with its concluded
/// reason: the result is {"kind":"turn-end","turn":N,"reason":{...}}. PROTOCOL, naming
/// the state, otherwise.
///
/// extra_json is optional (NULL: none): a JSON object of host keys for the turn/end
/// data.
///
/// Ownership: *out_decided_json receives a new string owned by the caller; free it
/// with inboxlog_string_free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_close_turn(
    session: *mut inboxlog_session,
    extra_json: *const c_char,
    out_decided_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let out = unsafe { Out::new(out_decided_json, "out_decided_json") }?;
        out.write_string(s.session.close_turn_with(&extra)?.to_json())
    })
}

/// Cancels: unless keep_inbox, clears the inbox first (durable cancellations); then,
/// if a turn is open, ends an open step and the turn as aborted with the cause. Idle
/// with nothing pending writes nothing.
///
/// cause_json is optional (NULL: {"kind":"user"}): one of {"kind":"user"},
/// {"kind":"parent"}, {"kind":"hook","reason":"..."}, {"kind":"disposed"}. extra_json is
/// optional (NULL: none): a JSON object of host keys for the aborted turn's turn/end
/// data.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_cancel(
    session: *mut inboxlog_session,
    cause_json: *const c_char,
    keep_inbox: bool,
    extra_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let cause = unsafe { opt_json_arg(cause_json, "cause_json") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let cause = match cause {
            None => CancelCause::User,
            Some(json) => CancelCause::from_json(&json)?,
        };
        Ok(s.session.cancel_with(cause, keep_inbox, &extra)?)
    })
}

/// Fails the open turn (any state but idle; PROTOCOL when idle): ends an open step,
/// then the turn with {"kind":"error","error":...}. error_json is an object with string
/// "message" and "code" (other keys kept).
///
/// extra_json is optional (NULL: none): a JSON object of host keys for the turn/end
/// data.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_fail(
    session: *mut inboxlog_session,
    error_json: *const c_char,
    extra_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let turn_error = unsafe { json_arg(error_json, "error_json") }?;
        let extra = unsafe { extra_arg(extra_json) }?;
        let turn_error = TurnError::from_json(&turn_error)?;
        Ok(s.session.fail_with(turn_error, &extra)?)
    })
}

//! Approvals (ARCHITECTURE.md#approvals): asking for a person's decision on a tool call,
//! deciding it in process or from anywhere, parking the open turn on it and handing the
//! run on.

use std::ffi::{c_char, c_int};

use inboxlog_core::wire::{ApprovalRequest, FromJson, ToJson, parked_json};
use inboxlog_core::{ApprovalOutcome, Error};

use crate::boundary::boundary;
use crate::session::{inboxlog_session, session_string, with_session};
use crate::store::inboxlog_store;
use crate::strings::{Out, handle, json_arg, opt_json_arg, str_arg};

/// Asks for a person's approval of a tool call: writes approval/asked. request_json is
/// {"id","toolName","callId"?,"arguments"?,"reason"?}: callId names a tool call still
/// waiting for its result, arguments is any JSON, reason a string. PROTOCOL with no
/// open turn or a parked one; INVALID_INPUT for an id asked before in this log, an empty
/// id or tool name, a call not waiting, or another key. Nothing is written when refused.
///
/// Ownership: nothing is returned.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_ask_approval(
    session: *const inboxlog_session,
    request_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            // SAFETY: the caller's contract (header overview, Safety).
            let text = json_arg(request_json, "request_json")?;
            let ask = ApprovalRequest::from_json(&text)
                .map_err(|e| e.context(format_args!("argument `request_json`")))?;
            s.session.ask_approval(
                &ask.id,
                &ask.tool_name,
                ask.call_id.as_deref(),
                ask.arguments.as_deref(),
                ask.reason.as_deref(),
            )?;
            Ok(())
        })
    }
}

/// The outcome named `name`, as an argument.
fn outcome(name: &str) -> Result<ApprovalOutcome, Error> {
    ApprovalOutcome::parse(name).map_err(|e| e.context(format_args!("argument `outcome`")))
}

/// Decides approval approval_id: outcome is "allowed-once", "rejected", "cancelled" or
/// "unavailable". Writes approval/decided and, when the outcome does not allow the call
/// the approval names and that call still waits, the tool/result answering it
/// TOOL_NOT_ALLOWED. Allowed while parked. A decision for an approval that is not
/// pending is recorded as agent/inbox/rejected {"decision":...} and then refused:
/// ALREADY_DECIDED, or NOT_FOUND for an id never asked.
///
/// Ownership: nothing is returned.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_decide_approval(
    session: *const inboxlog_session,
    approval_id: *const c_char,
    outcome_name: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            // SAFETY (both): the caller's contract (header overview, Safety).
            let id = str_arg(approval_id, "approval_id")?;
            let outcome = outcome(str_arg(outcome_name, "outcome")?)?;
            Ok(s.session.decide_approval(id, outcome)?)
        })
    }
}

/// The session's approvals, after taking posted decisions in:
/// {"pending":[approval/asked data…],"parked":{"turn","approvals":[id…],"ready"}|null}.
/// "ready" says every approval the parked turn names is decided, so
/// inboxlog_session_resume_parked may hand the run on.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_approvals(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            s.session.approvals_ready()?;
            let pending = s.session.pending_approvals()?;
            let parked = s.session.parked()?;
            Ok(format!(
                "{{\"pending\":[{}],\"parked\":{}}}",
                pending.join(","),
                parked_json(parked.as_ref())
            ))
        })
    }
}

/// Parks the open turn on its pending approvals: writes turn/parked
/// {"turn","approvals":[id…],"state"?}; state_json (NULL for none) is whatever the host
/// needs to resume the run. The turn stays open with no process alive for it: opening
/// the session leaves it open. While parked, the step-boundary calls and appends are
/// PROTOCOL; deciding, cancel and fail are not. PROTOCOL with no open turn, a parked
/// one, or no pending approval.
///
/// Ownership: nothing is returned; state_json is only read.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_park(
    session: *const inboxlog_session,
    state_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            // SAFETY: the caller's contract (header overview, Safety).
            let state = opt_json_arg(state_json, "state_json")?;
            s.session.park(state.as_deref())?;
            Ok(())
        })
    }
}

/// Hands the parked run on, after taking posted decisions in: writes turn/resumed
/// {"turn"}, the one commit after which the run continues here, and gives
/// {"turn","parked":{turn/parked data},"decisions":[{"id","outcome"}…]}.
/// APPROVALS_PENDING while an approval it names is pending; PROTOCOL when the turn is
/// not parked; nothing is written then.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_resume_parked(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.session.resume_parked()?.to_json())
        })
    }
}

/// Decides approval approval_id of session id from anywhere, whether the session is
/// open or not: the decision travels as a post does (inboxlog_store_post), exactly
/// once; the session's writer takes it in where it takes posts in and writes
/// approval/decided carrying "post"; the first decision taken in wins, and a later one
/// (or one for an unknown id) is recorded as agent/inbox/rejected {"decision":...}
/// (already_decided, not_found). NOT_FOUND when there is no session id; INVALID_INPUT
/// for a bad id, an empty approval_id or an unknown outcome.
///
/// Ownership: *out_post receives the post id once the decision is durable, a new
/// string owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_decide(
    store: *const inboxlog_store,
    id: *const c_char,
    approval_id: *const c_char,
    outcome_name: *const c_char,
    out_post: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let approval_id = unsafe { str_arg(approval_id, "approval_id") }?;
        let outcome = outcome(unsafe { str_arg(outcome_name, "outcome") }?)?;
        let out = unsafe { Out::new(out_post, "out_post") }?;
        out.write_string(store.store.decide(id, approval_id, outcome)?)
    })
}

//! The inbox of a session: two ordered lists of pending messages (ARCHITECTURE.md#inbox).
//!
//! Targets cross as the strings `"next-turn"` and `"next-step"`; messages as JSON
//! objects with a non-empty string `id`. Imports the session handle, nothing else of
//! the C objects.

use std::ffi::{c_char, c_int};

use inboxlog_core::{Message, Session, Target, wire};

use crate::boundary::{FfiResult, boundary};
use crate::session::{inboxlog_session, session_string, session_value, with_session};
use crate::strings::{Out, handle, json_arg, str_arg};

/// # Safety
/// `ptr` is NULL or a NUL-terminated string.
unsafe fn target_arg(ptr: *const c_char) -> FfiResult<Target> {
    // SAFETY: forwarded contract of this function.
    Ok(Target::parse(unsafe { str_arg(ptr, "target") }?)?)
}

/// # Safety
/// `ptr` is NULL or a NUL-terminated string.
unsafe fn message_arg(ptr: *const c_char, name: &str) -> FfiResult<Message> {
    // SAFETY: forwarded contract of this function.
    let json = unsafe { json_arg(ptr, name) }?;
    Ok(Message::from_json(&json).map_err(|e| e.context(format_args!("argument `{name}`")))?)
}

/// Removes delete_count messages of target ("next-turn" or "next-step") from start
/// and inserts inserted_json (a JSON array of messages) there, with JavaScript
/// Array.prototype.splice arithmetic: start and delete_count may be any double, NaN
/// and infinities included, and a negative start counts from the end. This is the one
/// function whose numbers are clamped, on purpose: it is splice.
///
/// The change is durable before the call returns; a change that does nothing writes
/// nothing. INVALID_SPLICE or DUPLICATE_MESSAGE when the result would be invalid
/// (nothing is changed then).
///
/// Ownership: *out_removed_json receives the removed messages as a JSON array, a new
/// string owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_splice(
    session: *mut inboxlog_session,
    target: *const c_char,
    start: f64,
    delete_count: f64,
    inserted_json: *const c_char,
    out_removed_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let target = unsafe { target_arg(target) }?;
        let inserted = unsafe { json_arg(inserted_json, "inserted_json") }?;
        let out = unsafe { Out::new(out_removed_json, "out_removed_json") }?;
        let inserted = wire::messages_from(&inserted, "argument `inserted_json`")?;
        let removed = s
            .session
            .inbox()
            .splice(target, start, delete_count, inserted)?;
        out.write_string(wire::messages(&removed))
    })
}

/// The body of [`inboxlog_inbox_append`] and [`inboxlog_inbox_prepend`]: checks `session`, `target` and
/// `message_json`, in that order, then lets `op` put the message in the inbox.
///
/// # Safety
/// `session` is NULL or a live session handle; `target` and `message_json` are NULL or
/// NUL-terminated strings; a non-NULL `error` points to a writable pointer.
unsafe fn add(
    session: *const inboxlog_session,
    target: *const c_char,
    message_json: *const c_char,
    error: *mut *mut c_char,
    op: impl FnOnce(&Session, Target, Message) -> inboxlog_core::Result<()>,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): this function's contract.
        let s = unsafe { handle(session, "session") }?;
        let target = unsafe { target_arg(target) }?;
        let m = unsafe { message_arg(message_json, "message_json") }?;
        Ok(op(&s.session, target, m)?)
    })
}

/// Adds message_json at the end of target ("next-turn" or "next-step").
/// DUPLICATE_MESSAGE when its id is already pending.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_append(
    session: *mut inboxlog_session,
    target: *const c_char,
    message_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        add(session, target, message_json, error, |s, t, m| {
            s.inbox().append(t, m)
        })
    }
}

/// Adds message_json at the front of target. As inboxlog_inbox_append otherwise.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_prepend(
    session: *mut inboxlog_session,
    target: *const c_char,
    message_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        add(session, target, message_json, error, |s, t, m| {
            s.inbox().prepend(t, m)
        })
    }
}

/// Replaces the pending message id (looked up in next-turn, then next-step) with
/// message_json, which may have a new id. *out_replaced receives false (and nothing is
/// written) when id is not pending.
///
/// Ownership: *out_replaced receives a bool; nothing to free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_replace(
    session: *mut inboxlog_session,
    id: *const c_char,
    message_json: *const c_char,
    out_replaced: *mut bool,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let m = unsafe { message_arg(message_json, "message_json") }?;
        let out = unsafe { Out::new(out_replaced, "out_replaced") }?;
        out.write(s.session.inbox().replace(id, m)?);
        Ok(())
    })
}

/// Removes the pending message id (a durable cancellation). *out_removed receives
/// false (and nothing is written) when id is not pending.
///
/// Ownership: *out_removed receives a bool; nothing to free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_remove(
    session: *mut inboxlog_session,
    id: *const c_char,
    out_removed: *mut bool,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out_removed, "out_removed") }?;
        out.write(s.session.inbox().remove(id)?);
        Ok(())
    })
}

/// Cancels everything pending, next-step first, then next-turn (an empty list writes
/// nothing).
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_clear(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe { with_session(session, error, |s| Ok(s.session.inbox().clear()?)) }
}

/// A copy of next-turn as a JSON array of messages.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_next_turn(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(wire::messages(&s.session.inbox().next_turn()?))
        })
    }
}

/// A copy of next-step as a JSON array of messages.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_next_step(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(wire::messages(&s.session.inbox().next_step()?))
        })
    }
}

/// Whether either list holds a message: *out receives true or false.
///
/// Ownership: *out receives a bool; nothing to free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_has_pending(
    session: *const inboxlog_session,
    out: *mut bool,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_value(session, out, "out", error, |s| {
            Ok(s.session.inbox().has_pending()?)
        })
    }
}

//! The shared preamble of exported functions on a session handle: run in the
//! boundary, check `session` (`NULL_ARGUMENT` naming `session`), then the
//! out-parameter, if any, and only then do the work.
//!
//! The work is a closure that runs inside the caller's `unsafe` block, so it must be
//! safe code only: functions that decode further pointer arguments do so themselves,
//! each in its own commented `unsafe` block, and do not use these helpers.

use std::ffi::{c_char, c_int};

use crate::boundary::{FfiResult, boundary};
use crate::session::inboxlog_session;
use crate::strings::{Out, handle};

/// Runs `body` on the session in the boundary: `OK`, or the error's code (and JSON in
/// `*error`). `session` NULL is `NULL_ARGUMENT`; `body` does not run then.
///
/// # Safety
/// `session` is NULL or a live session handle for the whole call; a non-NULL `error`
/// points to a writable pointer.
pub(crate) unsafe fn with_session(
    session: *const inboxlog_session,
    error: *mut *mut c_char,
    body: impl FnOnce(&inboxlog_session) -> FfiResult<()>,
) -> c_int {
    boundary(error, || {
        // SAFETY: this function's contract: NULL or a live handle.
        let s = unsafe { handle(session, "session") }?;
        body(s)
    })
}

/// Like [`with_session`], for a getter whose result is a string: `out` is checked
/// after `session` (`NULL_ARGUMENT` naming `out_name`) and before `body` runs, and on
/// success receives `body`'s string, library-allocated (freed with
/// `inboxlog_string_free`). On failure `*out` is not written.
///
/// # Safety
/// As for [`with_session`]; `out` is NULL or points to a writable `char *`.
pub(crate) unsafe fn session_string(
    session: *const inboxlog_session,
    out: *mut *mut c_char,
    out_name: &str,
    error: *mut *mut c_char,
    body: impl FnOnce(&inboxlog_session) -> FfiResult<String>,
) -> c_int {
    // SAFETY: this function's contract, which is `session_out`'s.
    unsafe { session_out(session, out, out_name, error, body, Out::write_string) }
}

/// Like [`session_string`], for a getter whose result is a plain value (`bool`,
/// `uint64_t`, …) written to `*out` on success.
///
/// # Safety
/// As for [`with_session`]; `out` is NULL or valid for writing one `T`.
pub(crate) unsafe fn session_value<T>(
    session: *const inboxlog_session,
    out: *mut T,
    out_name: &str,
    error: *mut *mut c_char,
    body: impl FnOnce(&inboxlog_session) -> FfiResult<T>,
) -> c_int {
    let write = |out: Out<T>, value| {
        out.write(value);
        Ok(())
    };
    // SAFETY: this function's contract, which is `session_out`'s.
    unsafe { session_out(session, out, out_name, error, body, write) }
}

/// The two above: checks `session`, then `out`, then runs `body` and hands its result
/// to `write`.
///
/// # Safety
/// As for [`with_session`]; `out` is NULL or valid for writing one `T`.
unsafe fn session_out<T, V>(
    session: *const inboxlog_session,
    out: *mut T,
    out_name: &str,
    error: *mut *mut c_char,
    body: impl FnOnce(&inboxlog_session) -> FfiResult<V>,
    write: impl FnOnce(Out<T>, V) -> FfiResult<()>,
) -> c_int {
    // SAFETY: this function's contract covers both `with_session` and `Out::new`.
    unsafe {
        with_session(session, error, |s| {
            let out = Out::new(out, out_name)?;
            write(out, body(s)?)
        })
    }
}

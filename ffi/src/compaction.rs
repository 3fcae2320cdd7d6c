//! Compaction (ARCHITECTURE.md#compaction): replacing a range of the surface with a
//! summary the host wrote, one compaction at a time, and pruning a long tool result.
//! The handle of the compaction a session started lives in its `inboxlog_session`.

use std::ffi::{c_char, c_int};
use std::sync::{MutexGuard, PoisonError};

use inboxlog_core::wire::{CompactionCommit, FromJson, ToJson};
use inboxlog_core::{Compaction, Error, ErrorKind, Session};

use crate::session::{inboxlog_session, session_string, with_session};
use crate::strings::{json_arg, str_arg};

type Running = Compaction<std::sync::Arc<Session>>;

fn held(s: &inboxlog_session) -> MutexGuard<'_, Option<Running>> {
    s.compaction.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The compaction this handle started, taken: PROTOCOL when there is none.
fn take(s: &inboxlog_session, call: &str) -> Result<Running, Error> {
    held(s).take().ok_or_else(|| {
        Error::new(
            ErrorKind::Protocol,
            format!("{call}: no compaction started by this handle is running"),
        )
    })
}

/// Starts a compaction of the surface from seq start through seq end: writes
/// compaction/start {"compactionId","turn"}, owned by the open turn between its steps or,
/// with no turn open, by none; gives {"compactionId","turn":N|null,"range":{"start",
/// "end"},"shadowedSeqs":[seq…],"shadowedTokenCount":N,"messages":[message…]} (the
/// messages to summarize). inboxlog_session_commit_compaction or
/// inboxlog_session_abort_compaction ends it; freeing the session first ends it with
/// "abandoned". While it runs, another start, a park and any turn/start or turn/end
/// are BUSY; cancel and fail end it first. Refused with nothing written: BUSY while one
/// runs; PROTOCOL with a step open, a proposal pending or a parked turn;
/// INVALID_INPUT when start and end are not on the surface, start comes after end, or
/// the range splits a tool call from its result.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_begin_compaction(
    session: *const inboxlog_session,
    start: u64,
    end: u64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            let running = Compaction::begin(s.session.clone(), start, end)?;
            let json = running.to_json();
            *held(s) = Some(running);
            Ok(json)
        })
    }
}

/// Commits the compaction this session handle started, with commit_json
/// {"summary":S|[block…],"provider","model","usage"?} (a string summary is stored as one
/// text block): writes compaction/summary, one user/message replacing the range on the
/// surface and compaction/end, and gives {"compactionId","summary":event,
/// "message":event}. A commit_json that is NULL, not JSON or not of that shape is
/// refused first, the compaction still running. Any failure after that writes exactly
/// one compaction/end with an error instead: CONFLICT when the surface changed inside
/// the range since the start; INVALID_INPUT for a bad summary or usage. PROTOCOL when
/// this handle started none (or it was committed, aborted, or ended by cancel or fail
/// already).
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free; commit_json is only read.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_commit_compaction(
    session: *const inboxlog_session,
    commit_json: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            // SAFETY: the caller's contract (header overview, Safety).
            let text = json_arg(commit_json, "commit_json")?;
            let commit = CompactionCommit::from_json(&text)
                .map_err(|e| e.context(format_args!("argument `commit_json`")))?;
            let running = take(s, "inboxlog_session_commit_compaction")?;
            let done = running.commit(
                &commit.summary,
                &commit.provider,
                &commit.model,
                commit.usage.as_deref(),
            )?;
            Ok(done.to_json())
        })
    }
}

/// Ends the compaction this session handle started with error_text: writes
/// compaction/end {…,"error"}. PROTOCOL when this handle started none (or it ended
/// already).
///
/// Ownership: nothing is returned; error_text is only read.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_abort_compaction(
    session: *const inboxlog_session,
    error_text: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            // SAFETY: the caller's contract (header overview, Safety).
            let why = str_arg(error_text, "error_text")?;
            let running = take(s, "inboxlog_session_abort_compaction")?;
            Ok(running.abort(why)?)
        })
    }
}

/// Prunes the tool/result at seq on the surface: when its text is longer than 8,192
/// code points, writes compaction/prune and a tool/result replacing it whose text keeps
/// the first 4,096 and the last 1,024 around a marker, and gives that event; gives
/// null, with nothing written, when it is not that long. INVALID_INPUT when seq is not
/// a tool/result on the surface; PROTOCOL while parked.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread; calls on one session serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_prune(
    session: *const inboxlog_session,
    seq: u64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.session
                .prune(seq)?
                .map_or_else(|| "null".to_owned(), |e| e.to_json()))
        })
    }
}

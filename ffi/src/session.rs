//! Sessions: the handle, its lifecycle (create, open, fork, flush, close, free), what
//! it reads back (id, header, open report, events), and append (ARCHITECTURE.md#events, ARCHITECTURE.md#seeds-and-forks, ARCHITECTURE.md#c-abi).
//!
//! Also the shared preamble of the functions on a session handle elsewhere (inbox,
//! protocol, projection, notifications): run in the boundary, check `session`
//! (`NULL_ARGUMENT` naming `session`), then the out-parameter, if any, and only then
//! do the work. The work is a closure that runs inside the caller's `unsafe` block, so
//! it must be safe code only: functions that decode further pointer arguments do so
//! themselves, each in its own commented `unsafe` block, and do not use these helpers.

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, Once};

use inboxlog_core::store::OpenOptions;
use inboxlog_core::wire::{self, FromJson, ToJson};
use inboxlog_core::{Compaction, Envelope, Session, SessionMeta};

use crate::boundary::{FfiResult, boundary, boundary_void};
use crate::store::inboxlog_store;
use crate::strings::{
    Out, absent_or, events_arg, handle, json_arg, opt_json_arg, optional_number, str_arg,
};

/// One open session: the exclusive writer of a log, its inbox and its turn/step
/// protocol. Opaque.
///
/// Made by inboxlog_session_create, inboxlog_session_create_seeded,
/// inboxlog_session_open or inboxlog_session_fork; inboxlog_session_close releases the
/// log (later calls fail with INBOXLOG_STATUS_CLOSED) and inboxlog_session_free closes
/// it and releases the handle. Every function but inboxlog_session_free may be called
/// from several threads at once: calls on one session serialize.
pub struct inboxlog_session {
    pub(crate) session: Arc<Session>,
    /// The compaction this handle started and has not committed or aborted yet
    /// (ARCHITECTURE.md#compaction): one at a time, as the session allows.
    pub(crate) compaction: Mutex<Option<Compaction<Arc<Session>>>>,
    /// Notifications committed since the last poll, as JSON, in commit order.
    pub(crate) notices: Arc<Mutex<Vec<String>>>,
    /// Whether the notification observers are registered (once per handle).
    pub(crate) watching: Once,
}

impl inboxlog_session {
    pub(crate) fn new(session: Session) -> inboxlog_session {
        inboxlog_session {
            session: Arc::new(session),
            compaction: Mutex::new(None),
            notices: Arc::default(),
            watching: Once::new(),
        }
    }

    /// The session, refused with `closed` once closed.
    pub(crate) fn live(&self) -> FfiResult<&Session> {
        self.session.last_seq()?;
        Ok(&self.session)
    }
}

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
/// `int64_t`, …) written to `*out` on success.
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

/// # Safety
/// `ptr` is NULL or a NUL-terminated string.
unsafe fn meta_arg(ptr: *const c_char) -> FfiResult<SessionMeta> {
    // SAFETY: forwarded contract of this function.
    match unsafe { opt_json_arg(ptr, "meta_json") }? {
        None => Ok(SessionMeta::default()),
        Some(json) => Ok(SessionMeta::from_json(&json)?),
    }
}

fn give(out: Out<*mut inboxlog_session>, session: Session) {
    out.write(Box::into_raw(Box::new(inboxlog_session::new(session))));
}

/// Creates a new, empty session log id in store. ALREADY_EXISTS when the id is taken;
/// a bad id is INVALID_INPUT.
///
/// meta_json is optional (NULL: none): an object with optional "cwd", "origin"
/// ("subagent"), "delegationDepth" and "agentPreset".
///
/// Ownership: *out receives a new session handle owned by the caller; release it with
/// inboxlog_session_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_create(
    store: *const inboxlog_store,
    id: *const c_char,
    meta_json: *const c_char,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::create(&*store.store, id, meta)?);
        Ok(())
    })
}

/// Creates a session log id whose first events are seed_json (a JSON array of events,
/// e.g. another log's, seqs from 0): every event is validated, and session/end-seed is
/// appended unless the seed ends with one.
///
/// seed_length is INBOXLOG_ABSENT or the seedLength recorded in the header (the inbox
/// replays from there). meta_json is optional, as for inboxlog_session_create.
///
/// Ownership: *out receives a new session handle owned by the caller; release it with
/// inboxlog_session_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_create_seeded(
    store: *const inboxlog_store,
    id: *const c_char,
    meta_json: *const c_char,
    seed_json: *const c_char,
    seed_length: i64,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let seed = unsafe { json_arg(seed_json, "seed_json") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let seed_length = optional_number(seed_length, "seed_length")?;
        let seed = events_arg(&seed, "seed_json")?;
        give(
            out,
            Session::create_seeded(&*store.store, id, meta, seed, seed_length)?,
        );
        Ok(())
    })
}

/// Opens a stored session for writing: takes its exclusive lock (LOCKED when another
/// writer holds it), drops a torn tail, replays the inbox once, and closes a turn the
/// previous writer left open as interrupted (see inboxlog_session_open_report).
/// NOT_FOUND when there is no such session; CORRUPT when the log fails validation
/// (nothing is changed then).
///
/// Ownership: *out receives a new session handle owned by the caller; release it with
/// inboxlog_session_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open(
    store: *const inboxlog_store,
    id: *const c_char,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::open(&*store.store, id)?);
        Ok(())
    })
}

/// inboxlog_session_open with a takeover flag. When takeover is true, the session is
/// taken from its current owner even when that owner is alive but stuck (PostgreSQL
/// store only): this call proceeds at once, and the old owner gets FENCED on its next
/// call, having written nothing after the takeover. The memory and JSONL stores refuse
/// takeover as INVALID_INPUT (their locks die with their owner). With takeover false
/// this is inboxlog_session_open.
///
/// Ownership: *out receives a new session handle owned by the caller; release it with
/// inboxlog_session_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open_ex(
    store: *const inboxlog_store,
    id: *const c_char,
    takeover: bool,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(
            out,
            Session::open_with(&*store.store, id, &OpenOptions::takeover(takeover))?,
        );
        Ok(())
    })
}

/// Forks parent_id into a new session child_id: the child starts with a copy of the
/// parent's events (up to, not including, an open turn), an empty inbox and the
/// parent's cwd; the parent log is not changed.
///
/// meta_json is optional, as for inboxlog_session_create (a subagent passes
/// {"origin":"subagent","delegationDepth":N}).
///
/// Ownership: *out receives the child's new session handle, owned by the caller;
/// release it with inboxlog_session_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_fork(
    store: *const inboxlog_store,
    parent_id: *const c_char,
    child_id: *const c_char,
    meta_json: *const c_char,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let parent = unsafe { str_arg(parent_id, "parent_id") }?;
        let child = unsafe { str_arg(child_id, "child_id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::fork(&*store.store, parent, child, meta)?);
        Ok(())
    })
}

/// Makes everything appended so far durable (the barrier of the batched durability
/// mode; a no-op for sync).
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_flush(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe { with_session(session, error, |s| Ok(s.session.flush()?)) }
}

/// Flushes and releases the log (and its lock); later calls on this handle fail with
/// CLOSED. Closing a closed session is a no-op returning OK; a NULL session is
/// NULL_ARGUMENT, as everywhere but the _free functions. The handle itself stays
/// allocated until inboxlog_session_free.
///
/// Ownership: nothing is returned; the caller still owns the handle.
/// Threads: may race other calls on this session: they either complete first or fail
/// with CLOSED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_close(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe { with_session(session, error, |s| Ok(s.session.close()?)) }
}

/// Closes the session (ignoring a flush error; call inboxlog_session_close first to
/// see it) and releases the handle. NULL is a no-op.
///
/// Ownership: takes back the handle the caller owned; it must not be used afterwards.
/// Threads: must not race any other call on this session.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_free(session: *mut inboxlog_session) {
    boundary_void(|| {
        if !session.is_null() {
            // SAFETY: a live handle made by `Box::into_raw`, released exactly once.
            let handle = unsafe { Box::from_raw(session) };
            let _ = handle.session.close();
        }
    });
}

/// The session id.
///
/// Ownership: *out receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_id(
    session: *const inboxlog_session,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out, "out", error, |s| {
            Ok(s.live()?.id().to_owned())
        })
    }
}

/// The log's header as JSON ({"format":"inboxlog","version":2,"id":...,"createdAt":...}
/// plus optional keys).
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_header(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.live()?.header().to_json())
        })
    }
}

/// What opening found and fixed: {"tornBytes":N,"repairedTurn":N|null,
/// "repairedCompaction":S|null} (bytes of a torn tail dropped; the turn closed as
/// interrupted, if any; the compaction ended as interrupted, if any). Always 0 and null
/// for a created or forked session.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open_report(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.live()?.open_report().to_json())
        })
    }
}

/// Appends a host event of type type with data_json (any JSON; kept byte for byte once
/// valid, whitespace outside strings removed).
///
/// envelope_json is optional (NULL: none): an object with optional "ignorable"
/// (bool), "surfaceOp" and "sourceEventSeqs" (only on user/message, assistant/message,
/// tool/result). Reserved types (turn/start, agent/inbox/spliced, ...) are refused with
/// INVALID_INPUT, except user/message, whose data may be any JSON object: an "id" is
/// optional there (runtime context carries none); only inbox messages need one.
///
/// Ownership: out_event_json is optional; when it is not NULL, *out_event_json
/// receives the committed event as a new string owned by the caller (free it with
/// inboxlog_string_free).
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_append(
    session: *mut inboxlog_session,
    r#type: *const c_char,
    data_json: *const c_char,
    envelope_json: *const c_char,
    out_event_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let s = unsafe { handle(session, "session") }?;
        let ty = unsafe { str_arg(r#type, "type") }?;
        let data = unsafe { json_arg(data_json, "data_json") }?;
        let envelope_text = unsafe { opt_json_arg(envelope_json, "envelope_json") }?;
        let out = if out_event_json.is_null() {
            None
        } else {
            Some(unsafe { Out::new(out_event_json, "out_event_json") }?)
        };
        let envelope = match &envelope_text {
            None => Envelope::default(),
            Some(text) => {
                Envelope::from_json(text).map_err(|e| e.context("argument `envelope_json`"))?
            }
        };
        let event = s.session.append(ty, &data, envelope)?;
        match out {
            Some(out) => out.write_string(event.to_json()),
            None => Ok(()),
        }
    })
}

/// The events with seq >= since, as a JSON array of event objects (keys "type",
/// "seq", "time", "data", then optional "ignorable", "surfaceOp", "sourceEventSeqs").
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_events(
    session: *const inboxlog_session,
    since: u64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(wire::events(&s.session.events(since)?))
        })
    }
}

/// The seq of the last event: *out receives it, or INBOXLOG_ABSENT for an empty log.
///
/// Ownership: *out receives a number; nothing to free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_last_seq(
    session: *const inboxlog_session,
    out: *mut i64,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_value(session, out, "out", error, |s| {
            Ok(absent_or(s.session.last_seq()?))
        })
    }
}

/// The open turn: *out receives its number (turns count from 1), or INBOXLOG_ABSENT
/// when no turn is open.
///
/// Ownership: *out receives a number; nothing to free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_current_turn(
    session: *const inboxlog_session,
    out: *mut i64,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_value(session, out, "out", error, |s| {
            Ok(absent_or(s.session.turn_open()?))
        })
    }
}

//! Sessions: create, open, fork, read, append, flush, close, and polled notifications
//! (SPEC §1, §6, §9.1).

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use inboxlog_core::store::OpenOptions;
use inboxlog_core::{Envelope, Event, Session, SessionMeta};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::boundary::{FfiResult, boundary, boundary_void};
use crate::call::{session_string, session_value, with_session};
use crate::store::inboxlog_store;
use crate::strings::{
    Out, handle, json_arg, json_list, opt_json_arg, optional_index, parse_shape, raw_array, str_arg,
};

/// One open session: the exclusive writer of a log, its inbox and its turn/step
/// protocol. Opaque.
///
/// Created by `inboxlog_session_create`, `_create_seeded`, `_open` or `_fork`;
/// `inboxlog_session_close` releases the log (later calls fail with
/// `INBOXLOG_STATUS_CLOSED`; closing twice is fine) and `inboxlog_session_free` closes
/// and releases the handle. Every function but `_free` may be called from several
/// threads at once: calls on one session serialize.
pub struct inboxlog_session {
    pub(crate) session: Session,
    /// Notifications committed since the last poll, as JSON, in commit order.
    notices: Arc<Mutex<Vec<String>>>,
    watching: Once,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The queue is only pushed to and taken whole: a panic cannot leave it half-changed.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl inboxlog_session {
    fn new(session: Session) -> inboxlog_session {
        inboxlog_session {
            session,
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

/// Appends `[e1,e2,…]` (compact, §1.1 key order) to `out`.
pub(crate) fn write_events(out: &mut String, events: &[Event]) {
    out.push('[');
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        event.write_json(out);
    }
    out.push(']');
}

/// Parses a checked JSON array of events (`name` names the argument in errors).
pub(crate) fn parse_events(json: &str, name: &str) -> FfiResult<Vec<Event>> {
    raw_array(json, name, "events")?
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            Event::from_json(raw.get()).map_err(|e| {
                e.context(format_args!("argument `{name}` element {i}"))
                    .into()
            })
        })
        .collect()
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

/// Creates a new, empty session log `id` in `store`.
///
/// `meta_json` is NULL or an object with optional `cwd`, `origin` (`"subagent"`),
/// `delegationDepth` and `agentPreset`. `ALREADY_EXISTS` when the id is taken; a bad id
/// is `INVALID_INPUT`. On success `*out` receives a new session handle owned by the
/// caller (close and free it with `inboxlog_session_free`). `store`, `id` and `out` must
/// not be NULL. Thread-safe.
///
/// # Safety
/// `store` is a live store handle; `id` and a non-NULL `meta_json` are NUL-terminated
/// strings; `out` and a non-NULL `error` point to writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_create(
    store: *const inboxlog_store,
    id: *const c_char,
    meta_json: *const c_char,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract above.
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::create(&*store.store, id, meta)?);
        Ok(())
    })
}

/// Creates a session log `id` whose first events are `seed_json` (a JSON array of
/// events, e.g. another log's, seqs from 0): every event is validated, and
/// `session/end-seed` is appended unless the seed ends with one.
///
/// `seed_length` is -1 (absent) or the `seedLength` recorded in the header (the inbox
/// replays from there); other values are `INVALID_INPUT`. `meta_json` as in
/// `inboxlog_session_create`. On success `*out` receives a new session handle owned by
/// the caller. `store`, `id`, `seed_json` and `out` must not be NULL. Thread-safe.
///
/// # Safety
/// As for `inboxlog_session_create`; `seed_json` is a NUL-terminated string.
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
        // SAFETY (all five): the caller's contract above.
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let seed = unsafe { json_arg(seed_json, "seed_json") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let seed_length = optional_index(seed_length, "seed_length")?;
        let seed = parse_events(&seed, "seed_json")?;
        give(
            out,
            Session::create_seeded(&*store.store, id, meta, seed, seed_length)?,
        );
        Ok(())
    })
}

/// Opens a stored session for writing: takes its exclusive lock (`LOCKED` when another
/// writer holds it), drops a torn tail, replays the inbox once, and closes a turn the
/// previous writer left open as `interrupted` (see `inboxlog_session_open_report`).
///
/// On success `*out` receives a new session handle owned by the caller. `NOT_FOUND`
/// when there is no such session; `CORRUPT` when the log fails validation (nothing is
/// changed then). `store`, `id` and `out` must not be NULL. Thread-safe.
///
/// # Safety
/// `store` is a live store handle; `id` is a NUL-terminated string; `out` and a
/// non-NULL `error` point to writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open(
    store: *const inboxlog_store,
    id: *const c_char,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract above.
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::open(&*store.store, id)?);
        Ok(())
    })
}

/// `inboxlog_session_open` with a takeover flag: when `takeover` is true, the session is
/// taken from its current owner even when that owner is alive but stuck (PostgreSQL
/// store only, SPEC §10.3): this call proceeds at once and the old owner gets `FENCED`
/// on its next call, having written nothing after the takeover. The memory and JSONL
/// stores refuse `takeover` as `INVALID_INPUT` (their locks die with their owner). With
/// `takeover` false this is `inboxlog_session_open`. Same ownership, NULL and
/// thread-safety rules as `inboxlog_session_open`.
///
/// # Safety
/// As for `inboxlog_session_open`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open_ex(
    store: *const inboxlog_store,
    id: *const c_char,
    takeover: bool,
    out: *mut *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract above.
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(
            out,
            Session::open_with(&*store.store, id, OpenOptions::takeover(takeover))?,
        );
        Ok(())
    })
}

/// Forks `parent_id` into a new session `child_id`: the child starts with a copy of the
/// parent's events (up to, not including, an open turn), an empty inbox and the
/// parent's `cwd`; the parent log is not changed.
///
/// `meta_json` as in `inboxlog_session_create` (a subagent passes
/// `{"origin":"subagent","delegationDepth":N}`). On success `*out` receives the child's
/// new session handle, owned by the caller. `store`, `parent_id`, `child_id` and `out`
/// must not be NULL. Thread-safe.
///
/// # Safety
/// `store` is a live store handle; `parent_id`, `child_id` and a non-NULL `meta_json`
/// are NUL-terminated strings; `out` and a non-NULL `error` point to writable pointers.
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
        // SAFETY (all five): the caller's contract above.
        let store = unsafe { handle(store, "store") }?;
        let parent = unsafe { str_arg(parent_id, "parent_id") }?;
        let child = unsafe { str_arg(child_id, "child_id") }?;
        let meta = unsafe { meta_arg(meta_json) }?;
        let out = unsafe { Out::new(out, "out") }?;
        give(out, Session::fork(&*store.store, parent, child, meta)?);
        Ok(())
    })
}

/// Flushes and releases the log (and its lock); later calls on this handle fail with
/// `INBOXLOG_STATUS_CLOSED`. NULL and a second close are no-ops returning OK. The handle
/// itself stays allocated until `inboxlog_session_free`. Safe to call while other
/// threads use the session: their calls either complete first or fail with `CLOSED`.
///
/// # Safety
/// `session` is NULL or a live session handle; a non-NULL `error` points to a writable
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_close(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller passes NULL or a live handle.
        match unsafe { session.as_ref() } {
            None => Ok(()),
            Some(s) => Ok(s.session.close()?),
        }
    })
}

/// Closes the session (ignoring a flush error; call `inboxlog_session_close` first to
/// see it) and releases the handle. NULL is a no-op.
///
/// # Safety
/// `session` is NULL or a live session handle that no other thread is using; it must
/// not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_free(session: *mut inboxlog_session) {
    boundary_void(|| {
        if !session.is_null() {
            // SAFETY: a live handle made by `Box::into_raw`, released exactly once.
            let handle = unsafe { Box::from_raw(session) };
            let _ = handle.session.close();
        }
    })
}

/// Makes everything appended so far durable (the barrier of the `batched` durability
/// mode; a no-op for `sync`). `session` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; a non-NULL `error` points to a writable pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_flush(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { with_session(session, error, |s| Ok(s.session.flush()?)) }
}

/// The session id. On success `*out` receives it as a new string (free it with
/// `inboxlog_string_free`). `session` and `out` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out` and a non-NULL `error` point to writable
/// pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_id(
    session: *const inboxlog_session,
    out: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out, "out", error, |s| {
            Ok(s.live()?.id().to_owned())
        })
    }
}

/// The log's header as JSON (`{"format":"inboxlog","version":1,"id":…,"createdAt":…}`
/// plus optional keys). On success `*out_json` receives a new string (free it with
/// `inboxlog_string_free`). `session` and `out_json` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out_json` and a non-NULL `error` point to
/// writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_header(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.live()?.header().to_json())
        })
    }
}

/// What opening found and fixed: `{"tornBytes":N,"repairedTurn":N|null}` (bytes of a
/// torn tail dropped; the turn closed as `interrupted`, if any). Always zero/null for
/// a created or forked session. On success `*out_json` receives a new string (free it
/// with `inboxlog_string_free`). `session` and `out_json` must not be NULL.
/// Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out_json` and a non-NULL `error` point to
/// writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_open_report(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.live()?.open_report().to_json())
        })
    }
}

/// The seq of the last event: `*out` receives it, or -1 for an empty log. `session`
/// and `out` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out` and a non-NULL `error` point to writable
/// memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_last_seq(
    session: *const inboxlog_session,
    out: *mut i64,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_value(session, out, "out", error, |s| {
            // Seqs are safe integers (< 2^53), so they fit an int64_t.
            Ok(s.session.last_seq()?.map_or(-1, |seq| seq as i64))
        })
    }
}

/// The open turn: `*out` receives its number, or 0 when no turn is open (turns count
/// from 1). `session` and `out` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out` and a non-NULL `error` point to writable
/// memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_current_turn(
    session: *const inboxlog_session,
    out: *mut u64,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_value(session, out, "out", error, |s| {
            Ok(s.session.turn_open()?.unwrap_or(0))
        })
    }
}

/// The events with `seq >= since`, as a JSON array of event objects (keys `type`,
/// `seq`, `time`, `data`, then optional `ignorable`, `surfaceOp`, `sourceEventSeqs`).
/// On success `*out_json` receives a new string (free it with `inboxlog_string_free`).
/// `session` and `out_json` must not be NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `out_json` and a non-NULL `error` point to
/// writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_events(
    session: *const inboxlog_session,
    since: u64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            let mut json = String::new();
            write_events(&mut json, &s.session.events(since)?);
            Ok(json)
        })
    }
}

/// The optional envelope keys of an appended event.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeWire<'a> {
    #[serde(default)]
    ignorable: bool,
    #[serde(rename = "surfaceOp", borrow)]
    surface_op: Option<&'a RawValue>,
    #[serde(rename = "sourceEventSeqs")]
    source_event_seqs: Option<Vec<u64>>,
}

/// Appends a host event of type `type` with `data_json` (any JSON; kept byte-for-byte
/// once valid, whitespace outside strings removed).
///
/// `envelope_json` is NULL or an object with optional `ignorable` (bool), `surfaceOp`
/// and `sourceEventSeqs` (only on `user/message`, `assistant/message`, `tool/result`).
/// Reserved types (`turn/start`, `agent/inbox/spliced`, …) are refused with
/// `INVALID_INPUT`, except `user/message` carrying a valid message. On success
/// `*out_event_json` (when `out_event_json` is not NULL) receives the committed event
/// (free it with `inboxlog_string_free`). `session`, `type` and `data_json` must not be
/// NULL. Thread-safe.
///
/// # Safety
/// `session` is a live session handle; `type`, `data_json` and a non-NULL
/// `envelope_json` are NUL-terminated strings; non-NULL `out_event_json` and `error`
/// point to writable pointers.
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
        // SAFETY (all five): the caller's contract above.
        let s = unsafe { handle(session, "session") }?;
        let ty = unsafe { str_arg(r#type, "type") }?;
        let data = unsafe { json_arg(data_json, "data_json") }?;
        let envelope_text = unsafe { opt_json_arg(envelope_json, "envelope_json") }?;
        let out = match out_event_json.is_null() {
            true => None,
            false => Some(unsafe { Out::new(out_event_json, "out_event_json") }?),
        };
        let envelope = match &envelope_text {
            None => Envelope::default(),
            Some(text) => {
                let wire: EnvelopeWire<'_> = parse_shape(
                    text,
                    "envelope_json",
                    "an object with optional ignorable, surfaceOp, sourceEventSeqs",
                )?;
                Envelope {
                    ignorable: wire.ignorable,
                    surface_op: wire.surface_op.map(RawValue::to_owned),
                    source_event_seqs: wire.source_event_seqs,
                }
            }
        };
        let event = s.session.append(ty, &data, envelope)?;
        match out {
            Some(out) => out.write_string(event.to_json()),
            None => Ok(()),
        }
    })
}

/// Starts collecting notifications for `inboxlog_session_poll`: every event committed
/// from now on (`{"event":{…}}`) and every inbox notification (`{"inbox":{"type":
/// "agent/inbox/inserted"|"agent/inbox/discarded"|"agent/inbox/claimed","message":{…}
/// [,"turn":N]}}`). Collecting is opt-in so that a host that never polls does not
/// accumulate memory; watching twice is a no-op. `session` must not be NULL.
/// Thread-safe.
///
/// # Safety
/// `session` is a live session handle; a non-NULL `error` points to a writable pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_watch(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(session, "session") }?;
        let live = s.live()?;
        s.watching.call_once(|| {
            // The core publishes events and inbox notices in one commit order, each to
            // its own observers; both push to one queue, so the queue keeps that order.
            let events = Arc::clone(&s.notices);
            live.on_event(move |e| {
                lock(&events).push(format!("{{\"event\":{}}}", e.to_json()));
                Ok(())
            });
            let inbox = Arc::clone(&s.notices);
            live.on_inbox(move |n| {
                lock(&inbox).push(format!("{{\"inbox\":{}}}", n.to_json()));
                Ok(())
            });
        });
        Ok(())
    })
}

/// Returns and removes the notifications collected since the last poll (see
/// `inboxlog_session_watch`), oldest first, in commit order: a JSON array such as
/// `[{"event":{…}},{"inbox":{"type":"agent/inbox/inserted","message":{…}}}]`; `[]` when
/// nothing happened or the session is not watched. An `agent/inbox/spliced` event comes
/// right before the inbox notifications it caused. On success `*out_json` receives a new string
/// (free it with `inboxlog_string_free`). `session` and `out_json` must not be NULL.
/// Thread-safe (each notification is returned by exactly one poll).
///
/// # Safety
/// `session` is a live session handle; `out_json` and a non-NULL `error` point to
/// writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_poll(
    session: *mut inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            s.live()?;
            let taken = std::mem::take(&mut *lock(&s.notices));
            Ok(json_list(taken.iter().map(String::as_str)))
        })
    }
}

/// Returns and removes the failures of the session's observers recorded since the last
/// call: a JSON array of strings, oldest first, `[]` when none failed. A failure is
/// contained (the call that committed the event still succeeded); only the last 64 are
/// kept, and when older ones were dropped the first string says how many. Works on a
/// closed session too, so the failures of its last calls can still be read. On success
/// `*out_json` receives a new string (free it with `inboxlog_string_free`). `session`
/// and `out_json` must not be NULL. Thread-safe (each failure is returned once).
///
/// # Safety
/// `session` is a live session handle; `out_json` and a non-NULL `error` point to
/// writable pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_take_observer_failures(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.session.take_observer_failures().to_json())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::ptr::null_mut;

    use inboxlog_core::store::MemoryStore;

    /// Takes the failures through the C function; returns the status and the JSON.
    fn take(session: &inboxlog_session) -> (c_int, Option<String>) {
        let mut out = null_mut();
        // SAFETY: a live handle and a writable out-pointer; `error` is not wanted.
        let status =
            unsafe { inboxlog_session_take_observer_failures(session, &mut out, null_mut()) };
        if out.is_null() {
            return (status, None);
        }
        // SAFETY: a library string, read then freed once.
        let json = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_owned();
        // SAFETY: as above.
        unsafe { crate::inboxlog_string_free(out) };
        (status, Some(json))
    }

    #[test]
    fn observer_failures_are_taken_as_a_bounded_json_array() {
        let store = MemoryStore::new();
        let session =
            inboxlog_session::new(Session::create(&store, "s", SessionMeta::default()).unwrap());
        assert_eq!(take(&session), (0, Some("[]".to_owned())));
        // C hosts register no callbacks; a failing observer stands in for one that
        // panicked or failed inside the library.
        session
            .session
            .on_event(|e| Err(format!("observer \"bug\" at {}", e.seq())));
        for _ in 0..70 {
            session
                .session
                .append("host/x", "{}", Envelope::default())
                .unwrap();
        }
        let (status, json) = take(&session);
        assert_eq!(status, 0);
        let lines: Vec<String> = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(lines.len(), 65);
        assert_eq!(
            lines[0],
            "6 earlier observer failures were dropped (the last 64 are kept)"
        );
        assert_eq!(
            lines[1],
            r#"event observer failed on seq 6: observer "bug" at 6"#
        );
        assert_eq!(take(&session), (0, Some("[]".to_owned())));
        // Still readable after close.
        session
            .session
            .append("host/x", "{}", Envelope::default())
            .unwrap();
        session.session.close().unwrap();
        let (status, json) = take(&session);
        assert_eq!(status, 0);
        assert!(json.unwrap().contains("seq 70"));
        // NULL arguments.
        let mut out = null_mut();
        // SAFETY: NULL is what is being tested; it must be refused.
        let status = unsafe {
            inboxlog_session_take_observer_failures(std::ptr::null(), &mut out, null_mut())
        };
        assert_eq!(status, crate::inboxlog_status::NullArgument.code());
        // SAFETY: as above.
        let status =
            unsafe { inboxlog_session_take_observer_failures(&session, null_mut(), null_mut()) };
        assert_eq!(status, crate::inboxlog_status::NullArgument.code());
    }
}

//! Read-side projections (ARCHITECTURE.md#consumed-work-fold): the consumed-work fold and the queue projection
//! that keeps a consumer's copy of the inbox equal to the live one. Imports the session
//! handle (for a session's baseline), nothing else of the C objects.

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard, PoisonError};

use inboxlog_core::wire::{FromJson, ToJson};
use inboxlog_core::{Baseline, Event, QueueProjection, fold_consumed_work};

use crate::boundary::{boundary, boundary_void};
use crate::session::{inboxlog_session, session_string};
use crate::strings::{Out, events_arg, handle, json_arg, optional_number};

/// A standalone copy of an inbox that follows a log's agent/inbox/spliced events.
/// Opaque.
///
/// Made by inboxlog_projection_new or inboxlog_projection_replay, released by
/// inboxlog_projection_free. Every function but inboxlog_projection_free may be called
/// from several threads at once: calls on one projection serialize.
pub struct inboxlog_projection {
    inner: Mutex<QueueProjection>,
}

impl inboxlog_projection {
    fn lock(&self) -> MutexGuard<'_, QueueProjection> {
        // `apply` validates before it changes anything, so a panic cannot leave a
        // half-applied projection behind.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn give(out: Out<*mut inboxlog_projection>, projection: QueueProjection) {
    let handle = Box::new(inboxlog_projection {
        inner: Mutex::new(projection),
    });
    out.write(Box::into_raw(handle));
}

/// Folds a log, or an owned suffix of one, into the turn that last accounted for
/// pending work: events_json is a JSON array of events, and the result is
/// {"end":<turn/end event>|null,"droppedUnrun":bool}.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_fold_consumed_work(
    events_json: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let events = unsafe { json_arg(events_json, "events_json") }?;
        let out = unsafe { Out::new(out_json, "out_json") }?;
        let events = events_arg(&events, "events_json")?;
        out.write_string(fold_consumed_work(&events).to_json())
    })
}

/// The inbox of session as of the event at seq upto (INBOXLOG_ABSENT: the current
/// end), as a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]} to hand to a
/// consumer (inboxlog_projection_new), which then applies the events after seq
/// (inboxlog_session_events(session, seq + 1, ...)). An upto past the last event is
/// INVALID_INPUT naming the log's length, never clamped.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_baseline(
    session: *const inboxlog_session,
    upto: i64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            let upto = optional_number(upto, "upto")?;
            Ok(s.session.baseline(upto)?.to_json())
        })
    }
}

/// Starts a projection from a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]}
/// (every key required, no other; seq null or a safe integer; ids unique across both
/// lists; a baseline of another shape is INVALID_INPUT).
///
/// Ownership: *out receives a new projection handle owned by the caller; release it
/// with inboxlog_projection_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_new(
    baseline_json: *const c_char,
    out: *mut *mut inboxlog_projection,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let baseline = unsafe { json_arg(baseline_json, "baseline_json") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let baseline =
            Baseline::from_json(&baseline).map_err(|e| e.context("argument `baseline_json`"))?;
        give(out, QueueProjection::new(baseline)?);
        Ok(())
    })
}

/// Builds a projection by replaying events_json (a JSON array of a log's events, in
/// order): splices before seq replay_from (the header's seedLength, 0 when it has none)
/// are skipped, and events after seq upto (INBOXLOG_ABSENT: none) are ignored. An upto
/// past the last event, or a replay_from past the end of the events, is INVALID_INPUT,
/// never clamped.
///
/// Ownership: *out receives a new projection handle owned by the caller; release it
/// with inboxlog_projection_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_replay(
    events_json: *const c_char,
    replay_from: u64,
    upto: i64,
    out: *mut *mut inboxlog_projection,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let events = unsafe { json_arg(events_json, "events_json") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let upto = optional_number(upto, "upto")?;
        let events = events_arg(&events, "events_json")?;
        give(out, QueueProjection::replay(&events, replay_from, upto)?);
        Ok(())
    })
}

/// Releases a projection handle. NULL is a no-op.
///
/// Ownership: takes back the handle the caller owned; it must not be used afterwards.
/// Threads: must not race any other call on this projection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_free(projection: *mut inboxlog_projection) {
    boundary_void(|| {
        if !projection.is_null() {
            // SAFETY: a live handle made by `Box::into_raw`, released exactly once.
            drop(unsafe { Box::from_raw(projection) });
        }
    });
}

/// Applies the next event (event_json, one event object, seq after the projection's):
/// a splice changes the lists, validated as the live inbox is (INVALID_SPLICE,
/// DUPLICATE_MESSAGE); other events only advance the seq; an event already applied is
/// INVALID_INPUT. On failure nothing changes.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one projection serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_apply(
    projection: *mut inboxlog_projection,
    event_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let p = unsafe { handle(projection, "projection") }?;
        let event = unsafe { json_arg(event_json, "event_json") }?;
        let event = Event::from_json(&event)?;
        Ok(p.lock().apply(&event)?)
    })
}

/// Applies a JSON array of events in order (e.g. the output of
/// inboxlog_session_events), all or nothing: on failure the projection is unchanged and
/// the error names the event.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once (calls on one projection serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_apply_all(
    projection: *mut inboxlog_projection,
    events_json: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let p = unsafe { handle(projection, "projection") }?;
        let events = unsafe { json_arg(events_json, "events_json") }?;
        let events = events_arg(&events, "events_json")?;
        let mut guard = p.lock();
        let mut next = guard.clone();
        for event in &events {
            next.apply(event)?;
        }
        *guard = next;
        Ok(())
    })
}

/// The projection as a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]}.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_projection_baseline(
    projection: *const inboxlog_projection,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let p = unsafe { handle(projection, "projection") }?;
        let out = unsafe { Out::new(out_json, "out_json") }?;
        out.write_string(p.lock().baseline().to_json())
    })
}

//! Fleet features (ARCHITECTURE.md#posting): posting to a session from anywhere (messages,
//! and edits of its pending input), taking posts in,
//! and following a session from elsewhere with a polled follower handle. Imports the
//! store and session handles, nothing else of the C objects.

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use inboxlog_core::{Follower, Message, Target, wire};

use crate::boundary::{boundary, boundary_void};
use crate::session::{inboxlog_session, session_value};
use crate::store::inboxlog_store;
use crate::strings::{Out, handle, json_arg, optional_number, str_arg};

/// Posts message_json to the target list ("next-turn" or "next-step") of session id
/// from anywhere, whether the session is open or not (here, in another process, or
/// nowhere). The session's writer takes it in exactly once, as one
/// agent/inbox/spliced event carrying "post":"<post id>", when it opens, before each
/// inboxlog_session_propose_step and on inboxlog_inbox_receive; a message it cannot
/// take in (its id already pending) becomes one agent/inbox/rejected event instead.
/// NOT_FOUND when there is no session id; INVALID_INPUT for a bad id, target or message.
///
/// Ownership: *out_post receives the post id once the post is durable, a new string
/// owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once (posts of one store handle to one session
/// run one at a time, in call order).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_post(
    store: *const inboxlog_store,
    id: *const c_char,
    target: *const c_char,
    message_json: *const c_char,
    out_post: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let target = Target::parse(unsafe { str_arg(target, "target") }?)?;
        let json = unsafe { json_arg(message_json, "message_json") }?;
        let out = unsafe { Out::new(out_post, "out_post") }?;
        let message = Message::from_json(&json)
            .map_err(|e| e.context(format_args!("argument `message_json`")))?;
        out.write_string(store.store.post(id, target, &message)?)
    })
}

/// Removes the pending message message_id of session id from anywhere, whether the
/// session is open or not (SPEC §11.3): the edit travels as a post does
/// (inboxlog_store_post), exactly once and in order with the same store handle's posts
/// and edits. The session's writer applies it as the local inboxlog_inbox_remove (one
/// agent/inbox/spliced with "outcome":"canceled" carrying "post":"<post id>", the
/// usual notifications); when message_id is no longer pending (claimed first, removed,
/// never there) nothing changes and the log records one agent/inbox/rejected event
/// {"edit":{"op":"remove","id":...},"reason":{...},"post":...} (kind not_found).
/// NOT_FOUND when there is no session id; INVALID_INPUT for a bad id or an empty
/// message_id.
///
/// Ownership: *out_post receives the post id once the edit is durable, a new string
/// owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once (posts and edits of one store handle to one
/// session run one at a time, in call order).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_remove_pending(
    store: *const inboxlog_store,
    id: *const c_char,
    message_id: *const c_char,
    out_post: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all four): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let message_id = unsafe { str_arg(message_id, "message_id") }?;
        let out = unsafe { Out::new(out_post, "out_post") }?;
        out.write_string(store.store.remove_pending(id, message_id)?)
    })
}

/// Moves the pending message message_id of session id from anywhere, whether the
/// session is open or not (SPEC §17.5): to index in target ("next-turn" or
/// "next-step"), counted without the moved message, or to its end when index is
/// INBOXLOG_ABSENT ("send now": from next-turn to the end of next-step). The move travels
/// as a post does (inboxlog_store_post), exactly once and in order with the same store
/// handle's posts and edits; the session's writer applies it as one agent/inbox/spliced
/// removal with "outcome":"moved" and one insertion carrying "post", in one commit, or,
/// when message_id is no longer pending or index is past the end, records one
/// agent/inbox/rejected event {"move":{"id","target","index"?},"reason":{...},"post":...}
/// (not_found, invalid_splice). NOT_FOUND when there is no session id; INVALID_INPUT for
/// a bad id, an empty message_id, a bad target or a negative index other than
/// INBOXLOG_ABSENT.
///
/// Ownership: *out_post receives the post id once the move is durable, a new string
/// owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once (posts and edits of one store handle to one
/// session run one at a time, in call order).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_move_pending(
    store: *const inboxlog_store,
    id: *const c_char,
    message_id: *const c_char,
    target: *const c_char,
    index: i64,
    out_post: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let message_id = unsafe { str_arg(message_id, "message_id") }?;
        let target = Target::parse(unsafe { str_arg(target, "target") }?)?;
        let out = unsafe { Out::new(out_post, "out_post") }?;
        let index = optional_number(index, "index")?;
        out.write_string(store.store.move_pending(id, message_id, target, index)?)
    })
}

/// Replaces the pending message message_id of session id with message_json (which may
/// have a new id) from anywhere, whether the session is open or not (SPEC §11.3), as
/// inboxlog_store_remove_pending removes: applied as the local inboxlog_inbox_replace,
/// or recorded as one agent/inbox/rejected event
/// {"edit":{"op":"replace","id":...,"message":...},...} (kind not_found, or
/// duplicate_message when the new id is pending already). NOT_FOUND when there is no
/// session id; INVALID_INPUT for a bad id, an empty message_id or a bad message.
///
/// Ownership: *out_post receives the post id once the edit is durable, a new string
/// owned by the caller; free it with inboxlog_string_free.
/// Threads: any thread, any number at once (posts and edits of one store handle to one
/// session run one at a time, in call order).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_replace_pending(
    store: *const inboxlog_store,
    id: *const c_char,
    message_id: *const c_char,
    message_json: *const c_char,
    out_post: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all five): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let message_id = unsafe { str_arg(message_id, "message_id") }?;
        let json = unsafe { json_arg(message_json, "message_json") }?;
        let out = unsafe { Out::new(out_post, "out_post") }?;
        let message = Message::from_json(&json)
            .map_err(|e| e.context(format_args!("argument `message_json`")))?;
        out.write_string(store.store.replace_pending(id, message_id, &message)?)
    })
}

/// Takes in the messages posted to this session (inboxlog_store_post), each as one
/// durable event with the usual notifications; *out receives how many posts it wrote.
/// Runs on its own when the session opens and before each propose_step.
///
/// Ownership: *out receives a number; nothing to free.
/// Threads: any thread, any number at once (calls on one session serialize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_inbox_receive(
    session: *mut inboxlog_session,
    out: *mut u64,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_value(session, out, "out", error, |s| {
            Ok(s.live()?.receive()? as u64)
        })
    }
}

/// Follows one session's log from elsewhere: its events from a seq on, as they are
/// committed, read without owning the session or slowing its writer. Opaque.
///
/// Made by inboxlog_follower_open, released by inboxlog_follower_free. Calls on one
/// follower serialize.
pub struct inboxlog_follower {
    follower: Mutex<Follower>,
}

impl inboxlog_follower {
    fn lock(&self) -> MutexGuard<'_, Follower> {
        self.follower.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Opens a follower of session id from seq since (0: from the start). NOT_FOUND when
/// there is no session id.
///
/// Ownership: *out receives a new follower handle owned by the caller; release it with
/// inboxlog_follower_free. It stays usable after the store handle is freed.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_follower_open(
    store: *const inboxlog_store,
    id: *const c_char,
    since: u64,
    out: *mut *mut inboxlog_follower,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        let id = unsafe { str_arg(id, "id") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let follower = Follower::open(&*store.store, id, since)?;
        out.write(Box::into_raw(Box::new(inboxlog_follower {
            follower: Mutex::new(follower),
        })));
        Ok(())
    })
}

/// Waits up to timeout_ms milliseconds for the next committed events and returns every
/// event available then, in seq order, as a JSON array of event objects ("[]" when none
/// came in time; 0 does not wait). Each event comes once, with no gap; an incomplete
/// record (a writer killed mid-write) never does. A session deleted meanwhile is
/// NOT_FOUND; a log cut below what was read is CORRUPT.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread; calls on one follower serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_follower_poll(
    follower: *const inboxlog_follower,
    timeout_ms: u64,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let follower = unsafe { handle(follower, "follower") }?;
        let out = unsafe { Out::new(out_json, "out_json") }?;
        let events = follower
            .lock()
            .next_batch(Duration::from_millis(timeout_ms))?;
        out.write_string(wire::events(&events))
    })
}

/// The seq of the next event this follower will return: where a new follower resumes
/// (after a restart) with nothing skipped or repeated.
///
/// Ownership: *out receives a number; nothing to free.
/// Threads: any thread; calls on one follower serialize.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_follower_next_seq(
    follower: *const inboxlog_follower,
    out: *mut u64,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (both): the caller's contract (header overview, Safety).
        let follower = unsafe { handle(follower, "follower") }?;
        let out = unsafe { Out::new(out, "out") }?;
        out.write(follower.lock().next_seq());
        Ok(())
    })
}

/// Releases a follower. NULL is a no-op.
///
/// Ownership: takes back the handle the caller owned; it must not be used afterwards.
/// Threads: must not race any other call on this follower.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_follower_free(follower: *mut inboxlog_follower) {
    boundary_void(|| {
        if !follower.is_null() {
            // SAFETY: a live handle made by `Box::into_raw`, released exactly once.
            drop(unsafe { Box::from_raw(follower) });
        }
    });
}

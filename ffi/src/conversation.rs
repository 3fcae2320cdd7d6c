//! The conversation (ARCHITECTURE.md#the-conversation): the model-visible surface of a
//! session, read from its open handle or from a store without owning the session.

use std::ffi::{c_char, c_int};

use inboxlog_core::Session;
use inboxlog_core::wire::ToJson;

use crate::boundary::boundary;
use crate::session::{inboxlog_session, session_string};
use crate::store::inboxlog_store;
use crate::strings::{Out, handle, str_arg};

/// The model-visible surface: {"nodes":[seq…],"messages":[message…]}, the seqs of the
/// surface's events in the order the model sees them and the messages projected from
/// them (a user/message's data, an assistant/message's or a tool/result's
/// data.message; an assistant/message with empty content is skipped).
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_surface(
    session: *const inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.session.surface_view()?.to_json())
        })
    }
}

/// The model-visible surface of stored session id, as inboxlog_session_surface gives
/// it, read without owning the session (no lock, no repair, no write: a writer may be
/// appending meanwhile), from the session's checkpoint, so that it costs what the
/// surface holds and what follows the checkpoint. NOT_FOUND when there is no such
/// session; CORRUPT as inboxlog_session_open would refuse it.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_surface(
    store: *const inboxlog_store,
    id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let out = unsafe { Out::new(out_json, "out_json") }?;
        out.write_string(Session::read_surface(&*store.store, id)?.to_json())
    })
}

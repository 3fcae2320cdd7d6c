//! Notifications a C host polls instead of registering callbacks (ARCHITECTURE.md#c-abi), and the
//! failures of the session's observers: the last section of the header.

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use inboxlog_core::wire::{self, ToJson};

use crate::session::{inboxlog_session, session_string, with_session};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The queue is only pushed to and taken whole: a panic cannot leave it half-changed.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts collecting notifications for inboxlog_session_poll: every event committed
/// from now on ({"event":{...}}) and every inbox notification ({"inbox":{"type":
/// "agent/inbox/inserted"|"agent/inbox/discarded"|"agent/inbox/claimed","message":{...}
/// [,"turn":N]}}). Collecting is opt-in so that a host that never polls does not
/// accumulate memory; watching twice is a no-op.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_watch(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            let live = s.live()?;
            s.watching.call_once(|| {
                // The core publishes events and inbox notices in one commit order, each
                // to its own observers; both push to one queue, so it keeps that order.
                let events = Arc::clone(&s.notices);
                live.on_event(move |e| {
                    lock(&events).push(wire::event_notification(e));
                    Ok(())
                });
                let inbox = Arc::clone(&s.notices);
                live.on_inbox(move |n| {
                    lock(&inbox).push(wire::inbox_notification(n));
                    Ok(())
                });
            });
            Ok(())
        })
    }
}

/// Returns and removes the notifications collected since the last poll (see
/// inboxlog_session_watch), oldest first, in commit order: a JSON array such as
/// [{"event":{...}},{"inbox":{"type":"agent/inbox/inserted","message":{...}}}]; [] when
/// nothing happened or the session is not watched. An agent/inbox/spliced event comes
/// right before the inbox notifications it caused.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once; each notification is returned by exactly
/// one poll.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_poll(
    session: *mut inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            s.live()?;
            let taken = std::mem::take(&mut *lock(&s.notices));
            Ok(wire::list(taken.iter().map(String::as_str)))
        })
    }
}

/// Returns and removes the failures of the session's observers recorded since the last
/// call: a JSON array of strings, oldest first, [] when none failed. A failure is
/// contained (the call that committed the event still succeeded); only the last 64 are
/// kept, and when older ones were dropped the first string says how many. Works on a
/// closed session too, so the failures of its last calls can still be read.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once; each failure is returned by exactly one
/// call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_session_take_observer_failures(
    session: *mut inboxlog_session,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        session_string(session, out_json, "out_json", error, |s| {
            Ok(s.session.take_observer_failures().to_json())
        })
    }
}

/// Test hook, only in a library built with the ffi crate's testing feature (the shipped
/// library and header have no such function): registers on session an event observer
/// that fails on every event it is shown, with the message
/// `test observer refused seq <seq>`. C hosts register no callbacks, so this is how
/// their tests make inboxlog_session_take_observer_failures return something.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once.
///
/// # Safety
/// As for every session function (header overview, Safety).
#[cfg(feature = "testing")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_test_failing_observer(
    session: *mut inboxlog_session,
    error: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract (header overview, Safety).
    unsafe {
        with_session(session, error, |s| {
            s.session
                .on_event(|e| Err(format!("test observer refused seq {}", e.seq())));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::ptr::null_mut;

    use inboxlog_core::store::MemoryStore;
    use inboxlog_core::{Envelope, Session, SessionMeta};

    /// Takes the failures through the C function; returns the status and the JSON.
    fn take(session: &mut inboxlog_session) -> (c_int, Option<String>) {
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
        let mut session =
            inboxlog_session::new(Session::create(&store, "s", SessionMeta::default()).unwrap());
        assert_eq!(take(&mut session), (0, Some("[]".to_owned())));
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
        let (status, json) = take(&mut session);
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
        assert_eq!(take(&mut session), (0, Some("[]".to_owned())));
        // Still readable after close.
        session
            .session
            .append("host/x", "{}", Envelope::default())
            .unwrap();
        session.session.close().unwrap();
        let (status, json) = take(&mut session);
        assert_eq!(status, 0);
        assert!(json.unwrap().contains("seq 70"));
        // NULL arguments.
        let mut out = null_mut();
        // SAFETY: NULL is what is being tested; it must be refused.
        let status =
            unsafe { inboxlog_session_take_observer_failures(null_mut(), &mut out, null_mut()) };
        assert_eq!(status, crate::inboxlog_status::NullArgument.code());
        // SAFETY: as above.
        let status = unsafe {
            inboxlog_session_take_observer_failures(&mut session, null_mut(), null_mut())
        };
        assert_eq!(status, crate::inboxlog_status::NullArgument.code());
    }
}

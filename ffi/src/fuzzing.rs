//! A C ABI call-sequence driver for the fuzz targets (`fuzz/`, issue #27), behind the
//! `testing` feature: bytes become a sequence of calls on one session of a memory
//! store, made through the exported functions exactly as a C host makes them, and each
//! call is checked against the conventions of the header's overview.
//!
//! Checked for every call: the status is never `PANIC`; on failure the error JSON is
//! an object whose `code` is the status and whose `kind` is that status's name, and no
//! output was written; on success no error was written and every returned string is
//! JSON. Checked for every refused mutation: the log is as it was. After a close, no
//! mutation succeeds until the session is opened again.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::{null, null_mut};

use crate::status::inboxlog_status;
use crate::{
    inboxlog_fold_consumed_work, inboxlog_inbox_append, inboxlog_inbox_clear,
    inboxlog_inbox_next_turn, inboxlog_inbox_remove, inboxlog_inbox_splice, inboxlog_session,
    inboxlog_session_append, inboxlog_session_cancel, inboxlog_session_close,
    inboxlog_session_close_turn, inboxlog_session_create, inboxlog_session_decide,
    inboxlog_session_end_step, inboxlog_session_events, inboxlog_session_fail,
    inboxlog_session_free, inboxlog_session_open, inboxlog_session_open_turn,
    inboxlog_session_propose_step, inboxlog_status_name, inboxlog_store, inboxlog_store_free,
    inboxlog_store_new_memory, inboxlog_string_free,
};

/// Strings the driver passes, most of them meaningful to some call; a byte of input
/// picks one, or a run of input bytes is passed instead.
const WORDS: [&str; 24] = [
    "next-turn",
    "next-step",
    r#"{"id":"m1","role":"user"}"#,
    r#"{"id":"m2"}"#,
    r#"{"id":""}"#,
    r#"[{"id":"m3"},{"id":"m4"}]"#,
    "[]",
    r#"{"kind":"enter","messages":[{"id":"m1"}]}"#,
    r#"{"kind":"enter","messages":[]}"#,
    r#"{"kind":"reject"}"#,
    "continue",
    "completed",
    "max-tokens",
    r#"{"kind":"user"}"#,
    r#"{"kind":"hook","reason":"r"}"#,
    r#"{"message":"boom","code":"E1"}"#,
    r#"{"note":1}"#,
    r#"{"turn":9}"#,
    "host/x",
    "turn/start",
    r#"{"ignorable":true}"#,
    "m1",
    "\"\\ud83d\"",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
];

/// The input, read a byte at a time.
struct Input<'a> {
    bytes: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    /// A C string: one of [`WORDS`], or up to 32 raw input bytes (NULs dropped).
    fn text(&mut self) -> CString {
        let pick = self.byte().unwrap_or(0);
        if usize::from(pick) < WORDS.len() * 8 {
            return CString::new(WORDS[usize::from(pick) % WORDS.len()]).expect("no NUL");
        }
        let n = usize::from(self.byte().unwrap_or(0) % 32).min(self.bytes.len());
        let (raw, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        CString::new(raw.iter().copied().filter(|&b| b != 0).collect::<Vec<u8>>())
            .expect("NULs removed")
    }

    /// An optional C string: absent (NULL) for about one pick in four.
    fn maybe_text(&mut self) -> Option<CString> {
        if self.byte().unwrap_or(0).is_multiple_of(4) {
            None
        } else {
            Some(self.text())
        }
    }

    /// A splice coordinate: small integers mostly, any float sometimes.
    fn number(&mut self) -> f64 {
        match self.byte().unwrap_or(0) {
            250 => f64::NAN,
            251 => f64::INFINITY,
            252 => f64::NEG_INFINITY,
            253 => -0.5,
            254 => 1e300,
            b => f64::from(b % 8) - 2.0,
        }
    }
}

fn ptr(s: Option<&CString>) -> *const c_char {
    s.map_or(null(), |s| s.as_ptr())
}

/// Takes a library string (checking it is JSON) and frees it.
fn take_json(s: *mut c_char, what: &str) -> String {
    assert!(!s.is_null(), "{what}: NULL string on success");
    // SAFETY: a live NUL-terminated string the library returned; freed once, below.
    let text = unsafe { CStr::from_ptr(s) }
        .to_str()
        .unwrap_or_else(|e| panic!("{what}: output is not UTF-8: {e}"))
        .to_owned();
    // SAFETY: returned by the library, freed once.
    unsafe { inboxlog_string_free(s) };
    inboxlog_core::json::check(&text).unwrap_or_else(|e| panic!("{what}: output {text}: {e}"));
    text
}

/// Checks one call's status against its error string and outputs; `Ok` on success.
fn outcome(what: &str, status: c_int, error: *mut c_char, outputs: &[*mut c_char]) -> bool {
    assert_ne!(
        status,
        inboxlog_status::Panic as c_int,
        "{what}: a panic reached the boundary"
    );
    if status == 0 {
        assert!(error.is_null(), "{what}: error written on success");
        return true;
    }
    assert!(
        outputs.iter().all(|o| o.is_null()),
        "{what}: output written on failure"
    );
    let text = take_json(error, what);
    let fields: serde_json::Value = serde_json::from_str(&text).expect("checked JSON");
    assert_eq!(
        fields["code"].as_i64(),
        Some(i64::from(status)),
        "{what}: {text}"
    );
    let name = inboxlog_status_name(status);
    assert!(!name.is_null(), "{what}: status {status} has no name");
    // SAFETY: a non-NULL name is a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) };
    assert_eq!(
        fields["kind"].as_str(),
        name.to_str().ok(),
        "{what}: {text}"
    );
    assert!(fields["message"].is_string(), "{what}: {text}");
    false
}

/// The session's events as JSON (the session must be open).
fn events(s: *mut inboxlog_session) -> Option<String> {
    let (mut out, mut error) = (null_mut(), null_mut());
    // SAFETY: a live session handle and writable out-parameters.
    let status = unsafe { inboxlog_session_events(s, 0, &mut out, &mut error) };
    outcome("events", status, error, &[out]).then(|| take_json(out, "events"))
}

/// Runs the call sequence `data` describes (see the module documentation); panics when
/// a property does not hold.
pub fn call_sequence(data: &[u8]) {
    let mut input = Input { bytes: data };
    let mut store: *mut inboxlog_store = null_mut();
    let mut error = null_mut();
    // SAFETY: writable out-parameters.
    let status = unsafe { inboxlog_store_new_memory(&mut store, &mut error) };
    assert!(outcome("store", status, error, &[]));
    let id = CString::new("fuzz").expect("no NUL");
    let mut session: *mut inboxlog_session = null_mut();
    // SAFETY: a live store, a C string, writable out-parameters.
    let status =
        unsafe { inboxlog_session_create(store, id.as_ptr(), null(), &mut session, &mut error) };
    assert!(outcome("create", status, error, &[]));
    let mut open = true;
    let mut steps = 0;
    while let Some(op) = input.byte() {
        steps += 1;
        if steps > 256 {
            break;
        }
        let before = if open { events(session) } else { None };
        let (a, b, c) = (input.text(), input.text(), input.maybe_text());
        let (mut out, mut error) = (null_mut::<c_char>(), null_mut::<c_char>());
        let mut flag = false;
        let mut number = 0u64;
        if op % 15 == 13 {
            // The fold reads any JSON text; here the session's own log.
            let log = CString::new(events_text(session, open)).expect("JSON holds no NUL");
            // SAFETY: a C string and writable out-parameters.
            let status = unsafe { inboxlog_fold_consumed_work(log.as_ptr(), &mut out, &mut error) };
            if outcome("fold", status, error, &[out]) {
                take_json(out, "fold");
            }
            continue;
        }
        let (start, n) = (input.number(), input.number());
        let reopen = op % 15 == 14 && !open;
        if reopen {
            // SAFETY: the closed handle, released once; not used after.
            unsafe { inboxlog_session_free(session) };
            session = null_mut();
        }
        // SAFETY: `session` is the live handle (closed or not: a closed handle stays
        // valid until freed), except for the reopen, which writes a new one; the strings
        // are NUL-terminated C strings, or NULL where the function takes an optional
        // one; the out-parameters are writable.
        let (what, status, mutates) = unsafe {
            match op % 15 {
                0 => (
                    "inbox_append",
                    inboxlog_inbox_append(session, a.as_ptr(), b.as_ptr(), &mut error),
                    true,
                ),
                1 => (
                    "inbox_splice",
                    inboxlog_inbox_splice(
                        session,
                        a.as_ptr(),
                        start,
                        n,
                        b.as_ptr(),
                        &mut out,
                        &mut error,
                    ),
                    true,
                ),
                2 => (
                    "inbox_remove",
                    inboxlog_inbox_remove(session, a.as_ptr(), &mut flag, &mut error),
                    true,
                ),
                3 => (
                    "inbox_clear",
                    inboxlog_inbox_clear(session, &mut error),
                    true,
                ),
                4 => (
                    "session_append",
                    inboxlog_session_append(
                        session,
                        a.as_ptr(),
                        b.as_ptr(),
                        ptr(c.as_ref()),
                        &mut out,
                        &mut error,
                    ),
                    true,
                ),
                5 => (
                    "open_turn",
                    inboxlog_session_open_turn(session, ptr(c.as_ref()), &mut number, &mut error),
                    true,
                ),
                6 => (
                    "propose_step",
                    inboxlog_session_propose_step(session, &mut out, &mut error),
                    true,
                ),
                7 => (
                    "decide",
                    inboxlog_session_decide(
                        session,
                        a.as_ptr(),
                        ptr(c.as_ref()),
                        &mut out,
                        &mut error,
                    ),
                    true,
                ),
                8 => (
                    "end_step",
                    inboxlog_session_end_step(
                        session,
                        a.as_ptr(),
                        ptr(c.as_ref()),
                        &mut flag,
                        &mut error,
                    ),
                    true,
                ),
                9 => (
                    "close_turn",
                    inboxlog_session_close_turn(session, ptr(c.as_ref()), &mut out, &mut error),
                    true,
                ),
                10 => (
                    "cancel",
                    inboxlog_session_cancel(
                        session,
                        ptr(c.as_ref()),
                        start > 0.0,
                        null(),
                        &mut error,
                    ),
                    true,
                ),
                11 => (
                    "fail",
                    inboxlog_session_fail(session, a.as_ptr(), ptr(c.as_ref()), &mut error),
                    true,
                ),
                12 => (
                    "next_turn",
                    inboxlog_inbox_next_turn(session, &mut out, &mut error),
                    false,
                ),
                _ if reopen => (
                    "reopen",
                    inboxlog_session_open(store, id.as_ptr(), &mut session, &mut error),
                    false,
                ),
                _ => ("close", inboxlog_session_close(session, &mut error), false),
            }
        };
        match what {
            "reopen" => open = status == 0,
            "close" => open = false,
            _ => {}
        }
        let ok = outcome(what, status, error, &[out]);
        if ok && !out.is_null() {
            take_json(out, what);
        }
        if session.is_null() {
            break;
        }
        if !open || what == "close" {
            // A closed session refuses every mutation.
            assert!(
                !(ok && mutates && !open),
                "{what} succeeded on a closed session"
            );
            continue;
        }
        if mutates && !ok {
            assert_eq!(
                events(session),
                before,
                "{what} was refused but changed the log"
            );
        }
    }
    // SAFETY: live handles (or NULL), each released once.
    unsafe {
        inboxlog_session_free(session);
        inboxlog_store_free(store);
    }
}

/// The session's events, or an empty list when it is closed.
fn events_text(s: *mut inboxlog_session, open: bool) -> String {
    if open {
        events(s).unwrap_or_else(|| "[]".to_owned())
    } else {
        "[]".to_owned()
    }
}

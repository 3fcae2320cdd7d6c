//! Helpers for calling the C ABI from Rust tests as a C host would.
#![allow(dead_code)] // each test file uses a part

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::null_mut;

pub use inboxlog::*;

/// A failed call: its status and the decoded error JSON.
#[derive(Debug)]
pub struct Failure {
    pub code: c_int,
    pub kind: String,
    pub message: String,
    /// The whole error JSON (with its optional location keys).
    pub json: serde_json::Value,
}

/// A NUL-terminated copy of `s`.
pub fn c(s: &str) -> CString {
    CString::new(s).expect("test strings hold no NUL")
}

/// Copies a library string and frees it with `inboxlog_string_free`.
pub fn take(s: *mut c_char) -> String {
    assert!(
        !s.is_null(),
        "the library returned a NULL string on success"
    );
    // SAFETY: a live NUL-terminated string returned by the library.
    let text = unsafe { CStr::from_ptr(s) }.to_str().unwrap().to_owned();
    // SAFETY: returned by the library, freed once.
    unsafe { inboxlog_string_free(s) };
    text
}

/// Decodes a call's status and error string; checks that they agree.
pub fn outcome(status: c_int, error: *mut c_char) -> Result<(), Failure> {
    if status == 0 {
        assert!(error.is_null(), "error written on success");
        return Ok(());
    }
    let json: serde_json::Value = serde_json::from_str(&take(error)).expect("error is JSON");
    let failure = Failure {
        code: json["code"].as_i64().expect("code") as c_int,
        kind: json["kind"].as_str().expect("kind").to_owned(),
        message: json["message"].as_str().expect("message").to_owned(),
        json: json.clone(),
    };
    assert_eq!(failure.code, status, "error JSON code matches the status");
    for (key, value) in json.as_object().unwrap() {
        match key.as_str() {
            "code" | "kind" | "message" => {}
            "session" | "path" => assert!(value.is_string(), "{json}"),
            "line" | "offset" | "seq" => assert!(value.is_u64(), "{json}"),
            _ => panic!("unexpected key {key} in {json}"),
        }
    }
    Err(failure)
}

/// Calls an exported function, appending the `char **error` argument.
macro_rules! call {
    ($f:ident ( $($arg:expr),* $(,)? )) => {{
        let mut error: *mut std::ffi::c_char = std::ptr::null_mut();
        // SAFETY: test arguments are valid pointers, NULL, or deliberately bad strings
        // that the function must reject; `error` is a writable pointer.
        let status = unsafe { $f($($arg,)* &mut error) };
        crate::common::outcome(status, error)
    }};
}

/// Asserts a call failed with `code` and a message containing `needle`.
#[track_caller]
pub fn expect_fail(result: Result<(), Failure>, code: c_int, needle: &str) -> Failure {
    let f = result.expect_err("the call should fail");
    assert_eq!(f.code, code, "{f:?}");
    assert!(f.message.contains(needle), "{needle:?} not in {f:?}");
    f
}

pub fn memory_store() -> *mut inboxlog_store {
    let mut store = null_mut();
    call!(inboxlog_store_new_memory(&mut store)).unwrap();
    store
}

pub fn jsonl_store(root: &std::path::Path, durability: &str) -> *mut inboxlog_store {
    let mut store = null_mut();
    let root = c(root.to_str().unwrap());
    let durability = c(durability);
    call!(inboxlog_store_open_jsonl(
        root.as_ptr(),
        durability.as_ptr(),
        &mut store
    ))
    .unwrap();
    store
}

pub fn create(store: *mut inboxlog_store, id: &str) -> *mut inboxlog_session {
    let mut session = null_mut();
    let id = c(id);
    call!(inboxlog_session_create(
        store,
        id.as_ptr(),
        std::ptr::null(),
        &mut session
    ))
    .unwrap();
    session
}

pub fn open(store: *mut inboxlog_store, id: &str) -> Result<*mut inboxlog_session, Failure> {
    let mut session = null_mut();
    let id = c(id);
    call!(inboxlog_session_open(store, id.as_ptr(), &mut session))?;
    Ok(session)
}

/// A string-returning call: `$f(args…, &mut out, &mut error)`.
macro_rules! call_str {
    ($f:ident ( $($arg:expr),* $(,)? )) => {{
        let mut out: *mut std::ffi::c_char = std::ptr::null_mut();
        call!($f($($arg,)* &mut out)).map(|()| crate::common::take(out))
    }};
}

pub fn append(s: *mut inboxlog_session, target: &str, message: &str) -> Result<(), Failure> {
    let (target, message) = (c(target), c(message));
    call!(inboxlog_inbox_append(s, target.as_ptr(), message.as_ptr()))
}

pub fn events(s: *mut inboxlog_session, since: u64) -> String {
    call_str!(inboxlog_session_events(s, since)).unwrap()
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("library output is JSON")
}

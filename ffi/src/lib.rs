//! The C ABI of inboxlog (SPEC §9.1): a thin `extern "C"` layer over the `inboxlog`
//! core crate; the header `include/inboxlog.h` is generated from it by cbindgen.
//!
//! Conventions, the same for every exported function:
//! - Every function returns an `int` status: `INBOXLOG_STATUS_OK` (0) or an
//!   `inboxlog_status` code. The exceptions are the `_free` functions (void, NULL is a
//!   no-op), `inboxlog_version` and `inboxlog_status_name` (static strings).
//! - Results go to out-parameters, written only on success. The last parameter,
//!   `char **error`, is optional: when not NULL it receives, on failure only,
//!   `{"code":N,"kind":"…","message":"…"}`, plus where known the keys `session`,
//!   `path`, `line`, `offset` (bytes) and `seq` naming where the error happened.
//! - Strings in are NUL-terminated UTF-8, borrowed for the call. Structured values
//!   (messages, events, decisions, meta, causes, errors) cross as JSON text. Strings out
//!   are allocated by the library and freed with `inboxlog_string_free` only.
//! - Handles are opaque, made by `_new`/`_open`/`_create`, released by `_free`. A
//!   session handle may be shared by threads; `inboxlog_session_close` may race other
//!   calls (they fail with `CLOSED`), `_free` may not.
//! - No panic crosses the boundary: it becomes `INBOXLOG_STATUS_PANIC`.
//!
//! Each exported function is `unsafe` to call from Rust: its pointers must satisfy the
//! contract in its `# Safety` section.

#![allow(non_camel_case_types)] // C names: inboxlog_session, inboxlog_status, …

mod boundary;
mod call;
mod inbox;
mod projection;
mod protocol;
mod session;
mod status;
mod store;
mod strings;

use std::ffi::{CString, c_char, c_int};

pub use inbox::*;
pub use projection::*;
pub use protocol::*;
pub use session::*;
pub use status::inboxlog_status;
pub use store::*;

use boundary::boundary;

// Handles are shared across threads by C callers.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<inboxlog_store>();
    thread_safe::<inboxlog_session>();
    thread_safe::<inboxlog_projection>();
};

/// The library version, e.g. `"0.1.0"`: a static string, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn inboxlog_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The kind name of a status code (`"not_found"` for 5, `"ok"` for 0), or NULL for a
/// number that is no status: a static string, never freed. Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn inboxlog_status_name(status: c_int) -> *const c_char {
    const NAMES: [(inboxlog_status, &std::ffi::CStr); 21] = [
        (inboxlog_status::Ok, c"ok"),
        (inboxlog_status::Io, c"io"),
        (inboxlog_status::Corrupt, c"corrupt"),
        (inboxlog_status::Locked, c"locked"),
        (inboxlog_status::Poisoned, c"poisoned"),
        (inboxlog_status::NotFound, c"not_found"),
        (inboxlog_status::AlreadyExists, c"already_exists"),
        (inboxlog_status::InvalidSplice, c"invalid_splice"),
        (inboxlog_status::DuplicateMessage, c"duplicate_message"),
        (inboxlog_status::Protocol, c"protocol"),
        (inboxlog_status::InvalidInput, c"invalid_input"),
        (inboxlog_status::FormatUnsupported, c"format_unsupported"),
        (inboxlog_status::TooLarge, c"too_large"),
        (inboxlog_status::Closed, c"closed"),
        (inboxlog_status::Reentrant, c"reentrant"),
        (inboxlog_status::Fenced, c"fenced"),
        (inboxlog_status::Unavailable, c"unavailable"),
        (inboxlog_status::NullArgument, c"null_argument"),
        (inboxlog_status::InvalidUtf8, c"invalid_utf8"),
        (inboxlog_status::InvalidJson, c"invalid_json"),
        (inboxlog_status::Panic, c"panic"),
    ];
    NAMES
        .iter()
        .find(|(s, _)| s.code() == status)
        .map_or(std::ptr::null(), |(_, name)| name.as_ptr())
}

/// Frees a string returned by this library. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or a string returned by an `inboxlog_` function and not yet freed; it
/// must not be used afterwards. Strings from other allocators must not be passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_string_free(s: *mut c_char) {
    boundary::boundary_void(|| {
        if !s.is_null() {
            // SAFETY: made by `CString::into_raw` in this library, freed exactly once.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// Diagnostic: panics inside the boundary and so always returns
/// `INBOXLOG_STATUS_PANIC` (with `kind` `"panic"` in `*error`). It exists so that hosts
/// and tests can check their handling of that status against the shipped library; it
/// has no other effect. Thread-safe.
///
/// # Safety
/// A non-NULL `error` points to a writable pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_test_panic(error: *mut *mut c_char) -> c_int {
    boundary(error, || panic!("inboxlog_test_panic was called"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn status_names_match_the_enum() {
        for status in status::ALL_STATUSES {
            let name = inboxlog_status_name(status.code());
            // SAFETY: a non-NULL result is a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
            assert_eq!(name, status.name());
        }
        assert!(inboxlog_status_name(17).is_null());
        assert!(inboxlog_status_name(-1).is_null());
    }
}

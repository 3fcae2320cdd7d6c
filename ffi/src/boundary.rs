//! The one boundary every exported body runs inside: panics are caught, errors become
//! a status code plus optional error JSON. With the `testing` feature, also the test
//! hook that proves it (never in a release library, never in the header).

use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use inboxlog_core::wire::{ErrorFields, ToJson};

use crate::status::inboxlog_status;

/// An error on its way to C: a core error (its kind is its status, its location the
/// optional keys of the error JSON, ARCHITECTURE.md#errors) or one of the C layer's own statuses.
#[derive(Debug)]
pub(crate) enum FfiError {
    Core(inboxlog_core::Error),
    Status {
        status: inboxlog_status,
        message: String,
    },
}

pub(crate) type FfiResult<T> = Result<T, FfiError>;

impl FfiError {
    pub fn new(status: inboxlog_status, message: impl Into<String>) -> FfiError {
        FfiError::Status {
            status,
            message: message.into(),
        }
    }

    /// `invalid_input` with a message.
    pub fn invalid(message: impl Into<String>) -> FfiError {
        FfiError::new(inboxlog_status::InvalidInput, message)
    }

    /// The number returned to C. Core kinds and C statuses share their numbers; a kind
    /// added to the core later still crosses with its own number and name.
    pub fn code(&self) -> c_int {
        match self {
            FfiError::Core(e) => e.kind().code() as c_int,
            FfiError::Status { status, .. } => status.code(),
        }
    }

    /// The error JSON, in the core's one spelling of an error (`inboxlog::wire`).
    fn to_json(&self) -> String {
        match self {
            FfiError::Core(e) => ErrorFields::of(e).to_json(),
            FfiError::Status { status, message } => {
                ErrorFields::new(status.code() as u32, status.name(), message).to_json()
            }
        }
    }
}

impl From<inboxlog_core::Error> for FfiError {
    fn from(e: inboxlog_core::Error) -> FfiError {
        FfiError::Core(e)
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown cause");
    format!("inboxlog panicked (a bug, please report it): {what}")
}

/// Runs an exported body: `OK` on success; on failure the error's code, with its JSON
/// written to `*error` when `error` is not NULL. A panic becomes `PANIC`.
///
/// The body writes its out-parameters itself, last, so they are written only on
/// success.
pub(crate) fn boundary(error: *mut *mut c_char, body: impl FnOnce() -> FfiResult<()>) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return inboxlog_status::Ok.code(),
        Ok(Err(e)) => e,
        Err(panic) => FfiError::new(inboxlog_status::Panic, panic_message(&*panic)),
    };
    let code = failure.code();
    if !error.is_null() {
        // Formatting cannot panic on its own, but nothing may unwind into C.
        let json = catch_unwind(AssertUnwindSafe(|| failure.to_json())).unwrap_or_default();
        if let Ok(text) = CString::new(json) {
            // SAFETY: `error` is not NULL, and every exported function documents that a
            // non-NULL `error` points to a writable `char *`.
            unsafe { error.write(text.into_raw()) };
        }
    }
    code
}

/// Runs an exported body that returns nothing (the `_free` functions): a panic is
/// swallowed, never unwound into C.
pub(crate) fn boundary_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// Test hook, only in a library built with the ffi crate's testing feature (the shipped
/// library and header have no such function): panics inside the boundary and so always
/// returns INBOXLOG_STATUS_PANIC, with kind "panic" in *error. It lets the C and C++
/// host tests check their handling of that status; it has no other effect.
///
/// Ownership: *error, when error is not NULL, receives a string the caller frees.
/// Threads: any thread, any number at once.
///
/// # Safety
/// A non-NULL `error` points to a writable pointer.
#[cfg(feature = "testing")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_test_panic(error: *mut *mut c_char) -> c_int {
    boundary(error, || panic!("inboxlog_test_panic was called"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_cross_in_the_cores_spelling() {
        let e = FfiError::new(inboxlog_status::NullArgument, "argument \"id\" is NULL");
        assert_eq!(e.code(), 100);
        assert_eq!(
            e.to_json(),
            r#"{"code":100,"kind":"null_argument","message":"argument \"id\" is NULL"}"#
        );
        let located = inboxlog_core::Error::new(inboxlog_core::ErrorKind::Corrupt, "bad")
            .with_session("s")
            .with_path(std::path::Path::new("/r/\"s\".jsonl"))
            .with_line(2, 57)
            .with_seq(0);
        let e = FfiError::from(located);
        assert_eq!(e.code(), 2);
        assert_eq!(
            e.to_json(),
            r#"{"code":2,"kind":"corrupt","message":"bad","session":"s","path":"/r/\"s\".jsonl","line":2,"offset":57,"seq":0}"#
        );
    }
}

//! The status codes every exported function returns (ARCHITECTURE.md#errors, ARCHITECTURE.md#c-abi), their names, and
//! the library version: the first section of the header.

use std::ffi::{CString, c_char, c_int};
use std::sync::LazyLock;

use inboxlog_core::ErrorKind;

/// The result of every call: INBOXLOG_STATUS_OK (0) or what went wrong.
///
/// Codes from 1 to 99 are the error kinds shared by every layer (the same numbers as
/// the Rust ErrorKind::code() and the Python exception's code); codes from 100 exist
/// only at the C boundary. Numbers are never reused. Functions return them as int.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum inboxlog_status {
    /// Success.
    Ok = 0,
    /// The OS refused a read, write, fsync or lock.
    Io = 1,
    /// A stored log fails validation (the message names file, line, offset, seq).
    Corrupt = 2,
    /// Another writer holds the session.
    Locked = 3,
    /// A write or fsync failed earlier; reopen the session to continue.
    Poisoned = 4,
    /// No such session.
    NotFound = 5,
    /// A session with that id already exists.
    AlreadyExists = 6,
    /// Splice coordinates out of range.
    InvalidSplice = 7,
    /// A message id already pending.
    DuplicateMessage = 8,
    /// A step-boundary call out of order (the message names the state).
    Protocol = 9,
    /// A bad message, event, id, reason or argument value, or JSON of the wrong shape.
    InvalidInput = 10,
    /// A log written in another on-disk format version.
    FormatUnsupported = 11,
    /// A record or a JSON nesting over the limits.
    TooLarge = 12,
    /// Use of a session after inboxlog_session_close (stores have no close).
    Closed = 13,
    /// A mutation from inside an observer.
    Reentrant = 14,
    /// This writer lost ownership of its session (another writer took it over);
    /// nothing of the call was written.
    Fenced = 15,
    /// The store's server cannot be reached or went away mid-call; the message says
    /// whether the call committed or that its outcome is unknown.
    Unavailable = 16,
    /// A compaction is running; nothing was written.
    Busy = 17,
    /// The surface changed under a compaction; its end with the error was written.
    Conflict = 18,
    /// Approvals of the turn are still pending (a resume, end_step or close_turn);
    /// nothing was written.
    ApprovalsPending = 19,
    /// A decision for an approval already decided, recorded as rejected.
    AlreadyDecided = 20,
    /// A required pointer argument was NULL.
    NullArgument = 100,
    /// A string argument was not valid UTF-8.
    InvalidUtf8 = 101,
    /// A JSON argument was not well-formed JSON.
    InvalidJson = 102,
    /// The library panicked; the call was abandoned (a bug: please report it).
    Panic = 199,
}

/// The kind name of a status code ("not_found" for 5, "ok" for 0), or NULL for a number
/// that is no status.
///
/// Ownership: the result is a static string, never freed.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub extern "C" fn inboxlog_status_name(status: c_int) -> *const c_char {
    // Built once from the statuses' names (the core's, for its kinds), NUL-terminated.
    static NAMES: LazyLock<Vec<(c_int, CString)>> = LazyLock::new(|| {
        ALL_STATUSES
            .iter()
            .map(|s| (s.code(), CString::new(s.name()).unwrap_or_default()))
            .collect()
    });
    NAMES
        .iter()
        .find(|(code, _)| *code == status)
        .map_or(std::ptr::null(), |(_, name)| name.as_ptr())
}

/// The library version, e.g. "0.1.0".
///
/// Ownership: the result is a static string, never freed.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub extern "C" fn inboxlog_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Every status, in code order: the enum's variants (cbindgen reads the enum as
/// written, so it cannot be generated from the core's list); the tests below and
/// `ffi/tests/header.rs` hold both to `ErrorKind::ALL`.
pub(crate) const ALL_STATUSES: [inboxlog_status; 25] = [
    inboxlog_status::Ok,
    inboxlog_status::Io,
    inboxlog_status::Corrupt,
    inboxlog_status::Locked,
    inboxlog_status::Poisoned,
    inboxlog_status::NotFound,
    inboxlog_status::AlreadyExists,
    inboxlog_status::InvalidSplice,
    inboxlog_status::DuplicateMessage,
    inboxlog_status::Protocol,
    inboxlog_status::InvalidInput,
    inboxlog_status::FormatUnsupported,
    inboxlog_status::TooLarge,
    inboxlog_status::Closed,
    inboxlog_status::Reentrant,
    inboxlog_status::Fenced,
    inboxlog_status::Unavailable,
    inboxlog_status::Busy,
    inboxlog_status::Conflict,
    inboxlog_status::ApprovalsPending,
    inboxlog_status::AlreadyDecided,
    inboxlog_status::NullArgument,
    inboxlog_status::InvalidUtf8,
    inboxlog_status::InvalidJson,
    inboxlog_status::Panic,
];

impl inboxlog_status {
    /// The number returned to C.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The snake_case kind name used in error JSON (`"not_found"`).
    pub fn name(self) -> &'static str {
        match self {
            inboxlog_status::Ok => "ok",
            inboxlog_status::NullArgument => "null_argument",
            inboxlog_status::InvalidUtf8 => "invalid_utf8",
            inboxlog_status::InvalidJson => "invalid_json",
            inboxlog_status::Panic => "panic",
            other => ErrorKind::ALL
                .iter()
                .find(|k| k.code() as i32 == other.code())
                .map_or("unknown", |k| k.name()),
        }
    }

    /// The status with this number, if any.
    pub fn from_code(code: i32) -> Option<inboxlog_status> {
        ALL_STATUSES.iter().copied().find(|s| s.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn core_kinds_keep_their_numbers_and_names() {
        for kind in ErrorKind::ALL {
            let status = inboxlog_status::from_code(kind.code() as i32)
                .unwrap_or_else(|| panic!("no status for core kind {kind}"));
            assert_eq!(status.name(), kind.name());
        }
        assert_eq!(ALL_STATUSES.len(), ErrorKind::ALL.len() + 5);
        assert_eq!(inboxlog_status::Panic.code(), 199);
        assert_eq!(inboxlog_status::InvalidJson.name(), "invalid_json");
    }

    #[test]
    fn status_names_match_the_enum() {
        for status in ALL_STATUSES {
            let name = inboxlog_status_name(status.code());
            // SAFETY: a non-NULL result is a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
            assert_eq!(name, status.name());
        }
        assert!(inboxlog_status_name(21).is_null());
        assert!(inboxlog_status_name(-1).is_null());
    }
}

//! Arguments in, results out: C strings decoded strictly, JSON checked strictly,
//! optional numbers spelled one way, out-parameters checked before any work and
//! written only on success; and the one function that frees what the library returns.
//!
//! Helpers shared by several C objects live here, below all of them: this module
//! imports only `boundary` and `status`.

use std::borrow::Cow;
use std::ffi::{CStr, CString, c_char};
use std::ptr::NonNull;

use inboxlog_core::json::{self, JsonErrorKind};

use crate::boundary::{FfiError, FfiResult, boundary_void};
use crate::status::inboxlog_status;

/// The one spelling of an absent number: an int64_t argument or result that may be
/// absent holds INBOXLOG_ABSENT (-1) when it is; a present value is 0 to 2^53-1.
pub const INBOXLOG_ABSENT: i64 = -1;

/// Frees a string returned by this library (an out-parameter or an error). NULL is a
/// no-op.
///
/// s must be NULL or a string returned by an inboxlog_ function and not yet freed; it
/// must not be used afterwards. Strings from other allocators must not be passed.
///
/// Ownership: takes back the string the caller owned.
/// Threads: any thread; must not race another use of the same string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_string_free(s: *mut c_char) {
    boundary_void(|| {
        if !s.is_null() {
            // SAFETY: made by `CString::into_raw` in this library, freed exactly once
            // (the caller's contract above).
            drop(unsafe { CString::from_raw(s) });
        }
    });
}

/// A borrowed, NUL-terminated, strictly UTF-8 string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unchanged
/// for `'a`.
pub(crate) unsafe fn str_arg<'a>(ptr: *const c_char, name: &str) -> FfiResult<&'a str> {
    if ptr.is_null() {
        return Err(null(name));
    }
    // SAFETY: not NULL; the caller guarantees a NUL-terminated string valid for 'a.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map_err(|e| {
        FfiError::new(
            inboxlog_status::InvalidUtf8,
            format!(
                "argument `{name}` is not valid UTF-8 (bad byte at offset {})",
                e.valid_up_to()
            ),
        )
    })
}

/// Like [`str_arg`], but NULL is allowed and gives `None`.
///
/// # Safety
/// As for [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(ptr: *const c_char, name: &str) -> FfiResult<Option<&'a str>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract of this function.
    unsafe { str_arg(ptr, name) }.map(Some)
}

/// A JSON text argument: strict UTF-8, then the core's one check (`json::check`):
/// well-formed (`INVALID_JSON` otherwise), nesting at most 512 levels (`TOO_LARGE`),
/// numbers finite (`INVALID_INPUT`). Returned without insignificant whitespace, so raw
/// values taken from it never carry a newline into a log record.
///
/// # Safety
/// As for [`str_arg`].
pub(crate) unsafe fn json_arg<'a>(ptr: *const c_char, name: &str) -> FfiResult<Cow<'a, str>> {
    // SAFETY: forwarded contract of this function.
    let text = unsafe { str_arg(ptr, name) }?;
    check_json(text, name)
}

/// Like [`json_arg`], but NULL is allowed and gives `None`.
///
/// # Safety
/// As for [`str_arg`].
pub(crate) unsafe fn opt_json_arg<'a>(
    ptr: *const c_char,
    name: &str,
) -> FfiResult<Option<Cow<'a, str>>> {
    // SAFETY: forwarded contract of this function.
    match unsafe { opt_str_arg(ptr, name) }? {
        None => Ok(None),
        Some(text) => check_json(text, name).map(Some),
    }
}

fn null(name: &str) -> FfiError {
    FfiError::new(
        inboxlog_status::NullArgument,
        format!("argument `{name}` is NULL"),
    )
}

/// The core's check of a JSON argument, its refusal mapped to a C status by kind.
fn check_json<'a>(text: &'a str, name: &str) -> FfiResult<Cow<'a, str>> {
    json::check(text).map_err(|e| match e.kind() {
        JsonErrorKind::Syntax => FfiError::new(
            inboxlog_status::InvalidJson,
            format!("argument `{name}` is not valid JSON: {}", e.message()),
        ),
        JsonErrorKind::TooDeep => FfiError::new(
            inboxlog_status::TooLarge,
            format!("argument `{name}`: {}", e.message()),
        ),
        _ => FfiError::invalid(format!("argument `{name}`: {}", e.message())),
    })
}

/// A required pointer to a handle.
///
/// # Safety
/// `ptr` is NULL or points to a live handle of type `T` for `'a`.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, name: &str) -> FfiResult<&'a T> {
    // SAFETY: the caller guarantees NULL or a live handle for 'a.
    unsafe { ptr.as_ref() }.ok_or_else(|| null(name))
}

/// A required out-parameter, checked before any work is done and written at the end.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// `ptr` is NULL or valid for writing one `T` (it need not be initialized) for the
    /// rest of the exported call.
    pub unsafe fn new(ptr: *mut T, name: &str) -> FfiResult<Out<T>> {
        NonNull::new(ptr).map(Out).ok_or_else(|| null(name))
    }

    /// Writes the result; called only once the call has succeeded.
    pub fn write(self, value: T) {
        // SAFETY: `Out::new`'s contract: valid for one write during this call. `write`
        // does not read or drop the old (possibly uninitialized) value.
        unsafe { self.0.as_ptr().write(value) }
    }
}

impl Out<*mut c_char> {
    /// Hands a library-allocated string to C (freed with `inboxlog_string_free`).
    pub fn write_string(self, text: String) -> FfiResult<()> {
        let text = CString::new(text).map_err(|_| {
            FfiError::new(
                inboxlog_status::Panic,
                "internal error: an output string holds a NUL byte",
            )
        })?;
        self.write(text.into_raw());
        Ok(())
    }
}

/// An optional number from C: [`INBOXLOG_ABSENT`] gives `None`, a safe non-negative
/// integer gives itself, anything else is `INVALID_INPUT` naming the argument.
pub(crate) fn optional_number(value: i64, name: &str) -> FfiResult<Option<u64>> {
    match value {
        INBOXLOG_ABSENT => Ok(None),
        v if (0..=inboxlog_core::MAX_SAFE_INTEGER as i64).contains(&v) => Ok(Some(v as u64)),
        v => Err(FfiError::invalid(format!(
            "argument `{name}` must be INBOXLOG_ABSENT (-1) or 0..=2^53-1, got {v}"
        ))),
    }
}

/// An optional number for C: `None` is [`INBOXLOG_ABSENT`]. Seqs and turn numbers are
/// safe integers (< 2^53), so they fit an int64_t.
pub(crate) fn absent_or(value: Option<u64>) -> i64 {
    value.map_or(INBOXLOG_ABSENT, |n| n as i64)
}

/// A checked JSON array of events (`name` names the argument in errors).
pub(crate) fn events_arg(json: &str, name: &str) -> FfiResult<Vec<inboxlog_core::Event>> {
    Ok(inboxlog_core::wire::events_from(
        json,
        &format!("argument `{name}`"),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_checked_once_by_the_core_and_mapped_by_kind() {
        assert_eq!(
            check_json("{ \"a b\" :\n [1, \"x\\\" y\"] }", "x").unwrap(),
            "{\"a b\":[1,\"x\\\" y\"]}"
        );
        for bad in ["1 2", "{", "NaN", "", "[1,]", "\"\\"] {
            let e = check_json(bad, "x").unwrap_err();
            assert_eq!(e.code(), 102, "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
        assert_eq!(check_json(&deep, "x").unwrap_err().code(), 12);
        // A number a double cannot hold is a bad value, not bad syntax.
        assert_eq!(check_json("[1e400]", "x").unwrap_err().code(), 10);
        let ok = format!("{}{}", "[".repeat(512), "]".repeat(512));
        assert!(check_json(&ok, "x").is_ok());
    }

    #[test]
    fn optional_numbers_have_one_spelling_of_absent() {
        assert_eq!(optional_number(INBOXLOG_ABSENT, "n").unwrap(), None);
        assert_eq!(optional_number(0, "n").unwrap(), Some(0));
        assert_eq!(optional_number(7, "n").unwrap(), Some(7));
        let max = inboxlog_core::MAX_SAFE_INTEGER as i64;
        assert_eq!(optional_number(max, "n").unwrap(), Some(max as u64));
        for bad in [-2, i64::MIN, max + 1, i64::MAX] {
            let e = optional_number(bad, "n").unwrap_err();
            assert_eq!(e.code(), 10, "{bad}");
        }
        assert_eq!(absent_or(None), -1);
        assert_eq!(absent_or(Some(0)), 0);
    }
}

//! Lossless JSON helpers: nesting limits, whitespace-free text, strict parsing, and the
//! token [`Reader`] the bindings build their own values from.
//!
//! Event data and messages are kept as JSON text (`RawValue`), never as a DOM, so key
//! order, large integers and number spelling survive byte-for-byte. Input is checked
//! once at the edge: nesting at most [`MAX_DEPTH`], finite numbers, valid syntax, and
//! insignificant whitespace removed so a record never holds a raw newline.
//!
//! [`check`] is that edge for the bindings: its [`JsonError`] tells syntax, depth and
//! non-finite numbers apart, so a binding maps each to its own status without
//! scanning the text again.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result, invalid};

pub use builder::{Builder, Json, write_string};
pub use reader::{MAX_READ_DEPTH, Number, ReadError, ReadErrorKind, Reader, Token};

mod builder;
mod lexer;
pub(crate) mod plain;
mod reader;
mod scan;
pub(crate) mod walk;

/// Deepest JSON nesting accepted anywhere (ARCHITECTURE.md#limits).
pub const MAX_DEPTH: usize = 512;

/// Deepest nesting of a whole stored record: an event wraps its data in one level, and
/// a splice record wraps a message in two more, so data and messages at
/// [`MAX_DEPTH`] stay readable.
pub(crate) const MAX_RECORD_DEPTH: usize = MAX_DEPTH + 3;

/// Largest integer that round-trips through an IEEE double (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a JSON text was refused by [`check`]: the bindings map each to their own status
/// (C: syntax is `invalid_json`, depth `too_large`, a non-finite number `invalid_input`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// Not well-formed JSON.
    Syntax,
    /// Nested deeper than the limit ([`MAX_DEPTH`]).
    TooDeep,
    /// A number a double cannot hold (`1e400` would become Infinity).
    NonFinite,
}

/// A JSON text refused by [`check`]: its kind and a message naming the byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    kind: JsonErrorKind,
    message: String,
}

impl JsonError {
    fn new(kind: JsonErrorKind, message: String) -> JsonError {
        JsonError { kind, message }
    }

    /// Why the text was refused.
    pub fn kind(&self) -> JsonErrorKind {
        self.kind
    }

    /// What was wrong and where, e.g. `JSON nesting deeper than 512 levels at byte 512`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}

impl From<JsonError> for Error {
    /// Depth is `too_large`; syntax and non-finite numbers are `invalid_input`.
    fn from(e: JsonError) -> Error {
        let kind = match e.kind {
            JsonErrorKind::TooDeep => ErrorKind::TooLarge,
            JsonErrorKind::Syntax | JsonErrorKind::NonFinite => ErrorKind::InvalidInput,
        };
        Error::new(kind, e.message)
    }
}

/// The one check of host-supplied JSON text, for every binding: nesting at most
/// [`MAX_DEPTH`], numbers finite, syntax well-formed; returns the text without
/// whitespace outside strings (borrowed when there was none), so raw values taken from
/// it never carry a newline into a log record.
///
/// One scan bounds the depth before any recursive parser sees the text (no input can
/// overflow the stack), then one parse checks the syntax of the text as given (so a
/// syntax error names its line and column there). The error's kind tells the three
/// refusals apart.
pub fn check(text: &str) -> std::result::Result<Cow<'_, str>, JsonError> {
    let compacted = scan(text, MAX_DEPTH)?;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    IgnoredAny::deserialize(&mut de)
        .and_then(|_| de.end())
        .map_err(|e| JsonError::new(JsonErrorKind::Syntax, e.to_string()))?;
    Ok(compacted)
}

/// Scans `text` once: refuses nesting deeper than [`MAX_DEPTH`] and numbers beyond a
/// double's range, and returns the text
/// without whitespace outside strings (borrowed when there was none).
///
/// Syntax is not checked here beyond one case: two scalars separated only by
/// whitespace (`1 2`) are refused, because removing the whitespace would join them
/// into one valid number. This runs before any recursive parser sees the text so that
/// no input can overflow the stack.
pub(crate) fn compact(text: &str) -> Result<Cow<'_, str>> {
    compact_within(text, MAX_DEPTH)
}

/// [`compact`] with another nesting limit.
pub(crate) fn compact_within(text: &str, max_depth: usize) -> Result<Cow<'_, str>> {
    Ok(scan(text, max_depth)?)
}

/// Refuses `text` (valid JSON) when it nests deeper than `max_depth`, as `too_large`;
/// reads it without copying.
pub(crate) fn check_depth(text: &str, max_depth: usize) -> Result<()> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(off) = memchr::memchr3(b'"', b'[', b'{', bytes.get(i..).unwrap_or_default()) {
        // Closing brackets between here and the next opener or quote.
        depth = depth.saturating_sub(
            bytes[i..i + off]
                .iter()
                .filter(|&&b| b == b']' || b == b'}')
                .count(),
        );
        i += off;
        if bytes[i] == b'"' {
            i = plain::string_end(bytes, i).unwrap_or(bytes.len());
            continue;
        }
        depth += 1;
        if depth > max_depth {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("JSON nesting deeper than {max_depth} levels at byte {i}"),
            ));
        }
        i += 1;
    }
    Ok(())
}

/// A byte that may continue a number or a literal (`true`, `1e5`, `-0.5`).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-')
}

/// The scanner behind [`check`] and [`compact`].
fn scan(text: &str, max_depth: usize) -> std::result::Result<Cow<'_, str>, JsonError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0; // bytes[..copied] already handled in `out`
    // The last significant byte ended a number or literal, and whitespace followed it.
    let (mut after_word, mut gap) = (false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            if gap && after_word && is_word(b) {
                return Err(JsonError::new(
                    JsonErrorKind::Syntax,
                    format!("two values without a separator at byte {i}"),
                ));
            }
            gap = false;
            after_word = is_word(b);
        }
        match b {
            b'"' => {
                // Skip to the closing quote, honouring backslash escapes.
                i += 1;
                loop {
                    // An escape may be the last byte: never index past the end.
                    match memchr::memchr2(b'"', b'\\', bytes.get(i..).unwrap_or_default()) {
                        Some(off) if bytes[i + off] == b'\\' => i += off + 2,
                        Some(off) => {
                            i += off + 1;
                            break;
                        }
                        None => {
                            i = bytes.len();
                            break;
                        }
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(JsonError::new(
                        JsonErrorKind::TooDeep,
                        format!("JSON nesting deeper than {max_depth} levels at byte {i}"),
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let end = bytes[i..]
                    .iter()
                    .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                    .map_or(bytes.len(), |off| i + off);
                check_finite(&text[i..end], i)?;
                i = end;
                continue;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                gap = true;
                let buf = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
                buf.extend_from_slice(&bytes[copied..i]);
                copied = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(match out {
        None => Cow::Borrowed(text),
        Some(mut buf) => {
            buf.extend_from_slice(&bytes[copied.min(bytes.len())..]);
            // Only ASCII whitespace outside strings was removed: still UTF-8.
            Cow::Owned(String::from_utf8(buf).expect("removing ASCII keeps UTF-8"))
        }
    })
}

/// Refuses a number token that a double cannot hold (`1e400` would become Infinity).
fn check_finite(token: &str, at: usize) -> std::result::Result<(), JsonError> {
    let risky = token.len() > 300 || token.bytes().any(|b| b == b'e' || b == b'E');
    if risky && token.parse::<f64>().is_ok_and(f64::is_infinite) {
        return Err(JsonError::new(
            JsonErrorKind::NonFinite,
            format!("number {token} at byte {at} is not finite"),
        ));
    }
    Ok(())
}

/// Parses trusted-shape text into `T` with the recursion limit lifted (the depth was
/// bounded by [`compact`] or by the caller) and nothing allowed after the value.
pub(crate) fn from_str<'de, T: Deserialize<'de>>(text: &'de str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Validates host-supplied JSON (`what` names it in errors) and returns it as compact
/// raw text: nesting bounded, numbers finite (`1e400` is refused), syntax checked.
pub(crate) fn raw_value(text: &str, what: &str) -> Result<Box<RawValue>> {
    let compacted = compact(text).map_err(|e| e.context(what))?;
    RawValue::from_string(compacted.into_owned())
        .map_err(|e| invalid(format!("{what}: invalid JSON: {e}")))
}

/// Parses host-supplied JSON text into `T` (a decision, a cause: structures that may
/// wrap messages) after bounding its depth.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    let compacted = compact_within(text, MAX_RECORD_DEPTH).map_err(|e| e.context(what))?;
    from_str(&compacted).map_err(|e| invalid(format!("{what}: {e}")))
}

/// Equality of raw JSON by its text (the text is what the log keeps).
pub(crate) fn same(a: &RawValue, b: &RawValue) -> bool {
    a.get() == b.get()
}

/// JSON text of a string (quoted and escaped), for messages that name a value.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_string(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_removes_whitespace_outside_strings_only() {
        let c = compact("{ \"a b\" :\n [1, \"x\\\" y\"] }").unwrap();
        assert_eq!(c, "{\"a b\":[1,\"x\\\" y\"]}");
        assert!(matches!(compact("[1,2]").unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn depth_limit_is_512() {
        let ok = format!("{}{}", "[".repeat(512), "]".repeat(512));
        assert!(raw_value(&ok, "data").is_ok());
        let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
        let err = raw_value(&deep, "data").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge);
        assert!(err.to_string().contains("deeper than 512"), "{err}");
        // Brackets inside strings do not count.
        let quoted = format!("\"{}\"", "[".repeat(10_000));
        assert!(raw_value(&quoted, "data").is_ok());
        // An unterminated escape at the very end is a syntax error, not a panic.
        assert_eq!(
            raw_value("\"a\\", "data").unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        // A huge unbalanced input is refused without recursion.
        assert_eq!(
            raw_value(&"[".repeat(1_000_000), "data")
                .unwrap_err()
                .kind(),
            ErrorKind::TooLarge
        );
    }

    #[test]
    fn check_depth_counts_containers_outside_strings() {
        let at = |n: usize| format!("{}{}", "[{\"a\":".repeat(n / 2), "1}]".repeat(n / 2));
        assert!(check_depth(&at(512), 512).is_ok());
        let err = check_depth(&at(514), 512).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge);
        assert!(err.to_string().contains("deeper than 512 levels"), "{err}");
        // Brackets in strings, escaped quotes included, do not count; closers do.
        let quoted = format!("[\"\\\"{}\",{}]", "[".repeat(600), "[]".repeat(600));
        assert!(check_depth(&quoted, 2).is_ok());
        assert!(check_depth("[[]]", 1).is_err());
    }

    #[test]
    fn raw_value_is_lossless_and_strict() {
        let raw = raw_value("{\"z\":1,\"a\":12345678901234567890123}", "data").unwrap();
        assert_eq!(raw.get(), "{\"z\":1,\"a\":12345678901234567890123}");
        for bad in ["{", "NaN", "[1e400]", "{\"a\":1}x", "", "[-Infinity]"] {
            let err = raw_value(bad, "data").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(err.to_string().starts_with("data: "), "{err}");
        }
    }

    #[test]
    fn check_tells_syntax_depth_and_non_finite_apart() {
        assert_eq!(check("{ \"a\" : [1, 2] }").unwrap(), "{\"a\":[1,2]}");
        assert!(matches!(check("[1,2]").unwrap(), Cow::Borrowed(_)));
        for bad in ["1 2", "{", "NaN", "", "[1,]", "\"\\", "{\"a\":1}x", "tru e"] {
            let e = check(bad).unwrap_err();
            assert_eq!(e.kind(), JsonErrorKind::Syntax, "{bad}");
            assert_eq!(Error::from(e).kind(), ErrorKind::InvalidInput);
        }
        // A syntax error names its place in the text as given.
        let e = check("[1,\n  ]").unwrap_err();
        assert!(e.message().contains("line 2"), "{e}");
        let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
        let e = check(&deep).unwrap_err();
        assert_eq!(e.kind(), JsonErrorKind::TooDeep);
        assert_eq!(
            e.message(),
            "JSON nesting deeper than 512 levels at byte 512"
        );
        assert_eq!(Error::from(e).kind(), ErrorKind::TooLarge);
        assert!(check(&format!("{}{}", "[".repeat(512), "]".repeat(512))).is_ok());
        for bad in ["[1e400]", "-1E999", "{\"a\":[0.5e309]}"] {
            let e = check(bad).unwrap_err();
            assert_eq!(e.kind(), JsonErrorKind::NonFinite, "{bad}");
            assert!(e.message().contains("is not finite"), "{e}");
            assert_eq!(Error::from(e).kind(), ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn whitespace_never_joins_two_values_into_one() {
        // Removing the space would turn `1 2` into the valid number `12`, `1 e5` into
        // `1e5`: the scan refuses them instead of compacting.
        for bad in ["1 2", "[1 2]", "{\"n\":1 e5}", "[1. 5]", "[true false]"] {
            let err = raw_value(bad, "data").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(
                err.to_string().contains("without a separator"),
                "{bad}: {err}"
            );
        }
        let err = crate::message::Message::from_json("{\"id\":\"a\",\"n\":1 2}").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            raw_value("[1, 2, \"a b\" ]", "data").unwrap().get(),
            "[1,2,\"a b\"]"
        );
    }
}

//! Lossless JSON helpers: nesting limits, whitespace-free text, strict parsing.
//!
//! Event data and messages are kept as JSON text (`RawValue`), never as a DOM, so key
//! order, large integers and number spelling survive byte-for-byte. Input is checked
//! once at the edge: nesting at most [`MAX_DEPTH`], finite numbers, valid syntax, and
//! insignificant whitespace removed so a record never holds a raw newline.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result, invalid};

/// Deepest JSON nesting accepted anywhere (§7.5).
pub const MAX_DEPTH: usize = 512;

/// Deepest nesting of a whole stored record: an event wraps its data in one level, and
/// a splice record wraps a message in two more, so data and messages at
/// [`MAX_DEPTH`] stay readable.
pub(crate) const MAX_RECORD_DEPTH: usize = MAX_DEPTH + 3;

/// Largest integer that round-trips through an IEEE double (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Scans `text` once: refuses nesting deeper than [`MAX_DEPTH`] and numbers beyond a
/// double's range, and returns the text
/// without whitespace outside strings (borrowed when there was none).
///
/// Syntax is not checked here; this runs before any recursive parser sees the text so
/// that no input can overflow the stack.
pub(crate) fn compact(text: &str) -> Result<Cow<'_, str>> {
    compact_within(text, MAX_DEPTH)
}

/// [`compact`] with another nesting limit.
pub(crate) fn compact_within(text: &str, max_depth: usize) -> Result<Cow<'_, str>> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0; // bytes[..copied] already handled in `out`
    while i < bytes.len() {
        match bytes[i] {
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
                    return Err(Error::new(
                        ErrorKind::TooLarge,
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
fn check_finite(token: &str, at: usize) -> Result<()> {
    let risky = token.len() > 300 || token.bytes().any(|b| b == b'e' || b == b'E');
    if risky && token.parse::<f64>().is_ok_and(|v| v.is_infinite()) {
        return Err(invalid(format!(
            "number {token} at byte {at} is not finite"
        )));
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

/// JSON text of a string (quoted and escaped).
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("strings always serialize")
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
    fn raw_value_is_lossless_and_strict() {
        let raw = raw_value("{\"z\":1,\"a\":12345678901234567890123}", "data").unwrap();
        assert_eq!(raw.get(), "{\"z\":1,\"a\":12345678901234567890123}");
        for bad in ["{", "NaN", "[1e400]", "{\"a\":1}x", "", "[-Infinity]"] {
            let err = raw_value(bad, "data").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(err.to_string().starts_with("data: "), "{err}");
        }
    }
}

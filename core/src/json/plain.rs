//! One pass over *plain* JSON: compact text the library itself would write.
//!
//! [`value_end`] checks one value completely (syntax, nesting, string escapes) and
//! says where it ends, or answers "not plain" for anything that needs the general
//! path: whitespace (to be removed), an exponent or a very long number (to be checked
//! for finiteness), nesting deeper than [`STACK`] levels, and every syntax error (so
//! the general path names it). "Not plain" is never a verdict on validity; a value this
//! pass accepts is one the general path ([`super::compact_within`], then serde_json)
//! accepts unchanged. `plain_matches_the_general_path` in the tests holds it to that.

use super::scan;

/// Containers tracked on the fixed stack; deeper values take the general path.
pub(crate) const STACK: usize = 128;

/// Longest number token taken here: the general path checks longer ones for
/// finiteness (a 309-digit integer overflows a double).
const MAX_NUMBER: usize = 300;

/// Where the plain JSON value starting at `start` ends (one past its last byte), or
/// `None` when the value is not plain (see the module documentation).
pub(crate) fn value_end(b: &[u8], start: usize) -> Option<usize> {
    // `true` for an object, `false` for an array.
    let mut stack = [false; STACK];
    let mut depth = 0usize;
    let mut i = start;
    'value: loop {
        // A value starts at `i`.
        match *b.get(i)? {
            b'"' => i = string_end(b, i)?,
            b'{' => {
                if depth == STACK {
                    return None;
                }
                stack[depth] = true;
                depth += 1;
                i += 1;
                if *b.get(i)? == b'}' {
                    i += 1;
                    depth -= 1;
                } else {
                    i = key_end(b, i)?;
                    continue 'value;
                }
            }
            b'[' => {
                if depth == STACK {
                    return None;
                }
                stack[depth] = false;
                depth += 1;
                i += 1;
                if *b.get(i)? == b']' {
                    i += 1;
                    depth -= 1;
                } else {
                    continue 'value;
                }
            }
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b'-' | b'0'..=b'9' => i = number_end(b, i)?,
            _ => return None,
        }
        // After a value: close containers, or go on with the next item.
        loop {
            if depth == 0 {
                return Some(i);
            }
            let object = stack[depth - 1];
            match (*b.get(i)?, object) {
                (b',', true) => {
                    i = key_end(b, i + 1)?;
                    continue 'value;
                }
                (b',', false) => {
                    i += 1;
                    continue 'value;
                }
                (b'}', true) | (b']', false) => {
                    i += 1;
                    depth -= 1;
                }
                _ => return None,
            }
        }
    }
}

/// A key and its colon at `i`; returns where its value starts.
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if *b.get(i)? != b'"' {
        return None;
    }
    let end = string_end(b, i)?;
    (*b.get(end)? == b':').then_some(end + 1)
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    (b.get(i..end)? == word).then_some(end)
}

/// The end of the number at `i`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most
/// [`MAX_NUMBER`] bytes. An exponent is not plain.
fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if b[i] == b'-' {
        i += 1;
    }
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits_end(b, i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits_end(b, i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    match b.get(i) {
        // An exponent is not plain; a digit after a leading zero (`01`) is not JSON.
        Some(b'e' | b'E' | b'0'..=b'9') => None,
        _ if i - start > MAX_NUMBER => None,
        _ => Some(i),
    }
}

fn digits_end(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The end of the string whose opening quote is at `i` (one past the closing quote):
/// no raw control character, only JSON's escapes. The text is UTF-8 already (it is a
/// `str`), so bytes at or above 0x80 need no look.
#[inline]
pub(crate) fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut i = i + 1;
    loop {
        i = scan::to_quote_or_backslash(b, i).ok()?;
        if b[i] == b'"' {
            return Some(i + 1);
        }
        i += match *b.get(i + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
            b'u' => {
                let hex = b.get(i + 2..i + 6)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                6
            }
            _ => return None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Option<usize> {
        value_end(text.as_bytes(), 0)
    }

    #[test]
    fn takes_the_values_the_library_writes() {
        for text in [
            r#"{"id":"m1","role":"user","content":"a \"quoted\" line\n, é ✓ 𝄞 \u00e9"}"#,
            r#"[1,-2,0.5,-0.25,true,false,null,"",{},[],[{}],{"a":[{"b":{}}]}]"#,
            "0",
            "-0",
            r#""\\\/\b\f\n\r\t""#,
        ] {
            assert_eq!(plain(text), Some(text.len()), "{text}");
        }
        // The end of the value, not of the text.
        assert_eq!(plain(r#"{"a":1},"b""#), Some(7));
        assert_eq!(plain("12]"), Some(2));
    }

    #[test]
    fn leaves_everything_else_to_the_general_path() {
        for text in [
            "{ \"a\":1}",
            "[1, 2]",
            "1e5",
            "1E5",
            "01",
            "-",
            "-a",
            "1.",
            ".5",
            "[1,]",
            "{\"a\"}",
            "{\"a\":}",
            "{1:2}",
            "[",
            "{",
            "\"abc",
            "\"a\\x\"",
            "\"\\u12g4\"",
            "\"a\u{1}\"",
            "tru",
            "nul",
            "[1 ]",
            "[1}",
            "{\"a\":1]",
            "",
            "x",
        ] {
            assert_eq!(plain(text), None, "{text:?}");
        }
        let long = "1".repeat(MAX_NUMBER + 1);
        assert_eq!(plain(&long), None);
        assert_eq!(plain(&long[1..]), Some(MAX_NUMBER));
        let deep = format!("{}{}", "[".repeat(STACK + 1), "]".repeat(STACK + 1));
        assert_eq!(plain(&deep), None);
        let ok = format!("{}{}", "[".repeat(STACK), "]".repeat(STACK));
        assert_eq!(plain(&ok), Some(ok.len()));
    }

    #[test]
    fn strings_stop_at_quotes_backslashes_and_control_characters_in_every_lane() {
        for at in 0..20 {
            for stop in ["\"", "\\n\"", "\u{1f}\""] {
                let text = format!("\"{}{stop}", "x".repeat(at));
                let want = (stop != "\u{1f}\"").then_some(text.len());
                assert_eq!(plain(&text), want, "{text:?}");
            }
            // A multibyte character right before the quote.
            let text = format!("\"{}é\"", "x".repeat(at));
            assert_eq!(plain(&text), Some(text.len()));
        }
    }

    /// Values built from random pieces: plain ⇒ the general path takes the same value.
    #[test]
    fn plain_matches_the_general_path() {
        use proptest::prelude::*;
        let piece = prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"a\"",
            "\"\\u00e9\"",
            "\"\\q\"",
            "1",
            "-0",
            "0.5",
            "1e5",
            "01",
            "true",
            "null",
            " ",
            "\"x",
            "é",
            "\u{1}",
        ]);
        proptest!(ProptestConfig::with_cases(20_000), |(parts in prop::collection::vec(piece, 0..14))| {
            let text: String = parts.concat();
            if let Some(end) = plain(&text) {
                let value = &text[..end];
                prop_assert!(super::super::check(value).is_ok(), "{value:?}");
                prop_assert_eq!(super::super::compact(value).unwrap(), value);
            }
        });
    }
}

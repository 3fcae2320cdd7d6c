//! JSON text written value by value, valid by construction.
//!
//! A binding that walks its own values (Python dicts, …) writes them through a
//! [`Builder`] and hands the core the resulting [`Json`]: the core then stores it as
//! it is, without the second parse that text from anywhere else gets
//! ([`crate::Session::append_json`]). The builder owns every byte of punctuation, so
//! what it returns is compact, well-formed JSON within [`MAX_DEPTH`] whose numbers are
//! finite; a caller can misuse it (a key outside an object, an unclosed container),
//! but that is a bug in the caller and panics rather than produce bad text.

use serde_json::ser::{CompactFormatter, Formatter};

use super::MAX_DEPTH;
use crate::error::{Error, ErrorKind, Result, invalid};

/// Compact JSON text that is known to be valid: made by a [`Builder`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Json(String);

impl Json {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// Writes one JSON value into compact text: scalars, and containers opened with
/// [`Builder::begin_object`] / [`Builder::begin_array`] and closed with
/// [`Builder::end`]. Commas and colons are the builder's business.
///
/// # Panics
/// On misuse, which no input can cause: a key outside an object or a value where an
/// object wants a key, `end` with nothing open or right after a key, a second
/// top-level value, and `finish` before the value is complete.
#[derive(Debug)]
pub struct Builder {
    out: String,
    /// How many containers are open.
    depth: usize,
    /// Bit `n` tells whether the container at depth `n + 1` is an object.
    objects: [u64; MAX_DEPTH / 64],
    /// The innermost container has no item yet.
    first: bool,
    /// An object's key was written and its value is due.
    keyed: bool,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// An empty builder, with room for a small value. Not more: the text becomes the
    /// event's data as it is, spare room included.
    pub fn new() -> Builder {
        Builder {
            out: String::with_capacity(64),
            depth: 0,
            objects: [0; MAX_DEPTH / 64],
            first: false,
            keyed: false,
        }
    }

    /// Opens an object; refused past [`MAX_DEPTH`] levels.
    pub fn begin_object(&mut self) -> Result<()> {
        self.begin(true, '{')
    }

    /// Opens an array; refused past [`MAX_DEPTH`] levels.
    pub fn begin_array(&mut self) -> Result<()> {
        self.begin(false, '[')
    }

    /// Closes the innermost object or array.
    pub fn end(&mut self) {
        assert!(!self.keyed, "json::Builder: a key is waiting for its value");
        let object = self
            .innermost()
            .expect("json::Builder: end with nothing open");
        self.depth -= 1;
        self.out.push(if object { '}' } else { ']' });
        self.first = false;
    }

    /// Writes the key of the next entry of the innermost object.
    pub fn key(&mut self, key: &str) {
        assert!(
            self.innermost() == Some(true) && !self.keyed,
            "json::Builder: a key outside an object, or two keys in a row"
        );
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
        write_string(&mut self.out, key);
        self.out.push(':');
        self.keyed = true;
    }

    /// Writes a string.
    pub fn string(&mut self, s: &str) {
        self.item();
        write_string(&mut self.out, s);
    }

    /// Writes a signed integer.
    pub fn int(&mut self, n: i64) {
        self.item();
        self.out.push_str(itoa::Buffer::new().format(n));
    }

    /// Writes an unsigned integer.
    pub fn uint(&mut self, n: u64) {
        self.item();
        self.out.push_str(itoa::Buffer::new().format(n));
    }

    /// Writes an integer given as decimal digits (`-?[0-9]+`, any size); refused when
    /// it is not one, or too large for a double to hold, as parsed text is.
    pub fn digits(&mut self, digits: &str) -> Result<()> {
        let bare = digits.strip_prefix('-').unwrap_or(digits);
        let canonical = !bare.is_empty()
            && bare.bytes().all(|b| b.is_ascii_digit())
            && (bare == "0" || !bare.starts_with('0'));
        if !canonical {
            return Err(invalid(format!("{digits:?} is not an integer")));
        }
        // Beyond ~1.8e308 a reader's double would be Infinity: refused like `1e400`.
        if bare.len() > 308 && !digits.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(invalid(format!(
                "the integer of {} digits is too large for a JSON number (it exceeds a double)",
                bare.len()
            )));
        }
        self.item();
        self.out.push_str(digits);
        Ok(())
    }

    /// Writes a finite number; NaN and the infinities are refused.
    pub fn float(&mut self, x: f64) -> Result<()> {
        if !x.is_finite() {
            return Err(invalid(format!("{x} is not a JSON number")));
        }
        self.item();
        let mut spelled = Vec::with_capacity(24);
        CompactFormatter
            .write_f64(&mut spelled, x)
            .expect("writing to a Vec");
        self.out
            .push_str(std::str::from_utf8(&spelled).expect("numbers are ASCII"));
        Ok(())
    }

    /// Writes `true` or `false`.
    pub fn bool(&mut self, b: bool) {
        self.item();
        self.out.push_str(if b { "true" } else { "false" });
    }

    /// Writes `null`.
    pub fn null(&mut self) {
        self.item();
        self.out.push_str("null");
    }

    /// The text of the complete value.
    pub fn finish(self) -> Json {
        assert!(
            self.depth == 0 && !self.out.is_empty(),
            "json::Builder: finish before the value is complete"
        );
        Json(self.out)
    }

    fn begin(&mut self, object: bool, bracket: char) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("JSON nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.item();
        self.out.push(bracket);
        let (word, bit) = (self.depth / 64, self.depth % 64);
        self.objects[word] = self.objects[word] & !(1 << bit) | (u64::from(object) << bit);
        self.depth += 1;
        self.first = true;
        Ok(())
    }

    /// Whether the innermost open container is an object; `None` at the top level.
    fn innermost(&self) -> Option<bool> {
        let n = self.depth.checked_sub(1)?;
        Some(self.objects[n / 64] >> (n % 64) & 1 == 1)
    }

    /// Places a value: after its key in an object, after a comma in an array.
    fn item(&mut self) {
        match self.innermost() {
            Some(true) => {
                assert!(
                    std::mem::take(&mut self.keyed),
                    "json::Builder: an object's value without a key"
                );
            }
            Some(false) => {
                if !std::mem::take(&mut self.first) {
                    self.out.push(',');
                }
            }
            None => assert!(
                self.out.is_empty(),
                "json::Builder: a second top-level value"
            ),
        }
    }
}

/// How each byte is written inside a string: 0 as itself, else the letter after the
/// backslash (`u` for `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `s` as a JSON string: quoted, with `"`, `\` and control characters escaped
/// (`\n`-style where JSON has a short form, `\u00XX` otherwise) and everything else,
/// non-ASCII included, as it is.
pub fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    // Most strings have nothing to escape: find the first byte that needs it, eight
    // bytes at a time, and copy everything before it at once.
    while let Some(i) = first_escape(bytes, start) {
        let b = bytes[i];
        let escape = ESCAPE[b as usize];
        // Escaped bytes are ASCII, so `i` is a char boundary.
        out.push_str(&s[start..i]);
        out.push('\\');
        out.push(escape as char);
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The index of the first byte at or after `from` that a JSON string must escape.
fn first_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// Bytes of `word` that are zero get their high bit set (and only they, up to the
    /// first one, which is all the search needs).
    fn zeros(word: u64) -> u64 {
        word.wrapping_sub(ONES) & !word & HIGHS
    }
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
        // Below 0x20 (for bytes under 0x80: high bits are masked off separately), or
        // equal to `"` or `\`.
        let low = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let hit =
            low | zeros(word ^ (ONES * u64::from(b'"'))) | zeros(word ^ (ONES * u64::from(b'\\')));
        if hit != 0 {
            break;
        }
        i += 8;
    }
    bytes[i..]
        .iter()
        .position(|&b| ESCAPE[b as usize] != 0)
        .map(|n| i + n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(f: impl FnOnce(&mut Builder) -> Result<()>) -> String {
        let mut b = Builder::new();
        f(&mut b).unwrap();
        b.finish().into_string()
    }

    #[test]
    fn nested_values_are_compact_and_in_order() {
        let text = built(|b| {
            b.begin_object()?;
            b.key("z");
            b.begin_array()?;
            b.int(-1);
            b.uint(u64::MAX);
            b.float(1.5)?;
            b.bool(true);
            b.null();
            b.begin_object()?;
            b.end();
            b.begin_array()?;
            b.end();
            b.end();
            b.key("a");
            b.string("x");
            b.end();
            Ok(())
        });
        assert_eq!(
            text,
            r#"{"z":[-1,18446744073709551615,1.5,true,null,{},[]],"a":"x"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["a"], "x");
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut every = String::new();
        for c in (0u32..0x100).chain([0x2028, 0x1f600]) {
            every.push(char::from_u32(c).unwrap());
        }
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}",
            &every,
        ] {
            let mut out = String::new();
            write_string(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn an_escape_is_found_at_any_offset() {
        for len in [1, 7, 8, 9, 16, 23, 40] {
            for at in 0..len {
                for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', 'é', '\u{7f}', ' '] {
                    let mut s: String = "abcdefgh".chars().cycle().take(len).collect();
                    s.replace_range(at..at + 1, &special.to_string());
                    let mut out = String::new();
                    write_string(&mut out, &s);
                    assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn floats_are_spelled_as_serde_json_spells_them() {
        for x in [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e16,
            1.5e-7,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let text = built(|b| b.float(x));
            assert_eq!(text, serde_json::to_string(&x).unwrap(), "{x}");
        }
    }

    #[test]
    fn non_finite_floats_and_bad_digits_are_refused() {
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Builder::new().float(x).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{x}");
        }
        for d in ["", "-", "01", "1.5", "1e3", "+1", " 1", "١"] {
            let err = Builder::new().digits(d).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{d:?}");
        }
        let huge = "9".repeat(400);
        let err = Builder::new().digits(&huge).unwrap_err();
        assert!(err.to_string().contains("400 digits"), "{err}");
        let big = format!("-{}", "9".repeat(300));
        assert_eq!(built(|b| b.digits(&big)), big);
        assert_eq!(built(|b| b.digits("0")), "0");
    }

    #[test]
    fn nesting_is_bounded_by_the_limit() {
        let mut b = Builder::new();
        for _ in 0..MAX_DEPTH {
            b.begin_array().unwrap();
        }
        let err = b.begin_object().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge);
        for _ in 0..MAX_DEPTH {
            b.end();
        }
        let text = b.finish().into_string();
        assert!(super::super::check(&text).is_ok());
    }

    /// Writes `value` through a builder, as a binding walks its own values.
    fn build(b: &mut Builder, value: &serde_json::Value) -> Result<()> {
        use serde_json::Value;
        match value {
            Value::Null => b.null(),
            Value::Bool(x) => b.bool(*x),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => b.int(i),
                (None, Some(u), _) => b.uint(u),
                (None, None, Some(x)) => b.float(x)?,
                _ => unreachable!("a serde_json number is one of the three"),
            },
            Value::String(s) => b.string(s),
            Value::Array(items) => {
                b.begin_array()?;
                for item in items {
                    build(b, item)?;
                }
                b.end();
            }
            Value::Object(entries) => {
                b.begin_object()?;
                for (k, v) in entries {
                    b.key(k);
                    build(b, v)?;
                }
                b.end();
            }
        }
        Ok(())
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn whatever_is_built_is_what_serde_json_writes_and_passes_the_check() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(2_000), |(value in any_value())| {
            let mut b = Builder::new();
            build(&mut b, &value).unwrap();
            let text = b.finish().into_string();
            prop_assert_eq!(&text, &serde_json::to_string(&value).unwrap());
            prop_assert!(super::super::check(&text).is_ok());
        });
    }

    #[test]
    #[should_panic(expected = "an object's value without a key")]
    fn a_value_without_a_key_is_a_bug() {
        let mut b = Builder::new();
        b.begin_object().unwrap();
        b.null();
    }

    #[test]
    #[should_panic(expected = "finish before the value is complete")]
    fn an_unclosed_container_is_a_bug() {
        let mut b = Builder::new();
        b.begin_array().unwrap();
        b.finish();
    }

    #[test]
    #[should_panic(expected = "a second top-level value")]
    fn two_top_level_values_are_a_bug() {
        let mut b = Builder::new();
        b.null();
        b.null();
    }
}

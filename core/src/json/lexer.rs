//! JSON text read lexeme by lexeme: the lexical half of [`super::Reader`].
//!
//! A [`Lexer`] only moves over bytes it has seen, so it never passes the end; every
//! slice it takes starts and ends next to an ASCII byte (a quote, a backslash, a
//! digit), so it lies on character boundaries, and is taken with `get` all the same:
//! no input makes it panic.

use super::scan;

/// Most digits an integer may have to be read without overflow checks: 19 digits stay
/// below 10^19, which is less than 2^64.
const FAST_DIGITS: usize = 19;

/// The text made no sense at this byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unexpected(pub(super) usize);

/// A number as read, without loss: integers exact at any size, other numbers rounded
/// to the nearest double (as Python's `json.loads` and JavaScript read them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number<'t> {
    /// An integer that fits an i64.
    Int(i64),
    /// A positive integer above `i64::MAX` that fits a u64.
    Unsigned(u64),
    /// An integer too large for both, as its digits (and sign).
    Big(&'t str),
    /// A number with a fraction or an exponent, rounded to the nearest double.
    Float(f64),
}

/// A string as read: borrowed from the text when it holds no escape, else decoded into
/// the lexer's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Str<'t> {
    /// The text between the quotes, as it stands.
    Text(&'t str),
    /// Decoded into the buffer given to [`Lexer::string`].
    Unescaped,
}

/// A position in a JSON text.
pub(super) struct Lexer<'t> {
    text: &'t str,
    pos: usize,
}

impl<'t> Lexer<'t> {
    pub(super) fn new(text: &'t str) -> Lexer<'t> {
        Lexer { text, pos: 0 }
    }

    /// The byte offset of the next byte.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// The error at the current position.
    pub(super) fn unexpected(&self) -> Unexpected {
        Unexpected(self.pos)
    }

    /// Whether the whole text was read.
    #[inline(always)]
    pub(super) fn at_end(&self) -> bool {
        self.pos == self.text.len()
    }

    /// The next byte, not stepped over.
    #[inline(always)]
    pub(super) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// Steps over `b` when it comes next.
    #[inline(always)]
    pub(super) fn eat(&mut self, b: u8) -> bool {
        let next = self.peek() == Some(b);
        self.pos += usize::from(next);
        next
    }

    /// Steps over JSON's whitespace.
    #[inline(always)]
    pub(super) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// Steps over `word` (`true`, `false`, `null`).
    pub(super) fn literal(&mut self, word: &str) -> Result<(), Unexpected> {
        if !self.rest().starts_with(word.as_bytes()) {
            return Err(self.unexpected());
        }
        self.pos += word.len();
        Ok(())
    }

    /// Reads a number: an integer when it has neither fraction nor exponent, else a
    /// float.
    #[inline(always)]
    pub(super) fn number(&mut self) -> Result<Number<'t>, Unexpected> {
        let start = self.pos;
        let negative = self.eat(b'-');
        let digits = self.pos;
        // The integer part's value, exact while it has at most FAST_DIGITS digits.
        let mut magnitude = 0u64;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    magnitude = magnitude.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    self.pos += 1;
                }
            }
            _ => return Err(self.unexpected()),
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return self.float(start);
        }
        if self.pos - digits > FAST_DIGITS {
            return self.long_integer(start, negative, digits);
        }
        if negative {
            return match 0i64.checked_sub_unsigned(magnitude) {
                Some(n) => Ok(Number::Int(n)),
                None => self.slice(start, self.pos).map(Number::Big),
            };
        }
        Ok(i64::try_from(magnitude).map_or(Number::Unsigned(magnitude), Number::Int))
    }

    /// The rest of a number from its fraction or exponent (at the lexer), started at
    /// `start`: rounded to the nearest double.
    #[inline(never)]
    fn float(&mut self, start: usize) -> Result<Number<'t>, Unexpected> {
        if self.eat(b'.') {
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        // Rust rounds a decimal to the nearest double exactly, as Python does.
        self.slice(start, self.pos)?
            .parse()
            .map(Number::Float)
            .map_err(|_| Unexpected(start))
    }

    /// An integer of more than [`FAST_DIGITS`] digits (from `digits`, its sign before
    /// them), which ended at the lexer: read again with overflow checks.
    #[inline(never)]
    fn long_integer(
        &self,
        start: usize,
        negative: bool,
        digits: usize,
    ) -> Result<Number<'t>, Unexpected> {
        let magnitude = self
            .text
            .as_bytes()
            .get(digits..self.pos)
            .unwrap_or_default()
            .iter()
            .try_fold(0u64, |m, &d| {
                m.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            });
        let small = match (negative, magnitude) {
            (false, Some(m)) => Some(i64::try_from(m).map_or(Number::Unsigned(m), Number::Int)),
            (true, Some(m)) => 0i64.checked_sub_unsigned(m).map(Number::Int),
            (_, None) => None,
        };
        match small {
            Some(n) => Ok(n),
            None => self.slice(start, self.pos).map(Number::Big),
        }
    }

    /// Reads a string from its opening quote through its closing one: borrowed when it
    /// holds no escape, else decoded into `unescaped` (cleared first).
    #[inline(always)]
    pub(super) fn string(&mut self, unescaped: &mut String) -> Result<Str<'t>, Unexpected> {
        if !self.eat(b'"') {
            return Err(self.unexpected());
        }
        let start = self.pos;
        self.skip_to_quote_or_backslash()?;
        if self.eat(b'"') {
            return self.slice(start, self.pos - 1).map(Str::Text);
        }
        self.escaped(start, unescaped)
    }

    /// The rest of a string from its first backslash (at the lexer), its text since
    /// `start` decoded into `unescaped`.
    #[inline(never)]
    fn escaped(&mut self, start: usize, unescaped: &mut String) -> Result<Str<'t>, Unexpected> {
        unescaped.clear();
        let mut run = start;
        loop {
            // At a quote or a backslash, after text without escapes.
            unescaped.push_str(self.slice(run, self.pos)?);
            if self.eat(b'"') {
                return Ok(Str::Unescaped);
            }
            let backslash = self.pos;
            self.pos += 1;
            let escape = self.peek().ok_or(Unexpected(backslash))?;
            self.pos += 1;
            unescaped.push(match escape {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return Err(Unexpected(backslash)),
            });
            run = self.pos;
            self.skip_to_quote_or_backslash()?;
        }
    }

    #[inline(always)]
    fn rest(&self) -> &'t [u8] {
        self.text.as_bytes().get(self.pos..).unwrap_or_default()
    }

    /// `text[from..to]`, as an error if that is no slice of it.
    #[inline(always)]
    fn slice(&self, from: usize, to: usize) -> Result<&'t str, Unexpected> {
        self.text.get(from..to).ok_or(Unexpected(from))
    }

    /// Steps over one digit or more.
    fn digits(&mut self) -> Result<(), Unexpected> {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.unexpected());
        }
        Ok(())
    }

    /// Moves to the next quote or backslash, over text without control characters
    /// (an unterminated string, or a raw control character in it, is an error).
    #[inline(always)]
    fn skip_to_quote_or_backslash(&mut self) -> Result<(), Unexpected> {
        self.pos =
            scan::to_quote_or_backslash(self.text.as_bytes(), self.pos).map_err(Unexpected)?;
        Ok(())
    }

    /// Decodes the `XXXX` of `\uXXXX`, joined with a following `\uXXXX` when the two
    /// are a surrogate pair; an unpaired surrogate is U+FFFD.
    fn unicode_escape(&mut self) -> Result<char, Unexpected> {
        let unit = self.hex4()?;
        if (0xD800..0xDC00).contains(&unit) && self.rest().starts_with(b"\\u") {
            let high_end = self.pos;
            self.pos += 2;
            let low = self.hex4()?;
            if (0xDC00..0xE000).contains(&low) {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            // Not a pair: the second escape is read on its own.
            self.pos = high_end;
        }
        Ok(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Result<u32, Unexpected> {
        let digits = self.rest().get(..4).ok_or(self.unexpected())?;
        let mut unit = 0;
        for &d in digits {
            let v = char::from(d).to_digit(16).ok_or(self.unexpected())?;
            unit = unit * 16 + v;
        }
        self.pos += 4;
        Ok(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> Result<(String, usize), Unexpected> {
        let mut at = Lexer::new(text);
        let mut buf = String::new();
        let s = match at.string(&mut buf)? {
            Str::Text(s) => s.to_owned(),
            Str::Unescaped => buf,
        };
        Ok((s, at.pos))
    }

    fn number(text: &str) -> Result<(Number<'_>, usize), Unexpected> {
        let mut at = Lexer::new(text);
        let n = at.number()?;
        Ok((n, at.pos))
    }

    #[test]
    fn strings_decode_every_escape() {
        assert_eq!(string(r#""plain é""#), Ok(("plain é".to_owned(), 10)));
        assert_eq!(string(r#""""#), Ok((String::new(), 2)));
        assert_eq!(
            string(r#""a\"b\\c\/d\b\f\n\r\te""#).unwrap().0,
            "a\"b\\c/d\u{8}\u{c}\n\r\te"
        );
        assert_eq!(string(r#""\u00e9\u0000x""#).unwrap().0, "é\0x");
        assert_eq!(string(r#""\uD83D\uDE00!""#).unwrap().0, "😀!");
        // The cursor stops right after the closing quote.
        assert_eq!(string(r#""a\n"rest"#).unwrap().1, 5);
    }

    #[test]
    fn unpaired_surrogates_become_replacement_characters() {
        assert_eq!(string(r#""\ud800""#).unwrap().0, "\u{fffd}");
        assert_eq!(string(r#""\udc00x""#).unwrap().0, "\u{fffd}x");
        // A high surrogate followed by an escape that is no low one: both are kept.
        assert_eq!(string(r#""\ud800\u0041""#).unwrap().0, "\u{fffd}A");
        assert_eq!(string(r#""\ud800\ud800\udc00""#).unwrap().0, "\u{fffd}𐀀");
    }

    #[test]
    fn malformed_strings_are_errors() {
        for (text, at) in [
            ("x", 0),
            (r#""abc"#, 4),
            (r#""\"#, 1),
            (r#""ab\"#, 3),
            (r#""\x""#, 1),
            (r#""\u12""#, 3),
            (r#""\u12G4""#, 3),
            (r#""\u+123""#, 3),
            (r#""\ud800\u12""#, 9),
            ("\"a\u{1f}\"", 2),
            ("\"a\\n\n\"", 4),
        ] {
            assert_eq!(string(text), Err(Unexpected(at)), "{text}");
        }
    }

    #[test]
    fn numbers_read_as_json_loads_reads_them() {
        for (text, n) in [
            ("0", Number::Int(0)),
            ("-0", Number::Int(0)),
            ("42", Number::Int(42)),
            ("-42", Number::Int(-42)),
            ("9223372036854775807", Number::Int(i64::MAX)),
            ("-9223372036854775808", Number::Int(i64::MIN)),
            ("9223372036854775808", Number::Unsigned(1 << 63)),
            ("18446744073709551615", Number::Unsigned(u64::MAX)),
            ("18446744073709551616", Number::Big("18446744073709551616")),
            ("-9223372036854775809", Number::Big("-9223372036854775809")),
            // Either side of the digits read without overflow checks (19).
            (
                "9999999999999999999",
                Number::Unsigned(9_999_999_999_999_999_999),
            ),
            ("-9999999999999999999", Number::Big("-9999999999999999999")),
            (
                "-1000000000000000000",
                Number::Int(-1_000_000_000_000_000_000),
            ),
            (
                "10000000000000000000",
                Number::Unsigned(10_000_000_000_000_000_000),
            ),
            (
                "-10000000000000000000",
                Number::Big("-10000000000000000000"),
            ),
            ("99999999999999999999", Number::Big("99999999999999999999")),
            ("1.0", Number::Float(1.0)),
            ("-0.0", Number::Float(-0.0)),
            ("1e5", Number::Float(1e5)),
            ("1E+5", Number::Float(1e5)),
            ("25e-1", Number::Float(2.5)),
            ("0.1", Number::Float(0.1)),
            ("5e-324", Number::Float(5e-324)),
            ("1e400", Number::Float(f64::INFINITY)),
        ] {
            assert_eq!(number(text), Ok((n, text.len())), "{text}");
        }
        // -0.0 keeps its sign.
        let Ok((Number::Float(x), _)) = number("-0.0") else {
            panic!("a float")
        };
        assert!(x.is_sign_negative());
        // A number ends where its grammar does; what follows is the caller's.
        assert_eq!(number("01"), Ok((Number::Int(0), 1)));
        assert_eq!(number("12,"), Ok((Number::Int(12), 2)));
    }

    #[test]
    fn malformed_numbers_are_errors() {
        for (text, at) in [
            ("-", 1),
            ("+1", 0),
            ("-x", 1),
            ("1.", 2),
            ("1.e5", 2),
            ("1e", 2),
            ("1e+", 3),
            (".5", 0),
        ] {
            assert_eq!(number(text), Err(Unexpected(at)), "{text}");
        }
    }

    #[test]
    fn literals_and_whitespace() {
        let mut at = Lexer::new(" \t\r\ntrue fals");
        at.skip_whitespace();
        assert_eq!(at.literal("true"), Ok(()));
        at.skip_whitespace();
        assert_eq!(at.literal("false"), Err(Unexpected(9)));
        assert!(!at.at_end());
    }

    #[test]
    fn no_text_makes_it_panic() {
        // Every prefix and every starting byte of tricky texts, read as each token.
        let texts = [
            r#""\ud83d\ude00\u""#,
            r"-12.5e+3",
            r#""é\"\\\u00"#,
            "\"\u{10348}\\",
            r"18446744073709551616.0e",
        ];
        for text in texts {
            for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
                for start in (0..=end).filter(|&s| text.is_char_boundary(s)) {
                    let piece = &text[start..end];
                    let _ = string(piece);
                    let _ = number(piece);
                    let _ = Lexer::new(piece).literal("true");
                }
            }
        }
    }
}

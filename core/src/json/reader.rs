//! JSON text as a stream of tokens, in document order: the one reader a binding builds
//! its own values from (the Python module's dicts and lists), so no binding keeps a
//! lexer of its own.
//!
//! A [`Reader`] pulls one [`Token`] at a time and checks the grammar as it goes: a
//! malformed text ends in a [`ReadError`] naming the byte, and nesting is counted on a
//! fixed bit stack, so depth costs neither heap nor thread stack. It reads what
//! `json.loads` reads and gives what it gives: keys in text order (a repeated key comes
//! again, for the caller to treat as `json.loads` does), integers exact at any size,
//! other numbers rounded to the nearest double, escapes decoded with surrogate pairs
//! joined. One difference: an unpaired surrogate escape (`"\ud800"`) becomes U+FFFD,
//! as a Rust `str` cannot hold a lone surrogate. Whitespace is allowed where JSON
//! allows it; `NaN` and the infinities are not JSON and are refused.

use std::fmt;

use super::lexer::{Lexer, Str, Unexpected};

pub use super::lexer::Number;

/// Deepest nesting a [`Reader`] can track; a deeper `max_depth` is this.
pub const MAX_READ_DEPTH: usize = 64 * STACK_WORDS;

/// Words of the bit stack.
const STACK_WORDS: usize = 16;

/// One step through a JSON text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Token<'a> {
    /// `{`: the object's keys and values follow, then [`Token::EndObject`].
    BeginObject,
    /// `}`.
    EndObject,
    /// `[`: the array's items follow, then [`Token::EndArray`].
    BeginArray,
    /// `]`.
    EndArray,
    /// An object's key, decoded; its value comes next.
    Key(&'a str),
    /// A string value, decoded.
    String(&'a str),
    /// A number.
    Number(Number<'a>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

/// Why a [`Reader`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// Not well-formed JSON.
    Syntax,
    /// Nested deeper than the reader's `max_depth`.
    TooDeep,
}

/// A text a [`Reader`] refused: why, and at which byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadError {
    kind: ReadErrorKind,
    at: usize,
}

impl ReadError {
    /// Why the text was refused.
    pub fn kind(&self) -> ReadErrorKind {
        self.kind
    }

    /// The byte offset of the first byte that made no sense (for depth, the bracket
    /// one level too deep).
    pub fn at(&self) -> usize {
        self.at
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ReadErrorKind::Syntax => write!(f, "invalid JSON at byte {}", self.at),
            ReadErrorKind::TooDeep => write!(f, "JSON nesting too deep at byte {}", self.at),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<Unexpected> for ReadError {
    fn from(Unexpected(at): Unexpected) -> ReadError {
        ReadError {
            kind: ReadErrorKind::Syntax,
            at,
        }
    }
}

/// What the reader expects next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// A value.
    Value,
    /// The first key of an object, or its `}`.
    FirstKey,
    /// The first item of an array, or its `]`.
    FirstItem,
    /// After a member of an object: a comma and the next key, or the object's `}`.
    NextKey,
    /// After an item of an array: a comma and the next item, or the array's `]`.
    NextItem,
    /// After the top-level value: the end of the text.
    End,
    /// Nothing: the text was read whole, or refused.
    Done,
}

/// Reads the tokens of one JSON text; see the module documentation.
///
/// ```
/// use inboxlog::json::{Number, Reader, Token};
///
/// let mut reader = Reader::new(r#"{"a":[1,"\u00e9"]}"#, 8);
/// let mut tokens = Vec::new();
/// while let Some(token) = reader.next_token().unwrap() {
///     tokens.push(format!("{token:?}"));
/// }
/// assert_eq!(tokens.len(), 7);
/// assert_eq!(tokens[3], format!("{:?}", Token::Number(Number::Int(1))));
/// assert_eq!(tokens[4], r#"String("é")"#);
/// ```
pub struct Reader<'t> {
    lexer: Lexer<'t>,
    expect: Expect,
    /// What comes after a value in the innermost open container ([`Expect::NextKey`],
    /// [`Expect::NextItem`], or [`Expect::End`] at the top level): kept as containers
    /// open and close, so a scalar costs no look at the bit stack.
    after_value: Expect,
    /// Open containers.
    depth: usize,
    max_depth: usize,
    /// Bit `n` tells whether the container at depth `n + 1` is an object.
    objects: [u64; STACK_WORDS],
    /// The decoded text of the last string with escapes.
    unescaped: String,
}

impl<'t> Reader<'t> {
    /// A reader of `text` that refuses nesting deeper than `max_depth` containers
    /// (at most [`MAX_READ_DEPTH`]).
    pub fn new(text: &'t str, max_depth: usize) -> Reader<'t> {
        Reader::with_buffer(text, max_depth, String::new())
    }

    /// [`Reader::new`] decoding escaped strings into `buffer`, one handed back by
    /// [`Reader::into_buffer`] after an earlier text: a caller reading many texts
    /// allocates it once.
    pub fn with_buffer(text: &'t str, max_depth: usize, buffer: String) -> Reader<'t> {
        Reader {
            lexer: Lexer::new(text),
            expect: Expect::Value,
            after_value: Expect::End,
            depth: 0,
            max_depth: max_depth.min(MAX_READ_DEPTH),
            objects: [0; STACK_WORDS],
            unescaped: buffer,
        }
    }

    /// The buffer of escaped strings, for the next reader.
    pub fn into_buffer(self) -> String {
        self.unescaped
    }

    /// The next token, or `None` once the value is complete and nothing but
    /// whitespace follows it. After an error the reader stays at its end: every later
    /// call answers `None`. (Not an `Iterator`: a token may borrow the reader's
    /// buffer.)
    #[inline(always)]
    pub fn next_token(&mut self) -> Result<Option<Token<'_>>, ReadError> {
        self.lexer.skip_whitespace();
        // Every path that succeeds says what comes next; an error leaves `Done`.
        match std::mem::replace(&mut self.expect, Expect::Done) {
            Expect::Value => self.value().map(Some),
            Expect::FirstKey => {
                if self.lexer.eat(b'}') {
                    return Ok(Some(self.close(true)));
                }
                self.key().map(Some)
            }
            Expect::FirstItem => {
                if self.lexer.eat(b']') {
                    return Ok(Some(self.close(false)));
                }
                self.value().map(Some)
            }
            Expect::NextKey => {
                if self.lexer.eat(b',') {
                    self.lexer.skip_whitespace();
                    return self.key().map(Some);
                }
                if self.lexer.eat(b'}') {
                    return Ok(Some(self.close(true)));
                }
                Err(self.lexer.unexpected().into())
            }
            Expect::NextItem => {
                if self.lexer.eat(b',') {
                    self.lexer.skip_whitespace();
                    return self.value().map(Some);
                }
                if self.lexer.eat(b']') {
                    return Ok(Some(self.close(false)));
                }
                Err(self.lexer.unexpected().into())
            }
            Expect::End => {
                if self.lexer.at_end() {
                    return Ok(None);
                }
                Err(self.lexer.unexpected().into())
            }
            Expect::Done => Ok(None),
        }
    }

    /// A value at the lexer: a scalar whole, or a container opened.
    #[inline(always)]
    fn value(&mut self) -> Result<Token<'_>, ReadError> {
        let lexer = &mut self.lexer;
        let token = match lexer.peek() {
            Some(b'{') => return self.open(true),
            Some(b'[') => return self.open(false),
            Some(b'"') => {
                let s = lexer.string(&mut self.unescaped)?;
                self.expect = self.after_value;
                return Ok(Token::String(match s {
                    Str::Text(s) => s,
                    Str::Unescaped => &self.unescaped,
                }));
            }
            Some(b't') => {
                lexer.literal("true")?;
                Token::Bool(true)
            }
            Some(b'f') => {
                lexer.literal("false")?;
                Token::Bool(false)
            }
            Some(b'n') => {
                lexer.literal("null")?;
                Token::Null
            }
            Some(b'-' | b'0'..=b'9') => Token::Number(lexer.number()?),
            _ => return Err(lexer.unexpected().into()),
        };
        self.expect = self.after_value;
        Ok(token)
    }

    /// A key at the lexer, and the colon after it.
    #[inline(always)]
    fn key(&mut self) -> Result<Token<'_>, ReadError> {
        let key = self.lexer.string(&mut self.unescaped)?;
        self.lexer.skip_whitespace();
        if !self.lexer.eat(b':') {
            return Err(self.lexer.unexpected().into());
        }
        self.expect = Expect::Value;
        Ok(Token::Key(match key {
            Str::Text(s) => s,
            Str::Unescaped => &self.unescaped,
        }))
    }

    /// Opens the container whose bracket is at the lexer.
    #[inline]
    fn open(&mut self, object: bool) -> Result<Token<'static>, ReadError> {
        if self.depth >= self.max_depth {
            return Err(ReadError {
                kind: ReadErrorKind::TooDeep,
                at: self.lexer.pos(),
            });
        }
        self.lexer.eat(if object { b'{' } else { b'[' });
        let (word, bit) = (self.depth / 64, self.depth % 64);
        self.objects[word] = self.objects[word] & !(1 << bit) | (u64::from(object) << bit);
        self.depth += 1;
        if object {
            (self.expect, self.after_value) = (Expect::FirstKey, Expect::NextKey);
            Ok(Token::BeginObject)
        } else {
            (self.expect, self.after_value) = (Expect::FirstItem, Expect::NextItem);
            Ok(Token::BeginArray)
        }
    }

    /// Closes the innermost container, an object or not, whose bracket was just read:
    /// what follows a value is now the enclosing container's (one look at the bit
    /// stack per container, not per value).
    #[inline]
    fn close(&mut self, object: bool) -> Token<'static> {
        self.depth -= 1;
        self.after_value = match self.depth.checked_sub(1) {
            None => Expect::End,
            Some(top) if self.objects[top / 64] >> (top % 64) & 1 == 1 => Expect::NextKey,
            Some(_) => Expect::NextItem,
        };
        self.expect = self.after_value;
        if object {
            Token::EndObject
        } else {
            Token::EndArray
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokens of `text`, spelled, or the error.
    fn tokens(text: &str, max_depth: usize) -> Result<Vec<String>, ReadError> {
        let mut reader = Reader::new(text, max_depth);
        let mut out = Vec::new();
        while let Some(token) = reader.next_token()? {
            out.push(match token {
                Token::BeginObject => "{".to_owned(),
                Token::EndObject => "}".to_owned(),
                Token::BeginArray => "[".to_owned(),
                Token::EndArray => "]".to_owned(),
                Token::Key(k) => format!("{k}:"),
                Token::String(s) => format!("'{s}'"),
                Token::Number(n) => format!("{n:?}"),
                Token::Bool(b) => b.to_string(),
                Token::Null => "null".to_owned(),
            });
        }
        assert_eq!(reader.next_token(), Ok(None), "{text}");
        Ok(out)
    }

    fn syntax(at: usize) -> ReadError {
        ReadError {
            kind: ReadErrorKind::Syntax,
            at,
        }
    }

    #[test]
    fn tokens_come_in_document_order() {
        let got = tokens(
            r#"{"b":[1,-2.5,"x\n",true,false,null,{},[]],"a":{"k":"v"},"b":0}"#,
            8,
        )
        .unwrap();
        let want = [
            "{",
            "b:",
            "[",
            "Int(1)",
            "Float(-2.5)",
            "'x\n'",
            "true",
            "false",
            "null",
            "{",
            "}",
            "[",
            "]",
            "]",
            "a:",
            "{",
            "k:",
            "'v'",
            "}",
            "b:",
            "Int(0)",
            "}",
        ];
        assert_eq!(got, want);
        assert_eq!(tokens("7", 0).unwrap(), ["Int(7)"]);
        assert_eq!(tokens(r#""s""#, 0).unwrap(), ["'s'"]);
        assert_eq!(
            tokens("123456789012345678901234567890", 0).unwrap(),
            [r#"Big("123456789012345678901234567890")"#]
        );
    }

    #[test]
    fn whitespace_is_allowed_where_json_allows_it() {
        let spaced = " { \"a\" : [ 1 , { } , \"\\u00e9\" ] , \"b\"\t:\r\nnull } \n";
        assert_eq!(
            tokens(spaced, 8).unwrap(),
            [
                "{", "a:", "[", "Int(1)", "{", "}", "'é'", "]", "b:", "null", "}"
            ]
        );
    }

    #[test]
    fn keys_and_strings_with_escapes_are_decoded() {
        assert_eq!(
            tokens(r#"{"\u0061\"":"\ud83d\ude00","k":"\ud800"}"#, 1).unwrap(),
            ["{", "a\":", "'😀'", "k:", "'\u{fffd}'", "}"]
        );
    }

    #[test]
    fn malformed_texts_name_the_byte() {
        for (text, at) in [
            ("", 0),
            ("  ", 2),
            ("{", 1),
            ("[", 1),
            ("[1", 2),
            ("[1,]", 3),
            ("[,1]", 1),
            ("{\"a\"}", 4),
            ("{\"a\":}", 5),
            ("{\"a\":1,}", 7),
            ("{1:2}", 1),
            ("{\"a\":1]", 6),
            ("[1}", 2),
            ("[1 2]", 3),
            ("1 2", 2),
            ("{}x", 2),
            ("nul", 0),
            ("NaN", 0),
            ("[-Infinity]", 2),
            ("\"abc", 4),
            ("\"\\x\"", 1),
            ("[\"a\" \"b\"]", 5),
        ] {
            assert_eq!(tokens(text, 8), Err(syntax(at)), "{text:?}");
        }
    }

    #[test]
    fn depth_counts_every_container_and_stops_at_the_limit() {
        let at = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(tokens(&at(3), 3).is_ok());
        let err = tokens(&at(4), 3).unwrap_err();
        assert_eq!(err.kind(), ReadErrorKind::TooDeep);
        assert_eq!(err.at(), 3);
        assert_eq!(err.to_string(), "JSON nesting too deep at byte 3");
        // Empty containers count too, objects as arrays do.
        assert!(tokens("[{}]", 1).is_err());
        assert!(tokens(r#"{"a":{"b":[]}}"#, 3).is_ok());
        // The bit stack at its full height, objects and arrays in turn.
        let deep = format!(
            "{}1{}",
            "[{\"k\":".repeat(MAX_READ_DEPTH / 2),
            "}]".repeat(MAX_READ_DEPTH / 2)
        );
        assert!(tokens(&deep, usize::MAX).is_ok());
        let deeper = format!("[{deep}]");
        assert_eq!(
            tokens(&deeper, usize::MAX).unwrap_err().kind(),
            ReadErrorKind::TooDeep
        );
    }

    #[test]
    fn an_error_ends_the_reading() {
        let mut reader = Reader::new("[1,x]", 4);
        assert_eq!(reader.next_token(), Ok(Some(Token::BeginArray)));
        assert_eq!(reader.next_token(), Ok(Some(Token::Number(Number::Int(1)))));
        assert_eq!(reader.next_token(), Err(syntax(3)));
        assert_eq!(reader.next_token(), Ok(None));
    }

    #[test]
    fn a_buffer_serves_the_next_reader() {
        let mut reader = Reader::new(r#""a\nb""#, 0);
        assert_eq!(reader.next_token(), Ok(Some(Token::String("a\nb"))));
        let buffer = reader.into_buffer();
        assert!(buffer.capacity() >= 3);
        let mut reader = Reader::with_buffer(r#"["\t"]"#, 1, buffer);
        assert_eq!(reader.next_token(), Ok(Some(Token::BeginArray)));
        assert_eq!(reader.next_token(), Ok(Some(Token::String("\t"))));
    }

    /// Texts built from random pieces: the reader takes exactly what serde_json takes
    /// (within its depth), and never panics. (serde_json refuses a lone surrogate
    /// escape, which the reader decodes as U+FFFD: no piece holds one.)
    #[test]
    fn accepts_what_serde_json_accepts() {
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
            "-",
            "true",
            "nul",
            " ",
            "\"x",
            "é",
            "\u{1}",
        ]);
        proptest!(ProptestConfig::with_cases(20_000), |(parts in prop::collection::vec(piece, 0..14))| {
            let text: String = parts.concat();
            let ours = tokens(&text, 64).is_ok();
            let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
            prop_assert_eq!(ours, theirs, "{:?}", text);
        });
    }
}

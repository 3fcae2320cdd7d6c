//! JSON text → Python objects, in one pass over the text with no intermediate tree.
//!
//! The tokens come from the core's one JSON reader (`inboxlog::json::Reader`); this
//! module only turns them into Python objects. The text comes from the core (compact,
//! validated when it was stored), yet the loader relies on none of that for safety: the
//! reader never reads past the text nor panics; a malformed text raises `RuntimeError`
//! naming the byte; nesting is bounded by the reader and the containers being built sit
//! on an explicit stack, so depth costs heap, never thread stack.
//!
//! Values come out as `json.loads` gives them: keys in text order (a repeated key keeps
//! its first place and its last value, as a dict does), integers exact at any size
//! (`-0` is the int 0), a number with a fraction or an exponent a float rounded exactly
//! as `float(token)` rounds it, escapes decoded with surrogate pairs joined. One
//! difference: an unpaired surrogate escape (`"\ud800"`, which no Python host can
//! append) becomes U+FFFD, as a str built from Rust text cannot hold a lone surrogate.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use inboxlog::json::{self, Number, ReadError, Reader, Token};

/// Deepest nesting read. The core bounds data and messages at [`json::MAX_DEPTH`]; the
/// records that wrap them (a proposal around its messages, a splice record around the
/// messages it inserts) add a few levels.
const MAX_NESTING: usize = json::MAX_DEPTH + 16;

/// Object keys longer than this are made afresh every time (long keys seldom repeat).
const CACHED_KEY_BYTES: usize = 32;

/// Slots of the key cache (a power of two).
const KEY_SLOTS: usize = 256;

/// Texts a loader must be made for to keep a key cache: setting the cache up and
/// dropping it costs about as much as reading a dozen small objects.
const CACHE_FROM_TEXTS: usize = 16;

/// The Python value of the JSON text `text`.
pub(crate) fn to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    Loader::new(py).load(text)
}

/// Builds Python values from JSON texts, reusing its buffers from one text to the next.
/// A loader made for many texts also keeps a key cache: the events of one read then
/// share the Python str of each repeated key (allocated and hashed once).
pub(crate) struct Loader<'py> {
    py: Python<'py>,
    strings: Strings<'py>,
    /// The reader's buffer for strings with escapes, kept from one text to the next.
    buffer: String,
    /// The containers open around the current value, innermost last.
    open: Vec<Open<'py>>,
    /// The items read so far of the open arrays, each array's from its `start` on.
    items: Vec<Bound<'py, PyAny>>,
}

/// A container being read.
enum Open<'py> {
    /// A dict, and the key of the value being read (`None` before the first key).
    Object {
        dict: Bound<'py, PyDict>,
        key: Option<Bound<'py, PyString>>,
    },
    /// An array whose items so far sit in [`Loader::items`] from `start` on.
    Array { start: usize },
}

impl<'py> Loader<'py> {
    /// A loader for one text or a few: no key cache, whose setting up would cost more
    /// than it saves.
    pub(crate) fn new(py: Python<'py>) -> Loader<'py> {
        Loader {
            py,
            strings: Strings {
                py,
                cache: Vec::new(),
            },
            buffer: String::new(),
            open: Vec::new(),
            items: Vec::new(),
        }
    }

    /// A loader for `count` texts, with a key cache when they are enough to repay it.
    pub(crate) fn for_texts(py: Python<'py>, count: usize) -> Loader<'py> {
        let mut loader = Loader::new(py);
        if count >= CACHE_FROM_TEXTS {
            loader.strings.cache.resize_with(KEY_SLOTS, || None);
        }
        loader
    }

    /// The Python str of `text`, through the key cache when there is one (for a value
    /// that repeats like a key, e.g. an event type).
    pub(crate) fn cached_str(&mut self, text: &str) -> Bound<'py, PyString> {
        self.strings.cached(text)
    }

    /// The Python value of the JSON text `text`.
    pub(crate) fn load(&mut self, text: &str) -> PyResult<Bound<'py, PyAny>> {
        // A failed load may have left containers open.
        self.open.clear();
        self.items.clear();
        let mut reader = Reader::with_buffer(text, MAX_NESTING, std::mem::take(&mut self.buffer));
        let value = self.values(&mut reader);
        self.buffer = reader.into_buffer();
        value
    }

    /// Builds the value the reader's tokens spell.
    fn values(&mut self, reader: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        loop {
            let value = match reader.next_token().map_err(raise)? {
                Some(Token::BeginObject) => {
                    let dict = PyDict::new(py);
                    self.open.push(Open::Object { dict, key: None });
                    continue;
                }
                Some(Token::Key(text)) => {
                    if let Some(Open::Object { key, .. }) = self.open.last_mut() {
                        *key = Some(self.strings.cached(text));
                    }
                    continue;
                }
                Some(Token::BeginArray) => {
                    let start = self.items.len();
                    self.open.push(Open::Array { start });
                    continue;
                }
                Some(Token::EndObject | Token::EndArray) => match self.open.pop() {
                    Some(Open::Object { dict, .. }) => dict.into_any(),
                    Some(Open::Array { start }) => {
                        PyList::new(py, self.items.drain(start..))?.into_any()
                    }
                    None => return Err(unbalanced()),
                },
                Some(Token::String(text)) => PyString::new(py, text).into_any(),
                Some(Token::Number(n)) => number(py, n)?,
                Some(Token::Bool(b)) => PyBool::new(py, b).to_owned().into_any(),
                Some(Token::Null) => py.None().into_bound(py),
                None => return Err(unbalanced()),
            };
            // The value is complete: it goes into its container, or is the whole text.
            match self.open.last_mut() {
                None => {
                    // Nothing but whitespace may follow.
                    return match reader.next_token().map_err(raise)? {
                        None => Ok(value),
                        Some(_) => Err(unbalanced()),
                    };
                }
                Some(Open::Object { dict, key }) => match key {
                    Some(key) => dict.set_item(&*key, value)?,
                    None => return Err(unbalanced()),
                },
                Some(Open::Array { .. }) => self.items.push(value),
            }
        }
    }
}

/// Keeps one Python str per repeated key in a small cache.
struct Strings<'py> {
    py: Python<'py>,
    /// The key cache: [`KEY_SLOTS`] slots, each the last key (text and str) whose hash
    /// chose it; empty when the loader keeps no cache.
    cache: Vec<Option<(KeyText, Bound<'py, PyString>)>>,
}

impl<'py> Strings<'py> {
    /// The str of `text` from the cache.
    fn cached(&mut self, text: &str) -> Bound<'py, PyString> {
        cached(&mut self.cache, self.py, text)
    }
}

/// The str of `text` from `cache`: the one made last time when its slot still holds
/// it, else a new one that takes the slot. Without a cache, or for a long text, a new
/// str.
fn cached<'py>(
    cache: &mut [Option<(KeyText, Bound<'py, PyString>)>],
    py: Python<'py>,
    text: &str,
) -> Bound<'py, PyString> {
    if cache.is_empty() {
        return PyString::new(py, text);
    }
    let Some(known) = KeyText::new(text) else {
        return PyString::new(py, text);
    };
    let slot = &mut cache[known.slot()];
    if let Some((held, key)) = slot
        && *held == known
    {
        return key.clone();
    }
    let key = PyString::new(py, text);
    *slot = Some((known, key.clone()));
    key
}

/// A key of at most [`CACHED_KEY_BYTES`] as its length and four words (its bytes,
/// zero-padded): hashed and compared in a few word operations, whatever its length,
/// and kept without an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
struct KeyText {
    len: usize,
    words: [u64; CACHED_KEY_BYTES / 8],
}

impl KeyText {
    /// `text` as a cache key; `None` when it is too long to be cached.
    #[inline]
    fn new(text: &str) -> Option<KeyText> {
        let mut bytes = [0u8; CACHED_KEY_BYTES];
        bytes
            .get_mut(..text.len())?
            .copy_from_slice(text.as_bytes());
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        Some(KeyText {
            len: text.len(),
            words: std::array::from_fn(word),
        })
    }

    /// The key's slot: its words and length folded, multiplied by a large odd constant
    /// (Fibonacci hashing), the top bits kept.
    #[inline]
    fn slot(&self) -> usize {
        let [a, b, c, d] = self.words;
        let folded =
            a ^ b.rotate_left(16) ^ c.rotate_left(32) ^ d.rotate_left(48) ^ self.len as u64;
        (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - KEY_SLOTS.trailing_zeros())) as usize
    }
}

/// The Python value of a number token: an int of any size, or a float.
fn number<'py>(py: Python<'py>, n: Number<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match n {
        Number::Int(i) => i.into_pyobject(py)?.into_any(),
        Number::Unsigned(u) => u.into_pyobject(py)?.into_any(),
        Number::Big(digits) => py.get_type::<PyInt>().call1((digits,))?,
        Number::Float(x) => PyFloat::new(py, x).into_any(),
    })
}

/// The exception for a text that makes no sense: the core handed over something it
/// never writes.
fn raise(e: ReadError) -> PyErr {
    PyRuntimeError::new_err(format!(
        "inboxlog: unexpected JSON from the core at byte {}",
        e.at()
    ))
}

/// The exception for tokens out of order, which the reader never gives.
fn unbalanced() -> PyErr {
    PyRuntimeError::new_err("inboxlog: JSON tokens out of order from the core's reader")
}

//! JSON text → Python objects, in one pass over the text with no intermediate tree.
//!
//! The text comes from the core (compact, validated when it was stored), yet the loader
//! relies on none of that for safety: its tokens come from a [`Cursor`], which never
//! reads past the text nor panics; a malformed text raises `RuntimeError` naming the
//! byte; nesting is counted on an explicit stack, so depth costs heap, never thread
//! stack.
//!
//! Values come out as `json.loads` gives them: keys in text order (a repeated key keeps
//! its first place and its last value), integers exact at any size (`-0` is the int
//! 0), a number with a fraction or an exponent a float rounded exactly as
//! `float(token)` rounds it, escapes decoded with surrogate pairs joined. One
//! difference: an unpaired surrogate escape (`"\ud800"`, which no Python host can
//! append) becomes U+FFFD, as a str built from Rust text cannot hold a lone surrogate.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use inboxlog::json;

use super::cursor::{Cursor, Number, Unexpected};

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
    /// The containers open around the current value, innermost last.
    open: Vec<Open<'py>>,
    /// The items read so far of the open arrays, each array's from its `start` on.
    items: Vec<Bound<'py, PyAny>>,
}

/// A container being read.
enum Open<'py> {
    /// A dict, and the key of the value being read.
    Object {
        dict: Bound<'py, PyDict>,
        key: Bound<'py, PyString>,
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
                unescaped: String::new(),
            },
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
        let py = self.py;
        let mut at = Cursor::new(text);
        loop {
            // A value starts here: a scalar is read whole, a container is opened.
            at.skip_whitespace();
            let mut value = match at.peek() {
                Some(b'{') => {
                    at.eat(b'{');
                    at.skip_whitespace();
                    if at.eat(b'}') {
                        PyDict::new(py).into_any()
                    } else {
                        let key = self.strings.key(&mut at)?;
                        let dict = PyDict::new(py);
                        self.enter(Open::Object { dict, key }, &at)?;
                        continue;
                    }
                }
                Some(b'[') => {
                    at.eat(b'[');
                    at.skip_whitespace();
                    if at.eat(b']') {
                        PyList::empty(py).into_any()
                    } else {
                        let start = self.items.len();
                        self.enter(Open::Array { start }, &at)?;
                        continue;
                    }
                }
                Some(b'"') => self.strings.value(&mut at)?.into_any(),
                Some(b't') => {
                    at.literal("true").map_err(raise)?;
                    PyBool::new(py, true).to_owned().into_any()
                }
                Some(b'f') => {
                    at.literal("false").map_err(raise)?;
                    PyBool::new(py, false).to_owned().into_any()
                }
                Some(b'n') => {
                    at.literal("null").map_err(raise)?;
                    py.None().into_bound(py)
                }
                Some(b'-' | b'0'..=b'9') => number(py, at.number().map_err(raise)?)?,
                _ => return Err(raise(at.unexpected())),
            };
            // The value is complete: it goes into its container, which it may complete
            // in turn.
            loop {
                at.skip_whitespace();
                match self.open.last_mut() {
                    None if at.at_end() => return Ok(value),
                    None => return Err(raise(at.unexpected())),
                    Some(Open::Object { dict, key }) => {
                        dict.set_item(&*key, value)?;
                        if at.eat(b',') {
                            *key = self.strings.key(&mut at)?;
                            break;
                        }
                        if !at.eat(b'}') {
                            return Err(raise(at.unexpected()));
                        }
                        value = dict.clone().into_any();
                    }
                    Some(Open::Array { start }) => {
                        self.items.push(value);
                        if at.eat(b',') {
                            break;
                        }
                        if !at.eat(b']') {
                            return Err(raise(at.unexpected()));
                        }
                        let start = *start;
                        value = PyList::new(py, self.items.drain(start..))?.into_any();
                    }
                }
                self.open.pop();
            }
        }
    }

    /// Opens a container, within [`MAX_NESTING`].
    fn enter(&mut self, container: Open<'py>, at: &Cursor<'_>) -> PyResult<()> {
        if self.open.len() == MAX_NESTING {
            return Err(raise(at.unexpected()));
        }
        self.open.push(container);
        Ok(())
    }
}

/// Reads strings: keys through a small cache, escaped text through one reused buffer.
struct Strings<'py> {
    py: Python<'py>,
    /// The key cache: [`KEY_SLOTS`] slots, each the last key (text and str) whose hash
    /// chose it; empty when the loader keeps no cache.
    cache: Vec<Option<(Box<str>, Bound<'py, PyString>)>>,
    /// The decoded text of a string with escapes.
    unescaped: String,
}

impl<'py> Strings<'py> {
    /// Reads an object key and the colon after it (whitespace allowed around both).
    fn key(&mut self, at: &mut Cursor<'_>) -> PyResult<Bound<'py, PyString>> {
        at.skip_whitespace();
        let text = at.string(&mut self.unescaped).map_err(raise)?;
        let key = cached(&mut self.cache, self.py, text);
        at.skip_whitespace();
        if !at.eat(b':') {
            return Err(raise(at.unexpected()));
        }
        Ok(key)
    }

    /// Reads a string value from its opening quote.
    fn value(&mut self, at: &mut Cursor<'_>) -> PyResult<Bound<'py, PyString>> {
        let text = at.string(&mut self.unescaped).map_err(raise)?;
        Ok(PyString::new(self.py, text))
    }

    /// The str of `text` from the cache.
    fn cached(&mut self, text: &str) -> Bound<'py, PyString> {
        cached(&mut self.cache, self.py, text)
    }
}

/// The str of `text` from `cache`: the one made last time when its slot still holds
/// it, else a new one that takes the slot. Without a cache, or for a long text, a new
/// str.
fn cached<'py>(
    cache: &mut [Option<(Box<str>, Bound<'py, PyString>)>],
    py: Python<'py>,
    text: &str,
) -> Bound<'py, PyString> {
    if cache.is_empty() || text.len() > CACHED_KEY_BYTES {
        return PyString::new(py, text);
    }
    let slot = &mut cache[slot_of(text.as_bytes())];
    if let Some((known, key)) = slot
        && **known == *text
    {
        return key.clone();
    }
    let key = PyString::new(py, text);
    *slot = Some((text.into(), key.clone()));
    key
}

/// The cache slot of a key: FNV-1a, enough spread for short keys.
fn slot_of(text: &[u8]) -> usize {
    let mut hash: u32 = 0x811c_9dc5;
    for &b in text {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    hash as usize & (KEY_SLOTS - 1)
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
fn raise(Unexpected(at): Unexpected) -> PyErr {
    PyRuntimeError::new_err(format!(
        "inboxlog: unexpected JSON from the core at byte {at}"
    ))
}

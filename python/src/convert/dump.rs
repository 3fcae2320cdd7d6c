//! Python objects ⇄ JSON text, without `json.dumps`/`json.loads` round trips.
//!
//! Python → JSON walks dict/list/tuple/str/int/float/bool/None into compact text: key
//! order kept, integers of any size written exactly, nesting counted on an explicit
//! stack (a self-referencing list is refused, never a stack overflow). JSON → Python parses
//! the text the core hands back (compact, already validated) into dicts and lists,
//! keeping key order and large integers.

use std::fmt::Write as _;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};

use inboxlog::json;

use crate::errors::{InvalidInputError, TooLargeError};

/// Deepest nesting accepted: the core's limit (ARCHITECTURE.md#limits). The walk below counts its own
/// open containers rather than leaving the depth to the core's check of the text it
/// writes, because a Python value may contain itself: the bound is what makes that
/// walk finite, and it names the path to the value, which text no longer knows.
const MAX_DEPTH: usize = json::MAX_DEPTH;

/// Path segments shown at most in an error.
const MAX_PATH_SHOWN: usize = 16;

enum Why {
    /// Not JSON: the message says what was found.
    Invalid(String),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A Python exception while reading the value.
    Py(PyErr),
}

impl From<PyErr> for Why {
    fn from(e: PyErr) -> Why {
        Why::Py(e)
    }
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

/// Compact JSON text of `value`; `root` names it in errors (`data["a"][2]: …`).
pub(crate) fn to_json(value: &Bound<'_, PyAny>, root: &str) -> PyResult<String> {
    let mut w = Writer {
        out: Vec::with_capacity(64),
        stack: Vec::new(),
    };
    match w.run(value) {
        Ok(()) => Ok(String::from_utf8(w.out).expect("the writer emits UTF-8")),
        Err(why) => Err(w.error(root, why)),
    }
}

/// Like [`to_json`] for a value that must be a dict or another mapping (`TypeError`
/// otherwise).
pub(crate) fn dict_to_json(value: &Bound<'_, PyAny>, root: &str) -> PyResult<String> {
    if !value.is_instance_of::<PyDict>() && value.cast::<PyMapping>().is_err() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{root} must be a dict, not {}",
            type_name(value)
        )));
    }
    to_json(value, root)
}

/// The items of an open container.
enum Items<'py> {
    List(Bound<'py, PyList>),
    Tuple(Bound<'py, PyTuple>),
    Dict(pyo3::types::iter::BoundDictIterator<'py>),
    Pairs(std::vec::IntoIter<(Bound<'py, PyAny>, Bound<'py, PyAny>)>),
}

/// What an open container yields next.
enum Step<'py> {
    Item(Option<Bound<'py, PyAny>>),
    Pair(Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>),
}

/// One open container: its items, how many were written, and the current key.
struct Frame<'py> {
    items: Items<'py>,
    count: usize,
    key: Option<Bound<'py, PyAny>>,
}

/// Walks a value with an explicit stack (no recursion: nesting costs heap, not
/// thread stack); on a refusal the stack is the path to the offending value.
struct Writer<'py> {
    out: Vec<u8>,
    stack: Vec<Frame<'py>>,
}

impl<'py> Writer<'py> {
    fn run(&mut self, root: &Bound<'py, PyAny>) -> Result<(), Why> {
        self.value(root)?;
        while let Some(frame) = self.stack.last_mut() {
            let n = frame.count;
            let step = match &mut frame.items {
                Items::List(l) => Step::Item((n < l.len()).then(|| l.get_item(n)).transpose()?),
                Items::Tuple(t) => Step::Item((n < t.len()).then(|| t.get_item(n)).transpose()?),
                Items::Dict(it) => Step::Pair(it.next()),
                Items::Pairs(it) => Step::Pair(it.next()),
            };
            let item = match step {
                Step::Item(item) => {
                    if item.is_some() && n > 0 {
                        self.out.push(b',');
                    }
                    item
                }
                Step::Pair(pair) => self.entry(pair)?,
            };
            let Some(item) = item else {
                let frame = self.stack.pop().expect("a frame is open");
                let close = match frame.items {
                    Items::Dict(_) | Items::Pairs(_) => b'}',
                    Items::List(_) | Items::Tuple(_) => b']',
                };
                self.out.push(close);
                continue;
            };
            self.stack.last_mut().expect("a frame is open").count += 1;
            self.value(&item)?;
        }
        Ok(())
    }

    /// Writes the key of the next dict entry (refusing a non-str key) and returns its
    /// value.
    fn entry(
        &mut self,
        pair: Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    ) -> Result<Option<Bound<'py, PyAny>>, Why> {
        let Some((k, v)) = pair else {
            return Ok(None);
        };
        let frame = self.stack.last_mut().expect("a frame is open");
        frame.key = None;
        let Ok(key) = k.cast::<PyString>() else {
            let shown = k.repr().map(|r| r.to_string()).unwrap_or_default();
            return Err(Why::Invalid(format!(
                "dict key {shown} is not a string ({})",
                type_name(&k)
            )));
        };
        let text = key.to_cow().map_err(|_| {
            Why::Invalid("dict key is not valid Unicode (a lone surrogate?)".to_owned())
        })?;
        if frame.count > 0 {
            self.out.push(b',');
        }
        serde_json::to_writer(&mut self.out, &*text).expect("writing to a Vec");
        self.out.push(b':');
        frame.key = Some(k);
        Ok(Some(v))
    }

    /// Opens a container on the stack.
    fn open(&mut self, items: Items<'py>, open: u8) -> Result<(), Why> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Why::TooDeep);
        }
        self.out.push(open);
        self.stack.push(Frame {
            items,
            count: 0,
            key: None,
        });
        Ok(())
    }

    /// Writes a scalar, or opens a container.
    fn value(&mut self, v: &Bound<'py, PyAny>) -> Result<(), Why> {
        let out = &mut self.out;
        if let Ok(s) = v.cast::<PyString>() {
            let text = s.to_cow().map_err(|_| {
                Why::Invalid("string is not valid Unicode (a lone surrogate?)".to_owned())
            })?;
            serde_json::to_writer(&mut *out, &*text).expect("writing to a Vec");
        } else if let Ok(d) = v.cast::<PyDict>() {
            self.open(Items::Dict(d.iter()), b'{')?;
        } else if let Ok(b) = v.cast::<PyBool>() {
            out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
        } else if v.is_instance_of::<PyInt>() {
            if let Ok(i) = v.extract::<i64>() {
                let _ = write!(Utf8(out), "{i}");
            } else if let Ok(u) = v.extract::<u64>() {
                let _ = write!(Utf8(out), "{u}");
            } else {
                // Exact digits of any size (an int subclass is first made a plain int).
                let digits = v
                    .py()
                    .get_type::<PyInt>()
                    .call1((v,))
                    .and_then(|i| i.str())
                    .map_err(|e| Why::Invalid(format!("integer not representable: {e}")))?;
                out.extend_from_slice(digits.to_cow()?.as_bytes());
            }
        } else if let Ok(f) = v.cast::<PyFloat>() {
            let x = f.value();
            if !x.is_finite() {
                let name = if x.is_nan() {
                    "NaN"
                } else if x > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                return Err(Why::Invalid(format!("{name} is not a JSON number")));
            }
            serde_json::to_writer(&mut *out, &x).expect("finite floats serialize");
        } else if v.is_none() {
            out.extend_from_slice(b"null");
        } else if let Ok(l) = v.cast::<PyList>() {
            // Read by index as it is now: a list changed meanwhile is never overrun.
            self.open(Items::List(l.clone()), b'[')?;
        } else if let Ok(t) = v.cast::<PyTuple>() {
            self.open(Items::Tuple(t.clone()), b'[')?;
        } else if let Ok(m) = v.cast::<PyMapping>() {
            let pairs = m
                .items()?
                .iter()
                .map(|pair| pair.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>())
                .collect::<PyResult<Vec<_>>>()?;
            self.open(Items::Pairs(pairs.into_iter()), b'{')?;
        } else {
            return Err(Why::Invalid(format!(
                "a {} is not a JSON value (use dict, list, tuple, str, int, float, bool or None)",
                type_name(v)
            )));
        }
        Ok(())
    }

    /// The exception for a refusal, naming the path from `root` to the value.
    fn error(&self, root: &str, why: Why) -> PyErr {
        let mut path = root.to_owned();
        for (n, frame) in self.stack.iter().enumerate() {
            if n == MAX_PATH_SHOWN {
                path.push('…');
                break;
            }
            match (&frame.key, &frame.items) {
                (Some(k), _) => {
                    let k = k
                        .cast::<PyString>()
                        .map(|k| k.to_string_lossy().into_owned());
                    let _ = write!(path, "[{}]", json::quote(&k.unwrap_or_default()));
                }
                // A dict between entries (e.g. refusing a key): the path is the dict.
                (None, Items::Dict(_) | Items::Pairs(_)) => break,
                (None, _) if frame.count > 0 => {
                    let _ = write!(path, "[{}]", frame.count - 1);
                }
                (None, _) => break,
            }
        }
        match why {
            Why::Invalid(msg) => InvalidInputError::new_err(format!("{path}: {msg}")),
            Why::TooDeep => TooLargeError::new_err(format!(
                "{path}: JSON nesting deeper than {MAX_DEPTH} levels"
            )),
            Why::Py(e) => e,
        }
    }
}

/// `fmt::Write` over a byte buffer.
struct Utf8<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Utf8<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Python objects from JSON text produced by the core.
pub(crate) fn to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let mut p = Parser {
        py,
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = p.value(0)?;
    if p.pos != p.bytes.len() {
        return Err(p.bad());
    }
    Ok(value)
}

/// A recursive-descent reader for compact, already validated JSON (no whitespace
/// between tokens is assumed but tolerated).
struct Parser<'a, 'py> {
    py: Python<'py>,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'py> Parser<'_, 'py> {
    fn bad(&self) -> PyErr {
        pyo3::exceptions::PyRuntimeError::new_err(format!(
            "inboxlog: unexpected JSON from the core at byte {}",
            self.pos
        ))
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> PyResult<()> {
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.bad())
        }
    }

    fn value(&mut self, depth: usize) -> PyResult<Bound<'py, PyAny>> {
        // The core bounds nesting at 512 inside data; a few envelope levels sit above.
        if depth > MAX_DEPTH + 16 {
            return Err(self.bad());
        }
        self.skip_ws();
        let py = self.py;
        match self.bytes.get(self.pos) {
            Some(b'{') => {
                self.pos += 1;
                let dict = PyDict::new(py);
                self.skip_ws();
                if self.bytes.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Ok(dict.into_any());
                }
                loop {
                    self.skip_ws();
                    let key = self.string()?;
                    self.eat(b':')?;
                    let item = self.value(depth + 1)?;
                    dict.set_item(key, item)?;
                    self.skip_ws();
                    match self.bytes.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(dict.into_any());
                        }
                        _ => return Err(self.bad()),
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.bytes.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.skip_ws();
                        match self.bytes.get(self.pos) {
                            Some(b',') => self.pos += 1,
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.bad()),
                        }
                    }
                }
                Ok(PyList::new(py, items)?.into_any())
            }
            Some(b'"') => Ok(self.string()?.into_any()),
            Some(b't') => self.word("true", PyBool::new(py, true).to_owned().into_any()),
            Some(b'f') => self.word("false", PyBool::new(py, false).to_owned().into_any()),
            Some(b'n') => self.word("null", py.None().into_bound(py)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.bad()),
        }
    }

    fn word(&mut self, w: &str, v: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if self.bytes[self.pos..].starts_with(w.as_bytes()) {
            self.pos += w.len();
            Ok(v)
        } else {
            Err(self.bad())
        }
    }

    fn number(&mut self) -> PyResult<Bound<'py, PyAny>> {
        let start = self.pos;
        let mut float = false;
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.pos += 1;
        }
        let token = &self.text[start..self.pos];
        let py = self.py;
        if float {
            let x: f64 = token.parse().map_err(|_| self.bad())?;
            return Ok(PyFloat::new(py, x).into_any());
        }
        if let Ok(i) = token.parse::<i64>() {
            return Ok(i.into_pyobject(py)?.into_any());
        }
        if let Ok(u) = token.parse::<u64>() {
            return Ok(u.into_pyobject(py)?.into_any());
        }
        py.get_type::<PyInt>().call1((token,))
    }

    fn string(&mut self) -> PyResult<Bound<'py, PyString>> {
        if self.bytes.get(self.pos) != Some(&b'"') {
            return Err(self.bad());
        }
        self.pos += 1;
        let start = self.pos;
        let rest = &self.bytes[start..];
        let Some(end) = memchr::memchr2(b'"', b'\\', rest) else {
            return Err(self.bad());
        };
        if rest[end] == b'"' {
            self.pos += end + 1;
            return Ok(PyString::new(self.py, &self.text[start..start + end]));
        }
        let mut s = String::from(&self.text[start..start + end]);
        self.pos += end;
        loop {
            let rest = &self.bytes[self.pos..];
            let Some(off) = memchr::memchr2(b'"', b'\\', rest) else {
                return Err(self.bad());
            };
            s.push_str(&self.text[self.pos..self.pos + off]);
            self.pos += off;
            if self.bytes[self.pos] == b'"' {
                self.pos += 1;
                return Ok(PyString::new(self.py, &s));
            }
            let esc = *self.bytes.get(self.pos + 1).ok_or_else(|| self.bad())?;
            self.pos += 2;
            match esc {
                b'"' => s.push('"'),
                b'\\' => s.push('\\'),
                b'/' => s.push('/'),
                b'b' => s.push('\u{8}'),
                b'f' => s.push('\u{c}'),
                b'n' => s.push('\n'),
                b'r' => s.push('\r'),
                b't' => s.push('\t'),
                b'u' => {
                    let hi = self.hex4()?;
                    let c = if (0xD800..0xDC00).contains(&hi)
                        && self.bytes[self.pos..].starts_with(b"\\u")
                    {
                        let save = self.pos;
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if (0xDC00..0xE000).contains(&lo) {
                            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                        } else {
                            self.pos = save;
                            None
                        }
                    } else {
                        char::from_u32(hi)
                    };
                    s.push(c.unwrap_or('\u{FFFD}'));
                }
                _ => return Err(self.bad()),
            }
        }
    }

    fn hex4(&mut self) -> PyResult<u32> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.bad())?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.bad())?;
        self.pos += 4;
        Ok(v)
    }
}

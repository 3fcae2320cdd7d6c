//! Python objects → compact JSON text, without a `json.dumps` round trip.
//!
//! The walk takes dict/list/tuple/str/int/float/bool/None (and other mappings) into
//! compact text: key order kept, integers of any size written exactly, nesting counted
//! on an explicit stack (a self-referencing list is refused, never a stack overflow).
//! It writes through the core's `json::Builder`, so the text is valid by construction
//! and the core stores it without parsing it again. A flat dict (str keys, scalar
//! values: most event data) is written by one loop without the stack.
//!
//! On request the same walk builds the value's *plain copy*: what reading the text
//! back gives. Dicts and lists are new (the copy never shares a container with the
//! value), tuples become lists, other mappings dicts, and subclasses of str, int and
//! float their exact built-in type; immutable values of the exact built-in types are
//! shared. `Session.append` returns that copy as the event's data instead of parsing
//! the text it has just written.

use std::fmt::Write as _;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};

use inboxlog::json::{self, Builder, Json};

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
    to_json_value(value, root).map(Json::into_string)
}

/// [`to_json`] as the core takes it: text it stores without parsing it again.
pub(crate) fn to_json_value(value: &Bound<'_, PyAny>, root: &str) -> PyResult<Json> {
    if let Some((text, _)) = flat(value, false) {
        return Ok(text);
    }
    let (text, _) = Writer::new(value.py(), false).write(value, root)?;
    Ok(text)
}

/// [`to_json`], and the value's plain copy (see the module doc): equal to what reading
/// the text back gives, sharing no container with `value`.
pub(crate) fn to_json_and_copy<'py>(
    value: &Bound<'py, PyAny>,
    root: &str,
) -> PyResult<(Json, Bound<'py, PyAny>)> {
    if let Some((text, copy)) = flat(value, true) {
        return Ok((text, copy.expect("a copying walk returns the copy")));
    }
    let (text, copy) = Writer::new(value.py(), true).write(value, root)?;
    Ok((text, copy.expect("a copying walk returns the copy")))
}

/// The text, and when `copying` the plain copy, of a *flat* dict: an exact dict whose
/// keys are exact strs and whose values are exact strs, ints, floats, bools or `None`,
/// the usual shape of an event's data. One loop, no frames; the copy is `dict.copy()`,
/// which is the plain copy of a dict whose values are all immutable. No Python code
/// runs meanwhile, so the dict cannot change between the text and the copy.
///
/// `None` for anything else, and for a value the walk would refuse: the general walk
/// then writes it, or names the refusal with its path.
fn flat<'py>(
    value: &Bound<'py, PyAny>,
    copying: bool,
) -> Option<(Json, Option<Bound<'py, PyAny>>)> {
    let dict = value.cast_exact::<PyDict>().ok()?;
    let mut out = Builder::new();
    out.begin_object().ok()?;
    for (k, v) in dict.iter() {
        let key = k.cast_exact::<PyString>().ok()?;
        out.key(key.to_str().ok()?);
        flat_scalar(&mut out, &v)?;
    }
    out.end();
    let copy = if copying {
        Some(dict.copy().ok()?.into_any())
    } else {
        None
    };
    Some((out.finish(), copy))
}

/// Writes `v` when it is an exact str, int (of up to 64 bits), float, bool or `None`.
fn flat_scalar(out: &mut Builder, v: &Bound<'_, PyAny>) -> Option<()> {
    if let Ok(s) = v.cast_exact::<PyString>() {
        out.string(s.to_str().ok()?);
    } else if v.is_exact_instance_of::<PyInt>() {
        match v.extract::<i64>() {
            Ok(i) => out.int(i),
            Err(_) => out.uint(v.extract::<u64>().ok()?),
        }
    } else if let Ok(f) = v.cast_exact::<PyFloat>() {
        out.float(f.value()).ok()?;
    } else if let Ok(b) = v.cast_exact::<PyBool>() {
        out.bool(b.is_true());
    } else if v.is_none() {
        out.null();
    } else {
        return None;
    }
    Some(())
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

/// One open container: its items, how many were written, the current key, and its
/// plain copy when the walk builds one.
struct Frame<'py> {
    items: Items<'py>,
    count: usize,
    key: Option<Bound<'py, PyAny>>,
    plain: Option<Plain<'py>>,
}

/// The plain copy of an open container, filled as the walk goes.
enum Plain<'py> {
    /// A new dict, and the exact str key of the entry being walked.
    Dict {
        dict: Bound<'py, PyDict>,
        key: Option<Bound<'py, PyString>>,
    },
    /// A new list (also for a tuple).
    List(Bound<'py, PyList>),
}

impl<'py> Plain<'py> {
    fn as_any(&self) -> Bound<'py, PyAny> {
        match self {
            Plain::Dict { dict, .. } => dict.clone().into_any(),
            Plain::List(list) => list.clone().into_any(),
        }
    }

    /// Adds the copy of the container's next item (under the current key in a dict).
    fn push(&mut self, item: Bound<'py, PyAny>) -> PyResult<()> {
        match self {
            Plain::Dict { dict, key } => {
                dict.set_item(key.take().expect("a key precedes its value"), item)
            }
            Plain::List(list) => list.append(item),
        }
    }
}

/// The UTF-8 text of `s`, read in place (the interpreter keeps it with the str); a
/// str holding a lone surrogate has none and is refused as `what`.
fn text<'a>(s: &'a Bound<'_, PyString>, what: &str) -> Result<&'a str, Why> {
    s.to_str()
        .map_err(|_| Why::Invalid(format!("{what} is not valid Unicode (a lone surrogate?)")))
}

/// The plain copy of the scalar `v` when `copying`: `v` itself when it is of the exact
/// built-in type (immutable, so shared), else `fresh()`.
fn plain_scalar<'py>(
    copying: bool,
    v: &Bound<'py, PyAny>,
    exact: bool,
    fresh: impl FnOnce() -> PyResult<Bound<'py, PyAny>>,
) -> Result<Option<Bound<'py, PyAny>>, Why> {
    match (copying, exact) {
        (false, _) => Ok(None),
        (true, true) => Ok(Some(v.clone())),
        (true, false) => Ok(Some(fresh()?)),
    }
}

/// Walks a value with an explicit stack (no recursion: nesting costs heap, not
/// thread stack); on a refusal the stack is the path to the offending value.
struct Writer<'py> {
    py: Python<'py>,
    out: Builder,
    stack: Vec<Frame<'py>>,
    /// Whether the walk builds the plain copy.
    copying: bool,
}

impl<'py> Writer<'py> {
    fn new(py: Python<'py>, copying: bool) -> Writer<'py> {
        Writer {
            py,
            out: Builder::new(),
            stack: Vec::with_capacity(4),
            copying,
        }
    }

    /// The text of `value` and, when copying, its plain copy.
    fn write(
        mut self,
        value: &Bound<'py, PyAny>,
        root: &str,
    ) -> PyResult<(Json, Option<Bound<'py, PyAny>>)> {
        match self.run(value) {
            Ok(copy) => Ok((self.out.finish(), copy)),
            Err(why) => Err(self.error(root, why)),
        }
    }

    fn run(&mut self, root: &Bound<'py, PyAny>) -> Result<Option<Bound<'py, PyAny>>, Why> {
        let copy = self.value(root)?;
        while let Some(frame) = self.stack.last_mut() {
            let n = frame.count;
            let step = match &mut frame.items {
                Items::List(l) => Step::Item((n < l.len()).then(|| l.get_item(n)).transpose()?),
                Items::Tuple(t) => Step::Item((n < t.len()).then(|| t.get_item(n)).transpose()?),
                Items::Dict(it) => Step::Pair(it.next()),
                Items::Pairs(it) => Step::Pair(it.next()),
            };
            let item = match step {
                Step::Item(item) => item,
                Step::Pair(pair) => self.entry(pair)?,
            };
            let Some(item) = item else {
                self.stack.pop();
                self.out.end();
                continue;
            };
            let parent = self.stack.len() - 1;
            self.stack[parent].count += 1;
            // `value` may open a frame above the parent: the parent is found by index.
            if let Some(copy) = self.value(&item)?
                && let Some(plain) = &mut self.stack[parent].plain
            {
                plain.push(copy)?;
            }
        }
        Ok(copy)
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
        let text = text(key, "dict key")?;
        self.out.key(text);
        if let Some(Plain::Dict { key: plain_key, .. }) = &mut frame.plain {
            *plain_key = Some(if key.is_exact_instance_of::<PyString>() {
                key.clone()
            } else {
                PyString::new(self.py, text)
            });
        }
        frame.key = Some(k);
        Ok(Some(v))
    }

    /// Opens a container on the stack; returns its plain copy when copying.
    fn open(&mut self, items: Items<'py>) -> Result<Option<Bound<'py, PyAny>>, Why> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Why::TooDeep);
        }
        let opened = match items {
            Items::Dict(_) | Items::Pairs(_) => self.out.begin_object(),
            Items::List(_) | Items::Tuple(_) => self.out.begin_array(),
        };
        opened.map_err(|_| Why::TooDeep)?;
        let plain = self.copying.then(|| match items {
            Items::Dict(_) | Items::Pairs(_) => Plain::Dict {
                dict: PyDict::new(self.py),
                key: None,
            },
            Items::List(_) | Items::Tuple(_) => Plain::List(PyList::empty(self.py)),
        });
        let copy = plain.as_ref().map(Plain::as_any);
        self.stack.push(Frame {
            items,
            count: 0,
            key: None,
            plain,
        });
        Ok(copy)
    }

    /// Writes a scalar, or opens a container; returns the plain copy when copying.
    fn value(&mut self, v: &Bound<'py, PyAny>) -> Result<Option<Bound<'py, PyAny>>, Why> {
        let (py, copying) = (self.py, self.copying);
        let out = &mut self.out;
        if let Ok(s) = v.cast::<PyString>() {
            let text = text(s, "string")?;
            out.string(text);
            let exact = s.is_exact_instance_of::<PyString>();
            return plain_scalar(copying, v, exact, || Ok(PyString::new(py, text).into_any()));
        }
        if let Ok(d) = v.cast::<PyDict>() {
            return self.open(Items::Dict(d.iter()));
        }
        if let Ok(b) = v.cast::<PyBool>() {
            out.bool(b.is_true());
            return Ok(copying.then(|| v.clone()));
        }
        if v.is_instance_of::<PyInt>() {
            let exact = v.is_exact_instance_of::<PyInt>();
            if let Ok(i) = v.extract::<i64>() {
                out.int(i);
                return plain_scalar(copying, v, exact, || Ok(i.into_pyobject(py)?.into_any()));
            }
            if let Ok(u) = v.extract::<u64>() {
                out.uint(u);
                return plain_scalar(copying, v, exact, || Ok(u.into_pyobject(py)?.into_any()));
            }
            // Exact digits of any size. An int subclass is read as the int it is:
            // `int.__int__` ignores any override of `__int__`, `__str__` or `__repr__`.
            let int = if exact {
                v.clone()
            } else {
                py.get_type::<PyInt>()
                    .getattr(intern!(py, "__int__"))?
                    .call1((v,))?
            };
            let digits = int
                .str()
                .map_err(|e| Why::Invalid(format!("integer not representable: {e}")))?;
            out.digits(&digits.to_cow()?)
                .map_err(|e| Why::Invalid(e.to_string()))?;
            return Ok(copying.then_some(int));
        }
        if let Ok(f) = v.cast::<PyFloat>() {
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
            out.float(x).map_err(|e| Why::Invalid(e.to_string()))?;
            let exact = f.is_exact_instance_of::<PyFloat>();
            return plain_scalar(copying, v, exact, || Ok(PyFloat::new(py, x).into_any()));
        }
        if v.is_none() {
            out.null();
            return Ok(copying.then(|| v.clone()));
        }
        if let Ok(l) = v.cast::<PyList>() {
            // Read by index as it is now: a list changed meanwhile is never overrun.
            return self.open(Items::List(l.clone()));
        }
        if let Ok(t) = v.cast::<PyTuple>() {
            return self.open(Items::Tuple(t.clone()));
        }
        if let Ok(m) = v.cast::<PyMapping>() {
            let pairs = m
                .items()?
                .iter()
                .map(|pair| pair.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>())
                .collect::<PyResult<Vec<_>>>()?;
            return self.open(Items::Pairs(pairs.into_iter()));
        }
        Err(Why::Invalid(format!(
            "a {} is not a JSON value (use dict, list, tuple, str, int, float, bool or None)",
            type_name(v)
        )))
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

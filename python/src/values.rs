//! Core values ⇄ Python dicts: events, messages, proposals, headers, inbox notices.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PySequence, PyString, PyTuple,
};

use inboxlog::wire::{ToJson, event_key};
use inboxlog::{Event, InboxNotice, Message, Proposal};

use crate::convert::{Loader, dict_to_json, to_py};
use crate::errors::OrRaise;

/// An event as a dict (keys in ARCHITECTURE.md#events order).
pub(crate) fn event<'py>(py: Python<'py>, e: &Event) -> PyResult<Bound<'py, PyDict>> {
    event_with(&mut Loader::new(py), e)
}

/// A list of events, read with one loader: their repeated keys and types share one
/// Python str each.
pub(crate) fn events<'py>(py: Python<'py>, events: &[Event]) -> PyResult<Bound<'py, PyList>> {
    let mut loader = Loader::for_texts(py, events.len());
    let items = events
        .iter()
        .map(|e| event_with(&mut loader, e))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// An event as a dict, built from its fields: only its data and `surfaceOp` are JSON
/// text to read.
fn event_with<'py>(loader: &mut Loader<'py>, e: &Event) -> PyResult<Bound<'py, PyDict>> {
    let ty = loader.cached_str(e.ty());
    let data = loader.load(e.data())?;
    let surface_op = match &e.envelope().surface_op {
        Some(op) => Some(loader.load(op.get())?),
        None => None,
    };
    event_dict(ty.py(), e, ty, data, surface_op)
}

/// The dict of event `e` around the Python values of its type, data and `surfaceOp`,
/// in the order of its JSON spelling (`Event::write_json`), keys spelled by the core
/// (`inboxlog::wire::event_key`): `type`, `seq`, `time`, `data`, then `ignorable`,
/// `surfaceOp` and `sourceEventSeqs` when present.
pub(crate) fn event_dict<'py>(
    py: Python<'py>,
    e: &Event,
    ty: Bound<'py, PyString>,
    data: Bound<'py, PyAny>,
    surface_op: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, event_key::TYPE), ty)?;
    dict.set_item(intern!(py, event_key::SEQ), e.seq())?;
    dict.set_item(intern!(py, event_key::TIME), e.time())?;
    dict.set_item(intern!(py, event_key::DATA), data)?;
    let envelope = e.envelope();
    if envelope.ignorable {
        dict.set_item(intern!(py, event_key::IGNORABLE), true)?;
    }
    // Without the caller's, the library's own (a surface type appended without one
    // gets "append").
    let op = match (surface_op, &envelope.surface_op) {
        (Some(op), _) => Some(op),
        (None, Some(op)) => Some(to_py(py, op.get())?),
        (None, None) => None,
    };
    if let Some(op) = op {
        dict.set_item(intern!(py, event_key::SURFACE_OP), op)?;
    }
    if let Some(seqs) = &envelope.source_event_seqs {
        dict.set_item(
            intern!(py, event_key::SOURCE_EVENT_SEQS),
            PyList::new(py, seqs)?,
        )?;
    }
    Ok(dict)
}

/// An event given as a dict, validated by the core.
pub(crate) fn event_from(obj: &Bound<'_, PyAny>, root: &str) -> PyResult<Event> {
    Event::from_json(&dict_to_json(obj, root)?).py()
}

/// A sequence (list, tuple, …) of event dicts.
pub(crate) fn events_from(obj: &Bound<'_, PyAny>, root: &str) -> PyResult<Vec<Event>> {
    items(obj, root)?
        .iter()
        .enumerate()
        .map(|(i, e)| event_from(e, &format!("{root}[{i}]")))
        .collect()
}

/// A message as a dict.
pub(crate) fn message<'py>(py: Python<'py>, m: &Message) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, m.json())
}

/// A list of message dicts.
pub(crate) fn messages<'py>(py: Python<'py>, ms: &[Message]) -> PyResult<Bound<'py, PyList>> {
    let items = ms
        .iter()
        .map(|m| message(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// A message given as a dict.
pub(crate) fn message_from(obj: &Bound<'_, PyAny>, root: &str) -> PyResult<Message> {
    Message::from_json(&dict_to_json(obj, root)?).py()
}

/// A sequence (list, tuple, …) of message dicts.
pub(crate) fn messages_from(obj: &Bound<'_, PyAny>, root: &str) -> PyResult<Vec<Message>> {
    items(obj, root)?
        .iter()
        .enumerate()
        .map(|(i, m)| message_from(m, &format!("{root}[{i}]")))
        .collect()
}

/// The items of a list, tuple or other sequence (`TypeError` for anything else, str
/// and bytes included).
fn items<'py>(obj: &Bound<'py, PyAny>, root: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        Ok(l.iter().collect())
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        Ok(t.iter().collect())
    } else if let Ok(seq) = obj.cast::<PySequence>()
        && !obj.is_instance_of::<PyString>()
        && !obj.is_instance_of::<PyBytes>()
        && !obj.is_instance_of::<PyByteArray>()
    {
        seq.try_iter()?.collect()
    } else {
        Err(PyTypeError::new_err(format!(
            "{root} must be a list, not {}",
            obj.get_type().qualname()?
        )))
    }
}

/// `{"turn","step","messages"}`, from the core's one spelling (`inboxlog::wire`).
pub(crate) fn proposal<'py>(py: Python<'py>, p: &Proposal) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, &p.to_json())?.cast_into::<PyDict>()?)
}

/// `{"type":…,"message":m[,"turn":n]}`, from the core's one spelling.
pub(crate) fn notice<'py>(py: Python<'py>, n: &InboxNotice) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, &n.to_json())?.cast_into::<PyDict>()?)
}

/// A splice coordinate: any int or float (NaN and ±inf included) as an f64, the way
/// JavaScript sees a number. An int too large for a float is ±inf.
pub(crate) fn coordinate(v: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(f.value());
    }
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        return match v.extract::<f64>() {
            Ok(x) => Ok(x),
            Err(_) if v.gt(0)? => Ok(f64::INFINITY),
            Err(_) => Ok(f64::NEG_INFINITY),
        };
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be an int or a float, not {}",
        v.get_type().qualname()?
    )))
}

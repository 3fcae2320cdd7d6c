//! `Compaction`, the handle of a compaction running (SPEC §16), and the session's
//! compaction calls (`begin_compaction`, `compact`, `prune`), which `session.rs`
//! forwards here.
//!
//! Core calls run with the GIL released; the summarizer `compact` calls runs with it
//! held, between the start and the commit.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use inboxlog::{Compacted, Compaction, Session, Summary};

use crate::convert::{to_json, to_py};
use crate::errors::OrRaise;
use crate::values;

type Running = Compaction<Arc<Session>>;

/// A compaction running (SPEC §16): `commit(summary, provider=, model=, usage=None)`
/// writes its summary as one surface replace, `abort(error)` ends it with an error;
/// a handle dropped before either ends it with `"abandoned"`.
#[pyclass(frozen, name = "Compaction", module = "inboxlog")]
pub(crate) struct PyCompaction {
    running: Mutex<Option<Running>>,
    id: String,
    turn: Option<u64>,
    range: (u64, u64),
    seqs: Vec<u64>,
    messages: Vec<String>,
    tokens: u64,
}

impl PyCompaction {
    fn new(running: Running) -> PyCompaction {
        PyCompaction {
            id: running.id().to_owned(),
            turn: running.turn(),
            range: running.range(),
            seqs: running.shadowed_seqs().to_vec(),
            messages: running.shadowed_messages().to_vec(),
            tokens: running.shadowed_token_count(),
            running: Mutex::new(Some(running)),
        }
    }

    /// The handle, taken once: a second `commit` or `abort` raises `ProtocolError`.
    fn take(&self) -> PyResult<Running> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| {
                crate::errors::raise(inboxlog::Error::new(
                    inboxlog::ErrorKind::Protocol,
                    format!("compaction {:?} was committed or aborted already", self.id),
                ))
            })
    }
}

/// A summary from Python: a str (one text block) or a list of block dicts.
fn summary_of(summary: &Bound<'_, PyAny>) -> PyResult<Summary> {
    if let Ok(text) = summary.cast::<PyString>() {
        return Ok(Summary::Text(text.to_str()?.to_owned()));
    }
    if summary.is_instance_of::<PyList>() {
        return Ok(Summary::Blocks(to_json(summary, "summary")?));
    }
    Err(PyTypeError::new_err(format!(
        "a summary is a str or a list of blocks, not {}",
        summary.get_type().qualname()?
    )))
}

/// `{"compactionId", "summary": event, "message": event}`.
fn compacted<'py>(py: Python<'py>, c: &Compacted) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("compactionId", &c.compaction_id)?;
    d.set_item("summary", values::event(py, &c.summary)?)?;
    d.set_item("message", values::event(py, &c.message)?)?;
    Ok(d)
}

fn messages<'py>(py: Python<'py>, texts: &[String]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for m in texts {
        list.append(to_py(py, m)?)?;
    }
    Ok(list)
}

fn commit<'py>(
    py: Python<'py>,
    running: Running,
    summary: &Bound<'py, PyAny>,
    provider: &str,
    model: &str,
    usage: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let summary = summary_of(summary);
    let usage = usage.map(|u| to_json(u, "usage")).transpose();
    let (summary, usage) = match (summary, usage) {
        (Ok(s), Ok(u)) => (s, u),
        (Err(e), _) | (_, Err(e)) => {
            // A summary Python cannot hand over is a failure after the start.
            let why = e.to_string();
            py.detach(|| running.abort(&why)).py()?;
            return Err(e);
        }
    };
    let done = py
        .detach(|| running.commit(&summary, provider, model, usage.as_deref()))
        .py()?;
    compacted(py, &done)
}

#[pymethods]
impl PyCompaction {
    /// Its `compactionId`.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The turn that owns it, `None` for a manual one.
    #[getter]
    fn turn(&self) -> Option<u64> {
        self.turn
    }

    /// The range it replaces, `(start, end)`: the seqs of its first and last surface node.
    #[getter]
    fn range(&self) -> (u64, u64) {
        self.range
    }

    /// The seqs of the surface nodes it replaces, in order.
    #[getter]
    fn shadowed_seqs(&self) -> Vec<u64> {
        self.seqs.clone()
    }

    /// The messages it replaces (what to summarize), as dicts, in order.
    #[getter]
    fn shadowed_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        messages(py, &self.messages)
    }

    /// The reference's token estimate of those messages.
    #[getter]
    fn shadowed_token_count(&self) -> u64 {
        self.tokens
    }

    /// Commits it with `summary` (a str, stored as one text block, or a list of
    /// blocks) by `provider`'s `model`, `usage` a dict or None: returns
    /// `{"compactionId", "summary": the compaction/summary event, "message": the
    /// summary's user/message}`. Raises `ConflictError` when the surface changed inside
    /// the range since the start (its `compaction/end` carries the error), and writes
    /// exactly one `compaction/end` with an error on any other failure.
    #[pyo3(signature = (summary, *, provider, model, usage = None))]
    fn commit<'py>(
        &self,
        py: Python<'py>,
        summary: &Bound<'py, PyAny>,
        provider: &str,
        model: &str,
        usage: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let running = self.take()?;
        commit(py, running, summary, provider, model, usage)
    }

    /// Ends it with `error` (a str): writes `compaction/end {…, "error"}`.
    fn abort(&self, py: Python<'_>, error: &str) -> PyResult<()> {
        let running = self.take()?;
        py.detach(|| running.abort(error)).py()
    }

    fn __repr__(&self) -> String {
        format!(
            "Compaction(id={:?}, range=({}, {}))",
            self.id, self.range.0, self.range.1
        )
    }
}

/// `session.begin_compaction(start, end)`.
pub(crate) fn begin(
    py: Python<'_>,
    session: &Arc<Session>,
    start: u64,
    end: u64,
) -> PyResult<PyCompaction> {
    let session = session.clone();
    let running = py.detach(|| Compaction::begin(session, start, end)).py()?;
    Ok(PyCompaction::new(running))
}

/// `session.compact(start, end, summarize, provider=, model=)`: `summarize` gets the
/// shadowed messages (a list of dicts) and returns the summary; when it raises, the
/// compaction ends with the exception's text and the exception propagates.
pub(crate) fn compact<'py>(
    py: Python<'py>,
    session: &Arc<Session>,
    start: u64,
    end: u64,
    summarize: &Bound<'py, PyAny>,
    provider: &str,
    model: &str,
) -> PyResult<Bound<'py, PyDict>> {
    if !summarize.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "compact needs a callable summarize, not {}",
            summarize.get_type().qualname()?
        )));
    }
    let session = session.clone();
    let running = py.detach(|| Compaction::begin(session, start, end)).py()?;
    let shadowed = messages(py, running.shadowed_messages());
    let summary = shadowed.and_then(|m| summarize.call1((m,)));
    match summary {
        Ok(summary) => commit(py, running, &summary, provider, model, None),
        Err(e) => {
            let ty = e
                .get_type(py)
                .qualname()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "Exception".to_owned());
            let why = format!("{ty}: {}", e.value(py));
            py.detach(|| running.abort(&why)).py()?;
            Err(e)
        }
    }
}

/// `session.prune(seq)`: the new `tool/result` event, or `None`.
pub(crate) fn prune<'py>(
    py: Python<'py>,
    session: &Session,
    seq: u64,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let pruned = py.detach(|| session.prune(seq)).py()?;
    pruned.map(|e| values::event(py, &e)).transpose()
}

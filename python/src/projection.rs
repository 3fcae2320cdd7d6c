//! Projections that read a log: the consumed-work fold and the queue projection (ARCHITECTURE.md#consumed-work-fold).

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyList;

use inboxlog::wire::{FromJson, ToJson};
use inboxlog::{Baseline, QueueProjection};

use crate::convert::{dict_to_json, to_py};
use crate::errors::OrRaise;
use crate::values;

/// Folds events (dicts) into `{"end": event | None, "droppedUnrun": bool}`.
#[pyfunction]
pub(crate) fn fold_consumed_work<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let events = values::events_from(events, "events")?;
    let text = inboxlog::fold_consumed_work(&events).to_json();
    to_py(py, &text)
}

/// A consumer's copy of the inbox, kept equal to the live one by applying later
/// `agent/inbox/spliced` events.
#[pyclass(frozen, name = "QueueProjection", module = "inboxlog")]
pub(crate) struct PyQueueProjection {
    inner: Mutex<QueueProjection>,
}

impl PyQueueProjection {
    fn with<R>(&self, f: impl FnOnce(&mut QueueProjection) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A baseline dict, parsed by the core's one strict parser (the C ABI's too): a
/// non-mapping is `TypeError`, a missing or unknown key `InvalidInputError`.
fn baseline_from(obj: &Bound<'_, PyAny>) -> PyResult<Baseline> {
    Baseline::from_json(&dict_to_json(obj, "baseline")?).py()
}

#[pymethods]
impl PyQueueProjection {
    /// Starts from `baseline` (`{"seq": int | None, "next_turn": [...], "next_step": [...]}`,
    /// e.g. from `Session.baseline()`); the default is an empty inbox before any event.
    #[new]
    #[pyo3(signature = (baseline = None))]
    fn new(baseline: Option<&Bound<'_, PyAny>>) -> PyResult<PyQueueProjection> {
        let baseline = match baseline {
            None => Baseline {
                seq: None,
                next_turn: Vec::new(),
                next_step: Vec::new(),
            },
            Some(b) => baseline_from(b)?,
        };
        let inner = QueueProjection::new(baseline).py()?;
        Ok(PyQueueProjection {
            inner: Mutex::new(inner),
        })
    }

    /// Builds the projection from a log's events (from `replay_from`, the header's
    /// `seedLength`) up to and including seq `upto` (all when `None`). An `upto` past
    /// the last event, or a `replay_from` past the end of the events, raises
    /// `InvalidInputError`, never clamped.
    #[staticmethod]
    #[pyo3(signature = (events, replay_from = 0, upto = None))]
    fn replay(
        events: &Bound<'_, PyAny>,
        replay_from: u64,
        upto: Option<u64>,
    ) -> PyResult<PyQueueProjection> {
        let events = values::events_from(events, "events")?;
        let inner = QueueProjection::replay(&events, replay_from, upto).py()?;
        Ok(PyQueueProjection {
            inner: Mutex::new(inner),
        })
    }

    /// Applies the next event (a dict): a splice changes the lists, others only
    /// advance the seq.
    fn apply(&self, event: &Bound<'_, PyAny>) -> PyResult<()> {
        let event = values::event_from(event, "event")?;
        self.with(|p| p.apply(&event)).py()
    }

    /// The last event applied, `None` before any.
    #[getter]
    fn seq(&self) -> Option<u64> {
        self.with(|p| p.seq())
    }

    /// The projected `next-turn`.
    #[getter]
    fn next_turn<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = self.with(|p| p.baseline().next_turn);
        values::messages(py, &list)
    }

    /// The projected `next-step`.
    #[getter]
    fn next_step<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = self.with(|p| p.baseline().next_step);
        values::messages(py, &list)
    }

    /// The projection as a baseline dict.
    #[getter]
    fn baseline<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.with(|p| p.baseline().to_json());
        to_py(py, &text)
    }
}

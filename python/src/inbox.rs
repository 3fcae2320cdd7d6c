//! `Inbox`: a session's two ordered lists, `next-turn` and `next-step`, as Python sees
//! them (core calls run with the GIL released, as `Session`'s do).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyList;

use inboxlog::{Session, Target};

use crate::errors::OrRaise;
use crate::queue_view::PyQueueView;
use crate::values;

/// The inbox of one session: two ordered lists, `next-turn` and `next-step`.
#[pyclass(frozen, name = "Inbox", module = "inboxlog")]
pub(crate) struct PyInbox {
    inner: Arc<Session>,
    /// The two live views, made once: they hold no copy, so they never go stale.
    next_turn: Py<PyQueueView>,
    next_step: Py<PyQueueView>,
}

impl PyInbox {
    /// The inbox of `inner`, with its two views.
    pub(crate) fn new(
        inner: Arc<Session>,
        next_turn: Py<PyQueueView>,
        next_step: Py<PyQueueView>,
    ) -> PyInbox {
        PyInbox {
            inner,
            next_turn,
            next_step,
        }
    }

    /// `view`, once the session is known to be open: a closed session's inbox raises
    /// `ClosedError` when read, as it did when these were copies.
    fn open_view(&self, py: Python<'_>, view: &Py<PyQueueView>) -> PyResult<Py<PyQueueView>> {
        let s = &self.inner;
        py.detach(|| s.with_inbox(|_| ())).py()?;
        Ok(view.clone_ref(py))
    }
}

fn target(name: &str) -> PyResult<Target> {
    Target::parse(name).py()
}

#[pymethods]
impl PyInbox {
    /// `next-turn`, as a live read-only view (`QueueView`).
    #[getter]
    fn next_turn(&self, py: Python<'_>) -> PyResult<Py<PyQueueView>> {
        self.open_view(py, &self.next_turn)
    }

    /// `next-step`, as a live read-only view (`QueueView`).
    #[getter]
    fn next_step(&self, py: Python<'_>) -> PyResult<Py<PyQueueView>> {
        self.open_view(py, &self.next_step)
    }

    /// Whether either list holds a message.
    #[getter]
    fn has_pending(&self, py: Python<'_>) -> PyResult<bool> {
        let s = &self.inner;
        py.detach(|| s.inbox().has_pending()).py()
    }

    /// JavaScript `Array.prototype.splice` on `target`; returns the removed messages.
    #[pyo3(signature = (target, start, delete_count, inserted = None))]
    fn splice<'py>(
        &self,
        py: Python<'py>,
        target: &str,
        start: &Bound<'py, PyAny>,
        delete_count: &Bound<'py, PyAny>,
        inserted: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let t = self::target(target)?;
        let start = values::coordinate(start, "start")?;
        let delete = values::coordinate(delete_count, "delete_count")?;
        let inserted = match inserted {
            None => Vec::new(),
            Some(list) => values::messages_from(list, "inserted")?,
        };
        let s = &self.inner;
        let removed = py
            .detach(|| s.inbox().splice(t, start, delete, inserted))
            .py()?;
        values::messages(py, &removed)
    }

    /// Adds `message` at the end of `target`.
    fn append(&self, py: Python<'_>, target: &str, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = self::target(target)?;
        let m = values::message_from(message, "message")?;
        let s = &self.inner;
        py.detach(|| s.inbox().append(t, m)).py()
    }

    /// Adds `message` at the front of `target`.
    fn prepend(&self, py: Python<'_>, target: &str, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = self::target(target)?;
        let m = values::message_from(message, "message")?;
        let s = &self.inner;
        py.detach(|| s.inbox().prepend(t, m)).py()
    }

    /// Replaces the pending message `id` with `message`; `False` when `id` is not
    /// pending.
    fn replace(&self, py: Python<'_>, id: &str, message: &Bound<'_, PyAny>) -> PyResult<bool> {
        let m = values::message_from(message, "message")?;
        let s = &self.inner;
        py.detach(|| s.inbox().replace(id, m)).py()
    }

    /// Removes the pending message `id`; `False` when it is not pending.
    fn remove(&self, py: Python<'_>, id: &str) -> PyResult<bool> {
        let s = &self.inner;
        py.detach(|| s.inbox().remove(id)).py()
    }

    /// Cancels everything pending: `next-step` first, then `next-turn`.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.inbox().clear()).py()
    }

    /// Takes in the messages posted to this session (`Store.post`, ARCHITECTURE.md#posting); returns how
    /// many posts it wrote (each a splice, or an `agent/inbox/rejected` event).
    fn receive(&self, py: Python<'_>) -> PyResult<usize> {
        let s = &self.inner;
        py.detach(|| s.receive()).py()
    }

    fn __repr__(&self) -> String {
        format!("<inboxlog.Inbox of session {:?}>", self.inner.id())
    }
}

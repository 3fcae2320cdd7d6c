//! Fleet features (ARCHITECTURE.md#posting) for Python: `Store.post`, the edits
//! `Store.remove_pending` and `Store.replace_pending`, `Store.follow` and the `Follower`
//! iterator it returns.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use inboxlog::store::Store;
use inboxlog::{Event, Follower, Target};

use crate::errors::OrRaise;
use crate::values;

/// How long one wait of a blocking `__next__` lasts before it looks for a signal
/// (Ctrl-C) with the GIL held again.
const SLICE: Duration = Duration::from_millis(100);

/// Posts `message` to session `id` (the store's `post`), GIL released.
pub(crate) fn post(
    py: Python<'_>,
    store: &Arc<dyn Store>,
    id: &str,
    target: &str,
    message: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let target = Target::parse(target).py()?;
    let message = values::message_from(message, "message")?;
    let store = &**store;
    py.detach(|| store.post(id, target, &message)).py()
}

/// Posts the removal of the pending message `message_id` of session `id` (the store's
/// `remove_pending`), GIL released.
pub(crate) fn remove_pending(
    py: Python<'_>,
    store: &Arc<dyn Store>,
    id: &str,
    message_id: &str,
) -> PyResult<String> {
    let store = &**store;
    py.detach(|| store.remove_pending(id, message_id)).py()
}

/// Posts the replacement of the pending message `message_id` of session `id` by
/// `message` (the store's `replace_pending`), GIL released.
pub(crate) fn replace_pending(
    py: Python<'_>,
    store: &Arc<dyn Store>,
    id: &str,
    message_id: &str,
    message: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let message = values::message_from(message, "message")?;
    let store = &**store;
    py.detach(|| store.replace_pending(id, message_id, &message))
        .py()
}

/// Opens a follower of session `id` from seq `since`.
pub(crate) fn follow(
    py: Python<'_>,
    store: &Arc<dyn Store>,
    id: &str,
    since: u64,
) -> PyResult<PyFollower> {
    let store = &**store;
    let follower = py
        .detach(|| inboxlog::Follower::open(store, id, since))
        .py()?;
    Ok(PyFollower {
        session: id.to_owned(),
        inner: Mutex::new(Some(follower)),
    })
}

/// The events of one session from a seq on, as they are committed (`Store.follow`).
///
/// Iterating blocks (GIL released) until the next event; `next(timeout)` waits at most
/// `timeout` seconds and returns `None` when nothing came. `next_seq` is where a new
/// follower resumes with nothing skipped or repeated.
#[pyclass(frozen, name = "Follower", module = "inboxlog")]
pub(crate) struct PyFollower {
    session: String,
    inner: Mutex<Option<Follower>>,
}

fn closed(session: &str) -> PyErr {
    let err = inboxlog::Error::new(
        inboxlog::ErrorKind::Closed,
        format!("the follower of session \"{session}\" is closed"),
    )
    .with_session(session);
    crate::errors::raise(err)
}

impl PyFollower {
    fn lock(&self) -> MutexGuard<'_, Option<Follower>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One wait of at most `wait`, GIL released.
    fn wait(&self, py: Python<'_>, wait: Duration) -> PyResult<Option<Event>> {
        let got = py.detach(|| {
            let mut guard = self.lock();
            match guard.as_mut() {
                None => Err(None),
                Some(f) => f.next_timeout(wait).map_err(Some),
            }
        });
        match got {
            Ok(event) => Ok(event),
            Err(None) => Err(closed(&self.session)),
            Err(Some(e)) => Err(crate::errors::raise(e)),
        }
    }

    /// The next event, waiting at most `timeout` seconds (forever when `None`) in
    /// slices, between which a signal (Ctrl-C) raises; `None` when none came in time.
    fn next_event(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Event>> {
        let mut left = match timeout {
            None => None,
            Some(t) => Some(
                Duration::try_from_secs_f64(t)
                    .map_err(|_| PyValueError::new_err(format!("timeout {t} is not a duration")))?,
            ),
        };
        loop {
            let wait = left.map_or(SLICE, |left| left.min(SLICE));
            if let Some(event) = self.wait(py, wait)? {
                return Ok(Some(event));
            }
            if let Some(left) = &mut left {
                *left = left.saturating_sub(wait);
                if left.is_zero() {
                    return Ok(None);
                }
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl PyFollower {
    /// The followed session's id.
    #[getter]
    fn session(&self) -> &str {
        &self.session
    }

    /// The seq of the next event to come.
    #[getter]
    fn next_seq(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.lock().as_ref().map(Follower::next_seq))
            .ok_or_else(|| closed(&self.session))
    }

    /// The next event, waiting at most `timeout` seconds (forever when `None`);
    /// `None` when none came in time.
    #[pyo3(signature = (timeout = None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        match self.next_event(py, timeout)? {
            Some(event) => values::event(py, &event).map(Some),
            None => Ok(None),
        }
    }

    /// [`Self::next`] as the core's JSON text of the event (the lines
    /// `python -m inboxlog tail --json` prints).
    #[pyo3(name = "_next_line", signature = (timeout = None))]
    fn next_line(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<String>> {
        Ok(self.next_event(py, timeout)?.map(|e| e.to_json()))
    }

    /// Releases the file; later calls raise `ClosedError`. Closing twice is fine.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.lock().take());
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let event = self.next_event(py, None)?;
        // Waiting without a timeout ends only with an event or an exception.
        let event = event.ok_or_else(|| closed(&self.session))?;
        values::event(py, &event)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("<inboxlog.Follower of session {:?}>", self.session)
    }
}

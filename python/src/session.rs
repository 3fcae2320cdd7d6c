//! `Session` (its `inbox` view is `inbox.rs`).
//!
//! Arguments are converted first; every core call then runs with the GIL released
//! (`py.detach`), so file I/O and fsync never block other Python threads, and an
//! observer running on another thread can take the GIL. Results are converted back
//! with the GIL held.
//!
//! One exception: `append` to a store whose appends never wait for a disk or a server
//! keeps the GIL when it can run at once (see [`PySession::append`]).

use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::value::RawValue;

use inboxlog::wire::{self, FromJson, ToJson};
use inboxlog::{
    ApprovalOutcome, CancelCause, Decision, Envelope, Extra, Session, StepBoundary, StepOutcome,
    Target, TryAppend, TurnClaim, TurnError,
};

use crate::convert::{dict_to_json, to_json, to_json_and_copy, to_py};
use crate::errors::{ObserverWarning, OrRaise};
use crate::inbox::PyInbox;
use crate::queue_view::PyQueueView;
use crate::values;

/// One open session: the exclusive writer of a log, with its inbox and the
/// step-boundary protocol. Safe to share between threads.
#[pyclass(frozen, name = "Session", module = "inboxlog")]
pub(crate) struct PySession {
    inner: Arc<Session>,
    /// The one inbox view, made once (`session.inbox` is read on every call).
    inbox: Py<PyInbox>,
    /// Whether the store's appends never wait for a disk or a server.
    quick_appends: bool,
    /// Whether an observer was ever registered (it is never unregistered).
    observed: AtomicBool,
}

impl PySession {
    /// A Python session over `session`; `quick_appends` when its store's appends never
    /// wait for a disk or a server.
    pub(crate) fn new(
        py: Python<'_>,
        session: Session,
        quick_appends: bool,
    ) -> PyResult<PySession> {
        let inner = Arc::new(session);
        let view = |target| Py::new(py, PyQueueView::new(inner.clone(), target));
        let inbox = Py::new(
            py,
            PyInbox::new(
                inner.clone(),
                view(Target::NextTurn)?,
                view(Target::NextStep)?,
            ),
        )?;
        Ok(PySession {
            inner,
            inbox,
            quick_appends,
            observed: AtomicBool::new(false),
        })
    }
}

fn callable(f: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyAny>> {
    if !f.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "{what} needs a callable, not {}",
            f.get_type().qualname()?
        )));
    }
    Ok(f.clone().unbind())
}

/// Reports an exception raised by an observer as an `ObserverWarning` (or, when
/// warnings are errors, as an unraisable exception): the committed call stays committed.
/// Returns the failure's description, which the core keeps for
/// `take_observer_failures`.
fn report(py: Python<'_>, callback: &Bound<'_, PyAny>, what: &str, err: &PyErr) -> String {
    let name = callback
        .getattr("__qualname__")
        .and_then(|n| n.extract::<String>())
        .or_else(|_| callback.repr().map(|r| r.to_string()))
        .unwrap_or_else(|_| "?".to_owned());
    let ty = err
        .get_type(py)
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    let msg = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let failure = format!("{what} callback {name} raised {ty}: {msg}");
    let text = format!("inboxlog {failure} (contained; the change stays committed)");
    let text = CString::new(text.replace('\0', "\\0")).expect("NULs replaced");
    let category = py.get_type::<ObserverWarning>();
    if let Err(raised) = PyErr::warn(py, &category, &text, 1) {
        raised.write_unraisable(py, Some(callback));
    }
    failure
}

/// `step_boundary`'s answer as Python sees it: `{"proposal", "decided"}`.
pub(crate) fn boundary_dict<'py>(
    py: Python<'py>,
    b: &StepBoundary,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("proposal", values::proposal(py, &b.proposal)?)?;
    out.set_item("decided", to_py(py, &b.decided.to_json())?)?;
    Ok(out)
}

/// An optional argument, with `None` read as absent.
fn present<'a, 'py>(v: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none())
}

/// Keyword extras of a protocol call as host keys for the event it writes (ARCHITECTURE.md#reserved-events).
fn extra_of(extra: Option<&Bound<'_, PyDict>>) -> PyResult<Extra> {
    match extra.filter(|d| !d.is_empty()) {
        None => Ok(Extra::none()),
        Some(d) => Extra::from_json(&to_json(d.as_any(), "extra")?).py(),
    }
}

fn cancel_cause(cause: Option<&Bound<'_, PyAny>>) -> PyResult<CancelCause> {
    let Some(cause) = cause.filter(|c| !c.is_none()) else {
        return Ok(CancelCause::User);
    };
    if let Ok(kind) = cause.extract::<String>() {
        return wire::cancel_cause_named(&kind).py();
    }
    CancelCause::from_json(&dict_to_json(cause, "cause")?).py()
}

#[pymethods]
impl PySession {
    /// The session id.
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// The log's header as a dict.
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.header().to_json())
    }

    /// Seq of the last event, `None` for an empty log.
    #[getter]
    fn last_seq(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let s = &self.inner;
        py.detach(|| s.last_seq()).py()
    }

    /// The open turn's number, `None` when idle.
    #[getter]
    fn current_turn(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let s = &self.inner;
        py.detach(|| s.turn_open()).py()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        let s = &self.inner;
        py.detach(|| {
            s.last_seq()
                .is_err_and(|e| e.kind() == inboxlog::ErrorKind::Closed)
        })
    }

    /// What opening found and fixed: `{"tornBytes": int, "repairedTurn": int | None,
    /// "repairedCompaction": str | None}`, spelled as in the C ABI.
    #[getter]
    fn open_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.open_report().to_json())
    }

    /// Takes the observer failures recorded since the last call, oldest first: one str
    /// each (each was also reported as an `ObserverWarning` when it happened). Only
    /// the last 64 are kept; when older ones were dropped, the first str says how many.
    fn take_observer_failures(&self) -> Vec<String> {
        self.inner.take_observer_failures().lines()
    }

    /// The model-visible surface: the seqs of its events, in the order the model sees
    /// them (SPEC §15.3).
    fn surface(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        let s = &self.inner;
        py.detach(|| s.surface()).py()
    }

    /// The messages the model sees, as dicts, in order: a `user/message`'s data, an
    /// `assistant/message`'s or a `tool/result`'s `data["message"]` (SPEC §15.3).
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let s = &self.inner;
        let messages = py.detach(|| s.messages()).py()?;
        let list = PyList::empty(py);
        for m in &messages {
            list.append(to_py(py, m)?)?;
        }
        Ok(list)
    }

    /// The events with `seq >= since`, as dicts.
    #[pyo3(signature = (since = 0))]
    fn events<'py>(&self, py: Python<'py>, since: u64) -> PyResult<Bound<'py, PyList>> {
        let s = &self.inner;
        let events = py.detach(|| s.events(since)).py()?;
        values::events(py, &events)
    }

    /// Appends a host event and returns it as stored. The envelope keywords are snake
    /// case (`surface_op` is the log's `surfaceOp`, `source_event_seqs` its
    /// `sourceEventSeqs`).
    #[pyo3(signature = (
        r#type, data, *, ignorable = false, surface_op = None, source_event_seqs = None
    ))]
    fn append<'py>(
        &self,
        py: Python<'py>,
        r#type: &Bound<'py, PyString>,
        data: &Bound<'py, PyAny>,
        ignorable: bool,
        surface_op: Option<&Bound<'py, PyAny>>,
        source_event_seqs: Option<Vec<u64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        // The returned event holds the plain copies of `data` and `surface_op`, which
        // equal what reading the stored text back gives: nothing is parsed again.
        let (data, data_copy) = to_json_and_copy(data, "data")?;
        let (surface_op, op_copy) = match present(surface_op) {
            None => (None, None),
            Some(op) => {
                let (text, copy) = to_json_and_copy(op, "surface_op")?;
                let raw = RawValue::from_string(text.into_string())
                    .expect("the converter writes valid JSON");
                (Some(raw), Some(copy))
            }
        };
        let envelope = Envelope {
            ignorable,
            surface_op,
            source_event_seqs,
        };
        let ty = r#type.to_cow()?;
        let s = &self.inner;
        // A quick append (memory, or JSONL with durability "none": one write to the
        // page cache, about a microsecond) keeps the GIL when nothing stands in its
        // way. Releasing the GIL for so short a call costs more than the call whenever
        // another thread runs Python: that thread takes the GIL, and this one waits out
        // a switch interval (5 ms by default) to get it back. Measured with one busy
        // thread beside the appending one: 77 µs per append when released, 9 µs when
        // kept. The GIL is still released to wait: when another call holds the session
        // (`try_append` answers `Busy`), and whenever an observer is registered, as an
        // observer takes the GIL on the thread that publishes, which may be one this
        // call would wait for. `observed` is read after converting the arguments, whose
        // Python code (a mapping's `items()`) may register one; no other thread can
        // while this one holds the GIL through the call.
        let quick = self.quick_appends && !self.observed.load(Ordering::Relaxed);
        let attempt = if quick {
            s.try_append(&ty, data, envelope)
        } else {
            TryAppend::Busy(data, envelope)
        };
        let event = match attempt {
            TryAppend::Done(appended) => appended,
            TryAppend::Busy(data, envelope) => py.detach(|| s.append_json(&ty, data, envelope)),
        }
        .py()?;
        // The event's type is the argument, the very str when it is an exact one.
        let ty = if r#type.is_exact_instance_of::<PyString>() {
            r#type.clone()
        } else {
            PyString::new(py, &ty)
        };
        values::event_dict(py, &event, ty, data_copy, op_copy)
    }

    /// Makes everything appended so far durable (the barrier of `batched` mode).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.flush()).py()
    }

    /// Flushes and releases the log; later calls raise `ClosedError`. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.close()).py()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<inboxlog.Session {:?}>", self.inner.id())
    }

    /// Registers `fn(event)`, called for every committed event; returns `fn`.
    fn on_event<'py>(&self, callback: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let f = callable(&callback, "on_event")?;
        self.observed.store(true, Ordering::Relaxed);
        self.inner.on_event(move |event| {
            Python::attach(|py| {
                let f = f.bind(py);
                let called = values::event(py, event).and_then(|e| f.call1((e,)));
                called
                    .map(drop)
                    .map_err(|err| report(py, f, "on_event", &err))
            })
        });
        Ok(callback)
    }

    /// Registers `fn(notice)`, called for every inbox notification; returns `fn`.
    fn on_inbox<'py>(&self, callback: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let f = callable(&callback, "on_inbox")?;
        self.observed.store(true, Ordering::Relaxed);
        self.inner.on_inbox(move |notice| {
            Python::attach(|py| {
                let f = f.bind(py);
                let called = values::notice(py, notice).and_then(|n| f.call1((n,)));
                called
                    .map(drop)
                    .map_err(|err| report(py, f, "on_inbox", &err))
            })
        });
        Ok(callback)
    }

    /// The inbox operations of this session.
    #[getter]
    fn inbox(&self, py: Python<'_>) -> Py<PyInbox> {
        self.inbox.clone_ref(py)
    }

    /// The inbox as of the event at `at` (default: the end), as
    /// `{"seq", "next_turn", "next_step"}`. An `at` past the last event raises
    /// `InvalidInputError` naming the log's length (the C ABI's `upto`), never clamped.
    #[pyo3(signature = (at = None))]
    fn baseline<'py>(&self, py: Python<'py>, at: Option<u64>) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.inner;
        let text = py.detach(|| s.baseline(at).map(|b| b.to_json())).py()?;
        to_py(py, &text)
    }

    /// Opens the next turn; returns its number. Keyword arguments are host extras for
    /// the `turn/start` data (e.g. `trigger={...}`).
    #[pyo3(signature = (**extra))]
    fn open_turn(&self, py: Python<'_>, extra: Option<&Bound<'_, PyDict>>) -> PyResult<u64> {
        let extra = extra_of(extra)?;
        let s = &self.inner;
        py.detach(|| s.open_turn_with(&extra)).py()
    }

    /// Claims input for the next step: `{"turn", "step", "messages"}`. The turn's
    /// first proposal claims the first message of `next-turn`, or all of it with
    /// `whole_next_turn=True` (a framework run's first step).
    #[pyo3(signature = (*, whole_next_turn = false))]
    fn propose_step<'py>(
        &self,
        py: Python<'py>,
        whole_next_turn: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner;
        let claim = if whole_next_turn {
            TurnClaim::Whole
        } else {
            TurnClaim::First
        };
        let p = py.detach(|| s.propose_step_claiming(claim)).py()?;
        values::proposal(py, &p)
    }

    /// The one pre-step decision: `{"kind": "reject"}` or
    /// `{"kind": "enter", "messages": [...]}`.
    /// Keyword arguments are host extras for the first event written (`step/start`,
    /// or `turn/end`).
    #[pyo3(signature = (decision, **extra))]
    fn decide<'py>(
        &self,
        py: Python<'py>,
        decision: &Bound<'py, PyAny>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let decision = Decision::from_json(&dict_to_json(decision, "decision")?).py()?;
        let extra = extra_of(extra)?;
        let s = &self.inner;
        let decided = py.detach(|| s.decide_with(decision, &extra)).py()?;
        to_py(py, &decided.to_json())
    }

    /// Ends the open step (`"continue"`, `"completed"` or `"max-tokens"`); returns
    /// whether another step must be proposed. Keyword arguments are host extras for
    /// the `step/end` data.
    #[pyo3(signature = (outcome, **extra))]
    fn end_step(
        &self,
        py: Python<'_>,
        outcome: &str,
        extra: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<bool> {
        let outcome = StepOutcome::parse(outcome).py()?;
        let extra = extra_of(extra)?;
        let s = &self.inner;
        py.detach(|| s.end_step_with(outcome, &extra)).py()
    }

    /// `end_step(end_step)` (when given), `propose_step(whole_next_turn=...)` and
    /// `decide({"kind": "enter", "messages": <the claim>})` as one call and one durable
    /// write, with the same events; `{"proposal", "decided"}`, or `None` when
    /// `end_step` answered that no other step is due (the step ended, nothing claimed).
    #[pyo3(signature = (end_step = None, *, whole_next_turn = false))]
    fn step_boundary<'py>(
        &self,
        py: Python<'py>,
        end_step: Option<&str>,
        whole_next_turn: bool,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let end = end_step.map(StepOutcome::parse).transpose().py()?;
        let claim = if whole_next_turn {
            TurnClaim::Whole
        } else {
            TurnClaim::First
        };
        let s = &self.inner;
        let Some(b) = py.detach(|| s.step_boundary(end, claim)).py()? else {
            return Ok(None);
        };
        boundary_dict(py, &b).map(Some)
    }

    /// `end_step(outcome)` and, when no other step is due, `close_turn()`, as one call
    /// and one durable write, with the same events: the turn's end, or `None` when
    /// another step must be proposed (only the step ended).
    fn end_step_and_close<'py>(
        &self,
        py: Python<'py>,
        outcome: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let outcome = StepOutcome::parse(outcome).py()?;
        let s = &self.inner;
        match py.detach(|| s.end_step_and_close(outcome)).py()? {
            None => Ok(None),
            Some(decided) => to_py(py, &decided.to_json()).map(Some),
        }
    }

    /// Ends a concluded turn. Keyword arguments are host extras for the `turn/end`
    /// data.
    #[pyo3(signature = (**extra))]
    fn close_turn<'py>(
        &self,
        py: Python<'py>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let extra = extra_of(extra)?;
        let s = &self.inner;
        let decided = py.detach(|| s.close_turn_with(&extra)).py()?;
        to_py(py, &decided.to_json())
    }

    /// Cancels: clears the inbox unless `keep_inbox`, then aborts the open turn.
    /// `cause` is a dict like `{"kind": "user"}`, a kind name, or `None` (user).
    /// Keyword arguments are host extras for the aborted turn's `turn/end` data.
    #[pyo3(signature = (cause = None, keep_inbox = false, **extra))]
    fn cancel(
        &self,
        py: Python<'_>,
        cause: Option<&Bound<'_, PyAny>>,
        keep_inbox: bool,
        extra: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let cause = cancel_cause(cause)?;
        let extra = extra_of(extra)?;
        let s = &self.inner;
        py.detach(|| s.cancel_with(cause, keep_inbox, &extra)).py()
    }

    /// Asks for a person's approval `id` of a call of tool `tool_name` (SPEC §17.1):
    /// writes `approval/asked`. `call_id` names a tool call still waiting for its
    /// result, `arguments` is any JSON value, `reason` a str. Raises `ProtocolError`
    /// with no open turn or a parked one, `InvalidInputError` for an id asked before.
    #[pyo3(signature = (id, tool_name, call_id = None, arguments = None, reason = None))]
    fn ask_approval(
        &self,
        py: Python<'_>,
        id: &str,
        tool_name: &str,
        call_id: Option<&str>,
        arguments: Option<&Bound<'_, PyAny>>,
        reason: Option<&str>,
    ) -> PyResult<()> {
        let arguments = arguments.map(|a| to_json(a, "arguments")).transpose()?;
        let s = &self.inner;
        py.detach(|| s.ask_approval(id, tool_name, call_id, arguments.as_deref(), reason))
            .py()
            .map(drop)
    }

    /// Decides approval `id`: `outcome` is `"allowed-once"`, `"rejected"`,
    /// `"cancelled"` or `"unavailable"`. A call not allowed is answered
    /// `TOOL_NOT_ALLOWED`. A decision for an approval not pending is recorded as
    /// rejected, then raises `AlreadyDecidedError` (or `NotFoundError`).
    fn decide_approval(&self, py: Python<'_>, id: &str, outcome: &str) -> PyResult<()> {
        let outcome = ApprovalOutcome::parse(outcome).py()?;
        let s = &self.inner;
        py.detach(|| s.decide_approval(id, outcome)).py()
    }

    /// The approvals waiting for a decision, each its `approval/asked` data, in order.
    fn pending_approvals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.inner;
        let pending = py.detach(|| s.pending_approvals()).py()?;
        to_py(py, &format!("[{}]", pending.join(",")))
    }

    /// Parks the open turn on its pending approvals (SPEC §17.2), with `state` (any
    /// JSON value) for whoever resumes the run. Raises `ProtocolError` with no open
    /// turn, a parked one, or no pending approval.
    #[pyo3(signature = (state = None))]
    fn park(&self, py: Python<'_>, state: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let state = state.map(|v| to_json(v, "state")).transpose()?;
        let s = &self.inner;
        py.detach(|| s.park(state.as_deref())).py().map(drop)
    }

    /// The parked turn, `{"turn", "approvals": [id, ...], "ready"}`, or `None` when the
    /// open turn is not parked.
    fn parked<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.inner;
        let parked = py.detach(|| s.parked()).py()?;
        to_py(py, &wire::parked_json(parked.as_ref()))
    }

    /// Whether the turn is parked and every approval it names is decided, after taking
    /// posted decisions in; `False` when not parked.
    fn approvals_ready(&self, py: Python<'_>) -> PyResult<bool> {
        let s = &self.inner;
        py.detach(|| s.approvals_ready()).py()
    }

    /// Hands the parked run on (writes `turn/resumed`) and returns `{"turn", "parked":
    /// turn/parked data, "decisions": [{"id", "outcome"}, ...]}`. Raises
    /// `ApprovalsPendingError` while any is pending, `ProtocolError` when not parked.
    fn resume_parked<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.inner;
        let resumed = py.detach(|| s.resume_parked()).py()?;
        to_py(py, &resumed.to_json())
    }

    /// Starts a compaction of the surface from seq `start` through seq `end` (SPEC §16):
    /// writes `compaction/start` and returns its `Compaction` handle (the messages to
    /// summarize, `commit`, `abort`). Raises `BusyError` while one runs,
    /// `ProtocolError` with a step open, a proposal pending or a parked turn,
    /// `InvalidInputError` for a range not on the surface or one that splits a tool
    /// call from its result; nothing is written then.
    fn begin_compaction(
        &self,
        py: Python<'_>,
        start: u64,
        end: u64,
    ) -> PyResult<crate::compaction::PyCompaction> {
        crate::compaction::begin(py, &self.inner, start, end)
    }

    /// A whole compaction (SPEC §16): `begin_compaction(start, end)`, then
    /// `summarize(messages)` (the shadowed messages as dicts; returns a str or a list
    /// of blocks), then `commit` by `provider`'s `model`. When `summarize` raises, the
    /// compaction ends with the exception's text and the exception propagates.
    #[pyo3(signature = (start, end, summarize, *, provider, model))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
        summarize: &Bound<'py, PyAny>,
        provider: &str,
        model: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        crate::compaction::compact(py, &self.inner, start, end, summarize, provider, model)
    }

    /// Prunes the `tool/result` at `seq` on the surface (SPEC §16): when its text is
    /// longer than 8,192 code points, writes `compaction/prune` and a `tool/result`
    /// keeping the first 4,096 and last 1,024 around a marker, and returns that event;
    /// `None` when it is not that long. Raises `InvalidInputError` when `seq` is not a
    /// `tool/result` on the surface.
    fn prune<'py>(&self, py: Python<'py>, seq: u64) -> PyResult<Option<Bound<'py, PyDict>>> {
        crate::compaction::prune(py, &self.inner, seq)
    }

    /// The `compactionId` of the compaction running, or `None`.
    fn running_compaction(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let s = &self.inner;
        py.detach(|| s.running_compaction()).py()
    }

    /// Ends the open turn with `error` (a dict with str `message` and `code`).
    /// Keyword arguments are host extras for the `turn/end` data.
    #[pyo3(signature = (error, **extra))]
    fn fail(
        &self,
        py: Python<'_>,
        error: &Bound<'_, PyAny>,
        extra: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let error = TurnError::from_json(&dict_to_json(error, "error")?).py()?;
        let extra = extra_of(extra)?;
        let s = &self.inner;
        py.detach(|| s.fail_with(error, &extra)).py()
    }
}

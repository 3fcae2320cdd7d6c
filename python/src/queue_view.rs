//! `Inbox.next_turn` and `Inbox.next_step`: live, read-only views of one inbox list.
//!
//! A view holds the session and a target, never a copy, so `len(view)`, `bool(view)`
//! and `view[i]` cost O(log n) whatever the list's length (the core keeps each list
//! as an implicit treap). Each read takes the session lock with the GIL released and
//! only clones the messages it needs (a clone shares the message's text); they become
//! dicts afterwards, with the lock released, so no core lock is held while Python
//! runs. Iteration reads `CHUNK` messages per lock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyBool, PyDict, PyList, PySlice, PyString};

use inboxlog::{ErrorKind, Inbox, Message, Session, Target};

use crate::errors::OrRaise;
use crate::values;

/// Messages read per lock by iteration and by the comparisons that walk a list.
const CHUNK: usize = 64;

/// One list of one session's inbox, read under the session lock.
#[derive(Clone)]
struct Queue {
    session: Arc<Session>,
    target: Target,
}

impl Queue {
    /// Runs `f` on the inbox under the session lock, GIL released; `ClosedError` once
    /// the session is closed.
    fn read<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Inbox, Target) -> R + Send,
    ) -> PyResult<R> {
        let (session, target) = (&self.session, self.target);
        py.detach(|| session.with_inbox(|inbox| f(inbox, target)))
            .py()
    }

    fn len(&self, py: Python<'_>) -> PyResult<usize> {
        self.read(py, Inbox::len)
    }

    /// The messages from position `from` up to `to` (exclusive) that exist now.
    fn range(&self, py: Python<'_>, from: usize, to: usize) -> PyResult<Vec<Message>> {
        self.read(py, |inbox, t| {
            (from..to)
                .map_while(|pos| inbox.get(t, pos).cloned())
                .collect()
        })
    }

    /// Whether two queues are the same list of the same session.
    fn same(&self, other: &Queue) -> bool {
        Arc::ptr_eq(&self.session, &other.session) && self.target == other.target
    }
}

/// A live, read-only view of one inbox list (`Inbox.next_turn`, `Inbox.next_step`).
///
/// A `collections.abc.Sequence` of message dicts that always shows the list as it is
/// now, as `dict.keys()` shows its dict. `len`, `bool` and `view[i]` are O(log n);
/// a slice is a plain list, and `view[:]` copies the whole list at one instant. It
/// equals a list of equal dicts (and another view with equal items), never a tuple,
/// and it is unhashable, as a list is; its repr is the list's. Iterating reads the
/// list 64 messages at a time by position, as a list iterator walks its list: a
/// change made meanwhile shows from the next 64 on and never raises, so to change the
/// inbox while walking it, walk a copy (`view[:]`). Reading a view of a closed
/// session raises `ClosedError`.
#[pyclass(frozen, sequence, name = "QueueView", module = "inboxlog")]
pub(crate) struct PyQueueView {
    queue: Queue,
}

impl PyQueueView {
    pub(crate) fn new(session: Arc<Session>, target: Target) -> PyQueueView {
        PyQueueView {
            queue: Queue { session, target },
        }
    }

    /// The items at the positions a slice picks, read at one instant: the positions
    /// depend only on the length, so they are recomputed if it changed meanwhile.
    fn slice<'py>(
        &self,
        py: Python<'py>,
        slice: &Bound<'py, PySlice>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut len = self.queue.len(py)?;
        loop {
            let picked = slice.indices(isize::try_from(len)?)?;
            let (start, step) = (picked.start, picked.step);
            // Every position a slice picks lies in `0..len`.
            let positions = (0..picked.slicelength)
                .map(move |i| (start + i as isize * step) as usize)
                .collect::<Vec<_>>();
            let read = self.queue.read(py, |inbox, t| {
                let now = inbox.len(t);
                if now != len {
                    return Err(now);
                }
                Ok(positions
                    .iter()
                    .filter_map(|&pos| inbox.get(t, pos).cloned())
                    .collect::<Vec<_>>())
            })?;
            match read {
                Ok(messages) => return values::messages(py, &messages),
                Err(now) => len = now,
            }
        }
    }

    /// Calls `visit(item)` on each item from `from` up to `to` (exclusive) in order,
    /// until it returns `true`; returns the position it stopped at.
    fn scan(
        &self,
        py: Python<'_>,
        from: usize,
        to: usize,
        mut visit: impl FnMut(&Bound<'_, PyAny>) -> PyResult<bool>,
    ) -> PyResult<Option<usize>> {
        let mut pos = from;
        while pos < to {
            let chunk = self
                .queue
                .range(py, pos, to.min(pos.saturating_add(CHUNK)))?;
            if chunk.is_empty() {
                break;
            }
            for m in &chunk {
                if visit(&values::message(py, m)?)? {
                    return Ok(Some(pos));
                }
                pos += 1;
            }
        }
        Ok(None)
    }

    /// Where `value` can equal an item, answered by the message id when `value` is a
    /// plain dict with a plain str `id` (ids are unique in the inbox, and a dict equals
    /// a message's only if their ids are equal strings) or no `id` at all.
    fn by_id(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<ById> {
        let Ok(dict) = value.cast_exact::<PyDict>() else {
            return Ok(ById::Unknown);
        };
        let Some(id) = dict.get_item("id")? else {
            return Ok(ById::Absent);
        };
        let Some(id) = id
            .cast_exact::<PyString>()
            .ok()
            .and_then(|s| s.extract::<String>().ok())
        else {
            return Ok(ById::Unknown);
        };
        let found = self.queue.read(py, |inbox, t| match inbox.find(&id) {
            Some((target, pos)) if target == t => inbox.get(t, pos).map(|m| (pos, m.clone())),
            _ => None,
        })?;
        match found {
            Some((pos, m)) if values::message(py, &m)?.eq(value)? => Ok(ById::At(pos)),
            _ => Ok(ById::Absent),
        }
    }

    /// The first position from `from` up to `to` (exclusive) whose item equals
    /// `value`, comparing as a list does (`item == value`).
    fn position(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        from: usize,
        to: usize,
    ) -> PyResult<Option<usize>> {
        match self.by_id(py, value)? {
            ById::At(pos) => Ok((from..to).contains(&pos).then_some(pos)),
            ById::Absent => Ok(None),
            ById::Unknown => self.scan(py, from, to, |item| item.eq(value)),
        }
    }

    /// Whether the items equal those of `list`, in order, compared as two lists are.
    fn equals_list(&self, py: Python<'_>, list: &Bound<'_, PyList>) -> PyResult<bool> {
        if self.queue.len(py)? != list.len() {
            return Ok(false);
        }
        let mut pos = 0;
        loop {
            let chunk = self.queue.range(py, pos, pos + CHUNK)?;
            for m in &chunk {
                // An item's `__eq__` may shrink the list: what is missing differs.
                let Ok(other) = list.get_item(pos) else {
                    return Ok(false);
                };
                if !values::message(py, m)?.eq(other)? {
                    return Ok(false);
                }
                pos += 1;
            }
            if chunk.len() < CHUNK {
                return Ok(pos == list.len());
            }
        }
    }

    /// Whether the items equal those of `other`, in order. Equal message texts need
    /// no dicts; different texts may still be equal dicts (`1` and `1.0`, key order).
    fn equals_view(&self, py: Python<'_>, other: &PyQueueView) -> PyResult<bool> {
        if self.queue.same(&other.queue) {
            return Ok(true);
        }
        if self.queue.len(py)? != other.queue.len(py)? {
            return Ok(false);
        }
        let mut pos = 0;
        loop {
            let mine = self.queue.range(py, pos, pos + CHUNK)?;
            let theirs = other.queue.range(py, pos, pos + CHUNK)?;
            if mine.len() != theirs.len() {
                return Ok(false);
            }
            for (a, b) in mine.iter().zip(&theirs) {
                if a != b && !values::message(py, a)?.eq(values::message(py, b)?)? {
                    return Ok(false);
                }
            }
            if mine.len() < CHUNK {
                return Ok(true);
            }
            pos += CHUNK;
        }
    }
}

/// What the message ids tell about where a value can equal an item.
enum ById {
    /// Nothing: every item must be compared.
    Unknown,
    /// It equals no item.
    Absent,
    /// It equals the item at this position, and only that one.
    At(usize),
}

#[pymethods]
impl PyQueueView {
    /// Unhashable, as the list it shows (it compares equal to lists).
    #[classattr]
    const __hash__: Option<Py<PyAny>> = None;

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.queue.len(py)
    }

    /// `view[i]` (negative counts from the end) is a dict; `view[a:b:c]` a list.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = key.cast::<PySlice>() {
            return Ok(self.slice(py, slice)?.into_any());
        }
        let index = index_of(key)?;
        let found = self.queue.read(py, |inbox, t| {
            let pos = if index < 0 {
                index.checked_add_unsigned(inbox.len(t))
            } else {
                Some(index)
            };
            let pos = usize::try_from(pos?).ok()?;
            inbox.get(t, pos).cloned()
        })?;
        match found {
            Some(m) => values::message(py, &m),
            None => Err(PyIndexError::new_err("QueueView index out of range")),
        }
    }

    fn __iter__(&self) -> PyQueueViewIterator {
        PyQueueViewIterator::new(self.queue.clone(), Direction::Forward, 0)
    }

    fn __reversed__(&self, py: Python<'_>) -> PyResult<PyQueueViewIterator> {
        let len = self.queue.len(py)?;
        Ok(PyQueueViewIterator::new(
            self.queue.clone(),
            Direction::Backward,
            len,
        ))
    }

    fn __contains__(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.position(py, value, 0, usize::MAX)?.is_some())
    }

    /// The first position of `value` from `start` up to `stop` (exclusive; negative
    /// counts from the end), as `list.index`; `ValueError` when it is not there.
    #[pyo3(signature = (value, start = 0, stop = None, /))]
    fn index(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        start: isize,
        stop: Option<isize>,
    ) -> PyResult<usize> {
        let len = self.queue.len(py)?;
        let from = from_end(start, len);
        let to = stop.map_or(usize::MAX, |stop| from_end(stop, len));
        self.position(py, value, from, to)?.ok_or_else(|| {
            let shown = value
                .repr()
                .map_or_else(|_| "value".into(), |r| r.to_string());
            PyValueError::new_err(format!("{shown} is not in QueueView"))
        })
    }

    /// How many items equal `value`.
    #[pyo3(signature = (value, /))]
    fn count(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<usize> {
        match self.by_id(py, value)? {
            ById::At(_) => Ok(1),
            ById::Absent => Ok(0),
            ById::Unknown => {
                let mut count = 0;
                self.scan(py, 0, usize::MAX, |item| {
                    count += usize::from(item.eq(value)?);
                    Ok(false)
                })?;
                Ok(count)
            }
        }
    }

    /// `==` and `!=` with a list or another view; other comparisons, and any other
    /// type (a tuple included), are `NotImplemented`, as for a list.
    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        if !matches!(op, CompareOp::Eq | CompareOp::Ne) {
            return Ok(py.NotImplemented());
        }
        let equal = if let Ok(view) = other.cast::<PyQueueView>() {
            self.equals_view(py, view.get())?
        } else if let Ok(list) = other.cast::<PyList>() {
            self.equals_list(py, list)?
        } else {
            return Ok(py.NotImplemented());
        };
        Ok(PyBool::new(py, equal == matches!(op, CompareOp::Eq))
            .to_owned()
            .into_any()
            .unbind())
    }

    /// The list's repr, e.g. `[{'id': 'a'}]`; a closed session's view names itself.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let queue = &self.queue;
        match py.detach(|| queue.session.with_inbox(|inbox| inbox.list(queue.target))) {
            Ok(all) => Ok(values::messages(py, &all)?.repr()?.to_string()),
            Err(e) if e.kind() == ErrorKind::Closed => Ok(format!(
                "<inboxlog.QueueView {} of closed session {:?}>",
                queue.target.as_str(),
                queue.session.id()
            )),
            Err(e) => Err(e).py(),
        }
    }
}

/// An index as a list takes one: an int, or any object with `__index__`. One too
/// large for a position is out of range.
fn index_of(key: &Bound<'_, PyAny>) -> PyResult<isize> {
    let ty = key.get_type();
    if !ty.hasattr("__index__")? {
        return Err(PyTypeError::new_err(format!(
            "QueueView indices must be integers or slices, not {}",
            ty.name()?
        )));
    }
    key.extract::<isize>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(key.py()) {
            PyIndexError::new_err("QueueView index out of range")
        } else {
            e
        }
    })
}

/// A `start` or `stop` of `index` as a position: negative counts from the end of a
/// list of `len`, clamped at its front.
fn from_end(i: isize, len: usize) -> usize {
    match usize::try_from(i) {
        Ok(pos) => pos,
        Err(_) => len.saturating_sub(i.unsigned_abs()),
    }
}

/// Which way an iterator walks.
#[derive(Clone, Copy)]
enum Direction {
    Forward,
    Backward,
}

/// An iterator over a `QueueView`: it walks the list by position, as a list
/// iterator does, reading `CHUNK` messages per lock.
#[pyclass(frozen, name = "QueueViewIterator", module = "inboxlog")]
pub(crate) struct PyQueueViewIterator {
    queue: Queue,
    direction: Direction,
    cursor: Mutex<Cursor>,
}

/// Where an iterator stands. Its mutex is only ever held briefly with the GIL held,
/// never across a read of the session (which releases the GIL) nor across a call
/// into Python, so taking it cannot deadlock.
struct Cursor {
    /// Read and not yet returned, the next one last (it is popped).
    ahead: Vec<Message>,
    /// Forward: the position after the last one read. Backward: the position of the
    /// last one read, the end of what is left.
    next: usize,
    /// Set once the list ran out, and kept, as by a list iterator.
    done: bool,
}

impl PyQueueViewIterator {
    fn new(queue: Queue, direction: Direction, next: usize) -> PyQueueViewIterator {
        PyQueueViewIterator {
            queue,
            direction,
            cursor: Mutex::new(Cursor {
                ahead: Vec::new(),
                next,
                done: false,
            }),
        }
    }

    fn cursor(&self) -> MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The chunk that follows position `at`, the next one last; empty at the end. A
    /// backward walk ends, as a list's reverse iterator does, once the list is
    /// shorter than where it stands.
    fn read(&self, py: Python<'_>, at: usize) -> PyResult<Vec<Message>> {
        match self.direction {
            Direction::Forward => {
                let mut chunk = self.queue.range(py, at, at.saturating_add(CHUNK))?;
                chunk.reverse();
                Ok(chunk)
            }
            Direction::Backward => self.queue.read(py, |inbox, t| {
                if inbox.len(t) < at {
                    return Vec::new();
                }
                (at.saturating_sub(CHUNK)..at)
                    .filter_map(|pos| inbox.get(t, pos).cloned())
                    .collect()
            }),
        }
    }
}

#[pymethods]
impl PyQueueViewIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let at = {
                let mut cursor = self.cursor();
                if let Some(m) = cursor.ahead.pop() {
                    drop(cursor);
                    return values::message(py, &m).map(Some);
                }
                if cursor.done {
                    return Ok(None);
                }
                cursor.next
            };
            let chunk = self.read(py, at)?;
            let mut cursor = self.cursor();
            // Another thread may have stepped this iterator while the GIL was released:
            // its chunk stands, this one is dropped.
            if cursor.next != at || !cursor.ahead.is_empty() || cursor.done {
                continue;
            }
            cursor.done = chunk.is_empty();
            cursor.next = match self.direction {
                Direction::Forward => at + chunk.len(),
                Direction::Backward => at - chunk.len(),
            };
            cursor.ahead = chunk;
        }
    }
}

/// Registers `QueueView` as a `collections.abc.Sequence`, so `isinstance` holds.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let sequence = py.import("collections.abc")?.getattr("Sequence")?;
    sequence.call_method1("register", (py.get_type::<PyQueueView>(),))?;
    Ok(())
}

//! `Store`: where session logs live (the JSONL directory store or memory).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use inboxlog::store::{
    self as stores, Backend, Durability, JsonlStore, MemoryStore, OpenOptions, PgOptions, PgStore,
    Store, StoreOptions,
};
use inboxlog::{Event, Session, SessionMeta, ToJson as _};

use crate::convert::to_py;
use crate::errors::OrRaise;
use crate::session::PySession;
use crate::values;

/// A place that holds session logs: `Store(path, durability)` for a JSONL directory,
/// `Store.memory()` for process memory.
#[pyclass(frozen, name = "Store", module = "inboxlog")]
pub(crate) struct PyStore {
    inner: Arc<dyn Store>,
    label: String,
    /// Whether an append never waits for a disk or a server: memory, or a JSONL
    /// directory with durability `"none"` (one write to the page cache).
    quick_appends: bool,
}

impl PyStore {
    /// The store itself, for calls that take one (the GIL may be released meanwhile).
    pub(crate) fn shared(&self) -> Arc<dyn Store> {
        Arc::clone(&self.inner)
    }

    /// A Python session over `session`, opened in this store.
    pub(crate) fn session(&self, py: Python<'_>, session: Session) -> PyResult<PySession> {
        PySession::new(py, session, self.quick_appends)
    }

    /// `store.open(id, takeover=False)`: opens log `id` for writing.
    fn open_session(&self, py: Python<'_>, id: &str, takeover: bool) -> PyResult<PySession> {
        let store = &*self.inner;
        let session = py
            .detach(|| Session::open_with(store, id, &OpenOptions::takeover(takeover)))
            .py()?;
        self.session(py, session)
    }
}

/// `Store.open`, which reads by where it is looked up: on the class,
/// `Store.open(url_or_path, durability="sync", *, schema=None, record_limit=None,
/// max_connections=None)`
/// opens a store of any backend (`core::store::open`); on a store,
/// `store.open(id, takeover=False)` opens a session.
#[pyclass(frozen, name = "_StoreOpen", module = "inboxlog._native")]
pub(crate) struct PyStoreOpen;

#[pymethods]
impl PyStoreOpen {
    fn __get__(
        slf: Py<Self>,
        py: Python<'_>,
        instance: &Bound<'_, PyAny>,
        _owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if instance.is_none() {
            return Ok(slf.into_any());
        }
        let store = instance.cast::<PyStore>()?.clone().unbind();
        Ok(Py::new(py, PySessionOpen { store })?.into_any())
    }

    /// Opens the store `url_or_path` names: `"memory:"` for a new store in memory, a
    /// `postgresql://` (or `postgres://`) URL for the PostgreSQL store, anything else
    /// for the JSONL directory store at that path. `schema` and `max_connections` (the
    /// most connections the store holds, however many sessions are open; default 8, at
    /// least 2) are for PostgreSQL only, `record_limit` (bytes of one event line) for
    /// JSONL and PostgreSQL; an option the store has no use for raises
    /// `InvalidInputError`.
    #[pyo3(signature = (
        url_or_path, durability = "sync", *, schema = None, record_limit = None,
        max_connections = None
    ))]
    #[expect(
        clippy::needless_pass_by_value,
        reason = "PyO3 converts a path argument (str or os.PathLike) to an owned PathBuf only"
    )]
    fn __call__(
        &self,
        py: Python<'_>,
        url_or_path: PathBuf,
        durability: &str,
        schema: Option<String>,
        record_limit: Option<u64>,
        max_connections: Option<u32>,
    ) -> PyResult<PyStore> {
        let Some(where_) = url_or_path.to_str() else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the store's path is not valid UTF-8",
            ));
        };
        let mut options = StoreOptions::durability(Durability::parse(durability).py()?);
        options.schema = schema;
        options.record_limit = record_limit;
        options.max_connections = max_connections;
        let backend = Backend::of(where_);
        let label = match backend {
            Backend::Memory => "Store.open(\"memory:\")".to_owned(),
            Backend::Postgres => format!(
                "Store.open({:?}, durability={durability:?})",
                inboxlog::store::postgres::redact_url(where_)
            ),
            Backend::Jsonl => format!("Store.open({where_:?}, durability={durability:?})"),
        };
        let store = py.detach(|| stores::open(where_, &options)).py()?;
        Ok(PyStore {
            inner: Arc::from(store),
            label,
            quick_appends: match backend {
                Backend::Memory => true,
                Backend::Jsonl => options.durability == Durability::None,
                Backend::Postgres => false,
            },
        })
    }
}

/// `store.open` looked up on a store: opens one of its sessions.
#[pyclass(frozen, name = "_SessionOpen", module = "inboxlog._native")]
pub(crate) struct PySessionOpen {
    store: Py<PyStore>,
}

#[pymethods]
impl PySessionOpen {
    /// Opens log `id` for writing: replays its inbox and repairs an interrupted turn.
    /// `takeover=True` takes the session from a live but stuck owner (PostgreSQL only;
    /// the old owner gets `FencedError` on its next call).
    #[pyo3(signature = (id, takeover = false))]
    fn __call__(&self, py: Python<'_>, id: &str, takeover: bool) -> PyResult<PySession> {
        self.store.get().open_session(py, id, takeover)
    }
}

#[pymethods]
impl PyStore {
    /// The JSONL directory store at `path` (created if missing); `durability` is
    /// `"sync"` (fsync before each call returns), `"batched"` or `"none"`;
    /// `record_limit` caps one event line in bytes (default 64 MiB).
    #[new]
    #[pyo3(signature = (path, durability = "sync", *, record_limit = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        durability: &str,
        record_limit: Option<u64>,
    ) -> PyResult<PyStore> {
        let mode = Durability::parse(durability).py()?;
        let label = format!(
            "Store({:?}, durability={durability:?})",
            path.display().to_string()
        );
        let store = py.detach(|| JsonlStore::open(path, mode)).py()?;
        let store = match record_limit {
            Some(limit) => store.with_record_limit(limit),
            None => store,
        };
        Ok(PyStore {
            inner: Arc::new(store),
            label,
            quick_appends: mode == Durability::None,
        })
    }

    /// A store in process memory (tests, ephemeral agents).
    #[staticmethod]
    fn memory() -> PyStore {
        PyStore {
            inner: Arc::new(MemoryStore::new()),
            label: "Store.memory()".to_owned(),
            quick_appends: true,
        }
    }

    /// The PostgreSQL store at `url` (a `postgresql://` URL, libpq syntax with
    /// `sslmode`): tables in `schema` (created on first use), `durability` `"sync"`
    /// (each call committed before it returns), `"batched"` or `"none"` (asynchronous
    /// commit; `flush()` is the barrier). `max_connections` bounds the connections the
    /// store holds, however many sessions are open (default 8, at least 2). Raises
    /// `UnavailableError` when the server cannot be reached; no message shows the
    /// password.
    #[staticmethod]
    #[pyo3(signature = (
        url, schema = "inboxlog", durability = "sync", *, record_limit = None,
        max_connections = None
    ))]
    fn postgres(
        py: Python<'_>,
        url: &str,
        schema: &str,
        durability: &str,
        record_limit: Option<u64>,
        max_connections: Option<u32>,
    ) -> PyResult<PyStore> {
        let options = PgOptions {
            schema: schema.to_owned(),
            durability: Durability::parse(durability).py()?,
            record_limit: record_limit.unwrap_or(PgStore::DEFAULT_RECORD_LIMIT),
            max_connections: max_connections.unwrap_or(PgStore::DEFAULT_MAX_CONNECTIONS),
        };
        let store = py.detach(|| PgStore::connect(url, options)).py()?;
        let label = format!(
            "Store.postgres({:?}, schema={schema:?}, durability={durability:?})",
            store.url().to_string()
        );
        Ok(PyStore {
            inner: Arc::new(store),
            label,
            quick_appends: false,
        })
    }

    /// Starts a new log `id`; `seed` (event dicts) copies events from another log.
    /// Meta keywords are snake case (`delegation_depth` is the header's `delegationDepth`).
    #[pyo3(signature = (
        id, *, cwd = None, origin = None, delegation_depth = None, agent_preset = None,
        seed = None, seed_length = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        py: Python<'_>,
        id: &str,
        cwd: Option<String>,
        origin: Option<String>,
        delegation_depth: Option<u64>,
        agent_preset: Option<String>,
        seed: Option<&Bound<'_, PyAny>>,
        seed_length: Option<u64>,
    ) -> PyResult<PySession> {
        let meta = SessionMeta {
            cwd,
            origin,
            delegation_depth,
            agent_preset,
        };
        let seed = match seed {
            None => None,
            Some(events) => Some(values::events_from(events, "seed")?),
        };
        let store = &*self.inner;
        let session = py
            .detach(|| match seed {
                None if seed_length.is_none() => Session::create(store, id, meta),
                seed => {
                    Session::create_seeded(store, id, meta, seed.unwrap_or_default(), seed_length)
                }
            })
            .py()?;
        self.session(py, session)
    }

    /// On the class, opens a store of any backend; on a store, opens a session (see
    /// `_StoreOpen`).
    #[classattr]
    fn open() -> PyStoreOpen {
        PyStoreOpen
    }

    /// Forks `parent_id` into a new log `child_id` (whole turns only; empty inbox).
    #[pyo3(signature = (
        parent_id, child_id, *, cwd = None, origin = None, delegation_depth = None,
        agent_preset = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn fork(
        &self,
        py: Python<'_>,
        parent_id: &str,
        child_id: &str,
        cwd: Option<String>,
        origin: Option<String>,
        delegation_depth: Option<u64>,
        agent_preset: Option<String>,
    ) -> PyResult<PySession> {
        let meta = SessionMeta {
            cwd,
            origin,
            delegation_depth,
            agent_preset,
        };
        let store = &*self.inner;
        let session = py
            .detach(|| Session::fork(store, parent_id, child_id, meta))
            .py()?;
        self.session(py, session)
    }

    /// Reads log `id` as stored, without locking or repairing: `(header, events)`.
    fn inspect<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyTuple>> {
        let store = &*self.inner;
        let (header, events) = py.detach(|| Session::inspect(store, id)).py()?;
        let header = to_py(py, &header.to_json())?;
        let events = values::events(py, &events)?;
        PyTuple::new(py, [header, events.into_any()])
    }

    /// The events of log `id` with `seq >= since`, as stored (the same as `inspect`'s
    /// from `since` on), read without owning the session and at the cost of what it
    /// returns.
    #[pyo3(signature = (id, since = 0))]
    fn read<'py>(&self, py: Python<'py>, id: &str, since: u64) -> PyResult<Bound<'py, PyList>> {
        let store = &*self.inner;
        let (_, events) = py.detach(|| Session::read(store, id, since)).py()?;
        values::events(py, &events)
    }

    /// The last `limit` events of log `id` (of `types`, when given), oldest first: the
    /// last such events of `inspect`, read without owning the session and at the cost
    /// of what it returns.
    #[pyo3(signature = (id, limit, types = None))]
    #[expect(
        clippy::needless_pass_by_value,
        reason = "PyO3 extracts a sequence of str to an owned Vec only"
    )]
    fn tail<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        limit: usize,
        types: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let store = &*self.inner;
        let (_, events) = py
            .detach(|| {
                let types: Option<Vec<&str>> = types
                    .as_ref()
                    .map(|t| t.iter().map(String::as_str).collect());
                Session::tail(store, id, limit, types.as_deref())
            })
            .py()?;
        values::events(py, &events)
    }

    /// The core's JSON text of what `inspect` reads: the header's, then each event's
    /// (the lines `python -m inboxlog inspect --json` prints).
    #[pyo3(name = "_inspect_lines")]
    fn inspect_lines(&self, py: Python<'_>, id: &str) -> PyResult<Vec<String>> {
        let store = &*self.inner;
        let (header, events) = py.detach(|| Session::inspect(store, id)).py()?;
        let mut lines = Vec::with_capacity(events.len() + 1);
        lines.push(header.to_json());
        lines.extend(events.iter().map(Event::to_json));
        Ok(lines)
    }

    /// The core's JSON text of the consumed-work fold of log `id` as stored (what
    /// `python -m inboxlog fold --json` prints).
    #[pyo3(name = "_fold_line")]
    fn fold_line(&self, py: Python<'_>, id: &str) -> PyResult<String> {
        let store = &*self.inner;
        let (_, events) = py.detach(|| Session::inspect(store, id)).py()?;
        Ok(inboxlog::fold_consumed_work(&events).to_json())
    }

    /// Checks log `id` exactly as `open` would (header, format version, every complete
    /// record, the turn/step rules, the inbox replay) without locking, repairing or
    /// writing; raises what `open` would raise. Returns the report: `header`, `events`,
    /// `tornBytes` and `openTurn`/`openStep` (the repairs opening would make),
    /// `needsRepair`, and the pending counts `nextTurn`, `nextStep`.
    fn verify<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let store = &*self.inner;
        let report = py.detach(|| Session::verify(store, id)).py()?;
        to_py(py, &report.to_json())
    }

    /// What log `id` holds now, read without owning it (no lock, no repair, no write; a
    /// writer may hold it meanwhile) and from its checkpoint when the store keeps one:
    /// `header`, `events`, `tornBytes`, the turn and step left open (`openTurn`,
    /// `openStep`) and the inbox as a `baseline`.
    fn peek<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let store = &*self.inner;
        let peek = py.detach(|| Session::peek(store, id)).py()?;
        to_py(py, &peek.to_json())
    }

    /// The model-visible surface of log `id`, read without owning it (as `peek` reads):
    /// `{"nodes": [seq, ...], "messages": [message, ...]}` (SPEC §15.3).
    fn surface<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let store = &*self.inner;
        let view = py.detach(|| Session::read_surface(store, id)).py()?;
        to_py(py, &view.to_json())
    }

    /// The messages the model sees in log `id`, read without owning it: the
    /// `messages` of `surface(id)`.
    fn messages<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let store = &*self.inner;
        let view = py.detach(|| Session::read_surface(store, id)).py()?;
        to_py(py, &format!("[{}]", view.messages.join(",")))
    }

    /// Rewrites log `id` in the newest on-disk format, atomically (a JSONL log of format
    /// version 1 becomes version 2, with checksums); a log already in it is checked and
    /// left as it is. Raises `LockedError` while a writer holds it and what `open` would
    /// raise for a log that does not read. Returns `from` (the version it had),
    /// `events` and `tornBytes` (a torn tail left out).
    fn upgrade<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let store = &*self.inner;
        let up = py.detach(|| store.upgrade(id)).py()?;
        let text = format!(
            r#"{{"from":{},"events":{},"tornBytes":{}}}"#,
            up.from, up.events, up.torn_bytes
        );
        to_py(py, &text)
    }

    /// The headers of every stored log, sorted by id.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let store = &*self.inner;
        let headers = py.detach(|| store.list()).py()?;
        let items = headers
            .iter()
            .map(|h| to_py(py, &h.to_json()))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The core's JSON text of every stored log's header, sorted by id (the lines
    /// `python -m inboxlog list --json` prints).
    #[pyo3(name = "_list_lines")]
    fn list_lines(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let store = &*self.inner;
        let headers = py.detach(|| store.list()).py()?;
        Ok(headers.iter().map(inboxlog::Header::to_json).collect())
    }

    /// Deletes log `id` for good, durably before it returns. Raises `LockedError` while
    /// a writer (an open session, here or in another process) holds it, `NotFoundError`
    /// when there is none, `InvalidInputError` for a bad id.
    fn delete(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        let store = &*self.inner;
        py.detach(|| Session::delete(store, id)).py()
    }

    /// Posts `message` to the `target` list of session `id` from anywhere, open or not
    /// (ARCHITECTURE.md#posting); returns the post id once the post is durable. Its owner takes it in
    /// exactly once (at open, before each `propose_step`, on `inbox.receive()`).
    fn post(
        &self,
        py: Python<'_>,
        id: &str,
        target: &str,
        message: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        crate::fleet::post(py, &self.inner, id, target, message)
    }

    /// Moves the pending message `message_id` of session `id` to `index` of `target`
    /// (counted without it; `None`: its end) from anywhere, open or not (SPEC §17.5);
    /// returns the post id once the move is durable. Applied once as one removal
    /// (`"outcome": "moved"`) and one insertion, or recorded as `agent/inbox/rejected`
    /// (`not_found`, `invalid_splice` for an index past the end).
    #[pyo3(signature = (id, message_id, target, index = None))]
    fn move_pending(
        &self,
        py: Python<'_>,
        id: &str,
        message_id: &str,
        target: &str,
        index: Option<u64>,
    ) -> PyResult<String> {
        let target = inboxlog::Target::parse(target).py()?;
        let store = &*self.inner;
        py.detach(|| store.move_pending(id, message_id, target, index))
            .py()
    }

    /// Decides approval `approval_id` of session `id` from anywhere, open or not (SPEC
    /// §17.3); returns the post id once the decision is durable. Its owner takes it in
    /// exactly once; the first decision wins, later ones are recorded as rejected.
    fn decide(
        &self,
        py: Python<'_>,
        id: &str,
        approval_id: &str,
        outcome: &str,
    ) -> PyResult<String> {
        let outcome = inboxlog::ApprovalOutcome::parse(outcome).py()?;
        let store = &*self.inner;
        py.detach(|| store.decide(id, approval_id, outcome)).py()
    }

    /// Removes the pending message `message_id` of session `id` from anywhere, open or
    /// not (SPEC §11.3); returns the post id once the edit is durable. Its owner applies
    /// it exactly once, in order with this store's earlier posts and edits, as
    /// `inbox.remove`; a message no longer pending (claimed first, removed, never there)
    /// is left alone and the log records one `agent/inbox/rejected` (`not_found`).
    fn remove_pending(&self, py: Python<'_>, id: &str, message_id: &str) -> PyResult<String> {
        crate::fleet::remove_pending(py, &self.inner, id, message_id)
    }

    /// Replaces the pending message `message_id` of session `id` with `message` (which
    /// may have a new id) from anywhere, open or not (SPEC §11.3); returns the post id once
    /// the edit is durable. Applied as `inbox.replace`, or recorded as one
    /// `agent/inbox/rejected` (`not_found`; `duplicate_message` when the new id is
    /// pending already).
    fn replace_pending(
        &self,
        py: Python<'_>,
        id: &str,
        message_id: &str,
        message: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        crate::fleet::replace_pending(py, &self.inner, id, message_id, message)
    }

    /// Follows session `id` from seq `since` (ARCHITECTURE.md#following): an iterator of its events as they
    /// are committed, read without owning the session.
    #[pyo3(signature = (id, since = 0))]
    fn follow(&self, py: Python<'_>, id: &str, since: u64) -> PyResult<crate::fleet::PyFollower> {
        crate::fleet::follow(py, &self.inner, id, since)
    }

    fn __repr__(&self) -> String {
        format!("<inboxlog.{}>", self.label)
    }
}

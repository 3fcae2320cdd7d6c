//! The store-level behaviour every backend shares (ARCHITECTURE.md#stores), one suite
//! run over every store from one list ([`stores`]): memory, a JSONL directory and
//! PostgreSQL, the last two made by `store::open` from their path or URL as the
//! bindings make them. Where backends differ by design the list says so
//! ([`Backend::takeover`], [`Backend::processes`], a record limit) and one test covers
//! both sides. What only one backend has (torn tails, fsync, the spool's files, rows
//! edited by hand, advisory locks, connections the server terminates) stays in that
//! backend's own test files.
//!
//! Without a PostgreSQL server at `INBOXLOG_TEST_PG` the suite runs over memory and
//! JSONL and says so, except under `CI=true`, where that fails.

#[path = "../common/mod.rs"]
mod common;
#[path = "../pg_common/mod.rs"]
mod pg_common;

mod approvals;
mod checkpoint;
mod child;
mod compaction;
mod conversation;
mod durability;
mod edit;
#[cfg(unix)]
mod edit_processes;
mod follow;
mod fork;
mod lifecycle;
mod limits;
mod moves;
mod ownership;
mod post;
#[cfg(unix)]
mod processes;
mod reads;
mod recovery;
mod verify;

use std::any::Any;

use inboxlog::store::{self, Durability, MemoryStore, Store, StoreOptions};
use inboxlog::{Envelope, Session, SessionMeta};

pub use common::{
    Ear, Rng, assert_err, assert_exactly_once, edits_applied, edits_rejected, msg, taken_in,
};

/// One store of the list, with what must outlive it (a temp dir, a PostgreSQL schema).
pub struct Backend {
    /// The backend's name, for assertion messages.
    pub name: &'static str,
    /// The store, empty when the list is made.
    pub store: Box<dyn Store>,
    /// Whether its owners may live on other machines, so that it takes a session from a
    /// live owner when asked (`OpenOptions::takeover`); the others refuse that.
    pub takeover: bool,
    /// Whether other processes reach its logs (every store but memory).
    pub processes: bool,
    /// The path or URL `store::open` made it from, with its options.
    url: String,
    options: StoreOptions,
    /// The memory store's logs, which its clones share.
    memory: Option<MemoryStore>,
    _guard: Option<Box<dyn Any>>,
}

impl Backend {
    /// Another handle on the same logs, as another worker holds: the store opened again
    /// from its path or URL (the memory store: a clone sharing its logs, as nothing
    /// outside the process reaches them).
    pub fn connect(&self) -> Box<dyn Store> {
        match &self.memory {
            Some(memory) => Box::new(memory.clone()),
            None => store::open(&self.url, &self.options).unwrap(),
        }
    }
}

/// One of every store with `options`, each empty: the memory store is left out when
/// `options` set a record limit, which it has none of.
pub fn stores_with(options: &StoreOptions) -> Vec<Backend> {
    let mut list = Vec::new();
    if options.record_limit.is_none() {
        let memory = MemoryStore::new();
        list.push(Backend {
            name: "memory",
            store: Box::new(memory.clone()),
            takeover: false,
            processes: false,
            url: "memory:".to_owned(),
            options: options.clone(),
            memory: Some(memory),
            _guard: None,
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs").to_str().unwrap().to_owned();
    list.push(Backend {
        name: "jsonl",
        store: store::open(&path, options).unwrap(),
        takeover: false,
        processes: true,
        url: path,
        options: options.clone(),
        memory: None,
        _guard: Some(Box::new(dir)),
    });
    if let Some(schema) = pg_common::Schema::new() {
        let mut options = options.clone();
        options.schema = Some(schema.name.clone());
        list.push(Backend {
            name: "postgres",
            store: store::open(&pg_common::url(), &options).unwrap(),
            takeover: true,
            processes: true,
            url: pg_common::url(),
            options,
            memory: None,
            _guard: Some(Box::new(schema)),
        });
    }
    list
}

/// One of every store, each empty, durable before every append returns.
pub fn stores() -> Vec<Backend> {
    stores_with(&StoreOptions::durability(Durability::Sync))
}

/// Runs `test` over every store.
pub fn each_store(test: impl Fn(&'static str, &dyn Store)) {
    for backend in stores() {
        test(backend.name, &*backend.store);
    }
}

/// Runs `test` over every store, with what the list knows of it.
pub fn each_backend(test: impl Fn(&Backend)) {
    for backend in stores() {
        test(&backend);
    }
}

/// The replacement an edit test puts in place of message `id`: the same id, `"v":2`.
pub fn edited(id: &str) -> inboxlog::Message {
    inboxlog::Message::from_json(&format!(r#"{{"id":"{id}","v":2}}"#)).unwrap()
}

/// Creates `id` with one host event and closes it.
pub fn stored(store: &dyn Store, id: &str) {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    s.append("host/x", r#"{"n":1}"#, Envelope::default())
        .unwrap();
    s.close().unwrap();
}

/// The ids of the stored sessions.
pub fn ids(store: &dyn Store) -> Vec<String> {
    store.list().unwrap().into_iter().map(|h| h.id).collect()
}

/// The events of `id` as stored, each as its JSON line.
pub fn lines(store: &dyn Store, id: &str) -> Vec<String> {
    let (_, events) = Session::inspect(store, id).unwrap();
    events.iter().map(inboxlog::Event::to_json).collect()
}

#[test]
fn the_list_holds_every_backend() {
    let names: Vec<&str> = stores().iter().map(|b| b.name).collect();
    assert_eq!(&names[..2], ["memory", "jsonl"]);
    if names.len() < 3 {
        eprintln!("SKIPPED for postgres: no server at INBOXLOG_TEST_PG");
    } else {
        assert_eq!(names[2], "postgres");
    }
    // A record limit leaves the memory store out, and only it.
    let mut limited = StoreOptions::default();
    limited.record_limit = Some(300);
    let limited: Vec<&str> = stores_with(&limited).iter().map(|b| b.name).collect();
    assert_eq!(limited, names[1..]);
}

//! The store-level behaviour every backend shares (ARCHITECTURE.md#stores), one suite
//! run over every store from one list ([`stores`]): memory, a JSONL directory and
//! PostgreSQL, each made by `store::open` from its URL or path as the bindings make
//! them. What only one backend has (torn tails, fsync, advisory locks, takeover) stays
//! in that backend's own test files.
//!
//! Without a PostgreSQL server at `INBOXLOG_TEST_PG` the suite runs over memory and
//! JSONL and says so, except under `CI=true`, where that fails.

#[path = "../pg_common/mod.rs"]
mod pg_common;

mod follow;
mod lifecycle;
mod post;

use std::any::Any;

use inboxlog::store::{self, Durability, Store, StoreOptions};
use inboxlog::{Envelope, Error, ErrorKind, Event, Message, Result, Session, SessionMeta};

/// One store of the list, with what must outlive it (a temp dir, a PostgreSQL schema).
pub struct Backend {
    /// The backend's name, for assertion messages.
    pub name: &'static str,
    pub store: Box<dyn Store>,
    _guard: Option<Box<dyn Any>>,
}

/// One of every store, each empty.
pub fn stores() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs");
    let options = StoreOptions::durability(Durability::Sync);
    let mut list = vec![
        Backend {
            name: "memory",
            store: store::open("memory:", &options).unwrap(),
            _guard: None,
        },
        Backend {
            name: "jsonl",
            store: store::open(path.to_str().unwrap(), &options).unwrap(),
            _guard: Some(Box::new(dir)),
        },
    ];
    if let Some(schema) = pg_common::Schema::new() {
        let mut options = options.clone();
        options.schema = Some(schema.name.clone());
        list.push(Backend {
            name: "postgres",
            store: store::open(&pg_common::url(), &options).unwrap(),
            _guard: Some(Box::new(schema)),
        });
    }
    list
}

/// Runs `test` over every store.
pub fn each_store(test: impl Fn(&'static str, &dyn Store)) {
    for backend in stores() {
        test(backend.name, &*backend.store);
    }
}

/// A message with id `id`.
pub fn msg(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","content":"do {id}"}}"#
    ))
    .unwrap()
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

/// The splices that took posts in: `(message id, post id)`.
pub fn taken_in(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.ty() == "agent/inbox/spliced" && e.data().contains(r#""post":"#))
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
            (
                v["inserted"][0]["id"].as_str().unwrap().to_owned(),
                v["post"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Asserts `result` failed with `kind` and a message holding every needle.
#[track_caller]
pub fn assert_err<T: std::fmt::Debug>(
    result: Result<T>,
    kind: ErrorKind,
    needles: &[&str],
) -> Error {
    let err = result.expect_err("expected an error");
    assert_eq!(err.kind(), kind, "{err}");
    for needle in needles {
        assert!(err.to_string().contains(needle), "{needle:?} not in: {err}");
    }
    err
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
}

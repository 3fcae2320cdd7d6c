//! Behaviour every store shares, run over each of them: deleting a session (ARCHITECTURE.md#seeds-and-forks)
//! against writers, readers, bad ids and absent sessions.

mod jsonl_common;
mod pg_common;

use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta};
use jsonl_common::assert_err;

/// What must outlive a store: its temp dir or its PostgreSQL schema.
type Guard = Box<dyn std::any::Any>;

/// One of every store, each with a name for assertion messages (the guard, a temp dir
/// or a PostgreSQL schema, must outlive its store; PostgreSQL is left out, with a
/// message, when no server answers outside CI).
fn stores() -> Vec<(&'static str, Option<Guard>, Box<dyn Store>)> {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open(dir.path().join("logs"), Durability::Sync).unwrap();
    let mut stores: Vec<(&'static str, Option<Guard>, Box<dyn Store>)> = vec![
        ("memory", None, Box::new(MemoryStore::new())),
        ("jsonl", Some(Box::new(dir)), Box::new(jsonl)),
    ];
    if let Some((schema, pg)) = pg_common::store(Durability::Sync) {
        stores.push(("postgres", Some(Box::new(schema)), Box::new(pg)));
    }
    stores
}

/// Creates `id` with one host event and closes it.
fn stored(store: &dyn Store, id: &str) {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    s.append("host/x", r#"{"n":1}"#, Envelope::default())
        .unwrap();
    s.close().unwrap();
}

fn ids(store: &dyn Store) -> Vec<String> {
    store.list().unwrap().into_iter().map(|h| h.id).collect()
}

#[test]
fn a_deleted_session_is_gone_for_good_and_its_id_is_free_again() {
    for (name, _dir, store) in stores() {
        let store = &*store;
        stored(store, "a");
        stored(store, "s");
        Session::delete(store, "s").unwrap();
        assert_eq!(ids(store), ["a"], "{name}");
        assert_err(
            Session::open(store, "s").map(drop),
            ErrorKind::NotFound,
            &["no session \"s\""],
        );
        assert_err(
            Session::inspect(store, "s"),
            ErrorKind::NotFound,
            &["\"s\""],
        );
        // Deleting twice: the second finds nothing.
        assert_err(
            Session::delete(store, "s"),
            ErrorKind::NotFound,
            &["no session \"s\""],
        );
        assert_err(store.delete("never"), ErrorKind::NotFound, &["\"never\""]);
        // The id can be used again, for a new empty log; the other session is intact.
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        assert_eq!(s.last_seq().unwrap(), None, "{name}");
        assert_eq!(Session::inspect(store, "a").unwrap().1.len(), 1, "{name}");
    }
}

#[test]
fn a_session_held_by_a_writer_is_not_deleted() {
    for (name, _dir, store) in stores() {
        let store = &*store;
        stored(store, "s");
        let before = Session::inspect(store, "s").unwrap();
        let writer = Session::open(store, "s").unwrap();
        let locked = "session \"s\" is locked by a writer and cannot be deleted";
        assert_err(Session::delete(store, "s"), ErrorKind::Locked, &[locked]);
        let err = Session::delete(store, "s").unwrap_err();
        assert_eq!(
            err.session(),
            Some("s"),
            "{name}: the error names its session"
        );
        // Intact, and the writer goes on writing to the log.
        assert_eq!(Session::inspect(store, "s").unwrap(), before, "{name}");
        writer.append("host/x", "{}", Envelope::default()).unwrap();
        // A writer straight from create holds it just the same.
        let fresh = Session::create(store, "t", SessionMeta::default()).unwrap();
        assert_err(store.delete("t"), ErrorKind::Locked, &[]);
        drop(fresh);
        writer.close().unwrap();
        // Released: now it goes (closing is enough, the handle may live on).
        Session::delete(store, "s").unwrap();
        drop(writer);
        store.delete("t").unwrap();
        assert!(ids(store).is_empty(), "{name}");
    }
}

#[test]
fn delete_checks_the_id_before_anything_else() {
    for (name, _dir, store) in stores() {
        let store = &*store;
        stored(store, "s");
        for bad in ["", "..", "../s", "a/b", ".s", "s\0"] {
            assert_err(Session::delete(store, bad), ErrorKind::InvalidInput, &[]);
            assert_err(store.delete(bad), ErrorKind::InvalidInput, &[]);
        }
        assert_eq!(ids(store), ["s"], "{name}");
    }
}

//! Sessions' lifecycle in every store: create, open, fork, list, inspect, verify and
//! delete (ARCHITECTURE.md#seeds-and-forks), against writers, readers, bad ids and
//! absent sessions.

use inboxlog::{Envelope, ErrorKind, Header, Session, SessionMeta, Target};

use crate::{assert_err, each_store, ids, msg, stored};

#[test]
fn create_open_fork_list_and_inspect_agree_in_every_store() {
    each_store(|name, store| {
        assert!(ids(store).is_empty(), "{name}");
        let s = Session::create(store, "p", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.append(
            "host/x",
            r#"{"big":123456789012345678901234567890,"z":1,"a":2}"#,
            Envelope::default(),
        )
        .unwrap();
        s.close().unwrap();
        // Create never overwrites, through the session or the store itself.
        let before = Session::inspect(store, "p").unwrap();
        assert_err(
            Session::create(store, "p", SessionMeta::default()),
            ErrorKind::AlreadyExists,
            &["session \"p\" already exists"],
        );
        let header = Header::new("p", 1, SessionMeta::default()).unwrap();
        assert_err(
            store.create(&header, &[]),
            ErrorKind::AlreadyExists,
            &["session \"p\" already exists"],
        );
        assert_eq!(Session::inspect(store, "p").unwrap(), before, "{name}");
        let s = Session::open(store, "p").unwrap();
        assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("a")], "{name}");
        assert_err(
            Session::open(store, "p").map(drop),
            ErrorKind::Locked,
            &["\"p\""],
        );
        let child = Session::fork(store, "p", "c", SessionMeta::default()).unwrap();
        assert_eq!(
            child.header().parent_session.as_deref(),
            Some("p"),
            "{name}"
        );
        assert_eq!(child.header().seed_length, Some(2), "{name}");
        assert!(
            !child.inbox().has_pending().unwrap(),
            "{name}: a fork's inbox starts empty"
        );
        drop(child);
        s.close().unwrap();
        assert_eq!(ids(store), ["c", "p"], "{name}");
        let (header, events) = Session::inspect(store, "p").unwrap();
        assert_eq!(header.id, "p");
        assert_eq!(events.len(), 2, "{name}");
        assert_eq!(
            events[1].data(),
            r#"{"big":123456789012345678901234567890,"z":1,"a":2}"#,
            "{name}: data kept byte for byte"
        );
        let report = Session::verify(store, "p").unwrap();
        assert_eq!(report.events, 2, "{name}");
        assert_err(
            Session::open(store, "none").map(drop),
            ErrorKind::NotFound,
            &["\"none\""],
        );
        assert_err(
            Session::verify(store, "none").map(drop),
            ErrorKind::NotFound,
            &["\"none\""],
        );
        assert_err(
            Session::inspect(store, "none"),
            ErrorKind::NotFound,
            &["no session \"none\""],
        );
        assert_err(
            Session::fork(store, "none", "c2", SessionMeta::default()),
            ErrorKind::NotFound,
            &["\"none\""],
        );
        assert_eq!(
            ids(store),
            ["c", "p"],
            "{name}: a refused fork creates nothing"
        );
    });
}

#[test]
fn a_deleted_session_is_gone_for_good_and_its_id_is_free_again() {
    each_store(|name, store| {
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
    });
}

#[test]
fn a_session_held_by_a_writer_is_not_deleted() {
    each_store(|name, store| {
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
    });
}

/// A bad id is refused as `invalid_input` by every call before the store looks for
/// the session: no call creates, finds or changes anything with it.
#[test]
fn bad_ids_are_refused_before_anything_else() {
    each_store(|name, store| {
        stored(store, "s");
        let before = Session::inspect(store, "s").unwrap();
        let long = "x".repeat(129);
        for bad in [
            "",
            "..",
            "../s",
            "a/b",
            ".s",
            "s\0",
            "/etc/passwd",
            "é",
            &long,
        ] {
            let needles = &["session id"][..];
            let kind = ErrorKind::InvalidInput;
            assert_err(
                Session::create(store, bad, SessionMeta::default()),
                kind,
                needles,
            );
            let header = Header {
                id: bad.to_owned(),
                ..Header::new("ok", 0, SessionMeta::default()).unwrap()
            };
            assert_err(store.create(&header, &[]), kind, needles);
            assert_err(Session::open(store, bad), kind, needles);
            assert_err(Session::inspect(store, bad), kind, needles);
            assert_err(Session::verify(store, bad), kind, needles);
            assert_err(
                Session::fork(store, "s", bad, SessionMeta::default()),
                kind,
                needles,
            );
            assert_err(
                Session::fork(store, bad, "c", SessionMeta::default()),
                kind,
                needles,
            );
            assert_err(Session::delete(store, bad), kind, needles);
            assert_err(store.delete(bad), kind, needles);
        }
        assert_eq!(ids(store), ["s"], "{name}");
        assert_eq!(Session::inspect(store, "s").unwrap(), before, "{name}");
    });
}

#[test]
fn list_holds_every_header_sorted_by_id() {
    each_store(|name, store| {
        for id in ["b", "a-2", "c.1", "a"] {
            let meta = SessionMeta {
                cwd: Some(format!("/w/{id}")),
                ..Default::default()
            };
            Session::create(store, id, meta).unwrap().close().unwrap();
        }
        let listed = store.list().unwrap();
        let ids: Vec<&str> = listed.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["a", "a-2", "b", "c.1"], "{name}");
        for header in &listed {
            assert_eq!(
                header,
                &Session::inspect(store, &header.id).unwrap().0,
                "{name}: list and inspect agree"
            );
            assert_eq!(header.cwd, Some(format!("/w/{}", header.id)), "{name}");
        }
    });
}

//! One writer per session in every store (ARCHITECTURE.md#exclusive-writer,
//! ARCHITECTURE.md#postgresql), seen from this process: a second opener is refused at
//! once, readers never wait, a closed writer lets the next in; and takeover, which a
//! store whose owners may live on other machines does (fencing the owner it took the
//! session from) and the others refuse. Owners in other processes are in
//! `processes.rs`.

use inboxlog::store::OpenOptions;
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta, Target};

use crate::{assert_err, each_backend, lines, msg, taken_in};

#[test]
fn a_second_writer_is_refused_at_once_and_admitted_after_the_first_closes() {
    each_backend(|b| {
        let (name, store) = (b.name, &*b.store);
        let first = Session::create(store, "s", SessionMeta::default()).unwrap();
        first.append("host/a", "{}", Envelope::default()).unwrap();
        // The same store, and another handle on its logs as another worker holds.
        // The first writer holds its lock until after the refusals: an open that waited
        // for it would not return.
        let other = b.connect();
        for handle in [store, &*other] {
            let err = assert_err(
                Session::open(handle, "s"),
                ErrorKind::Locked,
                &["session \"s\" is locked by another writer"],
            );
            assert_eq!(err.session(), Some("s"), "{name}");
        }
        // Reading, verifying and forking never lock, and never wait for the writer.
        assert_eq!(Session::inspect(&*other, "s").unwrap().1.len(), 1, "{name}");
        assert_eq!(Session::verify(&*other, "s").unwrap().events, 1, "{name}");
        drop(Session::fork(&*other, "s", "child", SessionMeta::default()).unwrap());
        // A writer straight from create holds its session just the same.
        let fresh = Session::create(store, "t", SessionMeta::default()).unwrap();
        assert_err(
            Session::open(&*other, "t"),
            ErrorKind::Locked,
            &["session \"t\" is locked"],
        );
        drop(fresh);
        // Closed: the next writer gets in (the closed handle may live on), and holds it.
        first.close().unwrap();
        let second = Session::open(&*other, "s").unwrap();
        assert_eq!(second.last_seq().unwrap(), Some(0), "{name}");
        assert_err(Session::open(store, "s"), ErrorKind::Locked, &[]);
        drop(first);
        // Dropped: released as well.
        drop(Session::open(store, "t").unwrap());
    });
}

/// Takeover takes a session from a live owner: the new owner proceeds at once and
/// writes no event for it; the old one is `fenced` from its next call on and has
/// written nothing after the takeover, and a post it can no longer take in waits for
/// the new owner. A store whose locks die with their owner refuses takeover as
/// `invalid_input`, with an owner or without.
#[test]
fn takeover_fences_the_live_owner_where_the_store_has_it_and_is_refused_elsewhere() {
    each_backend(|b| {
        let (name, store) = (b.name, &*b.store);
        let first = Session::create(store, "s", SessionMeta::default()).unwrap();
        first.append("host/a", "{}", Envelope::default()).unwrap();
        let takeover = OpenOptions::takeover(true);
        if !b.takeover {
            let refusal = "takeover is for stores whose owner may be alive on another machine";
            let err = assert_err(
                Session::open_with(store, "s", &takeover),
                ErrorKind::InvalidInput,
                &["cannot open session \"s\" with takeover", refusal],
            );
            assert_eq!(err.session(), Some("s"), "{name}");
            // Nothing changed: the owner goes on; once it is gone, the refusal stays.
            first.append("host/b", "{}", Envelope::default()).unwrap();
            first.close().unwrap();
            assert_err(
                Session::open_with(store, "s", &takeover),
                ErrorKind::InvalidInput,
                &[refusal],
            );
            let s = Session::open_with(store, "s", &OpenOptions::default()).unwrap();
            assert_eq!(s.last_seq().unwrap(), Some(1), "{name}");
            return;
        }
        assert_err(
            Session::open(store, "s"),
            ErrorKind::Locked,
            &["session \"s\" is locked by another writer"],
        );
        let before = lines(store, "s");
        // The first owner lives, holding its lock, until after the takeover: a takeover
        // that waited for it to let go would not return.
        let other = b.connect();
        let second = Session::open_with(&*other, "s", &takeover).unwrap();
        assert_eq!(
            lines(store, "s"),
            before,
            "{name}: a takeover writes no event"
        );
        second.append("host/b", "{}", Envelope::default()).unwrap();
        let err = assert_err(
            first.append("host/late", "{}", Envelope::default()),
            ErrorKind::Fenced,
            &["session \"s\" was taken over by another writer"],
        );
        assert_eq!(err.session(), Some("s"), "{name}");
        // Fenced for good, whatever the call; nothing of it was written.
        assert_err(first.open_turn(), ErrorKind::Fenced, &["taken over"]);
        assert_err(first.flush(), ErrorKind::Fenced, &[]);
        let post = store.post("s", Target::NextTurn, &msg("p")).unwrap();
        assert_err(first.receive(), ErrorKind::Fenced, &["taken over"]);
        let stored = lines(store, "s");
        assert_eq!(stored.len(), 2, "{name}: {stored:?}");
        assert!(stored.iter().all(|l| !l.contains("host/late")), "{name}");
        // The new owner goes on and takes the post in, once; a plain open is still
        // locked (by the new owner).
        assert_eq!(second.receive().unwrap(), 1, "{name}");
        assert_eq!(
            taken_in(&second.events(0).unwrap()),
            [("p".to_owned(), post)],
            "{name}"
        );
        second.open_turn().unwrap();
        assert_err(Session::open(store, "s"), ErrorKind::Locked, &[]);
        second.close().unwrap();
        let third = Session::open(store, "s").unwrap();
        assert_eq!(third.open_report().repaired_turn, Some(1), "{name}");
        assert_eq!(third.receive().unwrap(), 0, "{name}: taken in once");
        // A takeover finds no session that does not exist.
        assert_err(
            Session::open_with(store, "nobody", &takeover),
            ErrorKind::NotFound,
            &["no session \"nobody\""],
        );
    });
}

//! Following a session from elsewhere (ARCHITECTURE.md#following) in every store: each
//! event once, in order, with no gap, resuming where a follower stood; and a session
//! deleted under its follower.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use inboxlog::{Envelope, ErrorKind, Follower, Session, SessionMeta};

use crate::each_store;

#[test]
fn a_follower_yields_committed_events_and_resumes_where_it_stood() {
    each_store(|_, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.append("x/a", "{}", Envelope::default()).unwrap();
        let mut f = Follower::open(store, "s", 0).unwrap();
        assert_eq!(f.session(), "s");
        let first = f.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!((first.seq(), first.ty()), (0, "x/a"));
        assert!(f.next_timeout(Duration::from_millis(30)).unwrap().is_none());
        let writer = thread::spawn({
            let s = Arc::new(s);
            move || {
                for i in 0..50 {
                    s.append("x/b", &format!(r#"{{"i":{i}}}"#), Envelope::default())
                        .unwrap();
                }
                s
            }
        });
        let mut seqs = Vec::new();
        while seqs.len() < 20 {
            seqs.push(
                f.next_timeout(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .seq(),
            );
        }
        let resume = f.next_seq();
        drop(f);
        let s = writer.join().unwrap();
        let mut again = Follower::open(store, "s", resume).unwrap();
        for e in again.next_batch(Duration::from_secs(5)).unwrap() {
            seqs.push(e.seq());
        }
        while seqs.len() < 50 {
            seqs.push(
                again
                    .next_timeout(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .seq(),
            );
        }
        assert_eq!(seqs, (1..=50).collect::<Vec<u64>>());
        // From the middle, and from past the end.
        let mut mid = Follower::open(store, "s", 30).unwrap();
        assert_eq!(mid.next().unwrap().unwrap().seq(), 30);
        let mut late = Follower::open(store, "s", 51).unwrap();
        assert!(
            late.next_timeout(Duration::from_millis(20))
                .unwrap()
                .is_none()
        );
        s.append("x/c", "{}", Envelope::default()).unwrap();
        assert_eq!(late.next().unwrap().unwrap().seq(), 51);
        // A deleted session ends the follow with `not_found`.
        s.close().unwrap();
        store.delete("s").unwrap();
        let err = late.next_timeout(Duration::from_secs(1)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    });
}

/// A follower of a session deleted while events it has not read yet are stored gets
/// `not_found` at its next read, in every store, and none of those events: a delete
/// forgets the log for every reader at once (a JSONL follower could still read the
/// unlinked file, a PostgreSQL or memory one could not), and the follower reports the
/// end rather than a log that no longer exists. What it yielded before had no gap.
#[test]
fn a_follower_of_a_deleted_session_gets_not_found_before_unread_events() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.append("x/a", "{}", Envelope::default()).unwrap();
        let mut f = Follower::open(store, "s", 0).unwrap();
        let first = f.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(first.seq(), 0, "{name}");
        for _ in 0..3 {
            s.append("x/unread", "{}", Envelope::default()).unwrap();
        }
        s.close().unwrap();
        store.delete("s").unwrap();
        let err = f.next_timeout(Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{name}: {err}");
        assert_eq!(err.session(), Some("s"), "{name}");
        assert_eq!(f.next_seq(), 1, "{name}: nothing yielded after the delete");
        // And again: the session stays gone for this follower.
        let err = f.next_timeout(Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{name}: {err}");
    });
}

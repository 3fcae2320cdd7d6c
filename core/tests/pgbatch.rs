//! Client-side group commit of the PostgreSQL store's `batched` mode against a real
//! server (ARCHITECTURE.md#postgresql, ARCHITECTURE.md#postgresql): staged appends are written in order by one fenced
//! statement per batch, read back by their own writer before they are written, and a
//! batch that cannot be written (fenced, connection lost) is dropped whole.

mod pg_common;

use std::time::{Duration, Instant};

use inboxlog::store::{Durability, OpenOptions};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta};
use pg_common::Schema;

/// A batch window no test outlives: staged rows wait for `flush()`.
const LONG: Duration = Duration::from_secs(600);

fn host_seqs(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("host/n"))
        .map(|l| {
            let at = l.find("\"data\":").expect("a data field") + 7;
            l[at..].split([',', '}']).next().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn batched_appends_then_flush_are_all_stored_in_order() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Batched).with_batch_window(LONG);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let before = schema.lines("s").len();
    // More than one batch's worth of rows: full batches are written as they fill.
    for i in 0..2500 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    s.flush().unwrap();
    let lines = schema.lines("s");
    assert_eq!(lines.len(), before + 2500);
    let expected: Vec<String> = (0..2500).map(|i| i.to_string()).collect();
    assert_eq!(host_seqs(&lines), expected);
    drop(s);
    // Reopening sees the same log (the session row's next_seq moved with the rows).
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.events(0).unwrap().len(), before + 2500);
}

#[test]
fn the_window_writes_a_batch_while_the_host_is_idle() {
    let Some((schema, store)) = pg_common::store(Durability::Batched) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let before = schema.lines("s").len();
    for i in 0..3 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    // No flush, no further call: the writer's thread writes them after 5 ms.
    let deadline = Instant::now() + Duration::from_secs(5);
    while schema.lines("s").len() < before + 3 {
        assert!(Instant::now() < deadline, "staged rows never written");
        std::thread::sleep(Duration::from_millis(10));
    }
    s.flush().unwrap();
}

/// Staged rows wait for their batch, yet their writer reads them from where they wait,
/// and a read of the store in the writer's process (inspect, and fork, which reads
/// through it) writes them first. (That every read in the writer's process sees every
/// append at once, in every store and mode: the store suite.)
#[test]
fn staged_rows_wait_for_their_batch_and_a_read_of_the_store_writes_them_first() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Batched).with_batch_window(LONG);
    let s = Session::create(&store, "p", SessionMeta::default()).unwrap();
    let stored = schema.lines("p").len();
    for i in 0..5 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    assert_eq!(s.events(0).unwrap().len(), stored + 5);
    assert_eq!(
        schema.lines("p").len(),
        stored,
        "the writer read its rows where they wait"
    );
    assert_eq!(Session::inspect(&store, "p").unwrap().1.len(), stored + 5);
    assert_eq!(
        schema.lines("p").len(),
        stored + 5,
        "inspect wrote them first"
    );
    s.append("host/n", "5", Envelope::default()).unwrap();
    drop(Session::fork(&store, "p", "c", SessionMeta::default()).unwrap());
    assert_eq!(schema.lines("p").len(), stored + 6, "fork wrote them first");
}

#[test]
fn a_takeover_between_staging_and_flush_fences_and_writes_nothing_staged() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Batched).with_batch_window(LONG);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/kept", "0", Envelope::default()).unwrap();
    s.flush().unwrap();
    let committed = schema.lines("s");
    for i in 0..10 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    let other = schema.store(Durability::Sync);
    let t = Session::open_with(&other, "s", &OpenOptions::takeover(true)).unwrap();
    let err = s.flush().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains("taken over"), "{err}");
    assert_eq!(schema.lines("s"), committed);
    // Fenced for good: the next call is refused too, and writes nothing.
    let err = s.append("host/late", "1", Envelope::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    drop(s);
    assert_eq!(schema.lines("s"), committed);
    assert_eq!(t.events(0).unwrap().len(), committed.len());
}

#[test]
fn a_terminated_connection_with_staged_rows_poisons_and_reopening_shows_the_committed() {
    let Some(schema) = Schema::new() else { return };
    let store = schema
        .named_store(Durability::Batched)
        .with_batch_window(LONG);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/kept", "0", Envelope::default()).unwrap();
    s.flush().unwrap();
    let committed = schema.lines("s");
    for i in 0..10 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    let killed = schema.terminate();
    assert!(killed >= 1);
    // The flush either meets the dead connection, or finds it closed when it takes it
    // from the pool and writes on a new one (the client may or may not have seen the
    // termination yet): the rows are then lost whole, or committed whole.
    match s.flush() {
        Err(err) => {
            assert!(
                matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Poisoned),
                "{err}"
            );
            if err.kind() == ErrorKind::Unavailable {
                assert!(err.to_string().contains("127.0.0.1"), "{err}");
            }
            let err = s.append("host/late", "1", Envelope::default()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Poisoned, "{err}");
            assert!(err.to_string().contains("reopen"), "{err}");
            drop(s);
            let s = Session::open(&store, "s").unwrap();
            assert_eq!(schema.lines("s"), committed);
            assert_eq!(s.events(0).unwrap().len(), committed.len());
        }
        Ok(()) => {
            drop(s);
            let s = Session::open(&store, "s").unwrap();
            let lines = schema.lines("s");
            assert_eq!(lines.len(), committed.len() + 10);
            assert_eq!(lines[..committed.len()], committed[..]);
            assert_eq!(s.events(0).unwrap().len(), lines.len());
        }
    }
}

#[test]
fn a_fence_met_by_the_flusher_thread_is_reported_at_the_next_call() {
    let Some(schema) = Schema::new() else { return };
    let store = schema
        .store(Durability::Batched)
        .with_batch_window(Duration::from_millis(300));
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.flush().unwrap();
    let committed = schema.lines("s");
    s.append("host/n", "0", Envelope::default()).unwrap();
    let other = schema.store(Durability::Sync);
    let _t = Session::open_with(&other, "s", &OpenOptions::takeover(true)).unwrap();
    // The window passes with the host idle: the thread's write is fenced, dropped whole.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(schema.lines("s"), committed);
    let err = s.append("host/n", "1", Envelope::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert!(err.to_string().contains("taken over"), "{err}");
    assert_eq!(schema.lines("s"), committed);
}

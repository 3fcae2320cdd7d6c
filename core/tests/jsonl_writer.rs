//! The JSONL store's writer (ARCHITECTURE.md#stores–ARCHITECTURE.md#exclusive-writer): file layout, exclusive lock, tail
//! checks, durability modes, and failure handling under injected ENOSPC/EIO.

mod jsonl_common;

use std::time::{Duration, Instant};

use inboxlog::store::fault::{Action, Errno, FaultPlan, Point};
use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store};
use inboxlog::{
    Decision, Envelope, ErrorKind, Event, Header, Session, SessionMeta, StepOutcome, Target,
};
use jsonl_common::*;

fn faulty(durability: Durability, plan: &FaultPlan) -> (tempfile::TempDir, JsonlStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), durability)
        .unwrap()
        .with_faults(plan.clone());
    (dir, store)
}

#[test]
fn the_file_is_the_header_then_one_compact_event_per_line() {
    let (_dir, store) = store(Durability::None);
    let meta = SessionMeta {
        cwd: Some("/w".into()),
        ..Default::default()
    };
    let s = Session::create(&store, "s", meta).unwrap();
    let e0 = s
        .append(
            "host/x",
            "{ \"b\" : 1,\n \"a\" : [1, 2.50, \"x y\"] }",
            Envelope::default(),
        )
        .unwrap();
    s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    drop(s);
    let file = bytes(&store.path("s").unwrap());
    assert_eq!(file.last(), Some(&b'\n'));
    let ls: Vec<&str> = lines(&file)
        .into_iter()
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    // Version 2: each line is its version 1 object sealed with its checksum.
    for line in &ls {
        assert!(line.contains(r#","crc32c":""#), "{line}");
    }
    let v1_lines: Vec<String> = ls
        .iter()
        .map(|l| String::from_utf8(strip(l.as_bytes())).unwrap())
        .collect();
    let ls: Vec<&str> = v1_lines.iter().map(String::as_str).collect();
    let header = Header::from_json(ls[0]).unwrap();
    assert_eq!(ls[0], header.to_json());
    assert!(
        ls[0].starts_with(r#"{"format":"inboxlog","version":2,"id":"s","createdAt":"#),
        "{}",
        ls[0]
    );
    assert_eq!(
        ls[1],
        format!(
            r#"{{"type":"host/x","seq":0,"time":{},"data":{{"b":1,"a":[1,2.50,"x y"]}}}}"#,
            e0.time()
        )
    );
    assert!(
        ls[2].starts_with(r#"{"type":"agent/inbox/spliced","seq":1,"#),
        "{}",
        ls[2]
    );
    assert!(
        ls[6].starts_with(r#"{"type":"user/message","seq":5,"#)
            && ls[6].ends_with(r#","surfaceOp":"append"}"#),
        "{}",
        ls[6]
    );
    for line in &ls {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(value.is_object());
        assert!(
            !line.contains(": ") && !line.contains(", "),
            "not compact: {line}"
        );
    }
}

/// The refusals of a second create and of a second writer name the file, whoever
/// holds the lock (another handle, another process). (Both refusals in every store:
/// the store suite.)
#[test]
fn refusals_name_the_file() {
    let (_dir, store) = store(Durability::None);
    drop(populated(&store));
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let shown = format!("session \"s\" already exists ({})", path.display());
    assert_err(
        Session::create(&store, "s", SessionMeta::default()),
        ErrorKind::AlreadyExists,
        &[&shown],
    );
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    assert_err(
        store.create(&header, &[]),
        ErrorKind::AlreadyExists,
        &[&shown],
    );
    assert_eq!(bytes(&path), before);
    let held = lock_behind(&path);
    let err = assert_err(
        Session::open(&store, "s"),
        ErrorKind::Locked,
        &[&format!(
            "session \"s\" is locked by another writer ({})",
            path.display()
        )],
    );
    assert_eq!(err.path(), Some(path.as_path()));
    assert_eq!((err.line(), err.seq()), (None, None));
    drop(held);
    drop(Session::open(&store, "s").unwrap());
}

#[test]
fn every_append_continues_the_stored_tail() {
    let (_dir, store) = store(Durability::None);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    assert_err(
        store.create(&header, &[ev(0, "1"), ev(2, "2")]).map(drop),
        ErrorKind::InvalidInput,
        &["seed event at index 1 has seq 2"],
    );
    assert!(!store.path("s").unwrap().exists());
    let mut w = store.create(&header, &[ev(0, "1"), ev(1, "2")]).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let tail = format!(
        "append at seq 5 does not continue the stored tail of {} (next seq 2)",
        path.display()
    );
    assert_err(w.append(&[ev(5, "{}")]), ErrorKind::Corrupt, &[&tail]);
    assert_err(
        w.append(&[ev(2, "{}"), ev(4, "{}")]),
        ErrorKind::Corrupt,
        &["append at seq 4", "(next seq 3)"],
    );
    assert_eq!(bytes(&path), before);
    w.append(&[ev(2, "{}"), ev(3, "{}")]).unwrap();
    assert_eq!(w.read(0).unwrap().len(), 4);
    w.append(&[]).unwrap();
}

#[test]
fn read_since_returns_the_suffix_across_the_seek_index() {
    let (_dir, store) = store(Durability::None);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[ev(0, "\"seed\"")]).unwrap();
    for chunk in 0..30u64 {
        let events: Vec<_> = (0..100)
            .map(|i| {
                ev(
                    1 + chunk * 100 + i,
                    &format!("{{\"i\":{i},\"s\":\"é\\n\"}}"),
                )
            })
            .collect();
        w.append(&events).unwrap();
    }
    let (_, all) = store.inspect("s").unwrap();
    assert_eq!(all.len(), 3001);
    let check = |w: &dyn inboxlog::store::LogWriter| {
        for since in [0, 1, 1023, 1024, 1025, 2047, 2048, 2049, 3000, 3001, 9999] {
            let got: Vec<String> = w.read(since).unwrap().iter().map(Event::to_json).collect();
            let want: Vec<String> = all
                .iter()
                .skip(since as usize)
                .map(Event::to_json)
                .collect();
            assert_eq!(got, want, "since {since}");
        }
    };
    check(&*w);
    drop(w);
    let opened = store
        .open(
            "s",
            &OpenOptions::default(),
            &mut inboxlog::store::events(|_, _| Ok(())),
        )
        .unwrap();
    check(&*opened.writer);
}

#[test]
fn a_failed_write_leaves_nothing_and_the_writer_goes_on() {
    // Write 1 is the create; 2 lands 10 bytes then fails; 3 fails outright.
    let plan = FaultPlan::new()
        .on(Point::Write, 2, Action::FailAfter(10, Errno::Enospc))
        .on(Point::Write, 3, Action::Fail(Errno::Eio));
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let cannot = format!("cannot append to {}", path.display());
    assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Io,
        &[&cannot, "No space left on device"],
    );
    assert_eq!(bytes(&path), before, "the short write was rolled back");
    assert_err(
        s.inbox().append(Target::NextTurn, msg("m")),
        ErrorKind::Io,
        &[&cannot, "Input/output error"],
    );
    assert_eq!(bytes(&path), before);
    assert!(
        s.inbox().next_turn().unwrap().is_empty(),
        "nothing changed in memory either"
    );
    let e = s.append("host/x", "{}", Envelope::default()).unwrap();
    assert_eq!(e.seq(), 0);
    assert_eq!(plan.hits(Point::Truncate), 2);
}

#[test]
fn a_failed_rollback_poisons_until_reopened() {
    let plan = FaultPlan::new()
        .on(Point::Write, 2, Action::FailAfter(10, Errno::Enospc))
        .on(Point::Truncate, 1, Action::Fail(Errno::Eio));
    let (dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let poisoned = "session \"s\" is poisoned after a failed write; reopen it";
    assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Poisoned,
        &[
            poisoned,
            "No space left on device",
            "rollback to",
            "Input/output error",
        ],
    );
    assert_eq!(
        bytes(&path).len(),
        before.len() + 10,
        "the fragment stays: the rollback failed"
    );
    assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Poisoned,
        &[poisoned],
    );
    assert_err(s.flush(), ErrorKind::Poisoned, &[poisoned]);
    assert_eq!(
        plan.hits(Point::Write),
        2,
        "a poisoned writer writes nothing"
    );
    // The writer's errors name the session and the file as data (ARCHITECTURE.md#errors).
    let err = s.flush().unwrap_err();
    assert_eq!(
        (err.session(), err.path()),
        (Some("s"), Some(path.as_path()))
    );
    assert_eq!((err.line(), err.seq()), (None, None));
    drop(s);
    // Reopened: the fragment is a torn tail, and the seq continues.
    let clean = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let s = Session::open(&clean, "s").unwrap();
    assert_eq!(s.open_report().torn_bytes, 10);
    assert_eq!(bytes(&path), before);
    assert_eq!(
        s.append("host/x", "{}", Envelope::default()).unwrap().seq(),
        0
    );
}

#[test]
fn a_failed_fsync_poisons_and_is_never_retried() {
    // Sync 1 is the create's.
    let plan = FaultPlan::new().on(Point::Sync, 3, Action::Fail(Errno::Eio));
    let (dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let fsync = format!(
        "session \"s\" is poisoned after a failed fsync; reopen it: fdatasync {}: Input/output error",
        path.display()
    );
    assert_err(
        s.inbox().append(Target::NextTurn, msg("m")),
        ErrorKind::Poisoned,
        &[&fsync],
    );
    assert_eq!(bytes(&path), before, "the unsynced record was cut");
    assert!(s.inbox().next_turn().unwrap().is_empty());
    for _ in 0..2 {
        assert_err(
            s.append("host/x", "{}", Envelope::default()),
            ErrorKind::Poisoned,
            &[&fsync],
        );
        assert_err(s.flush(), ErrorKind::Poisoned, &[&fsync]);
    }
    assert_eq!(
        plan.hits(Point::Sync),
        3,
        "fsync is never retried on the same handle"
    );
    let err = s.append("host/x", "{}", Envelope::default()).unwrap_err();
    assert_eq!(
        (err.session(), err.path()),
        (Some("s"), Some(path.as_path()))
    );
    drop(s);
    let s = Session::open(
        &JsonlStore::open(dir.path(), Durability::Sync).unwrap(),
        "s",
    )
    .unwrap();
    assert_eq!(
        s.append("host/x", "{}", Envelope::default()).unwrap().seq(),
        1
    );
}

#[test]
fn a_failed_group_commit_poisons_the_batched_writer() {
    let plan = FaultPlan::new().on(Point::Sync, 2, Action::Fail(Errno::Eio));
    let (dir, store) = faulty(Durability::Batched, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    s.append("host/x", "{}", Envelope::default()).unwrap();
    assert_err(
        s.flush(),
        ErrorKind::Poisoned,
        &["session \"s\" is poisoned after a failed fsync; reopen it"],
    );
    assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Poisoned,
        &["poisoned"],
    );
    assert_eq!(bytes(&path), before, "the unacknowledged record was cut");
    assert_eq!(plan.hits(Point::Sync), 2);
    drop(s);
    let s = Session::open(
        &JsonlStore::open(dir.path(), Durability::Batched).unwrap(),
        "s",
    )
    .unwrap();
    assert_eq!(
        s.append("host/x", "{}", Envelope::default()).unwrap().seq(),
        0
    );
}

#[test]
fn a_failed_torn_tail_repair_refuses_the_open_and_changes_nothing() {
    let (dir, store) = store(Durability::Sync);
    drop(populated(&store));
    let path = store.path("s").unwrap();
    let mut torn = bytes(&path);
    let good_len = torn.len();
    torn.extend_from_slice(b"{\"type\":");
    std::fs::write(&path, &torn).unwrap();
    let plan = FaultPlan::new().on(Point::Truncate, 1, Action::Fail(Errno::Eio));
    let broken = JsonlStore::open(dir.path().join("logs"), Durability::Sync)
        .unwrap()
        .with_faults(plan);
    let needle = format!(
        "cannot drop the torn tail of {} (8 bytes after byte {good_len})",
        path.display()
    );
    assert_err(
        Session::open(&broken, "s").map(drop),
        ErrorKind::Io,
        &[&needle, "Input/output error"],
    );
    assert_eq!(bytes(&path), torn);
    assert_eq!(
        Session::open(&store, "s").unwrap().open_report().torn_bytes,
        8
    );
}

#[test]
fn a_failed_create_leaves_no_file() {
    // The first create fails at its write (and never reaches an fsync), the second at
    // its fsync.
    let plan = FaultPlan::new()
        .on(Point::Write, 1, Action::Fail(Errno::Enospc))
        .on(Point::Sync, 1, Action::Fail(Errno::Eio));
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let path = store.path("s").unwrap();
    assert_err(
        Session::create(&store, "s", SessionMeta::default()).map(drop),
        ErrorKind::Io,
        &["cannot write", "No space left"],
    );
    assert!(!path.exists());
    assert_err(
        Session::create(&store, "s", SessionMeta::default()).map(drop),
        ErrorKind::Io,
        &["cannot fsync", "Input/output"],
    );
    assert!(!path.exists());
    drop(Session::create(&store, "s", SessionMeta::default()).unwrap());
    assert!(path.exists());
}

#[test]
fn sync_mode_fsyncs_before_every_append_returns() {
    let plan = FaultPlan::new();
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    assert_eq!(plan.hits(Point::Sync), 1, "creation is durable");
    for i in 0..3 {
        s.append("host/x", "{}", Envelope::default()).unwrap();
        assert_eq!(plan.hits(Point::Sync), 2 + i);
    }
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 4, "nothing left to flush");
}

/// A `batched` window closes by itself: with no further call, the flusher makes the
/// appends of the window durable in one fsync, and `flush` then has nothing left to do.
/// Counted, not timed: it waits (at most 20 s, a hang guard) for that one fsync.
#[test]
fn batched_mode_syncs_a_window_by_itself_in_one_fsync() {
    let plan = FaultPlan::new();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Batched)
        .unwrap()
        .with_batch_window(Duration::from_millis(20))
        .with_faults(plan.clone());
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    assert_eq!(
        plan.hits(Point::Sync),
        1,
        "creation is durable in every mode"
    );
    s.append("host/x", "{}", Envelope::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while plan.hits(Point::Sync) == 1 {
        assert!(Instant::now() < deadline, "the window never closed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(plan.hits(Point::Sync), 2, "one fsync for the window");
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 2, "flush has nothing left to do");
    // flush() is the barrier: it syncs at once, on its own.
    s.append("host/x", "{}", Envelope::default()).unwrap();
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 3);
    // Closing is a barrier too, and releases the lock at once.
    s.append("host/x", "{}", Envelope::default()).unwrap();
    let before = plan.hits(Point::Sync);
    drop(s);
    assert_eq!(plan.hits(Point::Sync), before + 1);
    assert_eq!(
        Session::open(&store, "s").unwrap().last_seq().unwrap(),
        Some(2)
    );
}

/// `batched` appends are grouped, and `flush()` and closing do not wait for the batch
/// window: with a window of a day, no append syncs, a flush that waited would not
/// return, and each flush makes exactly one fsync of what it found. Counted, not timed.
#[test]
fn batched_flush_and_close_sync_at_once_whatever_the_window() {
    let plan = FaultPlan::new();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Batched)
        .unwrap()
        .with_batch_window(Duration::from_secs(24 * 3600))
        .with_faults(plan.clone());
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    assert_eq!(plan.hits(Point::Sync), 1, "creation is durable");
    for round in 0..3 {
        for _ in 0..4 {
            s.append("host/x", "{}", Envelope::default()).unwrap();
        }
        assert_eq!(
            plan.hits(Point::Sync),
            1 + round,
            "staged within the window"
        );
        s.flush().unwrap();
        assert_eq!(plan.hits(Point::Sync), 2 + round, "one fsync per flush");
    }
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 4, "nothing left to flush");
    s.append("host/x", "{}", Envelope::default()).unwrap();
    drop(s);
    assert_eq!(plan.hits(Point::Sync), 5, "closing syncs what was staged");
    assert_eq!(
        Session::open(&store, "s").unwrap().last_seq().unwrap(),
        Some(12)
    );
}

#[test]
fn none_mode_fsyncs_only_on_flush() {
    let plan = FaultPlan::new();
    let (_dir, store) = faulty(Durability::None, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for _ in 0..10 {
        s.append("host/x", "{}", Envelope::default()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(plan.hits(Point::Sync), 1);
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 2);
    s.flush().unwrap();
    assert_eq!(plan.hits(Point::Sync), 2);
    drop(s);
    assert_eq!(plan.hits(Point::Sync), 2);
}

#[test]
fn protocol_calls_and_splices_append_one_write_each() {
    let plan = FaultPlan::new();
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
    s.inbox().append(Target::NextStep, msg("m2")).unwrap();
    s.open_turn().unwrap();
    let writes = plan.hits(Point::Write);
    let p = s.propose_step().unwrap(); // claims both lists: two splice events
    s.decide(Decision::Enter(p.messages)).unwrap(); // step/start + two user/message
    assert_eq!(plan.hits(Point::Write), writes + 2);
    assert!(!s.end_step(StepOutcome::Completed).unwrap());
    s.close_turn().unwrap();
    assert_eq!(plan.hits(Point::Write), writes + 4);
    assert_eq!(plan.hits(Point::Sync), plan.hits(Point::Write));
}

#[test]
fn durability_names_parse() {
    assert_eq!(Durability::parse("batched").unwrap(), Durability::Batched);
    assert_eq!("none".parse::<Durability>().unwrap(), Durability::None);
    assert_eq!(Durability::default(), Durability::Sync);
    assert_err(
        Durability::parse("SYNC"),
        ErrorKind::InvalidInput,
        &["durability must be \"sync\", \"batched\" or \"none\", got \"SYNC\""],
    );
    let (_dir, store) = store(Durability::Batched);
    assert_eq!(store.durability(), Durability::Batched);
}

/// Appends `line` and a `\n` to `path` through a plain handle, behind the writer's lock.
/// Appends `line` to the version 2 log at `path` as a program following core/FORMAT.md
/// would: sealed, its checksum continuing the log's chain.
fn foreign_append(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let sealed = sealed_next(&bytes(path), line);
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(format!("{sealed}\n").as_bytes()).unwrap();
}

#[test]
fn a_line_written_behind_the_lock_is_refused_poisons_and_stays_openable() {
    // The same with a plain and a fault-wrapped file (the wrapper measures the file too).
    for plan in [None, Some(FaultPlan::new())] {
        let (_dir, store) = match &plan {
            None => store(Durability::Sync),
            Some(plan) => faulty(Durability::Sync, plan),
        };
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        let e0 = s.append("host/x", "{}", Envelope::default()).unwrap();
        let path = store.path("s").unwrap();
        let expected = bytes(&path).len();
        // A valid next-seq line: the OS lock is advisory and did not stop it.
        let foreign = format!(
            r#"{{"type":"host/foreign","seq":1,"time":{},"data":{{}}}}"#,
            e0.time()
        );
        foreign_append(&path, &foreign);
        let after_foreign = bytes(&path);
        let found = after_foreign.len();
        let changed = format!(
            "{} changed behind the writer of session \"s\": expected {expected} bytes, found {found}",
            path.display()
        );
        assert_err(
            s.append("host/x", "{}", Envelope::default()),
            ErrorKind::Corrupt,
            &[&changed, "nothing was written"],
        );
        assert_eq!(
            bytes(&path),
            after_foreign,
            "the refused call wrote nothing"
        );
        assert_eq!(s.last_seq().unwrap(), Some(0), "nor changed the session");
        // Every later mutation is refused until the session is reopened.
        assert_err(
            s.inbox().append(Target::NextTurn, msg("m")),
            ErrorKind::Poisoned,
            &["session \"s\" is poisoned", &changed, "reopen it"],
        );
        assert_err(
            s.append("host/x", "{}", Envelope::default()),
            ErrorKind::Poisoned,
            &[&changed],
        );
        assert_eq!(bytes(&path), after_foreign);
        drop(s);
        // The log is still a valid log: reopening shows the foreign event and goes on.
        let s = Session::open(&store, "s").unwrap();
        let events = s.events(0).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].ty(), "host/foreign");
        assert_eq!(
            s.append("host/x", "{}", Envelope::default()).unwrap().seq(),
            2
        );
    }
}

#[test]
fn a_file_cut_behind_the_lock_is_refused_and_poisons() {
    let (_dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    let path = store.path("s").unwrap();
    let with_one = bytes(&path).len();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    let expected = bytes(&path).len();
    // Another program drops the last line (and the batched/none writer has not synced).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(with_one as u64)
        .unwrap();
    let cut = bytes(&path);
    let changed = format!("expected {expected} bytes, found {with_one}");
    let err = assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Corrupt,
        &[&path.display().to_string(), &changed],
    );
    assert!(!err.to_string().ends_with('.'), "{err}");
    assert_eq!(bytes(&path), cut, "nothing fused onto the cut file");
    assert_err(
        s.flush().and(s.append("host/x", "{}", Envelope::default())),
        ErrorKind::Poisoned,
        &[&changed],
    );
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.last_seq().unwrap(), Some(0));
}

#[test]
fn an_empty_append_writes_nothing_and_checks_nothing() {
    let (_dir, store) = store(Durability::None);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[ev(0, "1")]).unwrap();
    foreign_append(
        &store.path("s").unwrap(),
        r#"{"type":"host/x","seq":1,"time":7,"data":2}"#,
    );
    w.append(&[]).unwrap();
    assert_err(w.append(&[ev(1, "3")]), ErrorKind::Corrupt, &["found"]);
    assert_err(w.append(&[ev(1, "3")]), ErrorKind::Poisoned, &["found"]);
}

#[test]
fn a_failed_length_check_writes_nothing_and_the_writer_goes_on() {
    let plan = FaultPlan::new().on(Point::Length, 1, Action::Fail(Errno::Eio));
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let cannot = format!("cannot read the length of {}", path.display());
    assert_err(
        s.append("host/x", "{}", Envelope::default()),
        ErrorKind::Io,
        &[&cannot, "Input/output error"],
    );
    assert_eq!(bytes(&path), before);
    assert_eq!(plan.hits(Point::Write), 1, "only the create wrote");
    assert_eq!(
        s.append("host/x", "{}", Envelope::default()).unwrap().seq(),
        0
    );
    assert_eq!(plan.hits(Point::Length), 2, "one length check per append");
}

/// A plain handle on `path` holding the exclusive lock.
fn lock_behind(path: &std::path::Path) -> std::fs::File {
    let f = std::fs::File::open(path).unwrap();
    f.try_lock().unwrap();
    f
}

#[test]
fn delete_unlinks_under_the_writer_lock() {
    let (_dir, store) = store(Durability::Sync);
    drop(populated(&store));
    drop(Session::create(&store, "other", SessionMeta::default()).unwrap());
    let path = store.path("s").unwrap();
    // Another process's writer (any handle holding the lock) blocks it at once: the
    // lock is held until after the call, so a delete that waited for it would not
    // return; it changes nothing.
    let held = lock_behind(&path);
    let before = bytes(&path);
    assert_err(
        store.delete("s"),
        ErrorKind::Locked,
        &[&format!("cannot be deleted ({})", path.display())],
    );
    assert_eq!(bytes(&path), before);
    drop(held);
    store.delete("s").unwrap();
    assert!(!path.exists());
    assert!(store.path("other").unwrap().exists());
    // A directory with a session's name is not a session.
    std::fs::create_dir(store.root().join("x.jsonl")).unwrap();
    assert_err(
        store.delete("x"),
        ErrorKind::NotFound,
        &["no session \"x\"", "is not a regular file"],
    );
    assert!(store.root().join("x.jsonl").is_dir());
}

#[test]
fn a_failed_unlink_keeps_the_log_and_lets_go_of_its_lock() {
    let plan = FaultPlan::new().on(Point::Unlink, 1, Action::Fail(Errno::Eio));
    let (_dir, store) = faulty(Durability::Sync, &plan);
    drop(populated(&store));
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    assert_err(
        store.delete("s"),
        ErrorKind::Io,
        &[
            &format!("cannot delete {}", path.display()),
            "Input/output error",
        ],
    );
    assert_eq!(bytes(&path), before);
    drop(Session::open(&store, "s").unwrap());
    store.delete("s").unwrap();
    assert_eq!(plan.hits(Point::Unlink), 2);
    assert!(!path.exists());
}

#[test]
fn an_open_racing_a_delete_finds_no_session_instead_of_an_orphan() {
    // Between the opener's open(2) and its lock, a delete (another process) takes the
    // lock, unlinks the file and lets go: the opener then gets the lock on a file with
    // no name, whose appends would vanish.
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    drop(populated(&store));
    let other = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let plan = FaultPlan::new().before_lock(move |_| other.delete("s").unwrap());
    let racing = JsonlStore::open(dir.path(), Durability::Sync)
        .unwrap()
        .with_faults(plan);
    let path = store.path("s").unwrap();
    assert_err(
        Session::open(&racing, "s").map(drop),
        ErrorKind::NotFound,
        &[&format!(
            "no session \"s\" ({} was deleted while this call opened it)",
            path.display()
        )],
    );
    assert!(!path.exists());
    // Two deletes racing: the second finds nothing.
    drop(populated(&store));
    assert_err(
        racing.delete("s"),
        ErrorKind::NotFound,
        &["was deleted while"],
    );
    assert!(!path.exists());
}

#[test]
fn create_does_not_wait_for_a_lock_on_its_new_file() {
    // Whoever found the new file first (an opener or `list` reading its missing
    // header) holds its lock; create refuses at once instead of waiting, and takes
    // back the empty file it made.
    // The lock is held until after the create returned: a create that waited for it
    // would not return. Counted: the lock was taken from it once.
    let holder = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = holder.clone();
    let plan = FaultPlan::new().before_lock(move |path| {
        held.lock().unwrap().push(lock_behind(path));
    });
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let path = store.path("s").unwrap();
    assert_err(
        Session::create(&store, "s", SessionMeta::default()).map(drop),
        ErrorKind::Locked,
        &[&format!(
            "session \"s\" was locked by another process before its create could lock it ({}); nothing was created",
            path.display()
        )],
    );
    assert!(!path.exists(), "the empty file was taken back");
    assert_eq!(holder.lock().unwrap().len(), 1, "one lock taken from it");
    holder.lock().unwrap().clear();
    plan.clear();
    drop(Session::create(&store, "s", SessionMeta::default()).unwrap());
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn create_leaves_alone_a_file_that_replaced_its_own() {
    // A delete took the new file's lock and unlinked it, and another create made the
    // id again: the refused create must not remove that one.
    let plan = FaultPlan::new().before_lock(|path| {
        let f = lock_behind(path);
        std::fs::remove_file(path).unwrap();
        std::fs::write(path, "someone else's\n").unwrap();
        drop(f);
    });
    let (_dir, store) = faulty(Durability::Sync, &plan);
    let path = store.path("s").unwrap();
    assert_err(
        Session::create(&store, "s", SessionMeta::default()).map(drop),
        ErrorKind::Locked,
        &["session \"s\" was deleted by another process before its create could lock it"],
    );
    assert_eq!(bytes(&path), b"someone else's\n");
    // The same while the other still holds the lock on the file it unlinked.
    std::fs::remove_file(&path).unwrap();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = kept.clone();
    plan.clear();
    let plan = plan.before_lock(move |path| {
        let f = lock_behind(path);
        std::fs::remove_file(path).unwrap();
        std::fs::write(path, "someone else's\n").unwrap();
        keep.lock().unwrap().push(f);
    });
    let store = store.with_faults(plan);
    assert_err(
        Session::create(&store, "s", SessionMeta::default()).map(drop),
        ErrorKind::Locked,
        &["session \"s\" was locked by another process"],
    );
    assert_eq!(bytes(&path), b"someone else's\n");
    assert_eq!(kept.lock().unwrap().len(), 1);
}

//! Fleet features (ARCHITECTURE.md#posting) where they meet the JSONL store's files:
//! the spool, owners killed by fault points between the steps of a take-in, and a
//! follower across a torn tail and the owner's repair. What every store does alike
//! (posters and owners killed, followers in other processes) is in the store suite
//! (`core/tests/store/`). Child processes are this test binary re-executed with
//! `INBOXLOG_FLEET_ROLE` set, running only `fleet_child`.
#![cfg(unix)]

mod jsonl_common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use inboxlog::store::fault::{Action, FaultPlan, Point};
use inboxlog::store::{Durability, JsonlStore, Store};
use inboxlog::{ErrorKind, Event, Follower, Session, SessionMeta, Target};
use jsonl_common::*;

const ROLE: &str = "INBOXLOG_FLEET_ROLE";
const ROOT: &str = "INBOXLOG_FLEET_ROOT";
const ARG: &str = "INBOXLOG_FLEET_ARG";

// ---------------------------------------------------------------- the child side

/// The child's entry point (`--ignored --exact fleet_child` with the role set).
#[test]
#[ignore = "the fleet tests' child process: they run it with INBOXLOG_FLEET_ROLE set"]
fn fleet_child() {
    println!();
    let root = std::env::var(ROOT).unwrap_or_default();
    let arg = std::env::var(ARG).unwrap_or_default();
    if std::env::var(ROLE).as_deref() == Ok("owner") {
        owner(&root, &arg);
    }
}

/// Opens session "s" with the fault `point:nth:action`, which kills it mid-take-in.
fn owner(root: &str, fault: &str) {
    let parts: Vec<&str> = fault.split(':').collect();
    let point = match parts[0] {
        "settle" => Point::Settle,
        "write" => Point::Write,
        "sync" => Point::Sync,
        other => panic!("bad point {other}"),
    };
    let action = match parts[2] {
        "crash-before" => Action::CrashBefore,
        "crash-after" => Action::CrashAfter,
        other => panic!("bad action {other}"),
    };
    let plan = FaultPlan::new().on(point, parts[1].parse().unwrap(), action);
    let store = JsonlStore::open(root, Durability::Sync)
        .unwrap()
        .with_faults(plan);
    let _s = Session::open(&store, "s").unwrap();
    println!("survived");
}

// ---------------------------------------------------------------- the parent side

/// Starts a child in `role`, and its complete stdout lines.
fn spawn(role: &str, root: &Path, arg: &str) -> (Child, Receiver<String>) {
    let mut child = rerun("fleet_child")
        .env(ROLE, role)
        .env(ROOT, root)
        .env(ARG, arg)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    (child, lines)
}

#[test]
fn a_spool_file_that_is_no_post_is_rejected_and_stale_temp_files_go() {
    let (dir, store) = store(Durability::Sync);
    Session::create(&store, "s", SessionMeta::default()).unwrap();
    let spool = dir.path().join("logs/s.posts");
    store.post("s", Target::NextTurn, &msg("first")).unwrap();
    std::fs::write(spool.join("00-garbage.json"), b"not json").unwrap();
    std::fs::write(
        spool.join("01-noid.json"),
        br#"{"post":"01-noid","target":"next-turn","prev":null,"message":{"role":"user"}}"#,
    )
    .unwrap();
    let fresh = spool.join(".9-fresh.tmp");
    let stale = spool.join(".9-stale.tmp");
    std::fs::write(&fresh, b"{").unwrap();
    std::fs::write(&stale, b"{").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();
    // `list` sees sessions only.
    assert_eq!(store.list().unwrap().len(), 1);
    let s = Session::open(&store, "s").unwrap();
    let log: Vec<String> = s.events(0).unwrap().iter().map(Event::to_json).collect();
    assert_eq!(log.len(), 3, "{log:#?}");
    assert!(
        log[0].contains(r#""data":{"message":"not json","reason":{"code":10,"kind":"invalid_input","message":"post file "#),
        "{}",
        log[0]
    );
    assert!(log[0].ends_with(r#""post":"00-garbage"},"ignorable":true}"#));
    assert!(log[1].contains(
        r#""data":{"message":{"role":"user"},"reason":{"code":10,"kind":"invalid_input""#
    ));
    assert!(log[2].contains(r#""inserted":[{"id":"first""#));
    assert!(fresh.exists() && !stale.exists());
    let left: Vec<_> = std::fs::read_dir(&spool).unwrap().collect();
    assert_eq!(left.len(), 1, "only the fresh temp file stays");
    // Deleting the session takes its spool along.
    drop(s);
    store.delete("s").unwrap();
    assert!(!spool.exists());
}

/// The owner killed between take-in steps (after a splice is written, before or after
/// its fsync, between the log append and the spool removal): the next open delivers
/// the rest and never a post twice.
#[test]
fn owners_killed_mid_take_in_deliver_each_post_once() {
    for fault in [
        "settle:1:crash-before",
        "settle:3:crash-after",
        "write:2:crash-after",
        "write:3:crash-before",
        "sync:2:crash-before",
        "sync:4:crash-after",
    ] {
        let (dir, store) = store(Durability::Sync);
        Session::create(&store, "s", SessionMeta::default()).unwrap();
        let ids: Vec<String> = (0..5).map(|i| format!("p-{i}")).collect();
        for id in &ids {
            store.post("s", Target::NextTurn, &msg(id)).unwrap();
        }
        let (mut child, lines) = spawn("owner", &dir.path().join("logs"), fault);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{fault}: the fault did not fire");
        assert!(!lines.iter().any(|l| l == "survived"), "{fault}");
        let s = Session::open(&store, "s").unwrap();
        let acked = HashMap::from([("p".to_owned(), ids.clone())]);
        assert_exactly_once(&taken_in(&s.events(0).unwrap()), &acked);
        assert_eq!(s.inbox().next_turn().unwrap().len(), 5, "{fault}");
        let spool = dir.path().join("logs/s.posts");
        assert_eq!(std::fs::read_dir(spool).unwrap().count(), 0, "{fault}");
    }
}

// ---------------------------------------------------------------- following

/// A torn tail is never yielded; the repair of the next owner is, with no gap.
#[test]
fn a_follower_survives_the_owners_crash_and_the_repair() {
    let (dir, store) = store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("a")).unwrap();
    s.open_turn().unwrap();
    drop(s);
    let path = dir.path().join("logs/s.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    let torn = br#"{"type":"x/torn","seq":2,"ti"#;
    bytes.extend_from_slice(torn);
    std::fs::write(&path, &bytes).unwrap();
    let mut f = Follower::open(&store, "s", 0).unwrap();
    let got = f.next_batch(Duration::from_secs(5)).unwrap();
    assert_eq!(got.len(), 2);
    assert!(f.next_timeout(Duration::from_millis(50)).unwrap().is_none());
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().torn_bytes, torn.len() as u64);
    let repair = f.next_batch(Duration::from_secs(5)).unwrap();
    assert_eq!(repair.len(), 1);
    assert_eq!(
        (repair[0].seq(), repair[0].ty(), repair[0].data()),
        (
            2,
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"interrupted"}}"#
        )
    );
    // A log cut below what was read is reported, never skipped over.
    drop(s);
    std::fs::write(
        &path,
        &bytes[..bytes.iter().position(|&b| b == b'\n').unwrap() + 1],
    )
    .unwrap();
    let err = f.next_timeout(Duration::from_secs(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("shrank"), "{err}");
}

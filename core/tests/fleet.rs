//! Fleet features (ARCHITECTURE.md#posting) where they meet the JSONL store's files:
//! exactly-once delivery across real killed posters and owners, the spool, following
//! from another process and across the owner's crash. What every store does alike is
//! in the store suite (`core/tests/store/`). Child
//! processes are this test binary re-executed with `INBOXLOG_FLEET_ROLE` set, running
//! only `fleet_child`.
#![cfg(unix)]

mod jsonl_common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::ToJson;
use inboxlog::store::fault::{Action, FaultPlan, Point};
use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    Baseline, Decision, Envelope, ErrorKind, Event, Follower, QueueProjection, Session,
    SessionMeta, StepOutcome, Target,
};
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
    match std::env::var(ROLE).as_deref() {
        Ok("poster") => poster(&root, &arg),
        Ok("owner") => owner(&root, &arg),
        Ok("follower") => follower(&root, &arg),
        _ => {}
    }
}

/// Posts `<name>-<i>` to session "s" (forever, or `count` times), printing
/// `ack <message id>` once each post is acknowledged.
fn poster(root: &str, arg: &str) {
    let (name, count) = arg.split_once(':').unwrap();
    let count: u64 = count.parse().unwrap();
    let store = JsonlStore::open(root, Durability::Sync).unwrap();
    for i in 0..count {
        let id = format!("{name}-{i}");
        store.post("s", Target::NextTurn, &msg(&id)).unwrap();
        println!("ack {id}");
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

/// Follows session "s" from 0 into a projection; prints `at <seq> <baseline>` every
/// `every` events and at the `test/done` event, then stops.
fn follower(root: &str, every: &str) {
    let every: u64 = every.parse().unwrap();
    let store = JsonlStore::open(root, Durability::Sync).unwrap();
    let mut follower = Follower::open(&store, "s", 0).unwrap();
    let mut projection = QueueProjection::new(empty()).unwrap();
    for event in &mut follower {
        let event = event.unwrap();
        projection.apply(&event).unwrap();
        let done = event.ty() == "test/done";
        if done || event.seq() % every == 0 {
            println!("at {} {}", event.seq(), projection.baseline().to_json());
        }
        if done {
            return;
        }
    }
}

// ---------------------------------------------------------------- the parent side

fn empty() -> Baseline {
    Baseline {
        seq: None,
        next_turn: Vec::new(),
        next_step: Vec::new(),
    }
}

fn spawn(role: &str, root: &Path, arg: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "fleet_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(ROOT, root)
        .env(ARG, arg)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// A child's stdout lines so far.
type Lines = Arc<Mutex<Vec<String>>>;

/// The child's complete stdout lines, read on a thread.
fn lines_of(child: &mut Child) -> Lines {
    let out = BufReader::new(child.stdout.take().unwrap());
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    thread::spawn(move || {
        let mut out = out;
        let mut line = Vec::new();
        // Only newline-terminated lines count: a kill can cut the last one.
        while out.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            if line.last() == Some(&b'\n') {
                line.pop();
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8(std::mem::take(&mut line)).unwrap());
            }
            line.clear();
        }
    });
    lines
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The message ids the log took in from posts, in log order, with their post ids.
fn taken_in(events: &[Event]) -> Vec<(String, String)> {
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

/// Every acknowledged message is in `taken` exactly once, in each poster's order; no
/// message or post id appears twice.
#[track_caller]
fn assert_exactly_once(taken: &[(String, String)], acked: &HashMap<String, Vec<String>>) {
    let mut seen = HashMap::new();
    let mut posts = HashMap::new();
    for (i, (m, p)) in taken.iter().enumerate() {
        assert!(seen.insert(m.clone(), i).is_none(), "{m} taken in twice");
        assert!(
            posts.insert(p.clone(), i).is_none(),
            "post {p} taken in twice"
        );
    }
    for (poster, ids) in acked {
        let at: Vec<usize> = ids
            .iter()
            .map(|id| {
                *seen
                    .get(id)
                    .unwrap_or_else(|| panic!("acked {id} was lost"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{poster} out of order");
    }
    // Posts of one poster that were taken in, acknowledged or not, keep their order.
    let mut by_poster: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (m, _) in taken {
        let (poster, i) = m.rsplit_once('-').unwrap();
        by_poster
            .entry(poster)
            .or_default()
            .push(i.parse().unwrap());
    }
    for (poster, is) in by_poster {
        assert!(is.windows(2).all(|w| w[0] < w[1]), "{poster}: {is:?}");
    }
}

#[test]
fn receive_from_inside_an_observer_is_refused() {
    let store = MemoryStore::new();
    let s = Arc::new(Session::create(&store, "s", SessionMeta::default()).unwrap());
    let inner = Arc::downgrade(&s);
    let got = Arc::new(Mutex::new(None));
    let sink = got.clone();
    s.on_event(move |_| {
        let s = inner.upgrade().unwrap();
        *sink.lock().unwrap() = Some(s.receive().map_err(|e| e.kind()));
        Ok(())
    });
    s.append("x/a", "{}", Envelope::default()).unwrap();
    assert_eq!(*got.lock().unwrap(), Some(Err(ErrorKind::Reentrant)));
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

#[test]
fn a_post_larger_than_the_record_limit_is_refused() {
    let (_dir, store) = store(Durability::Sync);
    let store = store.with_record_limit(200);
    Session::create(&store, "s", SessionMeta::default()).unwrap();
    let big = inboxlog::Message::from_json(&format!(r#"{{"id":"b","x":"{}"}}"#, "x".repeat(300)))
        .unwrap();
    assert_err(
        store.post("s", Target::NextTurn, &big),
        ErrorKind::TooLarge,
        &["larger than the record limit"],
    );
}

/// Posters killed with SIGKILL at random moments: every post they acknowledged is taken
/// in exactly once, in order; a post cut short before its rename is never delivered.
#[test]
fn posters_killed_mid_post_lose_nothing_acknowledged() {
    let (dir, store) = store(Durability::Sync);
    Session::create(&store, "s", SessionMeta::default()).unwrap();
    let root = dir.path().join("logs");
    let mut acked = HashMap::new();
    for round in 0..4u64 {
        let name = format!("k{round}");
        let mut child = spawn("poster", &root, &format!("{name}:1000000"));
        let lines = lines_of(&mut child);
        let wait = Instant::now();
        let acks = |l: &Vec<String>| l.iter().filter(|l| l.starts_with("ack ")).count();
        while acks(&lines.lock().unwrap()) < 3 && wait.elapsed() < Duration::from_secs(30) {
            thread::sleep(Duration::from_millis(2));
        }
        thread::sleep(Duration::from_millis(5 + round * 7));
        kill(&mut child);
        thread::sleep(Duration::from_millis(50));
        let ids: Vec<String> = lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("ack ").map(str::to_owned))
            .collect();
        assert!(!ids.is_empty());
        acked.insert(name, ids);
    }
    let s = Session::open(&store, "s").unwrap();
    assert_exactly_once(&taken_in(&s.events(0).unwrap()), &acked);
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_exactly_once(&taken_in(&s.events(0).unwrap()), &acked);
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
        let mut child = spawn("owner", &dir.path().join("logs"), fault);
        let lines = lines_of(&mut child);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{fault}: the fault did not fire");
        assert!(!lines.lock().unwrap().iter().any(|l| l == "survived"));
        let s = Session::open(&store, "s").unwrap();
        let acked = HashMap::from([("p".to_owned(), ids.clone())]);
        assert_exactly_once(&taken_in(&s.events(0).unwrap()), &acked);
        assert_eq!(s.inbox().next_turn().unwrap().len(), 5, "{fault}");
        let spool = dir.path().join("logs/s.posts");
        assert_eq!(std::fs::read_dir(spool).unwrap().count(), 0, "{fault}");
    }
}

/// Four poster processes while the owner runs turns: every acknowledged post is taken
/// in exactly once, in each poster's order.
#[test]
fn four_posting_processes_while_the_owner_runs_turns() {
    let (dir, store) = store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let root = dir.path().join("logs");
    let mut children: Vec<(String, Child, Lines)> = (0..4)
        .map(|i| {
            let name = format!("w{i}");
            let mut child = spawn("poster", &root, &format!("{name}:60"));
            let lines = lines_of(&mut child);
            (name, child, lines)
        })
        .collect();
    let mut turns = 0;
    let start = Instant::now();
    loop {
        let running = children
            .iter_mut()
            .any(|(_, c, _)| c.try_wait().unwrap().is_none());
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        if p.messages.is_empty() {
            s.decide(Decision::Enter(Vec::new())).unwrap();
        } else {
            s.decide(Decision::Enter(p.messages)).unwrap();
            s.end_step(StepOutcome::Completed).unwrap();
            s.close_turn().unwrap();
        }
        turns += 1;
        if !running {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "posters hang");
    }
    s.receive().unwrap();
    let mut acked = HashMap::new();
    for (name, mut child, lines) in children.drain(..) {
        assert!(child.wait().unwrap().success());
        thread::sleep(Duration::from_millis(20));
        let ids: Vec<String> = lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("ack ").map(str::to_owned))
            .collect();
        assert_eq!(ids.len(), 60, "{name}");
        acked.insert(name, ids);
    }
    assert!(turns > 1);
    let taken = taken_in(&s.events(0).unwrap());
    assert_eq!(taken.len(), 240);
    assert_exactly_once(&taken, &acked);
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

/// A follower process feeding a `QueueProjection` stays equal to the owner's inbox
/// through 10,000 random operations (checked at checkpoints while both run, and at
/// the end).
#[test]
fn a_follower_process_keeps_a_projection_equal_to_the_inbox() {
    let (dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let mut child = spawn("follower", &dir.path().join("logs"), "97");
    let lines = lines_of(&mut child);
    let mut rng = 0x5eed_u64;
    let mut next = || {
        rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    // The owner's inbox after each operation, by the seq of its last event.
    let mut states = HashMap::new();
    let inbox = s.inbox();
    for i in 0..10_000u64 {
        let target = if next() % 2 == 0 {
            Target::NextTurn
        } else {
            Target::NextStep
        };
        let len = match target {
            Target::NextTurn => inbox.next_turn().unwrap().len(),
            Target::NextStep => inbox.next_step().unwrap().len(),
        } as f64;
        match next() % 10 {
            0..=4 => inbox.append(target, msg(&format!("m{i}"))).unwrap(),
            5 => inbox.prepend(target, msg(&format!("m{i}"))).unwrap(),
            6 | 7 => {
                let at = (next() % (len as u64 + 1)) as f64;
                inbox.splice(target, at, 1.0, Vec::new()).map(drop).unwrap();
            }
            8 => {
                let at = (next() % (len as u64 + 1)) as f64;
                inbox
                    .splice(target, at, 2.0, vec![msg(&format!("r{i}"))])
                    .map(drop)
                    .unwrap();
            }
            _ => {
                if next() % 20 == 0 {
                    inbox.clear().unwrap();
                } else {
                    s.append("x/noise", "{}", Envelope::default()).unwrap();
                }
            }
        }
        if let Some(seq) = s.last_seq().unwrap() {
            let state = Baseline {
                seq: Some(seq),
                next_turn: inbox.next_turn().unwrap(),
                next_step: inbox.next_step().unwrap(),
            };
            states.insert(seq, state.to_json());
        }
    }
    s.append("test/done", "{}", Envelope::default()).unwrap();
    let last = s.last_seq().unwrap().unwrap();
    states.insert(
        last,
        Baseline {
            seq: Some(last),
            next_turn: inbox.next_turn().unwrap(),
            next_step: inbox.next_step().unwrap(),
        }
        .to_json(),
    );
    let status = child.wait().unwrap();
    assert!(status.success());
    thread::sleep(Duration::from_millis(50));
    let lines = lines.lock().unwrap();
    let mut checked = 0;
    let mut final_seen = false;
    for line in lines.iter().filter_map(|l| l.strip_prefix("at ")) {
        let (seq, state) = line.split_once(' ').unwrap();
        let seq: u64 = seq.parse().unwrap();
        if let Some(expected) = states.get(&seq) {
            assert_eq!(state, expected, "at seq {seq}");
            checked += 1;
        }
        final_seen |= seq == last;
    }
    assert!(final_seen, "the follower never reached seq {last}");
    assert!(checked > 50, "only {checked} checkpoints matched");
}

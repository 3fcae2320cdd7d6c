//! Ownership and faults with real processes on a real PostgreSQL server (ARCHITECTURE.md#postgresql).
//! Child processes are this test binary re-executed with `INBOXLOG_PG_ROLE` set,
//! running only `fleet_child`; they report every acknowledged event on stdout.
//!
//! - a second process's open is `locked` at once;
//! - `kill -9` of an owner inside a `sync` append loop: another process opens within
//!   2 s, every acknowledged event is there, the open turn is closed `interrupted`;
//! - `SIGSTOP` of an owner: open is `locked`, a takeover proceeds at once, and the old
//!   owner, continued, is `fenced` and has written nothing after the takeover;
//! - a bounded soak: 8 processes over 16 sessions for `INBOXLOG_SOAK_SECS` (default 15)
//!   of random opens, takeovers, appends, inbox and protocol calls, closes and crashes;
//!   afterwards every log verifies and every acknowledged event is stored exactly once,
//!   byte for byte.
#![cfg(unix)]

mod pg_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use inboxlog::store::{Durability, OpenOptions, PgStore};
use inboxlog::{
    CancelCause, Decided, Decision, Envelope, ErrorKind, Message, Session, SessionMeta,
    StepOutcome, Target,
};

const ROLE: &str = "INBOXLOG_PG_ROLE";
const SCHEMA: &str = "INBOXLOG_PG_SCHEMA";
const SEED: &str = "INBOXLOG_PG_SEED";
const DEADLINE: &str = "INBOXLOG_PG_DEADLINE_MS";

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn msg(id: &str) -> Message {
    Message::from_json(&format!(r#"{{"id":"{id}","role":"user"}}"#)).unwrap()
}

// ---------------------------------------------------------------- the child side

/// The children's entry point, run only by [`spawn`]; ignored in a normal run.
#[test]
#[ignore = "the fleet tests' child process: they run it with INBOXLOG_PG_ROLE set"]
fn fleet_child() {
    println!();
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let store = PgStore::connect(
        &pg_common::url(),
        inboxlog::store::PgOptions {
            schema: std::env::var(SCHEMA).unwrap(),
            durability: Durability::Sync,
            ..Default::default()
        },
    )
    .unwrap();
    match role.as_str() {
        "holder" => holder(&store),
        "writer" => writer(&store),
        "soak" => soak(&store),
        other => panic!("unknown role {other}"),
    }
}

/// Opens `s`, says `ready`, then runs the parent's commands from stdin: `append`
/// answers `ok <seq>` or `err <kind>`.
fn holder(store: &PgStore) {
    let s = Session::open(store, "s").unwrap();
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "append" => match s.append("host/late", "{}", Envelope::default()) {
                Ok(e) => println!("ok {}", e.seq()),
                Err(e) => println!("err {}", e.kind()),
            },
            _ => return,
        }
    }
}

/// Opens `s` and a turn, then appends forever, printing `ack <event json>` for each
/// acknowledged event.
fn writer(store: &PgStore) {
    let s = Session::open(store, "s").unwrap();
    s.open_turn().unwrap();
    println!("turn");
    for i in 0u64.. {
        let e = s
            .append(
                "host/chunk",
                &format!(r#"{{"i":{i}}}"#),
                Envelope::default(),
            )
            .unwrap();
        println!("ack {}", e.to_json());
    }
}

/// Where a soak child's session stands in the protocol.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Idle,
    TurnOpen,
    InStep,
}

struct Open {
    session: Session,
    phase: Phase,
    seen: Arc<Mutex<Vec<String>>>,
}

/// Random work over sessions `s0`..`s15` until the deadline: every committed event is
/// printed as `ack <session> <event json>`. Sometimes aborts on the spot.
fn soak(store: &PgStore) {
    let mut rng = Rng(std::env::var(SEED).unwrap().parse().unwrap());
    let deadline: u64 = std::env::var(DEADLINE).unwrap().parse().unwrap();
    let mut open: Vec<Open> = Vec::new();
    let mut n = 0u64;
    while now_ms() < deadline {
        n += 1;
        if rng.below(400) == 0 {
            std::process::abort();
        }
        if open.len() < 2 && (open.is_empty() || rng.below(4) == 0) {
            let id = format!("s{}", rng.below(16));
            if open.iter().any(|o| o.session.id() == id) {
                continue;
            }
            let takeover = rng.below(25) == 0;
            match Session::open_with(store, &id, &OpenOptions::takeover(takeover)) {
                Ok(session) => {
                    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
                    let sink = seen.clone();
                    session.on_event(move |e| {
                        sink.lock().unwrap().push(e.to_json());
                        Ok(())
                    });
                    open.push(Open {
                        session,
                        phase: Phase::Idle,
                        seen,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Locked => thread::sleep(Duration::from_millis(2)),
                // A takeover by another process came right after this open took the
                // session: its repair of an interrupted turn was fenced.
                Err(e) if e.kind() == ErrorKind::Fenced => {}
                Err(e) => panic!("open {id}: {e}"),
            }
            continue;
        }
        let i = rng.below(open.len() as u64) as usize;
        let o = &mut open[i];
        let result = step(&mut rng, o, n);
        for line in o.seen.lock().unwrap().drain(..) {
            println!("ack {} {line}", o.session.id());
        }
        match result {
            Ok(true) => {}
            Ok(false) => {
                let o = open.swap_remove(i);
                let _ = o.session.close();
            }
            // Another process took the session over: this writer is done with it.
            Err(e) if e.kind() == ErrorKind::Fenced => {
                open.swap_remove(i);
            }
            Err(e) => panic!("{}: {e}", open[i].session.id()),
        }
    }
}

/// One random call on an open session; `Ok(false)` asks to close it.
fn step(rng: &mut Rng, o: &mut Open, n: u64) -> inboxlog::Result<bool> {
    let s = &o.session;
    match (o.phase, rng.below(10)) {
        (_, 0) => return Ok(false),
        (_, 1 | 2) => {
            s.append("host/x", &format!(r#"{{"n":{n}}}"#), Envelope::default())?;
        }
        (Phase::Idle, 3 | 4) => {
            let id = format!("m{}-{n}", std::process::id());
            s.inbox().append(Target::NextTurn, msg(&id))?;
        }
        (Phase::Idle, 5) => s.cancel(CancelCause::User, false)?,
        (Phase::Idle, _) => {
            if s.inbox().has_pending()? {
                s.open_turn()?;
                o.phase = Phase::TurnOpen;
            }
        }
        (Phase::TurnOpen, 3) => {
            let id = format!("st{}-{n}", std::process::id());
            s.inbox().append(Target::NextStep, msg(&id))?;
        }
        (Phase::TurnOpen, _) => {
            let p = s.propose_step()?;
            o.phase = match s.decide(Decision::Enter(p.messages))? {
                Decided::Step { .. } => Phase::InStep,
                Decided::TurnEnded { .. } => Phase::Idle,
            };
        }
        (Phase::InStep, 3) => {
            s.cancel(CancelCause::User, false)?;
            o.phase = Phase::Idle;
        }
        (Phase::InStep, _) => {
            if s.end_step(StepOutcome::Completed)? {
                o.phase = Phase::TurnOpen;
            } else {
                s.close_turn()?;
                o.phase = Phase::Idle;
            }
        }
    }
    Ok(true)
}

// ---------------------------------------------------------------- the parent side

struct Kid {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Kid {
    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a child in `role`; its stdout lines go to `out` tagged with `tag`.
fn spawn(
    role: &str,
    schema: &str,
    seed: u64,
    deadline: u64,
    tag: usize,
    out: Sender<(usize, String)>,
) -> Kid {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "fleet_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(SCHEMA, schema)
        .env(SEED, seed.to_string())
        .env(DEADLINE, deadline.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    thread::spawn(move || {
        let mut line = Vec::new();
        // Only newline-terminated lines count: a kill can cut the last one.
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            if line.last() == Some(&b'\n') {
                line.pop();
                let text = String::from_utf8(std::mem::take(&mut line)).unwrap();
                if out.send((tag, text)).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    Kid { child, stdin }
}

/// The next line of a child, within `wait`.
fn expect_line(rx: &Receiver<(usize, String)>, wait: Duration) -> String {
    rx.recv_timeout(wait).expect("the child answers").1
}

fn wait_for(rx: &Receiver<(usize, String)>, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = expect_line(rx, deadline.saturating_duration_since(Instant::now()));
        if got == line {
            return;
        }
    }
}

fn created(store: &PgStore, id: &str) {
    Session::create(store, id, SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn a_second_process_is_locked_at_once_and_a_takeover_fences_a_stopped_owner() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    created(&store, "s");
    let (tx, rx) = mpsc::channel();
    let mut holder = spawn("holder", &schema.name, 0, 0, 0, tx);
    wait_for(&rx, "ready");

    // (a) The owner is alive: refused at once.
    let started = Instant::now();
    let err = Session::open(&store, "s").err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    holder.say("append");
    assert_eq!(expect_line(&rx, Duration::from_secs(10)), "ok 0");

    // (c) Stopped: still locked; a takeover proceeds at once and writes.
    holder.signal("-STOP");
    let err = Session::open(&store, "s").err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
    let started = Instant::now();
    let new = Session::open_with(&store, "s", &OpenOptions::takeover(true)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    new.append("host/new-owner", "{}", Envelope::default())
        .unwrap();
    // Continued: its next call is fenced, twice, and it wrote nothing.
    holder.signal("-CONT");
    holder.say("append");
    assert_eq!(expect_line(&rx, Duration::from_secs(10)), "err fenced");
    holder.say("append");
    assert_eq!(expect_line(&rx, Duration::from_secs(10)), "err fenced");
    let lines = schema.lines("s");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.contains("host/late")).count(), 1);
    assert!(lines[1].contains("host/new-owner"));
    new.append("host/still-mine", "{}", Envelope::default())
        .unwrap();
    holder.say("exit");
}

#[test]
fn kill_9_inside_a_sync_append_loop_loses_nothing_acknowledged() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    created(&store, "s");
    for round in 0..3u64 {
        let (tx, rx) = mpsc::channel();
        let kid = spawn("writer", &schema.name, round, 0, 0, tx);
        wait_for(&rx, "turn");
        // Let it run a random while, then kill it mid-loop.
        let until = Instant::now() + Duration::from_millis(100 + 150 * round);
        let mut acked = Vec::new();
        while Instant::now() < until {
            if let Ok((_, line)) = rx.recv_timeout(Duration::from_millis(10))
                && let Some(json) = line.strip_prefix("ack ")
            {
                acked.push(json.to_owned());
            }
        }
        kid.signal("-KILL");
        let killed = Instant::now();
        // Every line it printed before it died counts as acknowledged.
        drop(kid);
        while let Ok((_, line)) = rx.try_recv() {
            if let Some(json) = line.strip_prefix("ack ") {
                acked.push(json.to_owned());
            }
        }
        assert!(!acked.is_empty(), "round {round}: nothing was acknowledged");
        let s = loop {
            match Session::open(&store, "s") {
                Ok(s) => break s,
                Err(e) if e.kind() == ErrorKind::Locked => {
                    assert!(
                        killed.elapsed() < Duration::from_secs(2),
                        "round {round}: still locked {:?} after the kill",
                        killed.elapsed()
                    );
                    thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "{:?}",
            killed.elapsed()
        );
        assert_eq!(s.open_report().repaired_turn, Some(round + 1));
        let stored = schema.lines("s");
        for line in &acked {
            assert!(
                stored.contains(line),
                "round {round}: acknowledged {line} is missing"
            );
        }
        assert!(
            stored
                .last()
                .unwrap()
                .contains(r#""reason":{"kind":"interrupted"}"#),
            "{:?}",
            stored.last()
        );
        s.close().unwrap();
    }
    assert!(Session::verify(&store, "s").is_ok());
}

#[test]
fn a_soak_of_eight_processes_over_sixteen_sessions_keeps_every_acknowledged_event() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let secs: u64 = std::env::var("INBOXLOG_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    for i in 0..16 {
        created(&store, &format!("s{i}"));
    }
    let deadline = now_ms() + secs * 1000;
    let (tx, rx) = mpsc::channel();
    let mut seed = 1u64;
    let mut kids: Vec<Kid> = (0..8)
        .map(|tag| {
            seed += 1;
            spawn("soak", &schema.name, seed, deadline, tag, tx.clone())
        })
        .collect();
    let mut acked: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    let mut crashes = 0;
    let mut record = |line: String| {
        let Some(rest) = line.strip_prefix("ack ") else {
            return;
        };
        let (id, json) = rest.split_once(' ').unwrap();
        let event: serde_json::Value = serde_json::from_str(json).unwrap();
        let seq = event["seq"].as_u64().unwrap();
        let before = acked
            .entry(id.to_owned())
            .or_default()
            .insert(seq, json.to_owned());
        assert!(
            before.is_none(),
            "{id} seq {seq} acknowledged twice: {before:?} and {json}"
        );
    };
    loop {
        while let Ok((_, line)) = rx.recv_timeout(Duration::from_millis(20)) {
            record(line);
        }
        let mut running = false;
        for (tag, kid) in kids.iter_mut().enumerate() {
            match kid.child.try_wait().unwrap() {
                None => running = true,
                Some(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    let crashed = status.signal() == Some(6);
                    assert!(
                        status.success() || crashed,
                        "a soak child failed: {status:?}"
                    );
                    if crashed && now_ms() + 500 < deadline {
                        crashes += 1;
                        seed += 1;
                        *kid = spawn("soak", &schema.name, seed, deadline, tag, tx.clone());
                        running = true;
                    }
                }
            }
        }
        if !running {
            break;
        }
    }
    drop(tx);
    while let Ok((_, line)) = rx.recv_timeout(Duration::from_millis(200)) {
        record(line);
    }
    let total: usize = acked.values().map(BTreeMap::len).sum();
    eprintln!("soak: {secs} s, {total} acknowledged events, {crashes} crashes");
    assert!(total > 100, "the soak did too little: {total}");
    for i in 0..16 {
        let id = format!("s{i}");
        let report = Session::verify(&store, &id).unwrap();
        let stored = schema.lines(&id);
        assert_eq!(report.events as usize, stored.len());
        for (seq, json) in acked.get(&id).into_iter().flatten() {
            assert_eq!(
                stored.get(*seq as usize),
                Some(json),
                "{id} seq {seq}: acknowledged event missing or changed"
            );
        }
        // Opening repairs whatever a crash left open, and the log stays valid.
        Session::open(&store, &id).unwrap().close().unwrap();
        Session::verify(&store, &id).unwrap();
    }
}

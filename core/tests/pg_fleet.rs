//! A soak of processes on a real PostgreSQL server (ARCHITECTURE.md#postgresql): 8
//! processes over 16 sessions for `INBOXLOG_SOAK_SECS` (default 15) of random opens,
//! takeovers, appends, inbox and protocol calls, closes and crashes; afterwards every
//! log verifies and every acknowledged event is stored exactly once, byte for byte.
//! Child processes are this test binary re-executed with `INBOXLOG_PG_ROLE` set,
//! running only `fleet_child`; they report every acknowledged event on stdout. (A
//! second process locked out, a stopped owner taken over, a writer killed mid-loop:
//! the store suite's `processes.rs`, over every store other processes reach.)
#![cfg(unix)]

mod common;
mod pg_common;

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Rng, lines_of, msg, rerun};
use inboxlog::store::{Durability, OpenOptions, PgStore};
use inboxlog::{
    CancelCause, Decided, Decision, Envelope, ErrorKind, Session, SessionMeta, StepOutcome, Target,
};

const ROLE: &str = "INBOXLOG_PG_ROLE";
const SCHEMA: &str = "INBOXLOG_PG_SCHEMA";
const SEED: &str = "INBOXLOG_PG_SEED";
const DEADLINE: &str = "INBOXLOG_PG_DEADLINE_MS";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
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
        "soak" => soak(&store),
        other => panic!("unknown role {other}"),
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

/// A soak child, killed when dropped, and its complete stdout lines.
struct Kid {
    child: Child,
    lines: Receiver<String>,
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a soak child with `seed` that stops at `deadline`.
fn spawn(schema: &str, seed: u64, deadline: u64) -> Kid {
    let mut child = rerun("fleet_child")
        .env(ROLE, "soak")
        .env(SCHEMA, schema)
        .env(SEED, seed.to_string())
        .env(DEADLINE, deadline.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    Kid { child, lines }
}

fn created(store: &PgStore, id: &str) {
    Session::create(store, id, SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
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
    let mut seed = 1u64;
    let mut kids: Vec<Kid> = (0..8)
        .map(|_| {
            seed += 1;
            spawn(&schema.name, seed, deadline)
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
        thread::sleep(Duration::from_millis(20));
        let mut running = false;
        for kid in &mut kids {
            kid.lines.try_iter().for_each(&mut record);
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
                        // Everything it said before it died, then its successor.
                        kid.lines.iter().for_each(&mut record);
                        *kid = spawn(&schema.name, seed, deadline);
                        running = true;
                    }
                }
            }
        }
        if !running {
            break;
        }
    }
    for kid in &kids {
        kid.lines.iter().for_each(&mut record);
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

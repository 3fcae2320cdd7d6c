//! Real crashes (ARCHITECTURE.md#durability–ARCHITECTURE.md#opening-a-stored-log). A child process — this test binary re-executed with
//! `INBOXLOG_CRASH_ROLE` set, running only `crash_child` — appends in `sync` mode (turns,
//! steps, inbox splices, host events) and prints every acknowledged event. The parent
//! SIGKILLs it at random moments, or lets a failpoint abort it between a write and its
//! fsync, after an fsync, at a simulated power cut, or while it repairs a torn tail or an
//! interrupted turn. After each death the parent checks the log: every acknowledged
//! event present and byte-identical, seqs contiguous, an open turn closed as
//! `interrupted`, the inbox equal to a replay of the surviving log, a second open a
//! no-op. Set `INBOXLOG_CRASH_SEED` to replay a run. (A second process locked out
//! until the owner dies, in every store other processes reach: the store suite.)
#![cfg(unix)]

mod jsonl_common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::fault::{Action, FaultPlan, Point};
use inboxlog::store::{Durability, JsonlStore, Store};
use inboxlog::{
    Decided, Decision, Envelope, Event, QueueProjection, Session, SessionMeta, StepOutcome, Target,
};
use jsonl_common::*;

const ROLE: &str = "INBOXLOG_CRASH_ROLE";
const ROOT: &str = "INBOXLOG_CRASH_ROOT";
const SEED: &str = "INBOXLOG_CRASH_SEED";
const FAULT: &str = "INBOXLOG_CRASH_FAULT";

// ---------------------------------------------------------------- the child side

/// The child's entry point, run only by [`spawn`] (`--ignored --exact crash_child`) with
/// the role set; ignored in a normal run, where it would check nothing.
#[test]
#[ignore = "the crash tests' child process: they run it with INBOXLOG_CRASH_ROLE set"]
fn crash_child() {
    // Ends the harness's "test crash_child ... " line: each line of ours stands alone.
    println!();
    if std::env::var(ROLE).as_deref() == Ok("writer") {
        writer();
    }
}

/// `point:nth:action[:n]`, e.g. `write:3:power-cut:40`.
fn parse_fault(spec: &str) -> FaultPlan {
    let parts: Vec<&str> = spec.split(':').collect();
    let point = match parts[0] {
        "write" => Point::Write,
        "sync" => Point::Sync,
        "truncate" => Point::Truncate,
        "checkpoint" => Point::Checkpoint,
        other => panic!("bad point {other}"),
    };
    let nth = parts[1].parse().unwrap();
    let action = match parts[2] {
        "crash-before" => Action::CrashBefore,
        "crash-after" => Action::CrashAfter,
        "power-cut" => Action::PowerCut(parts[3].parse().unwrap()),
        other => panic!("bad action {other}"),
    };
    FaultPlan::new().on(point, nth, action)
}

fn child_store() -> JsonlStore {
    let store = JsonlStore::open(std::env::var(ROOT).unwrap(), Durability::Sync).unwrap();
    match std::env::var(FAULT) {
        Ok(spec) if !spec.is_empty() => store.with_faults(parse_fault(&spec)),
        _ => store,
    }
}

enum Phase {
    Idle,
    TurnOpen,
    InStep,
}

/// Appends forever, printing `ack <event json>` for each acknowledged event; between
/// turns, now and then, closes the session (writing its checkpoint,
/// core/FORMAT.md#checkpoints) and opens it again (from that checkpoint), so that kills
/// land while checkpoints are written too.
fn writer() {
    let seed: u64 = std::env::var(SEED).unwrap().parse().unwrap();
    let mut rng = Rng(seed);
    let store = child_store();
    let mut s = Session::open(&store, "s").unwrap();
    let mut printed = s.last_seq().unwrap().map_or(0, |l| l + 1);
    let mut phase = Phase::Idle;
    for i in 0u64.. {
        let id = format!("m{seed}-{i}");
        let chunk = |rng: &mut Rng| {
            let pad = "x".repeat(rng.below(300) as usize);
            format!(r#"{{"text":"chunk {i} é ✓ 𝄞 \"q\" \\ \n","pad":"{pad}"}}"#)
        };
        phase = match phase {
            Phase::Idle => match rng.below(5) {
                0 | 1 => {
                    s.inbox().append(Target::NextTurn, msg(&id)).unwrap();
                    Phase::Idle
                }
                2 => {
                    s.append("host/note", &chunk(&mut rng), Envelope::default())
                        .unwrap();
                    Phase::Idle
                }
                3 => {
                    s.inbox()
                        .splice(Target::NextTurn, rng.below(3) as f64, 1.0, vec![])
                        .unwrap();
                    Phase::Idle
                }
                _ if s.inbox().has_pending().unwrap() => {
                    s.open_turn().unwrap();
                    Phase::TurnOpen
                }
                _ => Phase::Idle,
            },
            Phase::TurnOpen => {
                let p = s.propose_step().unwrap();
                match s.decide(Decision::Enter(p.messages)).unwrap() {
                    Decided::Step { .. } => Phase::InStep,
                    Decided::TurnEnded { .. } => Phase::Idle,
                }
            }
            Phase::InStep => match rng.below(6) {
                0..=2 => {
                    s.append("assistant/chunk", &chunk(&mut rng), Envelope::default())
                        .unwrap();
                    Phase::InStep
                }
                3 => {
                    s.inbox().append(Target::NextStep, msg(&id)).unwrap();
                    Phase::InStep
                }
                4 => {
                    assert!(s.end_step(StepOutcome::Continue).unwrap());
                    Phase::TurnOpen
                }
                _ => {
                    if s.end_step(StepOutcome::Completed).unwrap() {
                        Phase::TurnOpen
                    } else {
                        s.close_turn().unwrap();
                        Phase::Idle
                    }
                }
            },
        };
        for e in s.events(printed).unwrap() {
            println!("ack {}", e.to_json());
            printed = e.seq() + 1;
        }
        if matches!(phase, Phase::Idle) && rng.below(20) == 0 {
            s.close().unwrap();
            s = Session::open(&store, "s").unwrap();
        }
    }
}

// ---------------------------------------------------------------- the parent side

/// A normal run skips the child entry point (it would assert nothing there); the
/// parent runs it on purpose.
#[test]
fn crash_child_is_ignored_unless_run_on_purpose() {
    let listed = Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--ignored", "--format=terse"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let ignored = String::from_utf8(listed.stdout).unwrap();
    assert!(
        ignored.lines().any(|l| l == "crash_child: test"),
        "crash_child is not #[ignore]d: {ignored}"
    );
}

/// Starts a child in `role` and a thread forwarding its complete stdout lines.
fn spawn(role: &str, root: &Path, seed: u64, fault: &str) -> (Child, Receiver<String>) {
    let mut child = rerun("crash_child")
        .env(ROLE, role)
        .env(ROOT, root)
        .env(SEED, seed.to_string())
        .env(FAULT, fault)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    (child, rx)
}

/// How a round ends the child.
#[derive(Clone, Copy, Debug)]
enum Death {
    /// SIGKILL after a random delay.
    Kill,
    /// Abort after the n-th write landed, before its fsync.
    AfterWrite,
    /// Abort after the n-th fsync, before the call returned.
    AfterSync,
    /// A power cut at the n-th write: the file keeps only its synced bytes plus a few.
    PowerCut,
    /// Abort right after the first write: the repair of an interrupted turn on open.
    DuringTurnRepair,
    /// Abort before, or after, dropping the torn tail on open (before its fsync).
    BeforeTailRepair,
    AfterTailRepair,
    /// Abort before or after one step of writing a checkpoint (its temporary file's
    /// write, its fdatasync, the rename, the directory's fsync: the n-th step of the
    /// child's first two), or a power cut that leaves the temporary file torn.
    InCheckpoint,
}

impl Death {
    fn fault(self, rng: &mut Rng) -> String {
        let nth = 1 + rng.below(25);
        match self {
            Death::Kill => String::new(),
            Death::AfterWrite => format!("write:{nth}:crash-after"),
            Death::AfterSync => format!("sync:{nth}:crash-after"),
            Death::PowerCut => format!("write:{nth}:power-cut:{}", rng.below(400)),
            Death::DuringTurnRepair => "write:1:crash-after".into(),
            Death::BeforeTailRepair => "truncate:1:crash-before".into(),
            Death::AfterTailRepair => "truncate:1:crash-after".into(),
            Death::InCheckpoint => {
                let step = 1 + rng.below(8);
                match rng.below(3) {
                    0 => format!("checkpoint:{step}:crash-before"),
                    1 => format!("checkpoint:{step}:crash-after"),
                    _ => format!("checkpoint:1:power-cut:{}", rng.below(200)),
                }
            }
        }
    }
}

/// Open turn and step at the end of `events`, as the log invariants track them.
fn open_turn_of(events: &[Event]) -> (Option<u64>, bool) {
    let (mut turn, mut step) = (None, false);
    for e in events {
        let data: serde_json::Value = serde_json::from_str(e.data()).unwrap();
        match e.ty() {
            "turn/start" => turn = data["turn"].as_u64(),
            "turn/end" => turn = None,
            "step/start" => step = true,
            "step/end" => step = false,
            _ => {}
        }
    }
    (turn, step)
}

/// Checks the log after a death; `acked` holds every event acknowledged so far.
fn verify(root: &Path, acked: &BTreeMap<u64, String>, what: &str) {
    let store = JsonlStore::open(root, Durability::Sync).unwrap();
    // From seq 0, the checkpoint (if any) compared with the replay at its seq.
    Session::verify(&store, "s").unwrap_or_else(|e| panic!("{what}: verify: {e}"));
    let path = store.path("s").unwrap();
    let raw = bytes(&path);
    let (header, stored) = store
        .inspect("s")
        .unwrap_or_else(|e| panic!("{what}: inspect: {e}"));
    let ls = lines(&raw);
    for (seq, json) in acked {
        let line = ls
            .get(*seq as usize + 1)
            .unwrap_or_else(|| panic!("{what}: acknowledged seq {seq} lost"));
        assert_eq!(
            std::str::from_utf8(&strip(line)).unwrap(),
            json,
            "{what}: seq {seq} changed"
        );
    }
    // The torn tail: the bytes after the last LF, and in a version 2 log any lines at
    // the end that break the checksum chain (inspect shows the events before them).
    let kept: usize = ls[..=stored.len()].iter().map(|l| l.len() + 1).sum();
    let torn = raw.len() - kept;
    assert!(
        torn >= raw.len() - raw.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1),
        "{what}"
    );
    let (open, step_open) = open_turn_of(&stored);

    let s = Session::open(&store, "s").unwrap_or_else(|e| panic!("{what}: open: {e}"));
    assert_eq!(s.open_report().torn_bytes, torn as u64, "{what}");
    assert_eq!(s.open_report().repaired_turn, open, "{what}");
    let after = s.events(0).unwrap();
    assert_eq!(
        after.len(),
        stored.len() + open.map_or(0, |_| 1 + usize::from(step_open)),
        "{what}"
    );
    for (a, b) in stored.iter().zip(&after) {
        assert_eq!(
            a.to_json(),
            b.to_json(),
            "{what}: events before the repair are never rewritten"
        );
    }
    if let Some(turn) = open {
        let end = after.last().unwrap();
        assert_eq!(end.ty(), "turn/end", "{what}");
        assert_eq!(
            end.data(),
            format!(r#"{{"turn":{turn},"reason":{{"kind":"interrupted"}}}}"#),
            "{what}"
        );
        assert_eq!(
            end.time(),
            stored.last().unwrap().time(),
            "{what}: repairs reuse the last time"
        );
    }
    let projection = QueueProjection::replay(&after, header.replay_from(), None).unwrap();
    assert_eq!(
        s.inbox().next_turn().unwrap(),
        projection.inbox().list(Target::NextTurn),
        "{what}"
    );
    assert_eq!(
        s.inbox().next_step().unwrap(),
        projection.inbox().list(Target::NextStep),
        "{what}"
    );
    drop(s);
    let repaired = bytes(&path);
    let again = Session::open(&store, "s").unwrap();
    assert_eq!(
        (
            again.open_report().torn_bytes,
            again.open_report().repaired_turn
        ),
        (0, None),
        "{what}"
    );
    drop(again);
    assert_eq!(
        bytes(&path),
        repaired,
        "{what}: a second open changed the file"
    );
}

/// Sets the stage a repair failpoint needs: an open turn with an open step, or a torn
/// tail (a cut-off record followed by NULs, as a crash mid-write leaves).
fn prepare(root: &Path, death: Death, rng: &mut Rng) {
    let store = JsonlStore::open(root, Durability::Sync).unwrap();
    match death {
        Death::DuringTurnRepair => {
            let s = Session::open(&store, "s").unwrap();
            s.inbox()
                .append(Target::NextTurn, msg(&format!("prep{}", rng.next_u64())))
                .unwrap();
            s.open_turn().unwrap();
            let p = s.propose_step().unwrap();
            assert!(matches!(
                s.decide(Decision::Enter(p.messages)).unwrap(),
                Decided::Step { .. }
            ));
        }
        Death::BeforeTailRepair | Death::AfterTailRepair => {
            let path = store.path("s").unwrap();
            let mut raw = bytes(&path);
            let last = *line_starts(&raw).last().unwrap();
            let cut = last + 1 + rng.below((raw.len() - last - 1) as u64) as usize;
            let fragment = raw[last..cut].to_vec();
            raw.extend_from_slice(&fragment);
            raw.extend(std::iter::repeat_n(0u8, rng.below(64) as usize));
            std::fs::write(&path, raw).unwrap();
        }
        _ => {}
    }
}

fn base_seed() -> u64 {
    std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn crash_every_acknowledged_event_survives_kills_and_failpoints() {
    use Death::*;
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let seed = base_seed();
    eprintln!("crash test seed {seed} (set {SEED}={seed} to replay)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    drop(
        Session::create(
            &JsonlStore::open(root, Durability::Sync).unwrap(),
            "s",
            SessionMeta::default(),
        )
        .unwrap(),
    );

    let faults = [
        PowerCut,
        BeforeTailRepair,
        InCheckpoint,
        AfterWrite,
        DuringTurnRepair,
        InCheckpoint,
        PowerCut,
        AfterTailRepair,
        InCheckpoint,
        AfterSync,
        PowerCut,
        InCheckpoint,
    ];
    // 36 SIGKILL rounds with a failpoint round after every third.
    let mut rounds = Vec::new();
    for i in 0..36 {
        rounds.push(Kill);
        if i % 3 == 2 {
            rounds.push(faults[i / 3]);
        }
    }
    let started = Instant::now();
    let mut acked = BTreeMap::new();
    let mut kills = 0;
    for (round, death) in rounds.into_iter().enumerate() {
        let fault = death.fault(&mut rng);
        let what = format!("seed {seed} round {round} {death:?} {fault}");
        prepare(root, death, &mut rng);
        let (mut child, rx) = spawn("writer", root, rng.next_u64() >> 11, &fault);
        let limit = match death {
            Kill => Duration::from_millis(10 + rng.below(150)),
            // Ends as soon as the fault fires: a generous bound for a loaded machine.
            InCheckpoint => Duration::from_secs(30),
            _ => Duration::from_secs(3),
        };
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill(); // SIGKILL; a no-op when a failpoint already ended it
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        match status.signal() {
            Some(9) => kills += 1,
            Some(6) => {}
            _ => panic!("{what}: child ended with {status}:\n{stderr}"),
        }
        if matches!(death, InCheckpoint) {
            // The child writes checkpoints within its time: the fault fired.
            assert_eq!(
                status.signal(),
                Some(6),
                "{what}: no checkpoint step was reached"
            );
        }
        for line in &rx {
            if let Some(json) = line.strip_prefix("ack ") {
                let seq = Event::from_json(json).unwrap().seq();
                if let Some(old) = acked.insert(seq, json.to_owned()) {
                    assert_eq!(
                        old, json,
                        "{what}: seq {seq} acknowledged twice, differently"
                    );
                }
            }
        }
        verify(root, &acked, &what);
    }
    assert!(kills >= 20, "only {kills} rounds ended by SIGKILL");
    assert!(acked.len() > 50, "only {} events acknowledged", acked.len());
    assert!(
        root.join("s.checkpoint").exists(),
        "no round closed the session with a checkpoint"
    );
    eprintln!(
        "{} rounds, {} acknowledged events, {:?}",
        kills,
        acked.len(),
        started.elapsed()
    );
}

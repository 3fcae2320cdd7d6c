//! Opening a 100,000-event JSONL log (ARCHITECTURE.md#checkpoints-and-reading-without-owning)
//! with its checkpoint at the end (written by `close`) and without one (the same log,
//! copied without its checkpoint): `Session::open` from the checkpoint reads the header
//! and the checkpoint only; from seq 0 it replays every event.
//!
//! Run: `cargo bench -p inboxlog --bench checkpoint` (set `INBOXLOG_BENCH_DIR` to put
//! the files on another disk than the temp dir).

use std::fs;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use inboxlog::store::{Durability, JsonlStore};
use inboxlog::{Decision, Envelope, Session, SessionMeta, StepOutcome, Target};

const EVENTS: u64 = 100_000;

/// The payload of a host event (~200 bytes as a line).
const DATA: &str = r#"{"text":"Here is the next part of the answer, with \"quotes\", some accents (é, ü, ñ) and a check ✓ to keep the parser honest.","index":42}"#;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("INBOXLOG_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// Session "big" of `EVENTS` events in `root`, in turns of a prompt, a step and host
/// events, closed (so with a checkpoint at its end).
fn generate(root: &Path) {
    let store = JsonlStore::open(root, Durability::None).unwrap();
    let s = Session::create(&store, "big", SessionMeta::default()).unwrap();
    let mut turn = 0;
    while s.last_seq().unwrap().map_or(0, |q| q + 1) < EVENTS - 100 {
        turn += 1;
        let m = inboxlog::Message::from_json(&format!(
            r#"{{"id":"m{turn}","role":"user","content":"turn {turn}"}}"#
        ))
        .unwrap();
        s.inbox().append(Target::NextTurn, m).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        for _ in 0..90 {
            s.append("assistant/chunk", DATA, Envelope::default())
                .unwrap();
        }
        s.end_step(StepOutcome::Completed).unwrap();
        s.close_turn().unwrap();
    }
    s.close().unwrap();
}

fn open_100k(c: &mut Criterion) {
    let dir = bench_dir();
    let with = dir.path().join("with");
    let without = dir.path().join("without");
    generate(&with);
    fs::create_dir_all(&without).unwrap();
    fs::copy(with.join("big.jsonl"), without.join("big.jsonl")).unwrap();
    assert!(with.join("big.checkpoint").exists());
    let with = JsonlStore::open(&with, Durability::None).unwrap();
    let without = JsonlStore::open(&without, Durability::None).unwrap();
    let events = Session::verify(&with, "big").unwrap().events;
    println!("open_100k: {events} events, checkpoint at the end");

    let mut group = c.benchmark_group("open_100k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("session_open_from_checkpoint", |b| {
        b.iter(|| drop(Session::open(&with, "big").unwrap()));
    });
    group.bench_function("session_open_from_seq_0", |b| {
        b.iter(|| drop(Session::open(&without, "big").unwrap()));
    });
    group.finish();
}

criterion_group!(benches, open_100k);
criterion_main!(benches);

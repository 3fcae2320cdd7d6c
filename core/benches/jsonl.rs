//! Benchmarks of the JSONL directory store (ARCHITECTURE.md#stores):
//! - `open_1m`: replay-once of a generated 1,000,000-event (~260 MB) log — the store's
//!   open, and a full `Session::open` — against a bare serde_json parse of the same lines
//!   into an envelope struct with `RawValue` data. The peak RSS of each is printed once.
//!   The log is generated in format version 1 and upgraded to version 2 (checksums,
//!   core/FORMAT.md#checksums-version-2), which the store opens; the bare parse reads the
//!   version 1 copy, so it measures the machine, not the format. The `_v1` benches open
//!   the same log kept as version 1: what the checksums cost (issue #40).
//! - `open_splices`: the same comparison for a 1,000,000-event log in which every
//!   event is an inbox splice (~150-byte messages, ~100 pending, appends at the end and
//!   removals by position of an id), the mix where the messages dominate the bytes.
//! - `batched`: durable events/s on one session in `batched` mode (appends + a flush).
//! - `sync_acks`: acknowledged appends/s in `sync` mode beside SQLite (WAL,
//!   `synchronous=FULL`, one row per transaction), same payload, same disk.
//! - `append_none`: one small append with durability `none`, from text (parsed and
//!   checked, as the C ABI appends) and from a `json::Builder` (as the wheel appends),
//!   beside the two system calls every append makes: `lseek` (the writer's length check,
//!   ARCHITECTURE.md#exclusive-writer) and the `write` of the same line.
//!
//! Run: `cargo bench -p inboxlog --bench jsonl` (set `INBOXLOG_BENCH_DIR` to put the
//! files on another disk than the temp dir).

use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store};
use inboxlog::{Envelope, Session, SessionMeta, Target, json};
use serde::Deserialize;
use serde_json::value::RawValue;

mod big_log;
use big_log::{EVENTS, generate};

/// The payload of the write benchmarks (~260 bytes as a line).
const DATA: &str = r#"{"text":"Here is the next part of the answer, with \"quotes\", a tab\t and a newline\n, some accents (é, ü, ñ), a check ✓ and a clef 𝄞 to keep the parser honest. Lorem ipsum dolor.","index":42}"#;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("INBOXLOG_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// The content of every message of the splice mix: ~110 bytes, one escape.
const CONTENT: &str = r#"Please summarise the attached report and list three follow-up questions, \"briefly\", in English."#;

/// Pending messages the splice mix keeps once it is warmed up.
const PENDING: usize = 100;

/// Writes a valid 1,000,000-event log in which every event is an `agent/inbox/spliced`
/// record on `next-turn`: 100 appends, then a removal of a pending message (by its
/// position, as removing by id writes it) and an append, in turn. Returns its size.
fn generate_splices(path: &Path) -> u64 {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).unwrap());
    writeln!(
        w,
        r#"{{"format":"inboxlog","version":1,"id":"splices","createdAt":1700000000000}}"#
    )
    .unwrap();
    let mut pending = 0usize;
    let mut next_id = 0u64;
    // A fixed linear congruential sequence picks which message goes (reproducible).
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for seq in 0..EVENTS {
        let time = 1_700_000_000_000 + seq;
        let data = if pending < PENDING || seq % 2 == 1 {
            let m = format!(r#"{{"id":"msg-{next_id:08}","role":"user","content":"{CONTENT}"}}"#);
            next_id += 1;
            pending += 1;
            format!(
                r#"{{"target":"next-turn","start":{},"inserted":[{m}]}}"#,
                pending - 1
            )
        } else {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let at = (rng >> 33) as usize % pending;
            pending -= 1;
            format!(r#"{{"target":"next-turn","start":{at},"removedCount":1,"inserted":[]}}"#)
        };
        writeln!(
            w,
            r#"{{"type":"agent/inbox/spliced","seq":{seq},"time":{time},"data":{data}}}"#
        )
        .unwrap();
    }
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// The baseline's envelope: the ARCHITECTURE.md#events keys, data kept raw.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Bare {
    #[serde(rename = "type")]
    ty: String,
    seq: u64,
    time: u64,
    data: Box<RawValue>,
    ignorable: Option<bool>,
    #[serde(rename = "surfaceOp")]
    surface_op: Option<Box<RawValue>>,
    #[serde(rename = "sourceEventSeqs")]
    source_event_seqs: Option<Vec<u64>>,
}

/// The baseline: every event line parsed into [`Bare`], nothing else.
fn bare_parse(path: &Path) -> u64 {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).unwrap());
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).unwrap(); // the header
    let mut n = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap() == 0 {
            return n;
        }
        black_box(serde_json::from_slice::<Bare>(&line).unwrap());
        n += 1;
    }
}

fn store_open(store: &JsonlStore, id: &str) -> u64 {
    let mut n = 0;
    let mut replay = inboxlog::store::events(|_, e| {
        black_box(e);
        n += 1;
        Ok(())
    });
    let opened = store
        .open(id, &OpenOptions::default(), &mut replay)
        .unwrap();
    drop(opened);
    n
}

fn session_open(store: &JsonlStore, id: &str) -> u64 {
    let s = Session::open(store, id).unwrap();
    s.last_seq().unwrap().unwrap() + 1
}

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Runs `f` once and prints the process's peak RSS during it (Linux only).
fn report_peak(name: &str, file_bytes: u64, f: impl FnOnce() -> u64) {
    // Writing 5 resets VmHWM to the current RSS (Linux 4.0+).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib("VmRSS:");
    let n = f();
    let peak = status_kib("VmHWM:");
    assert_eq!(n, EVENTS);
    if reset {
        eprintln!(
            "peak RSS during {name}: {:.1} MiB ({:.1} MiB above the {:.1} MiB before; file {:.1} MiB)",
            peak as f64 / 1024.0,
            peak.saturating_sub(before) as f64 / 1024.0,
            before as f64 / 1024.0,
            file_bytes as f64 / f64::from(1 << 20)
        );
    }
}

fn open_1m(c: &mut Criterion) {
    let dir = bench_dir();
    let path: PathBuf = dir.path().join("big.jsonl");
    let size = generate(&path);
    let bare: PathBuf = dir.path().join("bare.v1");
    std::fs::copy(&path, &bare).unwrap();
    // The same log kept as version 1, in a store of its own (the header names "big").
    let v1_dir = dir.path().join("v1");
    std::fs::create_dir(&v1_dir).unwrap();
    std::fs::copy(&path, v1_dir.join("big.jsonl")).unwrap();
    let store_v1 = JsonlStore::open(&v1_dir, Durability::Sync).unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    store.upgrade("big").unwrap();
    let size_v2 = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "generated {EVENTS} events, {:.1} MB ({size} bytes), {size_v2} bytes as version 2",
        size as f64 / 1e6
    );
    let path = bare;
    report_peak("bare serde parse", size, || bare_parse(&path));
    report_peak("JsonlStore::open", size, || store_open(&store, "big"));
    report_peak("Session::open", size, || session_open(&store, "big"));

    let mut group = c.benchmark_group("open_1m");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(12));
    group.throughput(Throughput::Elements(EVENTS));
    group.bench_function("bare_serde_envelope_parse", |b| {
        b.iter(|| bare_parse(&path));
    });
    group.bench_function("jsonl_store_open", |b| b.iter(|| store_open(&store, "big")));
    group.bench_function("jsonl_store_open_v1", |b| {
        b.iter(|| store_open(&store_v1, "big"));
    });
    group.bench_function("session_open_replay_once", |b| {
        b.iter(|| session_open(&store, "big"));
    });
    group.bench_function("session_open_replay_once_v1", |b| {
        b.iter(|| session_open(&store_v1, "big"));
    });
    group.finish();
}

fn open_splices(c: &mut Criterion) {
    let dir = bench_dir();
    let path: PathBuf = dir.path().join("splices.jsonl");
    let size = generate_splices(&path);
    let bare: PathBuf = dir.path().join("bare.v1");
    std::fs::copy(&path, &bare).unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    store.upgrade("splices").unwrap();
    eprintln!(
        "generated {EVENTS} splice events, {:.1} MB ({size} bytes)",
        size as f64 / 1e6
    );
    let path = bare;
    let pending = Session::open(&store, "splices")
        .unwrap()
        .with_inbox(|i| i.len(Target::NextTurn))
        .unwrap();
    assert_eq!(pending, PENDING);

    let mut group = c.benchmark_group("open_splices");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(12));
    group.throughput(Throughput::Elements(EVENTS));
    group.bench_function("bare_serde_envelope_parse", |b| {
        b.iter(|| bare_parse(&path));
    });
    group.bench_function("jsonl_store_open", |b| {
        b.iter(|| store_open(&store, "splices"));
    });
    group.bench_function("session_open_replay_once", |b| {
        b.iter(|| session_open(&store, "splices"));
    });
    group.finish();
}

fn batched(c: &mut Criterion) {
    const BATCH: u64 = 1000;
    let dir = bench_dir();
    let store = JsonlStore::open(dir.path(), Durability::Batched).unwrap();
    let s = Session::create(&store, "b", SessionMeta::default()).unwrap();
    let mut group = c.benchmark_group("batched");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("append_1000_then_flush", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                s.append("assistant/chunk", DATA, Envelope::default())
                    .unwrap();
            }
            s.flush().unwrap();
        });
    });
    group.finish();
}

fn sync_acks(c: &mut Criterion) {
    let dir = bench_dir();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let db = rusqlite::Connection::open(dir.path().join("events.sqlite")).unwrap();
    db.pragma_update(None, "journal_mode", "WAL").unwrap();
    db.pragma_update(None, "synchronous", "FULL").unwrap();
    db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL)", [])
        .unwrap();
    let mut insert = db
        .prepare(
            "INSERT INTO events (seq, type, time, data) VALUES (?1, 'assistant/message', ?2, ?3)",
        )
        .unwrap();
    let mut seq = 0u64;

    let mut group = c.benchmark_group("sync_acks");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(1));
    group.bench_function("inboxlog_sync_append", |b| {
        b.iter(|| {
            s.append("assistant/chunk", DATA, Envelope::default())
                .unwrap()
        });
    });
    group.bench_function("sqlite_wal_full_insert", |b| {
        b.iter(|| {
            // Autocommit: one transaction, and one WAL fsync, per row.
            insert
                .execute(rusqlite::params![seq, 1_700_000_000_000u64 + seq, DATA])
                .unwrap();
            seq += 1;
        });
    });
    group.finish();
}

/// The small event data of the Python append benchmark (`python/bench/bench_calls.py`).
const SMALL: &str = r#"{"text":"hello world token","index":42}"#;

fn append_none(c: &mut Criterion) {
    let dir = bench_dir();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let s = Session::create(&store, "n", SessionMeta::default()).unwrap();
    let line = s
        .append("assistant/chunk", SMALL, Envelope::default())
        .unwrap()
        .to_json()
        + "\n";
    let mut raw = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("raw.jsonl"))
        .unwrap();
    let mut group = c.benchmark_group("append_none");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("lseek_then_write", |b| {
        b.iter(|| {
            black_box(raw.seek(SeekFrom::End(0)).unwrap());
            raw.write_all(line.as_bytes()).unwrap();
        });
    });
    group.bench_function("session_append_text", |b| {
        b.iter(|| {
            s.append("assistant/chunk", SMALL, Envelope::default())
                .unwrap()
        });
    });
    group.bench_function("session_append_json", |b| {
        b.iter(|| {
            let mut data = json::Builder::new();
            data.begin_object().unwrap();
            data.key("text");
            data.string("hello world token");
            data.key("index");
            data.int(42);
            data.end();
            s.append_json("assistant/chunk", data.finish(), Envelope::default())
                .unwrap()
        });
    });
    group.finish();
}

criterion_group!(
    benches,
    open_1m,
    open_splices,
    batched,
    sync_acks,
    append_none
);
criterion_main!(benches);

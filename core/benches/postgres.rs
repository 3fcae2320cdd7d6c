//! Benchmarks of the PostgreSQL store (ARCHITECTURE.md#postgresql) against the server at
//! `INBOXLOG_TEST_PG` (default `postgresql://postgres@127.0.0.1:5432/test`), in
//! schemas of their own that are dropped at the end:
//! - `fleet` (`pg_fleet/`, a printed table rather than criterion): acks/s of 1, 8, 32
//!   and 64 writers on distinct sessions of one store in `sync` and `batched` mode
//!   beside bare `INSERT`+commit clients, one connection per writer; the backends each
//!   side held; commit-to-follower latency at 64 writers; opening 1,000 sessions on
//!   one handle;
//! - `pg_sync`: acknowledged appends/s on one session in `sync` mode, beside a bare
//!   one-row `INSERT` (autocommit, prepared) loop with the same client and payload;
//! - `pg_batched`: durable events/s on one session in `batched` mode (appends, then the
//!   `flush()` barrier), and aggregate acks/s of 64 sessions on 8 threads;
//! - `open_1m`: `Session::open` of a 1,000,000-event session (a small inbox history,
//!   host events otherwise) on PostgreSQL and on the JSONL store.
//!
//! Run: `cargo bench -p inboxlog --bench postgres` (all), `-- fleet` (the table only),
//! `-- pg_sync` (one criterion group). `INBOXLOG_BENCH_QUICK=1` makes a smoke run of the
//! table (1 s per side) and skips the criterion groups; `pg_fleet/mod.rs` lists the
//! table's other settings.

mod pg_fleet;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use inboxlog::store::{Durability, JsonlStore, PgOptions, PgStore};
use inboxlog::{Envelope, Session, SessionMeta};

/// The payload of the write benchmarks (~260 bytes as a line), as in `benches/jsonl.rs`.
const DATA: &str = r#"{"text":"Here is the next part of the answer, with \"quotes\", a tab\t and a newline\n, some accents (é, ü, ñ), a check ✓ and a clef 𝄞 to keep the parser honest. Lorem ipsum dolor.","index":42}"#;

const SCHEMA: &str = "inboxlog_bench";

/// The server's URL (`INBOXLOG_TEST_PG`), with `sslmode=disable` unless it names a
/// mode: the bare clients connect without TLS (`postgres::NoTls`), so the store does
/// too and both sides pay for the same transport. (`python/bench/bench_postgres.py`
/// compares the two over TLS, libpq's default where the server offers it.)
fn url() -> String {
    let url = std::env::var("INBOXLOG_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgresql://postgres@127.0.0.1:5432/test".to_owned());
    if url.contains("sslmode=") {
        return url;
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}sslmode=disable")
}

fn sql() -> postgres::Client {
    postgres::Client::connect(&url(), postgres::NoTls)
        .expect("a PostgreSQL server at INBOXLOG_TEST_PG")
}

fn store(durability: Durability) -> PgStore {
    PgStore::connect(
        &url(),
        PgOptions {
            schema: SCHEMA.to_owned(),
            durability,
            ..PgOptions::default()
        },
    )
    .unwrap()
}

fn fresh() {
    sql()
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        .unwrap();
}

fn sync_appends(c: &mut Criterion) {
    fresh();
    let store = store(Durability::Sync);
    let s = Session::create(&store, "sync", SessionMeta::default()).unwrap();
    let mut group = c.benchmark_group("pg_sync");
    group.throughput(Throughput::Elements(1));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("session_append", |b| {
        b.iter(|| {
            s.append("assistant/chunk", DATA, Envelope::default())
                .unwrap()
        });
    });
    let mut client = sql();
    client
        .batch_execute(&format!(
            "CREATE TABLE {SCHEMA}.bare (session text, seq bigint, type text, line text,
                 PRIMARY KEY (session, seq))"
        ))
        .unwrap();
    let insert = client
        .prepare(&format!(
            "INSERT INTO {SCHEMA}.bare VALUES ($1, $2, $3, $4)"
        ))
        .unwrap();
    let line = format!(r#"{{"type":"assistant/chunk","seq":0,"time":0,"data":{DATA}}}"#);
    let mut seq = 0i64;
    group.bench_function("bare_insert_commit", |b| {
        b.iter(|| {
            seq += 1;
            client
                .execute(&insert, &[&"bare", &seq, &"assistant/chunk", &line])
                .unwrap()
        });
    });
    group.finish();
}

fn batched(c: &mut Criterion) {
    const PER_FLUSH: u64 = 1000;
    // 64 sessions, 8 per thread; each thread appends round-robin over its sessions, then
    // flushes them: acks/s over all threads.
    const PER_SESSION: u64 = 50;
    fresh();
    let store = Arc::new(store(Durability::Batched));
    let s = Session::create(&*store, "batched", SessionMeta::default()).unwrap();
    let mut group = c.benchmark_group("pg_batched");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(PER_FLUSH));
    group.bench_function("durable_events_one_session", |b| {
        b.iter(|| {
            for _ in 0..PER_FLUSH {
                s.append("assistant/chunk", DATA, Envelope::default())
                    .unwrap();
            }
            s.flush().unwrap();
        });
    });
    let sessions: Vec<Vec<Session>> = (0..8)
        .map(|t| {
            (0..8)
                .map(|i| {
                    Session::create(&*store, &format!("t{t}s{i}"), SessionMeta::default()).unwrap()
                })
                .collect()
        })
        .collect();
    let sessions = Arc::new(sessions);
    group.throughput(Throughput::Elements(64 * PER_SESSION));
    group.bench_function("acks_64_sessions_8_threads", |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for _ in 0..iters {
                let workers: Vec<_> = (0..8)
                    .map(|t| {
                        let sessions = Arc::clone(&sessions);
                        thread::spawn(move || {
                            for _ in 0..PER_SESSION {
                                for s in &sessions[t] {
                                    s.append("assistant/chunk", DATA, Envelope::default())
                                        .unwrap();
                                }
                            }
                            for s in &sessions[t] {
                                s.flush().unwrap();
                            }
                        })
                    })
                    .collect();
                for w in workers {
                    w.join().unwrap();
                }
            }
            started.elapsed()
        });
    });
    group.finish();
}

/// The i-th line of the generated 1M-event log: one message sent and claimed by turn 1,
/// whose step holds host events to the end (a step/end and turn/end close it).
fn line_sql() -> &'static str {
    r#"CASE
         WHEN g = 0 THEN format('{"type":"agent/inbox/spliced","seq":0,"time":1700000000000,"data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user"}]}}')
         WHEN g = 1 THEN format('{"type":"turn/start","seq":1,"time":1700000000001,"data":{"turn":1}}')
         WHEN g = 2 THEN format('{"type":"agent/inbox/spliced","seq":2,"time":1700000000002,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}')
         WHEN g = 3 THEN format('{"type":"step/start","seq":3,"time":1700000000003,"data":{"turn":1,"step":1}}')
         WHEN g = 999998 THEN format('{"type":"step/end","seq":999998,"time":1700001000000,"data":{"turn":1,"step":1}}')
         WHEN g = 999999 THEN format('{"type":"turn/end","seq":999999,"time":1700001000000,"data":{"turn":1,"reason":{"kind":"completed"}}}')
         ELSE format('{"type":"assistant/chunk","seq":%s,"time":%s,"data":{"text":"Here is the next part of the answer, with some accents (é, ü) and a check ✓ to keep it honest. Lorem ipsum dolor sit amet.","index":%s}}', g, 1700000000000 + g, g)
       END"#
}

fn type_sql() -> &'static str {
    "CASE WHEN g IN (0, 2) THEN 'agent/inbox/spliced' WHEN g = 1 THEN 'turn/start'
          WHEN g = 3 THEN 'step/start' WHEN g = 999998 THEN 'step/end'
          WHEN g = 999999 THEN 'turn/end' ELSE 'assistant/chunk' END"
}

fn open_1m(c: &mut Criterion) {
    fresh();
    let store = store(Durability::Sync);
    drop(Session::create(&store, "big", SessionMeta::default()).unwrap());
    let mut client = sql();
    client
        .batch_execute(&format!(
            "INSERT INTO {SCHEMA}.events (session, seq, type, line)
                 SELECT 'big', g, {}, {} FROM generate_series(0, 999999) g;
             UPDATE {SCHEMA}.sessions SET next_seq = 1000000 WHERE id = 'big';",
            type_sql(),
            line_sql()
        ))
        .unwrap();
    // Its own statement: VACUUM cannot run inside the batch's implicit transaction.
    client
        .batch_execute(&format!("VACUUM ANALYZE {SCHEMA}.events"))
        .unwrap();
    // The same lines as a JSONL file.
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open(dir.path(), Durability::None).unwrap();
    {
        let header: String = client
            .query_one(
                &format!("SELECT header FROM {SCHEMA}.sessions WHERE id = 'big'"),
                &[],
            )
            .unwrap()
            .get(0);
        let mut w = BufWriter::new(File::create(jsonl.path("big").unwrap()).unwrap());
        writeln!(w, "{header}").unwrap();
        let mut copy = client
            .copy_out(&format!(
                "COPY (SELECT line FROM {SCHEMA}.events WHERE session = 'big' ORDER BY seq) TO STDOUT"
            ))
            .unwrap();
        std::io::copy(&mut copy, &mut w).unwrap();
    }
    let mut group = c.benchmark_group("open_1m");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("postgres_session_open", |b| {
        b.iter(|| Session::open(&store, "big").unwrap().close().unwrap());
    });
    group.bench_function("jsonl_session_open", |b| {
        b.iter(|| Session::open(&jsonl, "big").unwrap().close().unwrap());
    });
    group.finish();
    drop(store);
    fresh();
}

/// One criterion group: its setup and benchmarks.
type Group = fn(&mut Criterion);

/// Whether this is a smoke run: `INBOXLOG_BENCH_QUICK` set (not to 0) or `--quick` given.
fn quick() -> bool {
    std::env::var("INBOXLOG_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || std::env::args().any(|a| a == "--quick")
}

/// Whether the group `name` runs under the command line's filter (its first argument
/// that is not an option; every group when there is none).
fn wanted(filter: Option<&str>, name: &str) -> bool {
    filter.is_none_or(|f| name.contains(f) || f.starts_with(name))
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let filter = filter.as_deref();
    if wanted(filter, "fleet") {
        pg_fleet::run();
    }
    if quick() {
        println!(
            "INBOXLOG_BENCH_QUICK: the criterion groups (pg_sync, pg_batched, open_1m) are skipped"
        );
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let groups: [(&str, Group); 3] = [
        ("pg_sync", sync_appends),
        ("pg_batched", batched),
        ("open_1m", open_1m),
    ];
    let mut ran = false;
    for (name, group) in groups {
        if wanted(filter, name) {
            group(&mut c);
            ran = true;
        }
    }
    if ran {
        // The groups' schema, left by the last group run.
        fresh();
    }
    c.final_summary();
}

//! Benchmarks of posting and editing pending input from anywhere (ARCHITECTURE.md#posting,
//! SPEC §11.3) on every store, each side in the same run on the same store: one
//! iteration is the poster's call (acknowledged: durable in the store) and the owner's
//! `receive` that applies it (one durable splice and the mailbox settled).
//! - `post`: `store.post` of a new message to `next-step`, taken in.
//! - `replace_pending`: `store.replace_pending` of the one pending message by a new
//!   version of itself, applied.
//! - `remove_pending`: `store.remove_pending` of a pending message, applied (the
//!   message is appended locally before each iteration, untimed).
//!
//! The inbox holds the posted messages of earlier iterations (`post`) or one message
//! (the edits); an inbox mutation costs O(log n), so the sizes do not favour a side.
//! After the criterion groups, `interleaved` compares `post` and `replace_pending` in
//! alternating rounds on each store (what docs/benchmarks.md reports: a shared
//! machine's drift within a run falls on both sides).
//!
//! Run: `cargo bench -p inboxlog --bench fleet` (all; PostgreSQL at `INBOXLOG_TEST_PG`,
//! skipped with a message when none answers), `-- jsonl` (one store's criterion
//! groups only).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use inboxlog::store::{self, Durability, MemoryStore, Store, StoreOptions};
use inboxlog::{Message, Session, SessionMeta, Target};

const SCHEMA: &str = "inboxlog_bench_fleet";

/// A message of about the size of a short prompt.
fn message(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","content":"Please summarize the last three answers in one paragraph, and keep the numbers."}}"#
    ))
    .unwrap()
}

/// The server's URL (`INBOXLOG_TEST_PG`), without TLS unless it names a mode.
fn pg_url() -> String {
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

/// The stores: memory, a JSONL directory (`sync`), PostgreSQL (`sync`) when a server
/// answers; each with what must outlive it.
fn stores() -> Vec<(&'static str, Box<dyn Store>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(&'static str, Box<dyn Store>, Option<tempfile::TempDir>)> =
        vec![("memory", Box::new(MemoryStore::new()), None)];
    let dir = tempfile::tempdir().unwrap();
    let jsonl = store::open(
        dir.path().to_str().unwrap(),
        &StoreOptions::durability(Durability::Sync),
    )
    .unwrap();
    out.push(("jsonl", jsonl, Some(dir)));
    let dropped = postgres::Client::connect(&pg_url(), postgres::NoTls)
        .and_then(|mut c| c.batch_execute(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")));
    match dropped {
        Ok(()) => {
            let mut options = StoreOptions::durability(Durability::Sync);
            options.schema = Some(SCHEMA.to_owned());
            out.push(("postgres", store::open(&pg_url(), &options).unwrap(), None));
        }
        Err(e) => eprintln!("SKIPPED postgres: no server at INBOXLOG_TEST_PG ({e})"),
    }
    out
}

fn post_and_edit(c: &mut Criterion) {
    for (name, store, _guard) in stores() {
        let store = &*store;
        let mut group = c.benchmark_group(format!("fleet/{name}"));
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(4))
            .warm_up_time(Duration::from_secs(1));
        let n = AtomicU64::new(0);
        let next = || n.fetch_add(1, Ordering::Relaxed);

        // A session per side: a JSONL spool directory that many posts went through
        // lists slower afterwards (a directory does not shrink), which must not tax
        // the side measured after it.
        let s = Session::create(store, "post", SessionMeta::default()).unwrap();
        group.bench_function("post", |b| {
            b.iter(|| {
                let id = format!("p{}", next());
                store.post("post", Target::NextStep, &message(&id)).unwrap();
                assert_eq!(s.receive().unwrap(), 1);
            });
        });
        done(store, s);

        let s = Session::create(store, "replace", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextStep, message("r")).unwrap();
        group.bench_function("replace_pending", |b| {
            b.iter(|| {
                store
                    .replace_pending("replace", "r", &message("r"))
                    .unwrap();
                assert_eq!(s.receive().unwrap(), 1);
            });
        });
        done(store, s);

        let s = Session::create(store, "remove", SessionMeta::default()).unwrap();
        group.bench_function("remove_pending", |b| {
            b.iter_batched(
                || {
                    let id = format!("x{}", next());
                    s.inbox().append(Target::NextStep, message(&id)).unwrap();
                    id
                },
                |id| {
                    store.remove_pending("remove", &id).unwrap();
                    assert_eq!(s.receive().unwrap(), 1);
                },
                BatchSize::PerIteration,
            );
        });
        done(store, s);
        group.finish();
    }
}

/// Checks that every edit of `s` was applied (none rejected), then deletes it.
fn done(store: &dyn Store, s: Session) {
    let events = s.events(0).unwrap();
    assert!(events.iter().all(|e| e.ty() != "agent/inbox/rejected"));
    let id = s.id().to_owned();
    drop(s);
    store.delete(&id).unwrap();
}

/// Rounds of the interleaved comparison, and operations per side and round.
const ROUNDS: usize = 8;

/// The interleaved comparison: rounds alternating which side goes first, each side `ops`
/// posts (or replacements) taken in one by one on a session of its own; prints the
/// median cost per operation of each side and their ratio. Shared machines drift
/// within a run (other processes' disk and CPU use), which a side measured after the
/// other would pay alone; alternating puts the drift on both.
fn interleaved() {
    for (name, store, _guard) in stores() {
        let store = &*store;
        let ops: u32 = if name == "memory" { 2000 } else { 50 };
        let post = Session::create(store, "ab-post", SessionMeta::default()).unwrap();
        let edit = Session::create(store, "ab-edit", SessionMeta::default()).unwrap();
        edit.inbox().append(Target::NextStep, message("r")).unwrap();
        let mut n = 0u64;
        let (mut posts, mut edits) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            for side in [round % 2, 1 - round % 2] {
                let start = Instant::now();
                for _ in 0..ops {
                    if side == 0 {
                        n += 1;
                        let id = format!("p{n}");
                        store
                            .post("ab-post", Target::NextStep, &message(&id))
                            .unwrap();
                        assert_eq!(post.receive().unwrap(), 1);
                    } else {
                        store
                            .replace_pending("ab-edit", "r", &message("r"))
                            .unwrap();
                        assert_eq!(edit.receive().unwrap(), 1);
                    }
                }
                let per_op = start.elapsed().as_secs_f64() * 1e6 / f64::from(ops);
                if side == 0 {
                    posts.push(per_op);
                } else {
                    edits.push(per_op);
                }
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        let (p, e) = (median(&mut posts), median(&mut edits));
        println!(
            "fleet/{name}/interleaved: post {p:.1} µs/op, replace_pending {e:.1} µs/op, \
             edit/post {:.2} (medians of {ROUNDS} alternating rounds of {ops})",
            e / p
        );
        done(store, post);
        done(store, edit);
    }
}

criterion_group!(benches, post_and_edit);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench -- <filter>` runs only the criterion functions it names.
    let filtered = std::env::args().skip(1).any(|a| !a.starts_with('-'));
    if !filtered {
        interleaved();
    }
}

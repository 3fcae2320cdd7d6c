//! The conversation's costs (ARCHITECTURE.md#the-surface), side by side in one run:
//!
//! - `surface_append/1k` and `/100k`: appending one `assistant/message` to a session
//!   whose surface already holds 1,000 or 100,000 nodes (memory store, so the fold's
//!   own cost is what is measured): the surface is an order-statistics tree with an
//!   index by seq, so the two should be within 1.5× of each other.
//! - `read_surface/100` and `/100k`: `Session::read_surface` (what `store.messages(id)`
//!   does) of a closed JSONL session of 100 events and of one of 100,000 events whose
//!   surface was compacted every 1,000 events and holds 50 messages at the end:
//!   reading starts from the checkpoint, which holds the surface, so it costs what the
//!   surface holds, not the history (goal: within 2×). A summary cites every seq it
//!   shadows (`sourceEventSeqs`), so one compaction of a whole 100,000-event surface
//!   would leave a 600 KB node; compacting as a session grows keeps each summary's
//!   citations to the stretch it replaced.
//!
//! Run: `cargo bench -p inboxlog --bench conversation` (set `INBOXLOG_BENCH_DIR` to put
//! the files on another disk than the temp dir).

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{Envelope, Session, SessionMeta};
use serde_json::value::RawValue;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("INBOXLOG_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// One model response of about 300 bytes, `n` telling them apart.
fn reply(n: u64) -> String {
    format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"text","text":"Here is part {n} of the answer, with enough words to look like one."}}],"source":{{"kind":"model","provider":"scripted","model":"m1"}}}},"usage":{{"inputTokens":120,"outputTokens":18}}}}"#
    )
}

/// Session `id` of `store` with `nodes` model responses on its surface (no turn: the
/// conversation's types are not checked against turns).
fn filled(store: &dyn Store, id: &str, nodes: u64) -> Session {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    for n in 0..nodes {
        s.append("assistant/message", &reply(n), Envelope::default())
            .unwrap();
    }
    s
}

fn surface_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("surface_append");
    for (name, nodes) in [("1k", 1_000), ("100k", 100_000)] {
        let store = MemoryStore::new();
        let s = filled(&store, name, nodes);
        let data = reply(nodes);
        group.bench_function(name, |b| {
            b.iter(|| {
                s.append("assistant/message", &data, Envelope::default())
                    .unwrap()
            });
        });
    }
    group.finish();
}

/// A summary replacing every node of the surface but the last `keep`.
fn compact(s: &Session, keep: usize) {
    let nodes = s.surface().unwrap();
    let shadowed = &nodes[..nodes.len() - keep];
    let op = format!(
        r#"{{"op":"replace","start":{},"end":{}}}"#,
        shadowed[0],
        shadowed[shadowed.len() - 1]
    );
    let envelope = Envelope {
        surface_op: Some(RawValue::from_string(op).unwrap()),
        source_event_seqs: Some(shadowed.to_vec()),
        ..Envelope::default()
    };
    s.append(
        "user/message",
        r#"{"id":"summary","role":"user","content":"What was said so far, in short."}"#,
        envelope,
    )
    .unwrap();
}

fn read_surface(c: &mut Criterion) {
    let dir = bench_dir();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let small = filled(&store, "small", 100);
    small.close().unwrap();
    let big = Session::create(&store, "big", SessionMeta::default()).unwrap();
    for n in 0..100_000 {
        big.append("assistant/message", &reply(n), Envelope::default())
            .unwrap();
        if n % 1_000 == 999 {
            compact(&big, 49);
        }
    }
    big.close().unwrap();
    assert_eq!(
        Session::read_surface(&store, "big").unwrap().messages.len(),
        50
    );
    let mut group = c.benchmark_group("read_surface");
    group.measurement_time(Duration::from_secs(5));
    for (name, id) in [("100", "small"), ("100k", "big")] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |()| Session::read_surface(&store, id).unwrap(),
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, surface_append, read_surface);
criterion_main!(benches);

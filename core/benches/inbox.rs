//! Inbox, protocol, replay and fold benchmarks on the memory store.
//!
//! Run: `cargo bench -p inboxlog --bench inbox` (about two minutes; small samples).
//!
//! - `inbox/append+remove/N`: append one message to next-turn, then remove it by id,
//!   with N messages already pending (N = 10, 1,000, 100,000).
//! - `protocol/append+claim+reject`: append to next-turn, open_turn, propose_step
//!   (claims it), decide reject (turn ends blocked): one claim cycle, 4 events.
//! - `protocol/full turn`: append, open_turn, propose_step, decide enter, end_step
//!   completed, close_turn: 7 events.
//! - `replay/open 1M splice events`: `Session::open` of a log of 1,000,000
//!   `agent/inbox/spliced` events held in the memory store (replay-once).
//! - `fold/1M events`: `fold_consumed_work` over 1,000,000 events in a `Vec<Event>`.
//!
//! Every session log grows with each measured call, so a session is replaced by a fresh
//! one after [`LIMIT`] calls; building it is never timed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use inboxlog::store::MemoryStore;
use inboxlog::{
    Decision, Envelope, Event, Inbox, Message, Session, SessionMeta, StepOutcome, Target,
    fold_consumed_work,
};

/// Most calls timed in one stretch (their messages are built beforehand).
const CHUNK: u64 = 50_000;

const MILLION: usize = 1_000_000;

fn msg(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","content":"hello"}}"#
    ))
    .unwrap()
}

/// A fresh session whose next-turn holds `n` messages, seeded as one splice event.
fn prefilled(store: &MemoryStore, id: &str, n: usize) -> Session {
    if n == 0 {
        return Session::create(store, id, SessionMeta::default()).unwrap();
    }
    let inserted: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"id":"p{i}","role":"user","content":"hello"}}"#))
        .collect();
    let event = Event::from_json(&format!(
        r#"{{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{{"target":"next-turn","start":0,"inserted":[{}]}}}}"#,
        inserted.join(",")
    ))
    .unwrap();
    Session::create_seeded(store, id, SessionMeta::default(), vec![event], None).unwrap()
}

/// A session with `n` messages pending, replaced by a fresh one once its log holds
/// about [`LIMIT`] measured calls (the memory store keeps every event).
struct Rig {
    n: usize,
    session: Option<Session>,
    calls: u64,
}

/// Measured calls on one session before it is replaced.
const LIMIT: u64 = 200_000;

impl Rig {
    fn new(n: usize) -> Rig {
        Rig {
            n,
            session: None,
            calls: 0,
        }
    }

    /// The session to run `count` more calls on.
    fn session(&mut self, count: u64) -> &Session {
        if self.session.is_none() || self.calls + count > LIMIT {
            self.session = None;
            self.session = Some(prefilled(&MemoryStore::new(), "bench", self.n));
            self.calls = 0;
        }
        self.calls += count;
        self.session.as_ref().expect("just built")
    }
}

/// Times `iters` calls of `call(session, message)`, each with its own fresh message
/// built outside the timed region, in chunks of at most [`CHUNK`] calls.
fn chunked(iters: u64, rig: &mut Rig, mut call: impl FnMut(&Session, Message)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let count = CHUNK.min(iters - done);
        let messages: Vec<Message> = (0..count)
            .map(|i| msg(&format!("b{}-{i}", rig.calls)))
            .collect();
        let session = rig.session(count);
        let start = Instant::now();
        for m in messages {
            call(session, m);
        }
        total += start.elapsed();
        done += count;
    }
    total
}

fn append_remove(c: &mut Criterion) {
    let mut group = c.benchmark_group("inbox");
    group.throughput(Throughput::Elements(1));
    for n in [10usize, 1_000, 100_000] {
        let mut rig = Rig::new(n);
        group.bench_with_input(BenchmarkId::new("append+remove", n), &n, |b, _| {
            b.iter_custom(|iters| {
                chunked(iters, &mut rig, |s, m| {
                    let inbox = s.inbox();
                    inbox.append(Target::NextTurn, m.clone()).unwrap();
                    assert!(inbox.remove(black_box(m.id())).unwrap());
                })
            });
        });
    }
    group.finish();
}

fn protocol_cycles(c: &mut Criterion) {
    let mut group = c.benchmark_group("protocol");
    group.throughput(Throughput::Elements(1));
    let mut rig = Rig::new(0);
    group.bench_function("append+claim+reject", |b| {
        b.iter_custom(|iters| {
            chunked(iters, &mut rig, |s, m| {
                s.inbox().append(Target::NextTurn, m).unwrap();
                s.open_turn().unwrap();
                let p = s.propose_step().unwrap();
                black_box(&p);
                s.decide(Decision::Reject).unwrap();
            })
        });
    });
    let mut rig = Rig::new(0);
    group.bench_function("full turn", |b| {
        b.iter_custom(|iters| {
            chunked(iters, &mut rig, |s, m| {
                s.inbox().append(Target::NextTurn, m).unwrap();
                s.open_turn().unwrap();
                let p = s.propose_step().unwrap();
                s.decide(Decision::Enter(p.messages)).unwrap();
                s.end_step(StepOutcome::Completed).unwrap();
                s.close_turn().unwrap();
            })
        });
    });
    group.finish();
}

/// A closed log of exactly `MILLION` splice events: appends and removals by id, with
/// about 1,000 messages pending throughout.
fn splice_log(store: &MemoryStore, id: &str) {
    const PENDING: usize = 1_000;
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    let inbox = s.inbox();
    for i in 0..PENDING {
        inbox
            .append(Target::NextTurn, msg(&format!("m{i}")))
            .unwrap();
    }
    // Oldest out, newest in: appended and removed count the messages so far.
    let (mut appended, mut removed) = (PENDING, 0);
    for i in PENDING..MILLION {
        if i % 2 == 0 {
            inbox
                .append(Target::NextStep, msg(&format!("m{appended}")))
                .unwrap();
            appended += 1;
        } else {
            assert!(inbox.remove(&format!("m{removed}")).unwrap());
            removed += 1;
        }
    }
    assert_eq!(s.events(0).unwrap().len(), MILLION);
    s.close().unwrap();
}

fn replay(c: &mut Criterion) {
    let store = MemoryStore::new();
    splice_log(&store, "replay");
    let mut group = c.benchmark_group("replay");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Elements(MILLION as u64));
    group.bench_function("open 1M splice events", |b| {
        b.iter(|| {
            let s = Session::open(&store, "replay").unwrap();
            black_box(s.with_inbox(Inbox::has_pending).unwrap());
        });
    });
    group.finish();
}

/// `MILLION` events of whole turns (7 events each) plus a few leading host events.
fn turn_events() -> Vec<Event> {
    let store = MemoryStore::new();
    let s = Session::create(&store, "fold", SessionMeta::default()).unwrap();
    let mut i = 0u64;
    while (s.last_seq().unwrap().map_or(0, |q| q + 1) as usize) + 7 <= MILLION {
        s.inbox()
            .append(Target::NextTurn, msg(&format!("f{i}")))
            .unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.end_step(StepOutcome::Completed).unwrap();
        s.close_turn().unwrap();
        i += 1;
    }
    while (s.last_seq().unwrap().unwrap() as usize) + 1 < MILLION {
        s.append("host/tick", "{}", Envelope::default()).unwrap();
    }
    let events = s.events(0).unwrap();
    assert_eq!(events.len(), MILLION);
    events
}

fn fold(c: &mut Criterion) {
    let events = turn_events();
    let mut group = c.benchmark_group("fold");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Elements(MILLION as u64));
    group.bench_function("1M events", |b| {
        b.iter(|| {
            let out = fold_consumed_work(black_box(&events));
            black_box(out.end.map(Event::seq));
        });
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = append_remove, protocol_cycles, replay, fold
}
criterion_main!(benches);

//! Cost must not grow with queue length (ARCHITECTURE.md#inbox-validation): with n messages pending, appending
//! at the tail, claiming from the front, removing or replacing by id and splicing in
//! the list each touch O(log n) tree nodes.
//!
//! This counts work, not time: `Inbox::work()` is the number of tree nodes the two
//! lists have visited so far, read before and after each call. An implementation that
//! rebuilds an id set or shifts a `Vec` per mutation does O(n) work and fails both the
//! `c·log2(n)` bound and the growth bound between n = 1,000 and n = 100,000.

mod common;

use common::msg;
use inboxlog::store::MemoryStore;
use inboxlog::{Decision, Event, Session, SessionMeta, Target};

/// Average tree nodes visited per call, for each measured operation.
#[derive(Clone, Copy, Debug)]
struct Costs {
    append_tail: f64,
    claim_front: f64,
    remove_by_id: f64,
    replace_by_id: f64,
    splice_spread: f64,
}

impl Costs {
    fn all(&self) -> [(&'static str, f64); 5] {
        [
            ("append at the tail", self.append_tail),
            ("claim from the front", self.claim_front),
            ("remove by id", self.remove_by_id),
            ("replace by id", self.replace_by_id),
            ("splice at spread positions", self.splice_spread),
        ]
    }
}

/// Calls measured per operation and queue length.
const CALLS: usize = 200;

/// A session on the memory store whose next-turn holds `n` messages `p0..p{n-1}`,
/// seeded as one splice event (filling through `append` would only be slower).
fn session_with(store: &MemoryStore, n: usize) -> Session {
    let inserted: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"id":"p{i}","role":"user"}}"#))
        .collect();
    let event = Event::from_json(&format!(
        r#"{{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{{"target":"next-turn","start":0,"inserted":[{}]}}}}"#,
        inserted.join(",")
    ))
    .unwrap();
    let s = Session::create_seeded(
        store,
        &format!("n{n}"),
        SessionMeta::default(),
        vec![event],
        None,
    )
    .unwrap();
    assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), n);
    s
}

fn work(s: &Session) -> u64 {
    s.with_inbox(inboxlog::Inbox::work).unwrap()
}

/// Runs `call` [`CALLS`] times; returns the average and the largest work of one call.
fn measure(s: &Session, mut call: impl FnMut(usize)) -> (f64, u64) {
    let (mut total, mut max) = (0, 0);
    for i in 0..CALLS {
        let before = work(s);
        call(i);
        let spent = work(s) - before;
        total += spent;
        max = max.max(spent);
    }
    (total as f64 / CALLS as f64, max)
}

fn costs(n: usize) -> (Costs, u64) {
    assert!(n >= 1_000, "the id ranges below need room");
    let store = MemoryStore::new();
    let s = session_with(&store, n);
    let inbox = s.inbox();
    let mut worst = 0;
    let mut note = |(avg, max): (f64, u64)| {
        worst = worst.max(max);
        avg
    };
    // Ids to remove and replace: a stride permutation over p{n/4}..p{n-1}, away from
    // the front that claims consume. 7919 is prime and divides neither 750 nor 75,000.
    let span = n - n / 4;
    let pick = |i: usize| format!("p{}", n / 4 + (i * 7_919) % span);

    let append_tail = note(measure(&s, |i| {
        inbox
            .append(Target::NextTurn, msg(&format!("a{i}")))
            .unwrap();
    }));
    let claim_front = note(measure(&s, |i| {
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        assert_eq!(p.messages[0].id(), format!("p{i}"));
        s.decide(Decision::Reject).unwrap();
    }));
    let remove_by_id = note(measure(&s, |i| {
        assert!(inbox.remove(&pick(i)).unwrap());
    }));
    let replace_by_id = note(measure(&s, |i| {
        assert!(
            inbox
                .replace(&pick(CALLS + i), msg(&format!("r{i}")))
                .unwrap()
        );
    }));
    let splice_spread = note(measure(&s, |i| {
        let len = s.with_inbox(|x| x.len(Target::NextTurn)).unwrap();
        let at = ((i * 7_919) % len) as f64;
        let removed = inbox
            .splice(Target::NextTurn, at, 1.0, vec![msg(&format!("s{i}"))])
            .unwrap();
        assert_eq!(removed.len(), 1);
    }));
    let expected = n + CALLS - CALLS - 2 * CALLS;
    assert_eq!(
        s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(),
        expected + CALLS
    );
    (
        Costs {
            append_tail,
            claim_front,
            remove_by_id,
            replace_by_id,
            splice_spread,
        },
        worst,
    )
}

#[test]
fn inbox_work_per_call_is_logarithmic() {
    let (small, small_worst) = costs(1_000);
    let (large, large_worst) = costs(100_000);
    eprintln!("average tree nodes per call at n=1,000: {small:?} (worst {small_worst})");
    eprintln!("average tree nodes per call at n=100,000: {large:?} (worst {large_worst})");
    for (n, c, worst) in [
        (1_000f64, small, small_worst),
        (100_000f64, large, large_worst),
    ] {
        let log_n = n.log2();
        for (what, avg) in c.all() {
            assert!(avg >= 1.0, "{what} at n={n}: no work counted ({avg})");
            // A treap path is about 2·ln(n) ≈ 1.4·log2(n) nodes deep on average, and
            // a by-id replace walks it about five times (rank, read, split, merge).
            assert!(
                avg <= 12.0 * log_n,
                "{what} at n={n}: {avg:.1} nodes per call > 12·log2(n) = {:.0}",
                12.0 * log_n
            );
        }
        // No single call is pathological either.
        assert!(
            (worst as f64) <= 30.0 * log_n,
            "a call at n={n} visited {worst} nodes"
        );
    }
    // log2(100,000) / log2(1,000) ≈ 1.67, where linear work would be 100×. Over all
    // calls together the growth stays under 2×; one kind alone runs its calls along
    // one random tree path (e.g. the right spine for appends), whose length varies
    // more, so it gets 3× (still far below √n growth, 10×).
    let total = |c: Costs| c.all().iter().map(|(_, avg)| avg).sum::<f64>();
    let (s, l) = (total(small), total(large));
    assert!(
        l <= 2.0 * s,
        "all calls: {l:.1} nodes per call at n=100,000 vs {s:.1} at n=1,000"
    );
    for ((what, s), (_, l)) in small.all().into_iter().zip(large.all()) {
        assert!(
            l <= 3.0 * s,
            "{what}: {l:.1} nodes per call at n=100,000 vs {s:.1} at n=1,000"
        );
    }
}

//! The fused protocol calls (ARCHITECTURE.md#protocol): `Session::step_boundary` and
//! `Session::end_step_and_close` write exactly what the separate calls they stand for
//! write, event by event (timestamps aside), answer what those answer, refuse where the
//! first of them refuses with nothing written, and notify observers alike; over the
//! memory and the JSONL store. On a `sync` JSONL log they take one write and one fsync
//! where the separate calls take one per call.

mod common;

use std::sync::{Arc, Mutex};

use inboxlog::store::fault::{FaultPlan, Point};
use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    Decided, Decision, Result, Session, SessionMeta, StepBoundary, StepOutcome, Target, TurnClaim,
};
use serde_json::Value;

use common::msg;

/// How a script takes a step boundary or ends a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    /// `end_step`, `propose_step`, `decide`; `end_step`, `close_turn`.
    Separate,
    /// `step_boundary`; `end_step_and_close`.
    Fused,
}

/// A store kind the scripts run on.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Jsonl,
}

/// A fresh store of `kind` (what must outlive it, and the plan counting a JSONL
/// store's writes and fsyncs).
fn fresh(kind: Kind) -> (Box<dyn Store>, Option<(tempfile::TempDir, FaultPlan)>) {
    match kind {
        Kind::Memory => (Box::new(MemoryStore::new()), None),
        Kind::Jsonl => {
            let dir = tempfile::tempdir().unwrap();
            let plan = FaultPlan::new();
            let store = JsonlStore::open(dir.path(), Durability::Sync)
                .unwrap()
                .with_faults(plan.clone());
            (Box::new(store), Some((dir, plan)))
        }
    }
}

/// A step boundary taken `way`.
fn boundary(
    s: &Session,
    way: Way,
    end: Option<StepOutcome>,
    claim: TurnClaim,
) -> Result<Option<StepBoundary>> {
    match way {
        Way::Fused => s.step_boundary(end, claim),
        Way::Separate => {
            if let Some(outcome) = end
                && !s.end_step(outcome)?
            {
                return Ok(None);
            }
            let proposal = s.propose_step_claiming(claim)?;
            let decided = s.decide(Decision::Enter(proposal.messages.clone()))?;
            Ok(Some(StepBoundary { proposal, decided }))
        }
    }
}

/// The last step's end and the turn's close, taken `way`.
fn end_and_close(s: &Session, way: Way, outcome: StepOutcome) -> Result<Option<Decided>> {
    match way {
        Way::Fused => s.end_step_and_close(outcome),
        Way::Separate => {
            if s.end_step(outcome)? {
                return Ok(None);
            }
            s.close_turn().map(Some)
        }
    }
}

/// What a script saw: each call's answer, with an error's kind and message.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    fn note<T: std::fmt::Debug>(&mut self, what: &str, result: Result<T>) {
        let answer = match result {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("refused {}: {}", e.kind(), e.message()),
        };
        self.0.push(format!("{what}: {answer}"));
    }
}

/// An event as stored, without its time; a post's id (a JSONL spool names posts
/// afresh in every store) replaced by `"<post>"`.
fn shape(event: &inboxlog::Event) -> Value {
    let mut v: Value = serde_json::from_str(&event.to_json()).unwrap();
    let object = v.as_object_mut().unwrap();
    assert!(object.remove("time").is_some(), "{object:?}");
    if let Some(post) = object
        .get_mut("data")
        .and_then(Value::as_object_mut)
        .and_then(|data| data.get_mut("post"))
    {
        *post = Value::from("<post>");
    }
    v
}

/// What a script does to a session of a store, taking boundaries `way`.
type Script = fn(&dyn Store, &Session, Way, &mut Seen);

/// Runs `script` both ways on fresh stores of `kind` and asserts the answers, the
/// events and the notifications are the same.
fn same_both_ways(kind: Kind, script: Script) {
    let run = |way| {
        let (store, _keep) = fresh(kind);
        let s = Session::create(store.as_ref(), "s", SessionMeta::default()).unwrap();
        let notices = Arc::new(Mutex::new(Vec::new()));
        let record = notices.clone();
        s.on_inbox(move |n| {
            record.lock().unwrap().push(format!("{n:?}"));
            Ok(())
        });
        let mut seen = Seen::default();
        script(store.as_ref(), &s, way, &mut seen);
        let events: Vec<Value> = s.events(0).unwrap().iter().map(shape).collect();
        let notices = notices.lock().unwrap().clone();
        (seen.0, events, notices)
    };
    let (separate, fused) = (run(Way::Separate), run(Way::Fused));
    assert_eq!(fused.0, separate.0, "{kind:?}: answers");
    assert_eq!(fused.1.len(), separate.1.len(), "{kind:?}: {:#?}", fused.1);
    for (f, s) in fused.1.iter().zip(&separate.1) {
        assert_eq!(f, s, "{kind:?}: events");
    }
    assert_eq!(fused.2, separate.2, "{kind:?}: notifications");
}

fn both_stores(script: Script) {
    for kind in [Kind::Memory, Kind::Jsonl] {
        same_both_ways(kind, script);
    }
}

fn add(s: &Session, target: Target, ids: &[&str]) {
    for id in ids {
        s.inbox().append(target, msg(id)).unwrap();
    }
}

/// Turn 1 open and its first step entered with `first` (all of `next-turn`), taken
/// `way`.
fn first_step(s: &Session, way: Way, first: &[&str], seen: &mut Seen) {
    add(s, Target::NextTurn, first);
    seen.note("open_turn", s.open_turn());
    seen.note("first", boundary(s, way, None, TurnClaim::Whole));
}

#[test]
fn steering_enters_at_the_next_boundary_and_the_turn_closes_after_it() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1", "t2"], seen);
        add(s, Target::NextStep, &["s1", "s2"]);
        add(s, Target::NextTurn, &["later"]);
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::Whole);
        seen.note("continue with steering", b);
        seen.note("close", end_and_close(s, way, StepOutcome::Completed));
        seen.note("turn after", s.turn_open());
        seen.note("next-turn", s.inbox().next_turn());
    });
}

#[test]
fn a_continuation_with_nothing_pending_enters_an_empty_step() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("continue", b);
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("continue again", b);
        seen.note("close", end_and_close(s, way, StepOutcome::MaxTokens));
    });
}

#[test]
fn a_concluded_step_with_steering_goes_on_and_without_it_claims_nothing() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        add(s, Target::NextStep, &["s1"]);
        let b = boundary(s, way, Some(StepOutcome::Completed), TurnClaim::First);
        seen.note("completed with steering", b);
        add(s, Target::NextTurn, &["t2"]);
        let b = boundary(s, way, Some(StepOutcome::Completed), TurnClaim::Whole);
        seen.note("completed without steering", b);
        seen.note("next-turn kept", s.inbox().next_turn());
        seen.note("close_turn", s.close_turn());
    });
}

#[test]
fn max_tokens_sticks_across_fused_boundaries() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        add(s, Target::NextStep, &["s1"]);
        let b = boundary(s, way, Some(StepOutcome::MaxTokens), TurnClaim::First);
        seen.note("max-tokens with steering", b);
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("continue after max-tokens", b);
        seen.note("close_turn", s.close_turn());
    });
}

#[test]
fn a_first_boundary_with_nothing_pending_completes_the_turn() {
    both_stores(|_, s, way, seen| {
        seen.note("open_turn", s.open_turn());
        seen.note("first", boundary(s, way, None, TurnClaim::Whole));
        seen.note("turn after", s.turn_open());
        // The first message of `next-turn` only, with the default claim.
        add(s, Target::NextTurn, &["a", "b"]);
        seen.note("open_turn", s.open_turn());
        seen.note("first", boundary(s, way, None, TurnClaim::First));
        seen.note("next-turn", s.inbox().next_turn());
    });
}

#[test]
fn a_boundary_after_a_separately_ended_step_claims_and_enters() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        add(s, Target::NextStep, &["s1"]);
        seen.note("end_step", s.end_step(StepOutcome::Completed));
        seen.note("boundary", boundary(s, way, None, TurnClaim::First));
        seen.note("close", end_and_close(s, way, StepOutcome::Completed));
    });
}

#[test]
fn calls_out_of_order_are_refused_as_the_first_separate_call_with_nothing_written() {
    both_stores(|_, s, way, seen| {
        let all = |s: &Session, seen: &mut Seen, at: &str| {
            let before = s.last_seq().unwrap();
            let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
            seen.note(&format!("{at}: boundary ending a step"), b);
            seen.note(
                &format!("{at}: boundary"),
                boundary(s, way, None, TurnClaim::First),
            );
            let c = end_and_close(s, way, StepOutcome::Completed);
            seen.note(&format!("{at}: end and close"), c);
            assert_eq!(s.last_seq().unwrap(), before, "{at}: {way:?} wrote");
        };
        all(s, seen, "idle");
        add(s, Target::NextTurn, &["t1"]);
        s.open_turn().unwrap();
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("opened: boundary ending a step", b);
        seen.note(
            "opened: end and close",
            end_and_close(s, way, StepOutcome::Completed),
        );
        let p = s.propose_step().unwrap();
        all(s, seen, "proposed");
        s.decide(Decision::Enter(p.messages)).unwrap();
        let before = s.last_seq().unwrap().unwrap();
        seen.note(
            "in a step: boundary",
            boundary(s, way, None, TurnClaim::First),
        );
        assert_eq!(s.last_seq().unwrap(), Some(before));
        s.end_step(StepOutcome::Continue).unwrap();
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("between: boundary ending a step", b);
        seen.note(
            "between: end and close",
            end_and_close(s, way, StepOutcome::Completed),
        );
        seen.note("between: close_turn", s.close_turn());
        assert_eq!(
            s.last_seq().unwrap(),
            Some(before + 1),
            "only end_step wrote"
        );
    });
}

#[test]
fn ending_with_steering_pending_leaves_the_turn_open_and_close_refused() {
    both_stores(|_, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        add(s, Target::NextStep, &["s1"]);
        seen.note(
            "end and close",
            end_and_close(s, way, StepOutcome::Completed),
        );
        seen.note("close_turn", s.close_turn());
        seen.note("turn", s.turn_open());
        seen.note("boundary", boundary(s, way, None, TurnClaim::First));
        seen.note(
            "end and close",
            end_and_close(s, way, StepOutcome::Continue),
        );
        seen.note("close_turn owing work", s.close_turn());
        seen.note(
            "fail",
            s.fail(inboxlog::TurnError::from_json(r#"{"message":"m","code":"c"}"#).unwrap()),
        );
    });
}

#[test]
fn posts_waiting_are_taken_in_between_the_step_end_and_the_claim() {
    both_stores(|store, s, way, seen| {
        first_step(s, way, &["t1"], seen);
        store.post("s", Target::NextStep, &msg("p1")).unwrap();
        store.post("s", Target::NextTurn, &msg("p2")).unwrap();
        let b = boundary(s, way, Some(StepOutcome::Continue), TurnClaim::First);
        seen.note("continue with posts", b);
        store.post("s", Target::NextStep, &msg("p3")).unwrap();
        seen.note(
            "close with a post waiting",
            end_and_close(s, way, StepOutcome::Completed),
        );
        seen.note("next-turn", s.inbox().next_turn());
        seen.note("next-step", s.inbox().next_step());
    });
}

/// The JSONL store's (writes, fsyncs) while `f` runs.
fn counted(plan: &FaultPlan, f: impl FnOnce()) -> (u64, u64) {
    let before = (plan.hits(Point::Write), plan.hits(Point::Sync));
    f();
    (
        plan.hits(Point::Write) - before.0,
        plan.hits(Point::Sync) - before.1,
    )
}

#[test]
fn a_fused_call_is_one_durable_write() {
    let mut counts = Vec::new();
    for way in [Way::Separate, Way::Fused] {
        let (store, keep) = fresh(Kind::Jsonl);
        let plan = keep.as_ref().unwrap().1.clone();
        let s = Session::create(store.as_ref(), "s", SessionMeta::default()).unwrap();
        add(&s, Target::NextTurn, &["t1"]);
        s.open_turn().unwrap();
        let first = counted(&plan, || {
            boundary(&s, way, None, TurnClaim::Whole).unwrap().unwrap();
        });
        add(&s, Target::NextStep, &["s1"]);
        let steered = counted(&plan, || {
            let b = boundary(&s, way, Some(StepOutcome::Continue), TurnClaim::Whole);
            assert_eq!(b.unwrap().unwrap().proposal.messages, [msg("s1")]);
        });
        let continued = counted(&plan, || {
            let b = boundary(&s, way, Some(StepOutcome::Continue), TurnClaim::Whole);
            assert!(b.unwrap().unwrap().proposal.messages.is_empty());
        });
        let closed = counted(&plan, || {
            assert!(
                end_and_close(&s, way, StepOutcome::Completed)
                    .unwrap()
                    .is_some()
            );
        });
        counts.push((way, [first, steered, continued, closed]));
    }
    // Separate: claim + decide; end + claim + decide; end + decide (nothing to claim
    // writes nothing); end + close. Fused: one write, one fsync each.
    assert_eq!(
        counts,
        [
            (Way::Separate, [(2, 2), (3, 3), (2, 2), (2, 2)]),
            (Way::Fused, [(1, 1), (1, 1), (1, 1), (1, 1)]),
        ]
    );
}

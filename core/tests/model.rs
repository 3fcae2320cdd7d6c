//! Model-based property test (ARCHITECTURE.md#inbox, ARCHITECTURE.md#protocol, ARCHITECTURE.md#consumed-work-fold, ARCHITECTURE.md#queue-projection).
//!
//! Random sequences of every inbox operation and every protocol call run against a
//! session on the memory store and against a deliberately simple reference model
//! written from the SPEC, not from the core: two `Vec` lists, JavaScript splice
//! arithmetic done in saturating integers, duplicate ids found by scanning both lists,
//! and the ARCHITECTURE.md#protocol state machine. After every operation the two must agree on the lists,
//! the returned value (or the refused call's error kind), the new events (type, seq,
//! data, `surfaceOp`) and the notifications delivered to observers. At the end the log
//! is reopened and must replay to the same inbox (a turn left open is repaired as
//! `interrupted`); the queue projection's baseline at earlier seqs must be the inbox
//! as it was then, and reach the final inbox from there; and the consumed-work fold
//! over the log must agree with the model's own fold.

use inboxlog::ToJson as _;
use std::sync::{Arc, Mutex};

mod pg_common;

use inboxlog::store::{Durability, MemoryStore, Store};
use inboxlog::{
    CancelCause, Decided, Decision, ErrorKind, Event, Message, QueueProjection, Session,
    SessionMeta, StepOutcome, Target, TurnError, fold_consumed_work,
};
use proptest::prelude::*;

/// A message drawn from a small pool: `(id index, variant)`, so ids repeat often.
type Pick = (u8, u8);

#[derive(Clone, Debug)]
enum Dec {
    Reject,
    /// Enter with exactly the claimed batch.
    Claimed,
    /// Enter with the claimed messages rewritten, the last one dropped.
    Rewritten,
    /// Enter with no messages.
    Empty,
    /// Enter with the claimed batch plus one more message.
    Extra(Pick),
}

#[derive(Clone, Debug)]
enum Op {
    Splice(Target, f64, f64, Vec<Pick>),
    Append(Target, Pick),
    Prepend(Target, Pick),
    Replace(u8, Pick),
    Remove(u8),
    Clear,
    OpenTurn,
    Propose,
    Decide(Dec),
    EndStep(StepOutcome),
    CloseTurn,
    Cancel(u8, bool),
    Fail,
    /// The next call a well-behaved agent loop would make in the model's state (resolved
    /// to one of the calls above before running), so long turns happen often.
    Drive(Dec, StepOutcome, bool),
}

const IDS: u8 = 6;

fn id_of(i: u8) -> String {
    format!("m{i}")
}

fn msg((i, v): Pick) -> Message {
    Message::from_json(&format!(r#"{{"id":"{}","role":"user","v":{v}}}"#, id_of(i))).unwrap()
}

fn cause(i: u8) -> CancelCause {
    match i % 4 {
        0 => CancelCause::User,
        1 => CancelCause::Parent,
        2 => CancelCause::Hook {
            reason: "budget \"spent\"".to_owned(),
        },
        _ => CancelCause::Disposed,
    }
}

/// The cause as ARCHITECTURE.md#reserved-events JSON, written out here rather than taken from the core.
fn cause_json(i: u8) -> &'static str {
    match i % 4 {
        0 => r#"{"kind":"user"}"#,
        1 => r#"{"kind":"parent"}"#,
        2 => r#"{"kind":"hook","reason":"budget \"spent\""}"#,
        _ => r#"{"kind":"disposed"}"#,
    }
}

const TURN_ERROR: &str = r#"{"message":"boom","code":"E_MODEL","retry":false}"#;

fn coord() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => (-4i32..7).prop_map(f64::from),
        2 => (-30i32..50).prop_map(|x| f64::from(x) / 7.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(1e300),
        1 => Just(-1e300),
        1 => Just(9_007_199_254_740_993_u64 as f64),
        1 => Just(-(9_007_199_254_740_993_u64 as f64)),
        1 => Just(-0.0),
        1 => Just(0.5),
        1 => Just(-0.5),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    (0..IDS, 0u8..3)
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![Just(Target::NextTurn), Just(Target::NextStep)]
}

fn op() -> impl Strategy<Value = Op> {
    let dec = prop_oneof![
        2 => Just(Dec::Reject),
        4 => Just(Dec::Claimed),
        2 => Just(Dec::Rewritten),
        2 => Just(Dec::Empty),
        1 => pick().prop_map(Dec::Extra),
    ];
    let outcome = prop_oneof![
        Just(StepOutcome::Continue),
        Just(StepOutcome::Completed),
        Just(StepOutcome::MaxTokens),
    ];
    let drive_dec = dec.clone();
    let drive_outcome = outcome.clone();
    prop_oneof![
        4 => (target(), coord(), coord(), prop::collection::vec(pick(), 0..4))
            .prop_map(|(t, s, d, m)| Op::Splice(t, s, d, m)),
        5 => (target(), pick()).prop_map(|(t, m)| Op::Append(t, m)),
        2 => (target(), pick()).prop_map(|(t, m)| Op::Prepend(t, m)),
        2 => (0..IDS + 1, pick()).prop_map(|(i, m)| Op::Replace(i, m)),
        2 => (0..IDS + 1).prop_map(Op::Remove),
        1 => Just(Op::Clear),
        2 => Just(Op::OpenTurn),
        2 => Just(Op::Propose),
        2 => dec.prop_map(Op::Decide),
        2 => outcome.prop_map(Op::EndStep),
        2 => Just(Op::CloseTurn),
        1 => (0u8..4, any::<bool>()).prop_map(|(c, k)| Op::Cancel(c, k)),
        1 => Just(Op::Fail),
        16 => (drive_dec, drive_outcome, any::<bool>())
            .prop_map(|(d, o, close)| Op::Drive(d, o, close)),
    ]
}

/// What a call returned, in a form both sides can produce.
#[derive(Clone, Debug, PartialEq)]
enum Ret {
    Removed(Vec<String>),
    Unit,
    Bool(bool),
    Turn(u64),
    Proposal(u64, u64, Vec<String>),
    /// `step T S` or `end T <reason JSON>`.
    Decided(String),
}

fn jsons(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.json().to_owned()).collect()
}

/// What the fold (ARCHITECTURE.md#consumed-work-fold) needs to know about a model event.
#[derive(Clone, Copy, Debug)]
enum Fold {
    TurnStart,
    StepStart,
    Splice {
        removed: usize,
        canceled: bool,
        inserted_none: bool,
    },
    TurnEnd {
        completed: bool,
    },
    Other,
}

#[derive(Clone, Debug)]
struct MEvent {
    /// `seq type data surfaceOp` (the last empty when absent).
    canon: String,
    fold: Fold,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    /// No step open and no proposal pending.
    Ready,
    Proposed(u64),
    InStep(u64),
}

#[derive(Clone, Debug)]
struct Turn {
    turn: u64,
    steps: u64,
    proposed: bool,
    stage: Stage,
    /// `Some(reason JSON)` once the last ended step concluded the turn.
    concluded: Option<&'static str>,
    saw_max_tokens: bool,
}

const COMPLETED: &str = r#"{"kind":"completed"}"#;
const MAX_TOKENS: &str = r#"{"kind":"max-tokens"}"#;
const BLOCKED: &str = r#"{"kind":"blocked"}"#;
const INTERRUPTED: &str = r#"{"kind":"interrupted"}"#;

#[derive(Default)]
struct Model {
    /// `[next-turn, next-step]`.
    lists: [Vec<Message>; 2],
    last_turn: u64,
    turn: Option<Turn>,
    /// The batch of the pending proposal (what `Dec::Claimed` enters).
    claimed: Vec<Message>,
    log: Vec<MEvent>,
    notices: Vec<String>,
}

fn ix(t: Target) -> usize {
    match t {
        Target::NextTurn => 0,
        Target::NextStep => 1,
    }
}

fn name(t: Target) -> &'static str {
    match t {
        Target::NextTurn => "next-turn",
        Target::NextStep => "next-step",
    }
}

/// JavaScript's ToIntegerOrInfinity followed by the clamp of `Array.prototype.splice`,
/// done in saturating integers: `as i128` truncates toward zero, maps NaN to 0 and
/// saturates ±Infinity and huge values.
fn js_start(x: f64, len: usize) -> usize {
    let (rel, len) = (x as i128, len as i128);
    (if rel < 0 {
        (len + rel).max(0)
    } else {
        rel.min(len)
    }) as usize
}

fn js_delete(x: f64, start: usize, len: usize) -> usize {
    (x as i128).clamp(0, (len - start) as i128) as usize
}

impl Model {
    fn emit(&mut self, ty: &str, data: &str, surface: &str, fold: Fold) {
        let seq = self.log.len();
        self.log.push(MEvent {
            canon: format!("{seq} {ty} {data} {surface}"),
            fold,
        });
    }

    fn notice(&mut self, kind: &str, m: &Message, turn: Option<u64>) {
        let turn = turn.map_or(String::new(), |t| format!(",\"turn\":{t}"));
        self.notices.push(format!(
            r#"{{"type":"agent/inbox/{kind}","message":{}{turn}}}"#,
            m.json()
        ));
    }

    /// Every id across both lists is unique (checked by scanning, O(n²) on purpose).
    fn first_duplicate(lists: &[Vec<Message>; 2]) -> Option<String> {
        let all: Vec<&Message> = lists.iter().flatten().collect();
        for (i, a) in all.iter().enumerate() {
            if all[..i].iter().any(|b| b.id() == a.id()) {
                return Some(a.id().to_owned());
            }
        }
        None
    }

    /// ARCHITECTURE.md#inbox-mutations `mutate`; `claim_turn` is `Some(turn)` for a claim (`discardRemoved=false`).
    fn mutate(
        &mut self,
        t: Target,
        start: f64,
        delete: f64,
        inserted: &[Message],
        claim_turn: Option<u64>,
    ) -> Result<Vec<Message>, ErrorKind> {
        let len = self.lists[ix(t)].len();
        let s = js_start(start, len);
        let d = js_delete(delete, s, len);
        if d == 0 && inserted.is_empty() {
            return Ok(Vec::new());
        }
        let mut after = self.lists.clone();
        let removed: Vec<Message> = after[ix(t)]
            .splice(s..s + d, inserted.iter().cloned())
            .collect();
        if Self::first_duplicate(&after).is_some() {
            return Err(ErrorKind::DuplicateMessage);
        }
        let canceled = claim_turn.is_none() && d > 0;
        let mut data = format!(r#"{{"target":"{}","start":{s}"#, name(t));
        if d > 0 {
            data.push_str(&format!(r#","removedCount":{d}"#));
        }
        data.push_str(&format!(r#","inserted":[{}]"#, jsons(inserted).join(",")));
        if canceled {
            data.push_str(r#","outcome":"canceled""#);
        }
        data.push('}');
        let fold = Fold::Splice {
            removed: d,
            canceled,
            inserted_none: inserted.is_empty(),
        };
        self.emit("agent/inbox/spliced", &data, "", fold);
        self.lists = after;
        match claim_turn {
            None => {
                for m in &removed {
                    self.notice("discarded", m, None);
                }
                for m in inserted {
                    self.notice("inserted", m, None);
                }
            }
            Some(turn) => {
                for m in &removed {
                    self.notice("claimed", m, Some(turn));
                }
            }
        }
        Ok(removed)
    }

    fn find(&self, id: &str) -> Option<(Target, usize)> {
        [Target::NextTurn, Target::NextStep]
            .into_iter()
            .find_map(|t| {
                self.lists[ix(t)]
                    .iter()
                    .position(|m| m.id() == id)
                    .map(|p| (t, p))
            })
    }

    fn by_id(&mut self, id: &str, inserted: &[Message]) -> Result<Ret, ErrorKind> {
        match self.find(id) {
            None => Ok(Ret::Bool(false)),
            Some((t, p)) => self
                .mutate(t, p as f64, 1.0, inserted, None)
                .map(|_| Ret::Bool(true)),
        }
    }

    fn clear(&mut self) {
        for t in [Target::NextStep, Target::NextTurn] {
            self.mutate(t, 0.0, f64::INFINITY, &[], None)
                .expect("a pure deletion never fails");
        }
    }

    fn step_event(&mut self, ty: &str, turn: u64, step: u64) {
        let fold = if ty == "step/start" {
            Fold::StepStart
        } else {
            Fold::Other
        };
        self.emit(ty, &format!(r#"{{"turn":{turn},"step":{step}}}"#), "", fold);
    }

    fn end_turn(&mut self, reason: &str) -> Ret {
        let turn = self.turn.take().expect("a turn is open").turn;
        let completed = reason == COMPLETED;
        self.emit(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{reason}}}"#),
            "",
            Fold::TurnEnd { completed },
        );
        Ret::Decided(format!("end {turn} {reason}"))
    }

    /// `step/end` for an open step, then `turn/end` with `reason` (cancel, fail, repair).
    fn abort(&mut self, reason: &str) {
        if let Some(t) = &self.turn {
            if let Stage::InStep(step) = t.stage {
                let turn = t.turn;
                self.step_event("step/end", turn, step);
            }
            self.end_turn(reason);
        }
    }

    /// Resolves [`Op::Drive`] against the current state; other ops stay as they are.
    fn resolve(&self, op: Op) -> Op {
        let Op::Drive(dec, outcome, close) = op else {
            return op;
        };
        match &self.turn {
            None => Op::OpenTurn,
            Some(t) => match t.stage {
                Stage::Ready if close && t.concluded.is_some() => Op::CloseTurn,
                Stage::Ready => Op::Propose,
                Stage::Proposed(_) => Op::Decide(dec),
                Stage::InStep(_) => Op::EndStep(outcome),
            },
        }
    }

    fn apply(&mut self, op: &Op) -> Result<Ret, ErrorKind> {
        let protocol = Err(ErrorKind::Protocol);
        match op {
            Op::Splice(t, s, d, ms) => self
                .mutate(
                    *t,
                    *s,
                    *d,
                    &ms.iter().map(|&p| msg(p)).collect::<Vec<_>>(),
                    None,
                )
                .map(|r| Ret::Removed(jsons(&r))),
            Op::Append(t, m) => {
                let len = self.lists[ix(*t)].len() as f64;
                self.mutate(*t, len, 0.0, &[msg(*m)], None)
                    .map(|_| Ret::Unit)
            }
            Op::Prepend(t, m) => self
                .mutate(*t, 0.0, 0.0, &[msg(*m)], None)
                .map(|_| Ret::Unit),
            Op::Replace(i, m) => self.by_id(&id_of(*i), &[msg(*m)]),
            Op::Remove(i) => self.by_id(&id_of(*i), &[]),
            Op::Clear => {
                self.clear();
                Ok(Ret::Unit)
            }
            Op::OpenTurn => {
                if self.turn.is_some() {
                    return protocol;
                }
                self.last_turn += 1;
                let turn = self.last_turn;
                self.emit(
                    "turn/start",
                    &format!(r#"{{"turn":{turn}}}"#),
                    "",
                    Fold::TurnStart,
                );
                self.turn = Some(Turn {
                    turn,
                    steps: 0,
                    proposed: false,
                    stage: Stage::Ready,
                    concluded: None,
                    saw_max_tokens: false,
                });
                Ok(Ret::Turn(turn))
            }
            Op::Propose => {
                let Some(t) = self.turn.as_mut().filter(|t| t.stage == Stage::Ready) else {
                    return protocol;
                };
                let first = !t.proposed;
                t.proposed = true;
                let (turn, step) = (t.turn, t.steps + 1);
                t.stage = Stage::Proposed(step);
                let mut batch =
                    self.mutate(Target::NextStep, 0.0, f64::INFINITY, &[], Some(turn))?;
                if first {
                    batch.extend(self.mutate(Target::NextTurn, 0.0, 1.0, &[], Some(turn))?);
                }
                self.claimed = batch.clone();
                Ok(Ret::Proposal(turn, step, jsons(&batch)))
            }
            Op::Decide(dec) => {
                let Some(t) = self.turn.as_ref() else {
                    return protocol;
                };
                let Stage::Proposed(step) = t.stage else {
                    return protocol;
                };
                let (turn, steps, concluded) = (t.turn, t.steps, t.concluded);
                let messages: Vec<Message> = match dec {
                    Dec::Reject => return Ok(self.end_turn(BLOCKED)),
                    Dec::Claimed => self.claimed.clone(),
                    Dec::Rewritten => {
                        let mut out: Vec<Message> = self
                            .claimed
                            .iter()
                            .map(|m| {
                                Message::from_json(&format!(
                                    r#"{{"id":"{}","rewritten":true}}"#,
                                    m.id()
                                ))
                                .unwrap()
                            })
                            .collect();
                        if out.len() > 1 {
                            out.pop();
                        }
                        out
                    }
                    Dec::Empty => Vec::new(),
                    Dec::Extra(p) => {
                        let mut out = self.claimed.clone();
                        out.push(msg(*p));
                        out
                    }
                };
                if messages.is_empty() && steps == 0 {
                    return Ok(self.end_turn(COMPLETED));
                }
                if messages.is_empty()
                    && let Some(reason) = concluded
                {
                    return Ok(self.end_turn(reason));
                }
                let t = self.turn.as_mut().unwrap();
                t.steps = step;
                t.stage = Stage::InStep(step);
                self.step_event("step/start", turn, step);
                for m in &messages {
                    self.emit("user/message", m.json(), "\"append\"", Fold::Other);
                }
                Ok(Ret::Decided(format!("step {turn} {step}")))
            }
            Op::EndStep(outcome) => {
                let Some(t) = self.turn.as_mut() else {
                    return protocol;
                };
                let Stage::InStep(step) = t.stage else {
                    return protocol;
                };
                t.stage = Stage::Ready;
                t.saw_max_tokens |= *outcome == StepOutcome::MaxTokens;
                // Sticky: after max-tokens even `continue` leaves the turn concluded.
                t.concluded = match outcome {
                    _ if t.saw_max_tokens => Some(MAX_TOKENS),
                    StepOutcome::Continue => None,
                    _ => Some(COMPLETED),
                };
                let (turn, owes) = (t.turn, t.concluded.is_none());
                self.step_event("step/end", turn, step);
                Ok(Ret::Bool(owes || !self.lists[1].is_empty()))
            }
            Op::CloseTurn => {
                let Some(t) = self.turn.as_ref() else {
                    return protocol;
                };
                match (t.stage, t.concluded) {
                    (Stage::Ready, Some(reason)) if self.lists[1].is_empty() => {
                        Ok(self.end_turn(reason))
                    }
                    _ => protocol,
                }
            }
            Op::Cancel(c, keep) => {
                if !keep {
                    self.clear();
                }
                self.abort(&format!(
                    r#"{{"kind":"aborted","reason":{}}}"#,
                    cause_json(*c)
                ));
                Ok(Ret::Unit)
            }
            Op::Drive(..) => unreachable!("resolved before applying"),
            Op::Fail => {
                if self.turn.is_none() {
                    return protocol;
                }
                self.abort(&format!(r#"{{"kind":"error","error":{TURN_ERROR}}}"#));
                Ok(Ret::Unit)
            }
        }
    }

    /// ARCHITECTURE.md#consumed-work-fold, over the model's own events: `(seq of the accounting turn/end, droppedUnrun)`.
    fn fold(&self) -> (Option<usize>, bool) {
        let (mut open, mut end, mut dropped) = (None::<(bool, bool)>, None, false);
        for (seq, e) in self.log.iter().enumerate() {
            match e.fold {
                Fold::TurnStart => open = Some((false, false)),
                Fold::StepStart => {
                    if let Some(o) = open.as_mut() {
                        o.0 = true;
                    }
                }
                Fold::Splice {
                    removed,
                    canceled,
                    inserted_none,
                } if removed > 0 => {
                    if canceled {
                        dropped |= inserted_none;
                    } else if let Some(o) = open.as_mut() {
                        o.1 = true;
                    }
                }
                Fold::TurnEnd { completed } => {
                    if let Some((stepped, claimed)) = open.take()
                        && (stepped || (claimed && !completed))
                    {
                        end = Some(seq);
                        dropped = false;
                    }
                }
                _ => {}
            }
        }
        (end, dropped)
    }
}

fn canon(e: &Event) -> String {
    assert!(!e.envelope().ignorable, "library events are not ignorable");
    assert!(e.envelope().source_event_seqs.is_none());
    let surface = e.envelope().surface_op.as_ref().map_or("", |r| r.get());
    format!("{} {} {} {surface}", e.seq(), e.ty(), e.data())
}

fn decided(d: Decided) -> Ret {
    Ret::Decided(match d {
        Decided::Step { turn, step } => format!("step {turn} {step}"),
        Decided::TurnEnded { turn, reason } => format!("end {turn} {}", reason.to_json()),
    })
}

fn run_core(session: &Session, model: &Model, op: &Op) -> Result<Ret, ErrorKind> {
    let inbox = session.inbox();
    let r = match op {
        Op::Splice(t, s, d, ms) => inbox
            .splice(*t, *s, *d, ms.iter().map(|&p| msg(p)).collect())
            .map(|r| Ret::Removed(jsons(&r))),
        Op::Append(t, m) => inbox.append(*t, msg(*m)).map(|()| Ret::Unit),
        Op::Prepend(t, m) => inbox.prepend(*t, msg(*m)).map(|()| Ret::Unit),
        Op::Replace(i, m) => inbox.replace(&id_of(*i), msg(*m)).map(Ret::Bool),
        Op::Remove(i) => inbox.remove(&id_of(*i)).map(Ret::Bool),
        Op::Clear => inbox.clear().map(|()| Ret::Unit),
        Op::OpenTurn => session.open_turn().map(Ret::Turn),
        Op::Propose => session
            .propose_step()
            .map(|p| Ret::Proposal(p.turn, p.step, jsons(&p.messages))),
        Op::Decide(dec) => {
            // The batch is built from what the model holds as claimed; the model checks
            // separately that the core's proposal returned the same batch.
            let claimed = model.claimed.clone();
            let decision = match dec {
                Dec::Reject => Decision::Reject,
                Dec::Claimed => Decision::Enter(claimed),
                Dec::Rewritten => {
                    let mut out: Vec<Message> = claimed
                        .iter()
                        .map(|m| {
                            Message::from_json(&format!(
                                r#"{{ "id" : "{}", "rewritten" : true }}"#,
                                m.id()
                            ))
                            .unwrap()
                        })
                        .collect();
                    if out.len() > 1 {
                        out.pop();
                    }
                    Decision::Enter(out)
                }
                Dec::Empty => Decision::Enter(Vec::new()),
                Dec::Extra(p) => {
                    let mut out = claimed;
                    out.push(msg(*p));
                    Decision::Enter(out)
                }
            };
            session.decide(decision).map(decided)
        }
        Op::EndStep(o) => session.end_step(*o).map(Ret::Bool),
        Op::CloseTurn => session.close_turn().map(decided),
        Op::Cancel(c, keep) => session.cancel(cause(*c), *keep).map(|()| Ret::Unit),
        Op::Fail => session
            .fail(TurnError::from_json(TURN_ERROR).unwrap())
            .map(|()| Ret::Unit),
        Op::Drive(..) => unreachable!("resolved before running"),
    };
    r.map_err(|e| {
        assert!(!e.message().is_empty(), "errors carry a message");
        e.kind()
    })
}

type Sink = Arc<Mutex<Vec<String>>>;

fn drain(sink: &Sink) -> Vec<String> {
    std::mem::take(&mut *sink.lock().unwrap())
}

fn check_sequence(ops: &[Op]) -> Result<(), TestCaseError> {
    check_sequence_on(&MemoryStore::new(), "model", ops)
}

fn check_sequence_on(store: &dyn Store, id: &str, ops: &[Op]) -> Result<(), TestCaseError> {
    let session = Session::create(store, id, SessionMeta::default()).unwrap();
    let (seen_events, seen_notices): (Sink, Sink) = Default::default();
    let sink = seen_events.clone();
    session.on_event(move |e| {
        sink.lock().unwrap().push(canon(e));
        Ok(())
    });
    let sink = seen_notices.clone();
    session.on_inbox(move |n| {
        sink.lock().unwrap().push(n.to_json());
        Ok(())
    });
    let mut model = Model::default();
    // (last seq, next-turn, next-step) after each op, for the ARCHITECTURE.md#queue-projection baselines.
    let mut history: Vec<(u64, Vec<String>, Vec<String>)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let op = &model.resolve(op.clone());
        let since = model.log.len();
        let notices_before = model.notices.len();
        let expected = model.apply(op);
        let got = run_core(&session, &model, op);
        prop_assert_eq!(&got, &expected, "op #{} {:?}", i, op);
        let want: Vec<String> = model.log[since..].iter().map(|e| e.canon.clone()).collect();
        let written: Vec<String> = session
            .events(since as u64)
            .unwrap()
            .iter()
            .map(canon)
            .collect();
        prop_assert_eq!(&written, &want, "events of op #{} {:?}", i, op);
        prop_assert_eq!(&drain(&seen_events), &want, "published events of op #{}", i);
        prop_assert_eq!(
            &drain(&seen_notices),
            &model.notices[notices_before..].to_vec(),
            "notifications of op #{} {:?}",
            i,
            op
        );
        let inbox = session.inbox();
        prop_assert_eq!(jsons(&inbox.next_turn().unwrap()), jsons(&model.lists[0]));
        prop_assert_eq!(jsons(&inbox.next_step().unwrap()), jsons(&model.lists[1]));
        prop_assert_eq!(
            inbox.has_pending().unwrap(),
            model.lists.iter().any(|l| !l.is_empty())
        );
        prop_assert_eq!(
            session.turn_open().unwrap(),
            model.turn.as_ref().map(|t| t.turn)
        );
        prop_assert!(session.take_observer_failures().is_empty());
        if let Some(seq) = session.last_seq().unwrap() {
            history.push((seq, jsons(&model.lists[0]), jsons(&model.lists[1])));
        }
    }

    // Reopen: replay-once must rebuild the same inbox; a turn left open is repaired.
    session.close().unwrap();
    let reopened = Session::open(store, id).unwrap();
    let open_turn = model.turn.as_ref().map(|t| t.turn);
    model.abort(INTERRUPTED);
    prop_assert_eq!(reopened.open_report().repaired_turn, open_turn);
    let events = reopened.events(0).unwrap();
    let all: Vec<String> = events.iter().map(canon).collect();
    let want: Vec<String> = model.log.iter().map(|e| e.canon.clone()).collect();
    prop_assert_eq!(&all, &want);
    let inbox = reopened.inbox();
    prop_assert_eq!(jsons(&inbox.next_turn().unwrap()), jsons(&model.lists[0]));
    prop_assert_eq!(jsons(&inbox.next_step().unwrap()), jsons(&model.lists[1]));
    prop_assert_eq!(reopened.turn_open().unwrap(), None);

    // The queue projection over the whole log (ARCHITECTURE.md#queue-projection) lands on the same lists.
    let projection = QueueProjection::replay(&events, 0, None).unwrap();
    let baseline = projection.baseline();
    prop_assert_eq!(baseline.seq, events.last().map(Event::seq));
    prop_assert_eq!(jsons(&baseline.next_turn), jsons(&model.lists[0]));
    prop_assert_eq!(jsons(&baseline.next_step), jsons(&model.lists[1]));

    // A baseline at any earlier seq is the inbox as it was then, and a consumer holding
    // it reaches the final inbox by applying only the later splice events.
    for (seq, next_turn, next_step) in history.iter().step_by(3) {
        let then = QueueProjection::replay(&events, 0, Some(*seq)).unwrap();
        let baseline = then.baseline();
        prop_assert_eq!(baseline.seq, Some(*seq));
        prop_assert_eq!(&jsons(&baseline.next_turn), next_turn);
        prop_assert_eq!(&jsons(&baseline.next_step), next_step);
        let mut consumer = QueueProjection::new(baseline).unwrap();
        for e in events
            .iter()
            .filter(|e| e.seq() > *seq && e.splice().is_some())
        {
            consumer.apply(e).unwrap();
        }
        let now = consumer.baseline();
        prop_assert_eq!(jsons(&now.next_turn), jsons(&model.lists[0]));
        prop_assert_eq!(jsons(&now.next_step), jsons(&model.lists[1]));
    }

    // The consumed-work fold (ARCHITECTURE.md#consumed-work-fold) agrees with the model's fold of its own events.
    let folded = fold_consumed_work(&events);
    let (end, dropped) = model.fold();
    prop_assert_eq!(folded.end.map(|e| e.seq() as usize), end);
    prop_assert_eq!(folded.dropped_unrun, dropped);
    reopened.close().unwrap();
    Ok(())
}

proptest! {
    // PROPTEST_CASES overrides the count for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn session_matches_the_reference_model(ops in prop::collection::vec(op(), 1..60)) {
        check_sequence(&ops)?;
    }
}

proptest! {
    // The same property on the PostgreSQL store: every call is a round trip to the
    // server, so fewer cases (INBOXLOG_PG_PROPTEST_CASES overrides the 24).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("INBOXLOG_PG_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24),
        max_shrink_iters: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn session_on_postgres_matches_the_reference_model(ops in prop::collection::vec(op(), 1..60)) {
        // A schema per case (dropped with it); skipped without a server outside CI.
        if let Some((_schema, store)) = pg_common::store(Durability::Sync) {
            check_sequence_on(&store, "model", &ops)?;
        }
    }
}

/// The model's own arithmetic, pinned to JavaScript's answers, so a wrong model cannot
/// make the property pass by agreeing with a wrong core.
#[test]
fn model_arithmetic_matches_javascript() {
    let n = f64::NAN;
    let inf = f64::INFINITY;
    let big = 9_007_199_254_740_993_u64 as f64;
    // (len, start, deleteCount) -> (actualStart, actualDelete), as in a JS console.
    for (len, s, d, want) in [
        (3, n, n, (0, 0)),
        (3, -1.0, 1.0, (2, 1)),
        (3, -inf, inf, (0, 3)),
        (3, inf, 1.0, (3, 0)),
        (3, 1.9, 1.9, (1, 1)),
        (3, -1.5, 5.0, (2, 1)),
        (3, -0.5, 1.0, (0, 1)),
        (3, -10.0, -2.0, (0, 0)),
        (3, 1e300, 1e300, (3, 0)),
        (3, -1e300, 1e300, (0, 3)),
        (5, big, 1.0, (5, 0)),
        (5, -big, big, (0, 5)),
        (0, -0.0, 1.0, (0, 0)),
    ] {
        let start = js_start(s, len);
        assert_eq!((start, js_delete(d, start, len)), want, "{len} {s} {d}");
    }
}

//! The step-boundary protocol (SPEC §4): an explicit turn/step state machine.
//!
//! Each transition checks the state first and refuses an out-of-order call with a
//! `protocol` error naming the state; only then does it stage events in the
//! transaction, which the session writes in one durable append or not at all.

use serde::Deserialize;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::{Body, Envelope, STEP_END, STEP_START, TURN_END, TURN_START, USER_MESSAGE};
use crate::extra::Extra;
use crate::json;
use crate::message::Message;
use crate::reason::{CancelCause, StepOutcome, TurnEndReason, TurnError};
use crate::session::{Effect, Txn};
use crate::splice::Target;

/// Where the protocol stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No turn is open.
    #[default]
    Idle,
    /// A turn is open.
    Turn(TurnState),
}

/// The open turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TurnState {
    turn: u64,
    /// Steps entered so far.
    steps: u64,
    /// Whether a proposal was made in this turn (the first claims `next-turn`).
    proposed: bool,
    stage: Stage,
    /// How the last ended step concluded the turn; `None` while it owes more work.
    concluded: Option<Concluded>,
    /// `max-tokens` was seen in this turn (it is sticky).
    max_tokens: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// No step open, no proposal pending.
    Between,
    /// A claim is waiting for its decision.
    Proposed { step: u64 },
    /// A step is open.
    Step { step: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Concluded {
    Completed,
    MaxTokens,
}

impl Concluded {
    fn reason(self) -> TurnEndReason {
        match self {
            Concluded::Completed => TurnEndReason::Completed,
            Concluded::MaxTokens => TurnEndReason::MaxTokens,
        }
    }
}

impl Phase {
    /// The state, as named in `protocol` errors.
    pub fn describe(&self) -> String {
        match self {
            Phase::Idle => "idle (no turn open)".to_owned(),
            Phase::Turn(t) => match t.stage {
                Stage::Between if t.steps == 0 && !t.proposed => {
                    format!("turn {} open, nothing proposed yet", t.turn)
                }
                Stage::Between => format!("between steps of turn {}", t.turn),
                Stage::Proposed { step } => format!(
                    "step {step} of turn {} proposed, awaiting its decision",
                    t.turn
                ),
                Stage::Step { step } => format!("step {step} of turn {} open", t.turn),
            },
        }
    }

    fn refuse(&self, call: &str) -> Error {
        Error::new(
            ErrorKind::Protocol,
            format!(
                "{call} is not allowed now: the session is {}",
                self.describe()
            ),
        )
    }

    fn turn_mut(&mut self, call: &str) -> Result<&mut TurnState> {
        match self {
            Phase::Turn(t) => Ok(t),
            Phase::Idle => Err(self.refuse(call)),
        }
    }
}

/// The claimed input of a step boundary, awaiting the pre-step decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    /// The open turn.
    pub turn: u64,
    /// The number the step would get.
    pub step: u64,
    /// The claimed messages: all of `next-step`, then the claimed `next-turn` message.
    pub messages: Vec<Message>,
}

impl Proposal {
    /// `{"turn":N,"step":K,"messages":[…]}`.
    pub fn to_json(&self) -> String {
        let messages: Vec<&str> = self.messages.iter().map(|m| m.json()).collect();
        format!(
            r#"{{"turn":{},"step":{},"messages":[{}]}}"#,
            self.turn,
            self.step,
            messages.join(",")
        )
    }
}

/// The one pre-step decision for a pending proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Refuse the input: the turn ends `blocked`.
    Reject,
    /// Enter a step with this complete final batch.
    Enter(Vec<Message>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionWire {
    kind: String,
    messages: Option<Vec<Message>>,
}

impl Decision {
    /// Parses `{"kind":"reject"}` or `{"kind":"enter","messages":[…]}`.
    pub fn from_json(text: &str) -> Result<Decision> {
        let wire: DecisionWire = json::parse(text, "decision")?;
        match (wire.kind.as_str(), wire.messages) {
            ("reject", None) => Ok(Decision::Reject),
            ("enter", Some(messages)) => Ok(Decision::Enter(messages)),
            ("reject", Some(_)) => Err(invalid("decision: a reject carries no \"messages\"")),
            ("enter", None) => Err(invalid(
                "decision: an enter needs \"messages\" (the complete final batch)",
            )),
            (other, _) => Err(invalid(format!(
                "decision kind must be \"reject\" or \"enter\", got {}",
                json::quote(other)
            ))),
        }
    }
}

/// What a decision (or closing a turn) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    /// A step was entered.
    Step {
        /// The open turn.
        turn: u64,
        /// The entered step.
        step: u64,
    },
    /// The turn ended.
    TurnEnded {
        /// The ended turn.
        turn: u64,
        /// Why it ended.
        reason: TurnEndReason,
    },
}

impl Decided {
    /// `{"kind":"step","turn":N,"step":K}` or `{"kind":"turn-end","turn":N,"reason":R}`.
    pub fn to_json(&self) -> String {
        match self {
            Decided::Step { turn, step } => {
                format!(r#"{{"kind":"step","turn":{turn},"step":{step}}}"#)
            }
            Decided::TurnEnded { turn, reason } => {
                format!(
                    r#"{{"kind":"turn-end","turn":{turn},"reason":{}}}"#,
                    reason.to_json()
                )
            }
        }
    }
}

fn turn_start(txn: &mut Txn<'_>, turn: u64, extra: &Extra) -> Result<()> {
    txn.record(
        TURN_START,
        extra.close(format!(r#"{{"turn":{turn}"#)),
        Body::TurnStart { turn },
        Envelope::default(),
    )
}

fn turn_end(txn: &mut Txn<'_>, turn: u64, reason: &TurnEndReason, extra: &Extra) -> Result<()> {
    let data = extra.close(format!(r#"{{"turn":{turn},"reason":{}"#, reason.to_json()));
    let completed = *reason == TurnEndReason::Completed;
    txn.record(
        TURN_END,
        data,
        Body::TurnEnd { turn, completed },
        Envelope::default(),
    )?;
    txn.phase = Phase::Idle;
    Ok(())
}

fn step_start(txn: &mut Txn<'_>, turn: u64, step: u64, extra: &Extra) -> Result<()> {
    txn.record(
        STEP_START,
        extra.close(format!(r#"{{"turn":{turn},"step":{step}"#)),
        Body::StepStart { turn, step },
        Envelope::default(),
    )
}

fn step_end(txn: &mut Txn<'_>, turn: u64, step: u64, extra: &Extra) -> Result<()> {
    txn.record(
        STEP_END,
        extra.close(format!(r#"{{"turn":{turn},"step":{step}"#)),
        Body::StepEnd { turn, step },
        Envelope::default(),
    )
}

/// `open_turn`: idle only; writes `turn/start` (with the host's extras) before any
/// claim.
pub(crate) fn open_turn(txn: &mut Txn<'_>, extra: &Extra) -> Result<u64> {
    if txn.phase != Phase::Idle {
        return Err(txn.phase.refuse("open_turn"));
    }
    let turn = txn.last_turn() + 1;
    turn_start(txn, turn, extra)?;
    txn.phase = Phase::Turn(TurnState {
        turn,
        steps: 0,
        proposed: false,
        stage: Stage::Between,
        concluded: None,
        max_tokens: false,
    });
    Ok(turn)
}

/// `propose_step`: claims input for the next step (§3.2 claim).
pub(crate) fn propose_step(txn: &mut Txn<'_>) -> Result<Proposal> {
    let t = txn.phase.turn_mut("propose_step")?;
    if t.stage != Stage::Between {
        return Err(txn.phase.refuse("propose_step"));
    }
    let (turn, step) = (t.turn, t.steps + 1);
    let target = if t.proposed {
        Target::NextStep
    } else {
        Target::NextTurn
    };
    t.proposed = true;
    t.stage = Stage::Proposed { step };
    let messages = claim(txn, target, turn)?;
    Ok(Proposal {
        turn,
        step,
        messages,
    })
}

/// Removes all of `next-step` and, for `next-turn`, its first message, as pure
/// deletions that notify `claimed`.
fn claim(txn: &mut Txn<'_>, target: Target, turn: u64) -> Result<Vec<Message>> {
    let mut messages = Vec::new();
    if let Some(rec) = txn
        .inbox()
        .plan(Target::NextStep, 0.0, f64::INFINITY, Vec::new(), false)?
    {
        messages.extend(txn.splice(rec, Effect::Claim(turn))?);
    }
    if target == Target::NextTurn
        && let Some(rec) = txn
            .inbox()
            .plan(Target::NextTurn, 0.0, 1.0, Vec::new(), false)?
    {
        messages.extend(txn.splice(rec, Effect::Claim(turn))?);
    }
    Ok(messages)
}

/// `decide`: the one pre-step decision for the pending proposal. The host's extras go
/// on the event the decision writes first: `step/start`, or `turn/end`.
pub(crate) fn decide(txn: &mut Txn<'_>, decision: Decision, extra: &Extra) -> Result<Decided> {
    let t = txn.phase.turn_mut("decide")?;
    let Stage::Proposed { step } = t.stage else {
        return Err(txn.phase.refuse("decide"));
    };
    let turn = t.turn;
    let messages = match decision {
        Decision::Reject => return end_turn(txn, turn, TurnEndReason::Blocked, extra),
        Decision::Enter(messages) => messages,
    };
    if messages.is_empty() {
        if t.steps == 0 {
            return end_turn(txn, turn, TurnEndReason::Completed, extra);
        }
        if let Some(concluded) = t.concluded {
            return end_turn(txn, turn, concluded.reason(), extra);
        }
    }
    t.steps = step;
    t.stage = Stage::Step { step };
    step_start(txn, turn, step, extra)?;
    for m in messages {
        let envelope = Envelope {
            surface_op: Some(raw_append()),
            ..Envelope::default()
        };
        txn.record(
            USER_MESSAGE,
            m.json().to_owned(),
            Body::UserMessage,
            envelope,
        )?;
    }
    Ok(Decided::Step { turn, step })
}

fn raw_append() -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string("\"append\"".to_owned()).expect("valid JSON")
}

fn end_turn(txn: &mut Txn<'_>, turn: u64, reason: TurnEndReason, extra: &Extra) -> Result<Decided> {
    turn_end(txn, turn, &reason, extra)?;
    Ok(Decided::TurnEnded { turn, reason })
}

/// `end_step`: closes the open step (`step/end` with the host's extras); returns
/// whether another step must be proposed.
pub(crate) fn end_step(txn: &mut Txn<'_>, outcome: StepOutcome, extra: &Extra) -> Result<bool> {
    let t = txn.phase.turn_mut("end_step")?;
    let Stage::Step { step } = t.stage else {
        return Err(txn.phase.refuse("end_step"));
    };
    let turn = t.turn;
    t.stage = Stage::Between;
    t.max_tokens |= outcome == StepOutcome::MaxTokens;
    // `max-tokens` is sticky: once a step stopped at the token limit, the turn stays
    // concluded as `max-tokens` whatever later steps report, `continue` included, so
    // the loop goes on only while steering waits in `next-step` (§4).
    t.concluded = match outcome {
        _ if t.max_tokens => Some(Concluded::MaxTokens),
        StepOutcome::Continue => None,
        _ => Some(Concluded::Completed),
    };
    let concluded = t.concluded.is_some();
    step_end(txn, turn, step, extra)?;
    Ok(!concluded || txn.inbox().len(Target::NextStep) > 0)
}

/// `close_turn`: between steps of a concluded turn with no steering pending; the
/// host's extras go on `turn/end`.
pub(crate) fn close_turn(txn: &mut Txn<'_>, extra: &Extra) -> Result<Decided> {
    let steering = txn.inbox().len(Target::NextStep);
    let t = txn.phase.turn_mut("close_turn")?;
    let refusal = match (t.stage, t.concluded) {
        (Stage::Between, Some(_)) if steering > 0 => Some(format!(
            "{steering} steering message(s) wait in next-step; propose another step"
        )),
        (Stage::Between, Some(_)) => None,
        (Stage::Between, None) if t.steps == 0 => Some("no step has run in this turn".to_owned()),
        (Stage::Between, None) => {
            Some("the last step owes more work (it ended with \"continue\")".to_owned())
        }
        _ => Some(String::new()),
    };
    match refusal {
        None => {
            let (turn, concluded) = (t.turn, t.concluded.expect("checked above"));
            end_turn(txn, turn, concluded.reason(), extra)
        }
        Some(why) if why.is_empty() => Err(txn.phase.refuse("close_turn")),
        Some(why) => Err(Error::new(
            ErrorKind::Protocol,
            format!(
                "close_turn is not allowed now: the session is {}: {why}",
                txn.phase.describe()
            ),
        )),
    }
}

/// `cancel`: clears the inbox unless `keep_inbox`, then aborts the open turn (the
/// host's extras go on its `turn/end`).
pub(crate) fn cancel(
    txn: &mut Txn<'_>,
    cause: CancelCause,
    keep_inbox: bool,
    extra: &Extra,
) -> Result<()> {
    if !keep_inbox {
        txn.clear()?;
    }
    abort(txn, TurnEndReason::Aborted(cause), extra)
}

/// `fail`: ends the open turn with an error (the host's extras go on its `turn/end`).
pub(crate) fn fail(txn: &mut Txn<'_>, error: TurnError, extra: &Extra) -> Result<()> {
    txn.phase.turn_mut("fail")?;
    abort(txn, TurnEndReason::Error(error), extra)
}

/// Closes a turn the previous writer left open (§7.4): `step/end` for an open step,
/// then `turn/end {"kind":"interrupted"}`.
pub(crate) fn interrupt(txn: &mut Txn<'_>, turn: u64) -> Result<()> {
    let none = Extra::none();
    if let Some(step) = txn.open_step() {
        step_end(txn, turn, step, &none)?;
    }
    turn_end(txn, turn, &TurnEndReason::Interrupted, &none)
}

/// Closes an open step, then the open turn, with `reason`; nothing when idle.
fn abort(txn: &mut Txn<'_>, reason: TurnEndReason, extra: &Extra) -> Result<()> {
    let Phase::Turn(t) = &txn.phase else {
        return Ok(());
    };
    let (turn, stage) = (t.turn, t.stage);
    if let Stage::Step { step } = stage {
        step_end(txn, turn, step, &Extra::none())?;
    }
    turn_end(txn, turn, &reason, extra)
}

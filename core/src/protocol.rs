//! The step-boundary protocol (ARCHITECTURE.md#protocol) as a pure state machine.
//!
//! Each call is a function of the protocol state and the call's inputs that returns a
//! [`Transition`]: the events to write, in order, the state once they are durable and
//! the call's answer; or it refuses an out-of-order call with a `protocol` error naming
//! the state. It knows no transaction, store or lock: what a call needs to know of the
//! inbox or the log arrives as plain values (`last_turn`, `steering`), and the
//! transaction (`txn`) turns the [`Write`]s into events and inbox splices, written in
//! one durable append or not at all.
//!
//! The file runs past 600 lines because the machine's unit tests sit at its end, as
//! plain values in and out: every transition, every refusal, in every state.

use crate::error::{Error, ErrorKind, Result};
use crate::message::Message;
use crate::reason::{CancelCause, StepOutcome, TurnEndReason, TurnError};

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

/// Where the open turn stands between its steps.
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
    /// The state of turn `turn`, found open and parked when the log was opened
    /// (ARCHITECTURE.md#approvals): `steps` entered, `open_step` open or none, nothing
    /// concluded yet.
    pub fn reopened(turn: u64, steps: u64, open_step: Option<u64>) -> Phase {
        Phase::Turn(TurnState {
            turn,
            steps,
            proposed: steps > 0,
            stage: match open_step {
                Some(step) => Stage::Step { step },
                None => Stage::Between,
            },
            concluded: None,
            max_tokens: false,
        })
    }

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

    /// Who would own a compaction started now (ARCHITECTURE.md#compaction): `None` when
    /// idle (a manual one), the open turn between its steps (no step open, no proposal
    /// pending); refuses `call` naming the state otherwise.
    pub fn compaction_owner(&self, call: &str) -> Result<Option<u64>> {
        match self {
            Phase::Idle => Ok(None),
            Phase::Turn(t) if t.stage == Stage::Between => Ok(Some(t.turn)),
            Phase::Turn(_) => Err(self.refuse(call)),
        }
    }

    /// A copy of the open turn, to change into the next state; refuses `call` when idle.
    fn turn(&self, call: &str) -> Result<TurnState> {
        match self {
            Phase::Turn(t) => Ok(t.clone()),
            Phase::Idle => Err(self.refuse(call)),
        }
    }
}

/// One thing a transition writes; the transaction turns each into events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// `turn/start`.
    TurnStart { turn: u64 },
    /// The claim of a step boundary for `turn` (ARCHITECTURE.md#inbox-mutations): all of `next-step`, then, at
    /// the turn's first proposal, what `next_turn` says of `next-turn`; pure deletions
    /// that notify `claimed`.
    Claim {
        turn: u64,
        next_turn: Option<TurnClaim>,
    },
    /// Cancels everything pending: all of `next-step`, then all of `next-turn`.
    Clear,
    /// `step/start`.
    StepStart { turn: u64, step: u64 },
    /// `user/message` for one message of an entered step's batch.
    UserMessage(Message),
    /// `step/end`.
    StepEnd { turn: u64, step: u64 },
    /// `turn/end` with its reason.
    TurnEnd { turn: u64, reason: TurnEndReason },
}

/// What an allowed call does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Transition<R> {
    /// What to write, in order, in one durable append.
    pub writes: Vec<Write>,
    /// The index in `writes` of the event that carries the host's extras (ARCHITECTURE.md#reserved-events).
    pub extra_at: Option<usize>,
    /// The state once the writes are durable.
    pub next: Phase,
    /// The call's answer.
    pub reply: R,
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

/// The one pre-step decision for a pending proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Refuse the input: the turn ends `blocked`.
    Reject,
    /// Enter a step with this complete final batch.
    Enter(Vec<Message>),
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

/// `turn_end` for `turn` with `reason` as the only write, the extras on it.
fn end_turn(turn: u64, reason: TurnEndReason) -> Transition<Decided> {
    Transition {
        writes: vec![Write::TurnEnd {
            turn,
            reason: reason.clone(),
        }],
        extra_at: Some(0),
        next: Phase::Idle,
        reply: Decided::TurnEnded { turn, reason },
    }
}

/// `open_turn`: idle only; writes `turn/start` (with the host's extras) before any
/// claim. `last_turn` is the number of the log's last `turn/start` (0 before the first).
pub(crate) fn open_turn(phase: &Phase, last_turn: u64) -> Result<Transition<u64>> {
    if *phase != Phase::Idle {
        return Err(phase.refuse("open_turn"));
    }
    let turn = last_turn + 1;
    Ok(Transition {
        writes: vec![Write::TurnStart { turn }],
        extra_at: Some(0),
        next: Phase::Turn(TurnState {
            turn,
            steps: 0,
            proposed: false,
            stage: Stage::Between,
            concluded: None,
            max_tokens: false,
        }),
        reply: turn,
    })
}

/// How much of `next-turn` the first proposal of a turn claims (later proposals claim
/// only `next-step`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TurnClaim {
    /// The first message (ARCHITECTURE.md#inbox-mutations claim): each message waits
    /// for a turn of its own.
    #[default]
    First,
    /// All of it, in order: what a framework run does, whose own input joins
    /// `next-turn` behind what was pending and is taken in the same first step
    /// (ARCHITECTURE.md#framework-integrations).
    Whole,
}

/// `propose_step`: claims input for the next step (ARCHITECTURE.md#inbox-mutations claim); answers the turn and
/// the number the step would get. `claim` applies to the turn's first proposal only.
pub(crate) fn propose_step(phase: &Phase, claim: TurnClaim) -> Result<Transition<(u64, u64)>> {
    let mut t = phase.turn("propose_step")?;
    if t.stage != Stage::Between {
        return Err(phase.refuse("propose_step"));
    }
    let (turn, step) = (t.turn, t.steps + 1);
    let next_turn = if t.proposed { None } else { Some(claim) };
    t.proposed = true;
    t.stage = Stage::Proposed { step };
    Ok(Transition {
        writes: vec![Write::Claim { turn, next_turn }],
        extra_at: None,
        next: Phase::Turn(t),
        reply: (turn, step),
    })
}

/// `decide`: the one pre-step decision for the pending proposal. The host's extras go
/// on the event the decision writes first: `step/start`, or `turn/end`.
pub(crate) fn decide(phase: &Phase, decision: Decision) -> Result<Transition<Decided>> {
    let mut t = phase.turn("decide")?;
    let Stage::Proposed { step } = t.stage else {
        return Err(phase.refuse("decide"));
    };
    let turn = t.turn;
    let messages = match decision {
        Decision::Reject => return Ok(end_turn(turn, TurnEndReason::Blocked)),
        Decision::Enter(messages) => messages,
    };
    if messages.is_empty() {
        if t.steps == 0 {
            return Ok(end_turn(turn, TurnEndReason::Completed));
        }
        if let Some(concluded) = t.concluded {
            return Ok(end_turn(turn, concluded.reason()));
        }
    }
    t.steps = step;
    t.stage = Stage::Step { step };
    let mut writes = Vec::with_capacity(1 + messages.len());
    writes.push(Write::StepStart { turn, step });
    writes.extend(messages.into_iter().map(Write::UserMessage));
    Ok(Transition {
        writes,
        extra_at: Some(0),
        next: Phase::Turn(t),
        reply: Decided::Step { turn, step },
    })
}

/// `end_step`: closes the open step (`step/end` with the host's extras); answers
/// whether another step must be proposed. `steering` is the number of messages waiting
/// in `next-step`.
pub(crate) fn end_step(
    phase: &Phase,
    outcome: StepOutcome,
    steering: usize,
) -> Result<Transition<bool>> {
    let mut t = phase.turn("end_step")?;
    let Stage::Step { step } = t.stage else {
        return Err(phase.refuse("end_step"));
    };
    let turn = t.turn;
    t.stage = Stage::Between;
    t.max_tokens |= outcome == StepOutcome::MaxTokens;
    // `max-tokens` is sticky: once a step stopped at the token limit, the turn stays
    // concluded as `max-tokens` whatever later steps report, `continue` included, so
    // the loop goes on only while steering waits in `next-step` (ARCHITECTURE.md#protocol).
    t.concluded = match outcome {
        _ if t.max_tokens => Some(Concluded::MaxTokens),
        StepOutcome::Continue => None,
        _ => Some(Concluded::Completed),
    };
    let again = t.concluded.is_none() || steering > 0;
    Ok(Transition {
        writes: vec![Write::StepEnd { turn, step }],
        extra_at: Some(0),
        next: Phase::Turn(t),
        reply: again,
    })
}

/// `close_turn`: between steps of a concluded turn with no steering pending (`steering`
/// messages wait in `next-step`); the host's extras go on `turn/end`.
pub(crate) fn close_turn(phase: &Phase, steering: usize) -> Result<Transition<Decided>> {
    let t = phase.turn("close_turn")?;
    let why = match (t.stage, t.concluded) {
        (Stage::Between, Some(_)) if steering > 0 => {
            format!("{steering} steering message(s) wait in next-step; propose another step")
        }
        (Stage::Between, Some(concluded)) => return Ok(end_turn(t.turn, concluded.reason())),
        (Stage::Between, None) if t.steps == 0 => "no step has run in this turn".to_owned(),
        (Stage::Between, None) => {
            "the last step owes more work (it ended with \"continue\")".to_owned()
        }
        _ => return Err(phase.refuse("close_turn")),
    };
    Err(Error::new(
        ErrorKind::Protocol,
        format!(
            "close_turn is not allowed now: the session is {}: {why}",
            phase.describe()
        ),
    ))
}

/// `cancel`: clears the inbox unless `keep_inbox`, then aborts the open turn, if any
/// (the host's extras go on its `turn/end`). Never refused.
pub(crate) fn cancel(phase: &Phase, cause: CancelCause, keep_inbox: bool) -> Transition<()> {
    let clear = if keep_inbox { None } else { Some(Write::Clear) };
    abort(
        phase,
        clear.into_iter().collect(),
        TurnEndReason::Aborted(cause),
    )
}

/// `fail`: ends the open turn with an error (the host's extras go on its `turn/end`).
pub(crate) fn fail(phase: &Phase, error: TurnError) -> Result<Transition<()>> {
    phase.turn("fail")?;
    Ok(abort(phase, Vec::new(), TurnEndReason::Error(error)))
}

/// After `writes`, closes an open step, then the open turn, with `reason` (the extras
/// on `turn/end`); nothing more when idle.
fn abort(phase: &Phase, mut writes: Vec<Write>, reason: TurnEndReason) -> Transition<()> {
    let Phase::Turn(t) = phase else {
        return Transition {
            writes,
            extra_at: None,
            next: Phase::Idle,
            reply: (),
        };
    };
    if let Stage::Step { step } = t.stage {
        writes.push(Write::StepEnd { turn: t.turn, step });
    }
    writes.push(Write::TurnEnd {
        turn: t.turn,
        reason,
    });
    Transition {
        extra_at: Some(writes.len() - 1),
        writes,
        next: Phase::Idle,
        reply: (),
    }
}

/// Closes `turn`, which the previous writer left open (ARCHITECTURE.md#opening-a-stored-log): `step/end` for its open
/// step, if any, then `turn/end {"kind":"interrupted"}`; no extras. The phase of a
/// session just rebuilt from its log is idle, so the log, not the phase, names them.
pub(crate) fn interrupt(turn: u64, open_step: Option<u64>) -> Transition<()> {
    let step_end = open_step.map(|step| Write::StepEnd { turn, step });
    let mut writes: Vec<Write> = step_end.into_iter().collect();
    writes.push(Write::TurnEnd {
        turn,
        reason: TurnEndReason::Interrupted,
    });
    Transition {
        writes,
        extra_at: None,
        next: Phase::Idle,
        reply: (),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str) -> Message {
        Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap()
    }

    fn error() -> TurnError {
        TurnError::from_json(r#"{"message":"boom","code":"E"}"#).unwrap()
    }

    /// Turn 1 open, nothing proposed.
    fn opened() -> Phase {
        open_turn(&Phase::Idle, 0).unwrap().next
    }

    /// Step 1 of turn 1 proposed.
    fn proposed() -> Phase {
        propose_step(&opened(), TurnClaim::First).unwrap().next
    }

    /// Step 1 of turn 1 open.
    fn in_step() -> Phase {
        decide(&proposed(), Decision::Enter(vec![m("a")]))
            .unwrap()
            .next
    }

    /// Between steps of turn 1 after step 1 ended with `outcome`.
    fn after(outcome: StepOutcome) -> Phase {
        end_step(&in_step(), outcome, 0).unwrap().next
    }

    fn refused<R: std::fmt::Debug>(result: Result<R>, call: &str, state: &str) {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol);
        let message = err.message().to_owned();
        assert!(
            message.starts_with(&format!(
                "{call} is not allowed now: the session is {state}"
            )),
            "{message}"
        );
    }

    #[test]
    fn open_turn_numbers_the_turn_after_the_last_and_carries_the_extras() {
        let t = open_turn(&Phase::Idle, 3).unwrap();
        assert_eq!(t.writes, [Write::TurnStart { turn: 4 }]);
        assert_eq!((t.extra_at, t.reply), (Some(0), 4));
        assert_eq!(t.next.describe(), "turn 4 open, nothing proposed yet");
    }

    #[test]
    fn the_first_proposal_claims_next_turn_and_later_ones_only_next_step() {
        let first = propose_step(&opened(), TurnClaim::First).unwrap();
        assert_eq!(
            first.writes,
            [Write::Claim {
                turn: 1,
                next_turn: Some(TurnClaim::First)
            }]
        );
        assert_eq!((first.extra_at, first.reply), (None, (1, 1)));
        assert_eq!(
            first.next.describe(),
            "step 1 of turn 1 proposed, awaiting its decision"
        );
        let second = propose_step(&after(StepOutcome::Continue), TurnClaim::First).unwrap();
        assert_eq!(
            second.writes,
            [Write::Claim {
                turn: 1,
                next_turn: None
            }]
        );
        assert_eq!(second.reply, (1, 2));
    }

    #[test]
    fn a_whole_claim_reaches_all_of_next_turn_at_the_first_proposal_only() {
        let first = propose_step(&opened(), TurnClaim::Whole).unwrap();
        assert_eq!(
            first.writes,
            [Write::Claim {
                turn: 1,
                next_turn: Some(TurnClaim::Whole)
            }]
        );
        let second = propose_step(&after(StepOutcome::Continue), TurnClaim::Whole).unwrap();
        assert_eq!(
            second.writes,
            [Write::Claim {
                turn: 1,
                next_turn: None
            }]
        );
    }

    #[test]
    fn entering_writes_step_start_then_the_batch_in_order() {
        let t = decide(&proposed(), Decision::Enter(vec![m("a"), m("b")])).unwrap();
        assert_eq!(
            t.writes,
            [
                Write::StepStart { turn: 1, step: 1 },
                Write::UserMessage(m("a")),
                Write::UserMessage(m("b")),
            ]
        );
        assert_eq!(t.extra_at, Some(0));
        assert_eq!(t.reply, Decided::Step { turn: 1, step: 1 });
        assert_eq!(t.next.describe(), "step 1 of turn 1 open");
    }

    #[test]
    fn a_rejection_ends_the_turn_blocked_with_the_extras_on_turn_end() {
        let t = decide(&proposed(), Decision::Reject).unwrap();
        let reason = TurnEndReason::Blocked;
        assert_eq!(
            t.writes,
            [Write::TurnEnd {
                turn: 1,
                reason: reason.clone()
            }]
        );
        assert_eq!(t.extra_at, Some(0));
        assert_eq!(t.reply, Decided::TurnEnded { turn: 1, reason });
        assert_eq!(t.next, Phase::Idle);
    }

    #[test]
    fn an_empty_batch_ends_the_turn_or_enters_an_empty_step() {
        // Nothing ran yet: the turn completes at once.
        let t = decide(&proposed(), Decision::Enter(Vec::new())).unwrap();
        assert_eq!(
            t.reply,
            Decided::TurnEnded {
                turn: 1,
                reason: TurnEndReason::Completed
            }
        );
        // The last step concluded the turn: it ends with that conclusion.
        let concluded = propose_step(&after(StepOutcome::MaxTokens), TurnClaim::First)
            .unwrap()
            .next;
        let t = decide(&concluded, Decision::Enter(Vec::new())).unwrap();
        assert_eq!(
            t.reply,
            Decided::TurnEnded {
                turn: 1,
                reason: TurnEndReason::MaxTokens
            }
        );
        // The last step owes more work: an empty step is entered.
        let owing = propose_step(&after(StepOutcome::Continue), TurnClaim::First)
            .unwrap()
            .next;
        let t = decide(&owing, Decision::Enter(Vec::new())).unwrap();
        assert_eq!(t.writes, [Write::StepStart { turn: 1, step: 2 }]);
        assert_eq!(t.reply, Decided::Step { turn: 1, step: 2 });
    }

    #[test]
    fn end_step_asks_for_another_step_while_work_or_steering_remains() {
        let step = in_step();
        let t = end_step(&step, StepOutcome::Continue, 0).unwrap();
        assert_eq!(t.writes, [Write::StepEnd { turn: 1, step: 1 }]);
        assert_eq!((t.extra_at, t.reply), (Some(0), true));
        assert!(!end_step(&step, StepOutcome::Completed, 0).unwrap().reply);
        assert!(end_step(&step, StepOutcome::Completed, 2).unwrap().reply);
        assert_eq!(
            end_step(&step, StepOutcome::Completed, 0)
                .unwrap()
                .next
                .describe(),
            "between steps of turn 1"
        );
    }

    #[test]
    fn max_tokens_is_sticky_across_later_steps() {
        let again = propose_step(&after(StepOutcome::MaxTokens), TurnClaim::First)
            .unwrap()
            .next;
        let step2 = decide(&again, Decision::Enter(vec![m("s")])).unwrap().next;
        let ended = end_step(&step2, StepOutcome::Continue, 0).unwrap();
        assert!(
            !ended.reply,
            "a continue after max-tokens concludes the turn"
        );
        let closed = close_turn(&ended.next, 0).unwrap();
        assert_eq!(
            closed.reply,
            Decided::TurnEnded {
                turn: 1,
                reason: TurnEndReason::MaxTokens
            }
        );
    }

    #[test]
    fn close_turn_ends_a_concluded_turn_with_its_conclusion() {
        let t = close_turn(&after(StepOutcome::Completed), 0).unwrap();
        assert_eq!(
            t.writes,
            [Write::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Completed
            }]
        );
        assert_eq!((t.extra_at, &t.next), (Some(0), &Phase::Idle));
    }

    #[test]
    fn close_turn_refusals_say_why() {
        let why = |phase: &Phase, steering| {
            close_turn(phase, steering)
                .unwrap_err()
                .message()
                .to_owned()
        };
        assert_eq!(
            why(&after(StepOutcome::Completed), 2),
            "close_turn is not allowed now: the session is between steps of turn 1: \
             2 steering message(s) wait in next-step; propose another step"
        );
        assert_eq!(
            why(&opened(), 0),
            "close_turn is not allowed now: the session is turn 1 open, nothing proposed \
             yet: no step has run in this turn"
        );
        assert_eq!(
            why(&after(StepOutcome::Continue), 0),
            "close_turn is not allowed now: the session is between steps of turn 1: \
             the last step owes more work (it ended with \"continue\")"
        );
        refused(
            close_turn(&in_step(), 0),
            "close_turn",
            "step 1 of turn 1 open",
        );
        refused(
            close_turn(&Phase::Idle, 0),
            "close_turn",
            "idle (no turn open)",
        );
    }

    #[test]
    fn cancel_clears_then_closes_the_open_step_and_turn() {
        let reason = TurnEndReason::Aborted(CancelCause::User);
        let t = cancel(&in_step(), CancelCause::User, false);
        assert_eq!(
            t.writes,
            [
                Write::Clear,
                Write::StepEnd { turn: 1, step: 1 },
                Write::TurnEnd {
                    turn: 1,
                    reason: reason.clone()
                },
            ]
        );
        assert_eq!((t.extra_at, &t.next), (Some(2), &Phase::Idle));
        let kept = cancel(&proposed(), CancelCause::User, true);
        assert_eq!(kept.writes, [Write::TurnEnd { turn: 1, reason }]);
        assert_eq!(kept.extra_at, Some(0));
    }

    #[test]
    fn cancel_while_idle_only_clears() {
        let t = cancel(&Phase::Idle, CancelCause::User, false);
        assert_eq!(t.writes, [Write::Clear]);
        assert_eq!((t.extra_at, &t.next), (None, &Phase::Idle));
        assert!(
            cancel(&Phase::Idle, CancelCause::User, true)
                .writes
                .is_empty()
        );
    }

    #[test]
    fn fail_ends_the_open_turn_with_the_error() {
        let t = fail(&after(StepOutcome::Continue), error()).unwrap();
        assert_eq!(
            t.writes,
            [Write::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Error(error())
            }]
        );
        assert_eq!((t.extra_at, &t.next), (Some(0), &Phase::Idle));
        let t = fail(&in_step(), error()).unwrap();
        assert_eq!(t.writes[0], Write::StepEnd { turn: 1, step: 1 });
        assert_eq!(t.extra_at, Some(1));
    }

    #[test]
    fn interrupt_closes_the_open_step_first_without_extras() {
        let end = |turn| Write::TurnEnd {
            turn,
            reason: TurnEndReason::Interrupted,
        };
        let t = interrupt(3, Some(2));
        assert_eq!(t.writes, [Write::StepEnd { turn: 3, step: 2 }, end(3)]);
        assert_eq!((t.extra_at, &t.next), (None, &Phase::Idle));
        assert_eq!(interrupt(1, None).writes, [end(1)]);
    }

    /// The machine stays pure: its code names no transaction, session, store, inbox,
    /// log state or lock.
    #[test]
    fn the_machine_names_no_state_holder() {
        let source = include_str!("protocol.rs");
        let code = &source[..source.find("#[cfg(test)]").unwrap()];
        for holder in [
            "crate::txn",
            "crate::session",
            "crate::store",
            "crate::inbox",
            "crate::log",
            "Mutex",
        ] {
            assert!(!code.contains(holder), "protocol.rs uses {holder}");
        }
    }

    /// Every call in every state: allowed where ARCHITECTURE.md#protocol allows it, otherwise refused with
    /// the state named.
    #[test]
    fn every_call_is_refused_outside_its_states() {
        let states = [
            (Phase::Idle, "idle (no turn open)"),
            (opened(), "turn 1 open, nothing proposed yet"),
            (
                proposed(),
                "step 1 of turn 1 proposed, awaiting its decision",
            ),
            (in_step(), "step 1 of turn 1 open"),
            (after(StepOutcome::Continue), "between steps of turn 1"),
        ];
        for (i, (phase, state)) in states.iter().enumerate() {
            assert_eq!(phase.describe(), *state);
            let check = |call: &str, allowed: bool, result: Result<()>| match (allowed, result) {
                (true, r) => r.unwrap(),
                (false, r) => refused(r, call, state),
            };
            check("open_turn", i == 0, open_turn(phase, 0).map(drop));
            check(
                "propose_step",
                i == 1 || i == 4,
                propose_step(phase, TurnClaim::First).map(drop),
            );
            check("decide", i == 2, decide(phase, Decision::Reject).map(drop));
            check(
                "end_step",
                i == 3,
                end_step(phase, StepOutcome::Completed, 0).map(drop),
            );
            check("fail", i != 0, fail(phase, error()).map(drop));
        }
    }
}

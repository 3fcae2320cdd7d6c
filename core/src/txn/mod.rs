//! One transaction: the events of one public call, staged and checked against copies of
//! the state, handed to the log writer in one append, then applied in memory (ARCHITECTURE.md#observers,
//! ARCHITECTURE.md#inbox-mutations, ARCHITECTURE.md#durability).
//!
//! The protocol (`protocol`) decides what a protocol call writes; a [`Txn`] turns those
//! writes into events and inbox splices, checking every event against the log invariants
//! (ARCHITECTURE.md#log-invariants) and every splice against the inbox as it was before the call. Only after the
//! one append succeeded does [`Ledger::transact`] change the state and queue the
//! notices observers are to see; a refused call or a failed write changes nothing.

mod approvals;
mod compaction;

use serde_json::value::RawValue;

use crate::conversation::{self, Conversation, Journal, TOOL_RESULT};
use crate::error::Result;
use crate::event::{
    Body, Envelope, Event, INBOX_REJECTED, INBOX_SPLICED, STEP_END, STEP_START, TURN_END,
    TURN_START, USER_MESSAGE,
};
use crate::extra::Extra;
use crate::inbox::Inbox;
use crate::log::LogState;
use crate::message::Message;
use crate::observer::{InboxNotice, Notice};
use crate::protocol::{self, Decided, Decision, Phase, Proposal, Transition, TurnClaim, Write};
use crate::reason::{CancelCause, StepOutcome, TurnEndReason, TurnError};
use crate::splice::{SpliceRecord, Target};
use crate::store::LogWriter;

pub use approvals::Resumed;
pub use compaction::Compacted;
pub(crate) use compaction::{Begun, INTERRUPTED};

/// How a staged splice affects notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// A public splice: `discarded` for removed, `inserted` for inserted messages.
    Discard,
    /// A claim for `turn`: `claimed` for each removed message.
    Claim(u64),
}

/// What transactions change: the log's invariants so far, the inbox and the protocol
/// state, with the buffers every transaction reuses.
pub(crate) struct Ledger {
    /// The log invariants (ARCHITECTURE.md#log-invariants) after the last committed event.
    pub log: LogState,
    /// The inbox after the last committed splice.
    pub inbox: Inbox,
    /// The surface and the pending tool calls after the last committed event.
    pub conversation: Conversation,
    /// The protocol state.
    phase: Phase,
    /// Buffers reused by every transaction (cleared, capacity kept).
    staged: Vec<Event>,
    effects: Vec<Effect>,
}

impl Ledger {
    /// The state of a log read back (or just created): idle, as no call is under way.
    pub fn new(log: LogState, inbox: Inbox, conversation: Conversation) -> Ledger {
        Ledger {
            log,
            inbox,
            conversation,
            phase: Phase::Idle,
            staged: Vec::new(),
            effects: Vec::new(),
        }
    }

    /// Takes up a turn the log left parked on approvals (ARCHITECTURE.md#approvals): it
    /// stays open, in the step it was parked in, for `resume_parked` to hand on.
    /// Whether the open turn was such a turn.
    pub fn take_up_parked(&mut self) -> bool {
        match (self.log.open_turn, self.conversation.approvals.parked()) {
            (Some(turn), Some(parked)) if parked.turn == turn => {
                self.phase = Phase::reopened(turn, self.log.steps, self.log.open_step);
                true
            }
            _ => false,
        }
    }

    /// Runs one transaction at `time`: `stage` against copies of the state, then one
    /// append of the staged events to `writer`, then applies them to the state. With
    /// an `outbox`, queues the notices of the committed events there, in order.
    pub fn transact<R>(
        &mut self,
        writer: &mut dyn LogWriter,
        time: u64,
        outbox: Option<&mut Vec<Notice>>,
        stage: impl FnOnce(&mut Txn<'_>) -> Result<R>,
    ) -> Result<R> {
        let mut txn = Txn {
            inbox: &self.inbox,
            conversation: &mut self.conversation,
            journal: Journal::default(),
            log: self.log.clone(),
            phase: self.phase.clone(),
            events: std::mem::take(&mut self.staged),
            effects: std::mem::take(&mut self.effects),
            time,
            touched: [false; 2],
        };
        let staged = stage(&mut txn);
        let Txn {
            log,
            phase,
            mut events,
            mut effects,
            journal,
            ..
        } = txn;
        // The conversation changed as events were staged: a refused call or a failed
        // write takes that back.
        let written = staged.and_then(|result| {
            if !events.is_empty() {
                writer.append(&events)?;
            }
            Ok(result)
        });
        let result = match written {
            Ok(result) => result,
            Err(e) => {
                if !journal.is_empty() {
                    self.conversation.rollback(journal);
                }
                events.clear();
                effects.clear();
                (self.staged, self.effects) = (events, effects);
                return Err(e);
            }
        };
        // Durable: now the state may change.
        self.log = log;
        self.phase = phase;
        let mut effect_of = effects.drain(..);
        let mut outbox = outbox;
        for event in events.drain(..) {
            let Some(record) = event.splice() else {
                if let Some(outbox) = outbox.as_deref_mut() {
                    outbox.push(Notice::Event(event));
                }
                continue;
            };
            let removed = self.inbox.apply(record);
            let effect = effect_of.next().expect("one effect per splice");
            let Some(outbox) = outbox.as_deref_mut() else {
                continue;
            };
            let inserted = record.inserted.clone();
            outbox.push(Notice::Event(event));
            match effect {
                Effect::Discard => {
                    outbox.extend(
                        removed
                            .into_iter()
                            .map(|m| Notice::Inbox(InboxNotice::Discarded(m))),
                    );
                    outbox.extend(
                        inserted
                            .into_iter()
                            .map(|m| Notice::Inbox(InboxNotice::Inserted(m))),
                    );
                }
                Effect::Claim(turn) => {
                    outbox.extend(
                        removed
                            .into_iter()
                            .map(|m| Notice::Inbox(InboxNotice::Claimed(m, turn))),
                    );
                }
            }
        }
        drop(effect_of);
        (self.staged, self.effects) = (events, effects);
        Ok(result)
    }
}

/// Events staged by one public call, validated against copies of the state.
pub(crate) struct Txn<'a> {
    inbox: &'a Inbox,
    /// The conversation, changed as events are staged (taken back by the journal).
    conversation: &'a mut Conversation,
    journal: Journal,
    log: LogState,
    /// The protocol state after the call.
    phase: Phase,
    events: Vec<Event>,
    effects: Vec<Effect>,
    time: u64,
    /// Lists touched so far: a transaction splices each list at most once, so every
    /// splice can be validated against the state before the call.
    touched: [bool; 2],
}

impl<'a> Txn<'a> {
    /// The inbox as it was before this call.
    pub fn inbox(&self) -> &'a Inbox {
        self.inbox
    }

    /// Stages a host event whose `data` is compact JSON text known to be valid: the
    /// conversation's events are checked for their shape first
    /// (ARCHITECTURE.md#the-conversation), and a surface type without a `surfaceOp`
    /// gets `"append"`.
    pub fn append(&mut self, ty: &str, data: String, mut envelope: Envelope) -> Result<Event> {
        self.refuse_parked("append")?;
        conversation::check_shape(ty, &data)?;
        if envelope.surface_op.is_none()
            && matches!(
                ty,
                USER_MESSAGE | conversation::ASSISTANT_MESSAGE | TOOL_RESULT
            )
        {
            envelope.surface_op = Some(raw_append());
        }
        let event = Event::build(ty, self.log.next_seq, self.time, data, envelope)?;
        self.push(event.clone())?;
        Ok(event)
    }

    /// Stages a library-built event.
    fn record(
        &mut self,
        ty: &'static str,
        data: String,
        body: Body,
        envelope: Envelope,
    ) -> Result<()> {
        let event = Event::reserved(ty, self.log.next_seq, self.time, data, body, envelope);
        self.push(event)
    }

    fn push(&mut self, event: Event) -> Result<()> {
        self.guard_turns(&event)?;
        self.log.advance(&event)?;
        self.conversation.append(&event, &mut self.journal)?;
        self.events.push(event);
        Ok(())
    }

    /// Stages a validated splice; returns the messages it removes.
    pub fn splice(&mut self, record: SpliceRecord, effect: Effect) -> Result<Vec<Message>> {
        let slot = &mut self.touched[record.target as usize];
        debug_assert!(!*slot, "a transaction splices each list at most once");
        *slot = true;
        let start = record.start as usize;
        let removed = (start..start + record.removed_count as usize)
            .map(|pos| {
                self.inbox
                    .get(record.target, pos)
                    .expect("validated range")
                    .clone()
            })
            .collect();
        let data = record.to_json();
        self.record(
            INBOX_SPLICED,
            data,
            Body::Spliced(record),
            Envelope::default(),
        )?;
        self.effects.push(effect);
        Ok(removed)
    }

    /// Stages the splice that takes post `post` in (ARCHITECTURE.md#posting): an
    /// ordinary splice (a posted message's insertion, or an edit's cancellation) whose
    /// data carries the post's id after the record's keys, as a host extra would
    /// (`"post":"<id>"`, ARCHITECTURE.md#reserved-events), so replay knows which posts
    /// the log holds. Notifies as a local splice does (`discarded`, then `inserted`).
    pub fn take_post(&mut self, record: SpliceRecord, post: &str) -> Result<()> {
        let slot = &mut self.touched[record.target as usize];
        debug_assert!(!*slot, "a transaction splices each list at most once");
        *slot = true;
        let mut data = record.to_json();
        data.pop();
        data.push_str(",\"post\":");
        data.push_str(&crate::json::quote(post));
        data.push('}');
        self.record(
            INBOX_SPLICED,
            data,
            Body::Spliced(record),
            Envelope::default(),
        )?;
        self.effects.push(Effect::Discard);
        Ok(())
    }

    /// Stages the two splices of a posted move (ARCHITECTURE.md#moving-pending-input):
    /// `removal` (`"outcome":"moved"`) and `insertion`, planned against the inbox before
    /// the call and applied in this order, the second carrying the post's id. They may
    /// splice one list twice: the insertion's coordinates are those the removal leaves.
    /// Notifies `discarded`, then `inserted`.
    pub fn take_move(
        &mut self,
        removal: SpliceRecord,
        insertion: SpliceRecord,
        post: &str,
    ) -> Result<()> {
        self.touched[removal.target as usize] = true;
        self.touched[insertion.target as usize] = true;
        let data = removal.to_json();
        self.record(
            INBOX_SPLICED,
            data,
            Body::Spliced(removal),
            Envelope::default(),
        )?;
        self.effects.push(Effect::Discard);
        let mut data = insertion.to_json();
        data.pop();
        data.push_str(",\"post\":");
        data.push_str(&crate::json::quote(post));
        data.push('}');
        self.record(
            INBOX_SPLICED,
            data,
            Body::Spliced(insertion),
            Envelope::default(),
        )?;
        self.effects.push(Effect::Discard);
        Ok(())
    }

    /// Stages `agent/inbox/rejected` (ARCHITECTURE.md#posting) with `data`, built by the caller as
    /// `{"message":m,"reason":{"code","kind","message"},"post":id}` (or `"edit":e` in
    /// place of `"message"`); ignorable.
    pub fn reject(&mut self, data: String) -> Result<()> {
        let envelope = Envelope {
            ignorable: true,
            ..Envelope::default()
        };
        self.record(INBOX_REJECTED, data, Body::Rejected, envelope)
    }

    /// `clear()`: cancels all of `next-step`, then all of `next-turn`.
    pub fn clear(&mut self) -> Result<()> {
        for target in [Target::NextStep, Target::NextTurn] {
            if let Some(rec) = self
                .inbox
                .plan(target, 0.0, f64::INFINITY, Vec::new(), true)?
            {
                self.splice(rec, Effect::Discard)?;
            }
        }
        Ok(())
    }

    /// Removes all of `next-step` and then what `next_turn` names of `next-turn` (its
    /// first message, or all of it), as pure deletions that notify `claimed` for `turn`.
    fn claim(&mut self, turn: u64, next_turn: Option<TurnClaim>) -> Result<Vec<Message>> {
        let mut messages = Vec::new();
        if let Some(rec) =
            self.inbox
                .plan(Target::NextStep, 0.0, f64::INFINITY, Vec::new(), false)?
        {
            messages.extend(self.splice(rec, Effect::Claim(turn))?);
        }
        let count = match next_turn {
            None => 0.0,
            Some(TurnClaim::First) => 1.0,
            Some(TurnClaim::Whole) => f64::INFINITY,
        };
        if let Some(rec) = self
            .inbox
            .plan(Target::NextTurn, 0.0, count, Vec::new(), false)?
        {
            messages.extend(self.splice(rec, Effect::Claim(turn))?);
        }
        Ok(messages)
    }

    /// Messages waiting in `next-step` before this call.
    fn steering(&self) -> usize {
        self.inbox.len(Target::NextStep)
    }

    /// `open_turn` (ARCHITECTURE.md#protocol), the host's extras on `turn/start`.
    pub fn open_turn(&mut self, extra: &Extra) -> Result<u64> {
        self.refuse_parked("open_turn")?;
        let t = protocol::open_turn(&self.phase, self.log.last_turn)?;
        self.run(t, extra).map(|(turn, _)| turn)
    }

    /// `propose_step` (ARCHITECTURE.md#protocol): the claimed messages with the step they would enter.
    pub fn propose_step(&mut self, claim: TurnClaim) -> Result<Proposal> {
        self.refuse_parked("propose_step")?;
        let t = protocol::propose_step(&self.phase, claim)?;
        let ((turn, step), messages) = self.run(t, &Extra::none())?;
        Ok(Proposal {
            turn,
            step,
            messages,
        })
    }

    /// `decide` (ARCHITECTURE.md#protocol).
    pub fn decide(&mut self, decision: Decision, extra: &Extra) -> Result<Decided> {
        self.refuse_parked("decide")?;
        let t = protocol::decide(&self.phase, decision)?;
        self.run(t, extra).map(|(decided, _)| decided)
    }

    /// `end_step` (ARCHITECTURE.md#protocol): whether another step must be proposed.
    pub fn end_step(&mut self, outcome: StepOutcome, extra: &Extra) -> Result<bool> {
        self.refuse_parked("end_step")?;
        self.refuse_pending("end_step")?;
        let t = protocol::end_step(&self.phase, outcome, self.steering())?;
        self.run(t, extra).map(|(again, _)| again)
    }

    /// `close_turn` (ARCHITECTURE.md#protocol).
    pub fn close_turn(&mut self, extra: &Extra) -> Result<Decided> {
        self.refuse_parked("close_turn")?;
        self.refuse_pending("close_turn")?;
        let t = protocol::close_turn(&self.phase, self.steering())?;
        self.run(t, extra).map(|(decided, _)| decided)
    }

    /// `cancel` (ARCHITECTURE.md#protocol): a compaction running is ended first
    /// (`"error":"cancelled"`, ARCHITECTURE.md#compaction), then every pending approval
    /// is decided `cancelled` (ARCHITECTURE.md#approvals).
    pub fn cancel(&mut self, cause: CancelCause, keep_inbox: bool, extra: &Extra) -> Result<()> {
        self.end_compaction("cancelled")?;
        self.cancel_approvals()?;
        let t = protocol::cancel(&self.phase, cause, keep_inbox);
        self.run(t, extra).map(drop)
    }

    /// `fail` (ARCHITECTURE.md#protocol): a compaction running is ended first
    /// (`"error":"failed"`, ARCHITECTURE.md#compaction), then every pending approval is
    /// decided `cancelled` (ARCHITECTURE.md#approvals).
    pub fn fail(&mut self, error: TurnError, extra: &Extra) -> Result<()> {
        let t = protocol::fail(&self.phase, error)?;
        self.end_compaction("failed")?;
        self.cancel_approvals()?;
        self.run(t, extra).map(drop)
    }

    /// Closes `turn`, which the previous writer left open
    /// (ARCHITECTURE.md#opening-a-stored-log): answers each tool call it left without a
    /// result (ARCHITECTURE.md#tool-calls-across-a-crash), then ends its open step and
    /// the turn. Its pending approvals are decided `cancelled` first
    /// (ARCHITECTURE.md#approvals).
    pub fn interrupt(&mut self, turn: u64) -> Result<()> {
        self.cancel_approvals()?;
        let pending = self.conversation.calls.pending().to_vec();
        for call in &pending {
            let seq = self.log.next_seq;
            let (data, sources) = conversation::interrupted_result(call, seq);
            let envelope = Envelope {
                surface_op: Some(raw_append()),
                source_event_seqs: sources,
                ..Envelope::default()
            };
            let event = Event::build(TOOL_RESULT, seq, self.time, data, envelope)?;
            self.push(event)?;
        }
        let t = protocol::interrupt(turn, self.log.open_step);
        self.run(t, &Extra::none()).map(drop)
    }

    /// Stages a transition's writes in order, the host's `extra` on the one it names,
    /// then takes its next state; returns its answer and the messages its claim removed.
    fn run<R>(&mut self, t: Transition<R>, extra: &Extra) -> Result<(R, Vec<Message>)> {
        let Transition {
            writes,
            extra_at,
            next,
            reply,
        } = t;
        let none = Extra::none();
        let mut claimed = Vec::new();
        for (i, write) in writes.into_iter().enumerate() {
            let extra = if extra_at == Some(i) { extra } else { &none };
            match write {
                Write::TurnStart { turn } => self.record(
                    TURN_START,
                    extra.close(format!(r#"{{"turn":{turn}"#)),
                    Body::TurnStart { turn },
                    Envelope::default(),
                )?,
                Write::Claim { turn, next_turn } => claimed = self.claim(turn, next_turn)?,
                Write::Clear => self.clear()?,
                Write::StepStart { turn, step } => self.record(
                    STEP_START,
                    extra.close(format!(r#"{{"turn":{turn},"step":{step}"#)),
                    Body::StepStart { turn, step },
                    Envelope::default(),
                )?,
                Write::UserMessage(m) => {
                    let envelope = Envelope {
                        surface_op: Some(raw_append()),
                        ..Envelope::default()
                    };
                    self.record(
                        USER_MESSAGE,
                        m.json().to_owned(),
                        Body::UserMessage,
                        envelope,
                    )?;
                }
                Write::StepEnd { turn, step } => self.record(
                    STEP_END,
                    extra.close(format!(r#"{{"turn":{turn},"step":{step}"#)),
                    Body::StepEnd { turn, step },
                    Envelope::default(),
                )?,
                Write::TurnEnd { turn, reason } => {
                    let data =
                        extra.close(format!(r#"{{"turn":{turn},"reason":{}"#, reason.to_json()));
                    let completed = reason == TurnEndReason::Completed;
                    self.record(
                        TURN_END,
                        data,
                        Body::TurnEnd { turn, completed },
                        Envelope::default(),
                    )?;
                }
            }
        }
        self.phase = next;
        Ok((reply, claimed))
    }
}

/// The `surfaceOp` of a claimed message's `user/message`: `"append"`.
fn raw_append() -> Box<RawValue> {
    RawValue::from_string("\"append\"".to_owned()).expect("valid JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind};

    /// A log writer in memory that refuses every append while `fail`.
    #[derive(Default)]
    struct Writer {
        written: Vec<Event>,
        fail: bool,
    }

    impl LogWriter for Writer {
        fn append(&mut self, events: &[Event]) -> Result<()> {
            if self.fail {
                return Err(Error::new(ErrorKind::Io, "no space left on device"));
            }
            self.written.extend_from_slice(events);
            Ok(())
        }

        fn read(&self, since: u64) -> Result<Vec<Event>> {
            Ok(self.written[since as usize..].to_vec())
        }

        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
    }

    fn m(id: &str) -> Message {
        Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap()
    }

    fn described(notices: &[Notice]) -> Vec<String> {
        notices
            .iter()
            .map(|n| match n {
                Notice::Event(e) => format!("{} {}", e.ty(), e.data()),
                Notice::Inbox(n) => format!("{} {}", n.ty(), n.message().id()),
            })
            .collect()
    }

    #[test]
    fn a_failed_append_changes_nothing() {
        let mut ledger = Ledger::new(LogState::default(), Inbox::new(), Conversation::default());
        let mut writer = Writer {
            fail: true,
            ..Writer::default()
        };
        let mut outbox = Vec::new();
        let err = ledger
            .transact(&mut writer, 7, Some(&mut outbox), |txn| {
                txn.open_turn(&Extra::none())
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(ledger.log, LogState::default());
        assert_eq!(ledger.phase, Phase::Idle);
        assert!(outbox.is_empty());
        writer.fail = false;
        let turn = ledger
            .transact(&mut writer, 8, None, |txn| txn.open_turn(&Extra::none()))
            .unwrap();
        assert_eq!((turn, ledger.log.open_turn), (1, Some(1)));
        assert_eq!(writer.written[0].time(), 8);
    }

    #[test]
    fn a_refused_call_writes_nothing() {
        let mut ledger = Ledger::new(LogState::default(), Inbox::new(), Conversation::default());
        let mut writer = Writer::default();
        let err = ledger
            .transact(&mut writer, 1, None, |txn| {
                txn.propose_step(TurnClaim::First)
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol);
        assert!(writer.written.is_empty());
        assert_eq!(ledger.log.next_seq, 0);
    }

    #[test]
    fn commit_applies_splices_and_queues_notices_in_order() {
        let mut ledger = Ledger::new(LogState::default(), Inbox::new(), Conversation::default());
        let mut writer = Writer::default();
        let mut outbox = Vec::new();
        ledger
            .transact(&mut writer, 1, Some(&mut outbox), |txn| {
                let rec = txn
                    .inbox()
                    .plan(Target::NextTurn, 0.0, 0.0, vec![m("a"), m("b")], true)?
                    .unwrap();
                txn.splice(rec, Effect::Discard)
            })
            .unwrap();
        ledger
            .transact(&mut writer, 2, Some(&mut outbox), |txn| {
                txn.open_turn(&Extra::none())?;
                txn.propose_step(TurnClaim::First)
            })
            .unwrap();
        assert_eq!(
            described(&outbox),
            [
                r#"agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"a"},{"id":"b"}]}"#,
                "agent/inbox/inserted a",
                "agent/inbox/inserted b",
                r#"turn/start {"turn":1}"#,
                r#"agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
                "agent/inbox/claimed a",
            ]
        );
        assert_eq!(ledger.inbox.list(Target::NextTurn), [m("b")]);
        assert_eq!(writer.written.len(), 3);
    }

    #[test]
    fn the_host_extras_go_only_on_the_event_the_transition_names() {
        let mut ledger = Ledger::new(LogState::default(), Inbox::new(), Conversation::default());
        let mut writer = Writer::default();
        let extra = Extra::from_json(r#"{"host":1}"#).unwrap();
        ledger
            .transact(&mut writer, 1, None, |txn| {
                txn.open_turn(&Extra::none())?;
                txn.propose_step(TurnClaim::First)?;
                txn.decide(Decision::Enter(vec![m("x")]), &Extra::none())
            })
            .unwrap();
        let from = writer.written.len();
        ledger
            .transact(&mut writer, 2, None, |txn| {
                txn.cancel(CancelCause::User, true, &extra)
            })
            .unwrap();
        let data: Vec<&str> = writer.written[from..].iter().map(Event::data).collect();
        assert_eq!(
            data,
            [
                r#"{"turn":1,"step":1}"#,
                r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}},"host":1}"#,
            ]
        );
    }
}

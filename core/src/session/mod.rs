//! Sessions: one log, its inbox and its protocol state behind one writer.
//!
//! Every public mutation runs as a transaction (`txn`): validate and stage events
//! against copies of the state, write them in one durable append, then apply them in
//! memory; this module then publishes them to observers with no lock held (ARCHITECTURE.md#observers,
//! ARCHITECTURE.md#inbox-mutations, ARCHITECTURE.md#durability). The handle's locking, observers and publication live here; creating,
//! opening, forking and checking a stored log in `open`; the inbox operations
//! ([`InboxOps`]) in `inbox_ops`; protocol calls fused into one transaction
//! ([`Session::step_boundary`], [`Session::end_step_and_close`]) in `boundary`; what
//! reading a stored log reports ([`OpenReport`], [`VerifyReport`], [`Peek`]) in
//! `reports`.

mod approvals;
mod boundary;
mod compaction;
mod inbox_ops;
mod intake;
mod open;
mod reports;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::checkpoint::Checkpoint;
use crate::conversation::SurfaceView;
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::{Envelope, Event, is_reserved};
use crate::extra::Extra;
use crate::fleet::post::{Intake, PostIds};
use crate::header::Header;
use crate::inbox::Inbox;
use crate::json::{self, Json};
use crate::observer::{
    self, EventObserver, FailureLog, InboxNotice, InboxObserver, Notice, ObserverFailures,
    Observers,
};
use crate::projection::{Baseline, QueueProjection};
use crate::protocol::{Decided, Decision, Proposal, TurnClaim};
use crate::reason::{CancelCause, StepOutcome, TurnError};
use crate::splice::Target;
use crate::store::LogWriter;
use crate::txn::{Ledger, Txn};

pub use approvals::ParkedTurn;
pub use boundary::StepBoundary;
pub use compaction::{Compaction, Summary};
pub use inbox_ops::InboxOps;
pub(crate) use open::Filled;
pub use reports::{OpenReport, Peek, VerifyReport};

/// One open session: the exclusive writer of a log, with its inbox and protocol.
///
/// `Send + Sync`: calls from several threads serialize on an internal lock.
pub struct Session {
    serial: u64,
    header: Header,
    report: OpenReport,
    state: Mutex<State>,
    /// Serializes publication so observers see commit order across threads.
    publish: Mutex<()>,
    observers: Mutex<Observers>,
    /// Whether an observer was ever registered: a transaction reads this rather than
    /// take the observers' lock to learn that there are none.
    observed: AtomicBool,
    /// Contained observer failures not yet taken (bounded).
    failures: Mutex<FailureLog>,
}

struct State {
    writer: Option<Box<dyn LogWriter>>,
    ledger: Ledger,
    /// Committed notices not yet published.
    outbox: Vec<Notice>,
    /// The session's mailbox, when its store takes posts (ARCHITECTURE.md#posting).
    intake: Option<Intake>,
}

impl State {
    /// Writes a checkpoint of the state after the last committed event through the
    /// writer (ARCHITECTURE.md#checkpoints-and-reading-without-owning).
    fn write_checkpoint(&mut self) -> Result<()> {
        let none = PostIds::default();
        let posts = self.intake.as_ref().map_or(&none, Intake::known);
        let ledger = &self.ledger;
        let cp = Checkpoint::of(
            &ledger.log,
            &ledger.inbox,
            posts.set(),
            &ledger.conversation,
        );
        self.writer.as_mut().expect("open").checkpoint(&cp)
    }

    /// At the end of a committed transaction: a checkpoint when one is due. The
    /// transaction stands whatever happens here, so a failed checkpoint is not its
    /// error: it stays due and is tried again after the next one, and at close.
    fn checkpoint_if_due(&mut self) {
        if self
            .writer
            .as_ref()
            .is_some_and(|w| w.checkpoint_due(false))
        {
            let _ = self.write_checkpoint();
        }
    }
}

static SERIALS: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // State is only changed after a successful write and in steps that cannot panic
    // halfway, so a mutex poisoned by a panicking observer-free caller is consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`lock`] if no other thread holds `m` now, else `None`.
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The data of a host event of type `ty`, checked (see [`Session::append`]).
fn host_data(ty: &str, data: &str) -> Result<String> {
    host_type(ty)?;
    let data: Box<str> = json::raw_value(data, "event data")?.into();
    Ok(data.into_string())
}

/// Refuses a type only the library writes (see [`Session::append`]).
fn host_type(ty: &str) -> Result<()> {
    if is_reserved(ty) {
        return Err(invalid(format!(
            "event type {ty} is written only by inboxlog; it cannot be appended"
        )));
    }
    Ok(())
}

/// Unix epoch milliseconds now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What [`Session::try_append`] did.
#[derive(Debug)]
pub enum TryAppend {
    /// The append was made, or refused.
    Done(Result<Event>),
    /// Another call held the session: nothing was done, and the arguments come back.
    Busy(Json, Envelope),
}

fn closed(id: &str) -> Error {
    Error::new(ErrorKind::Closed, format!("session \"{id}\" is closed"))
}

impl Session {
    fn assemble(
        header: Header,
        report: OpenReport,
        writer: Box<dyn LogWriter>,
        ledger: Ledger,
    ) -> Session {
        Session {
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
            header,
            report,
            state: Mutex::new(State {
                writer: Some(writer),
                ledger,
                outbox: Vec::new(),
                intake: None,
            }),
            publish: Mutex::new(()),
            observers: Mutex::new(Observers::default()),
            observed: AtomicBool::new(false),
            failures: Mutex::new(FailureLog::default()),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The log's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// What opening found and fixed.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The inbox as of the event at `upto` (`None`: the current end), as the baseline a
    /// consumer's projection starts from; it then applies the events after the
    /// baseline's seq. An `upto` past the last event is `invalid_input` naming the
    /// log's length, never clamped.
    pub fn baseline(&self, upto: Option<u64>) -> Result<Baseline> {
        {
            // At the end: the inbox this writer holds, no read.
            let st = self.state()?;
            let last = st.ledger.log.next_seq.checked_sub(1);
            if upto.is_none() || upto == last {
                return Ok(Baseline {
                    seq: last,
                    next_turn: st.ledger.inbox.list(Target::NextTurn),
                    next_step: st.ledger.inbox.list(Target::NextStep),
                });
            }
        }
        let events = self.events(0)?;
        let projection = QueueProjection::replay(&events, self.header.replay_from(), upto)?;
        Ok(projection.baseline())
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        self.opened(lock(&self.state))
    }

    /// The locked state `st`, or `closed` when the session is.
    fn opened<'a>(&self, st: MutexGuard<'a, State>) -> Result<MutexGuard<'a, State>> {
        if st.writer.is_none() {
            return Err(closed(self.id()));
        }
        Ok(st)
    }

    /// Seq of the last event, `None` for an empty log.
    pub fn last_seq(&self) -> Result<Option<u64>> {
        Ok(self.state()?.ledger.log.next_seq.checked_sub(1))
    }

    /// The events with `seq >= since`.
    pub fn events(&self, since: u64) -> Result<Vec<Event>> {
        let st = self.state()?;
        st.writer.as_ref().expect("open").read(since)
    }

    /// Reads the inbox under the session lock.
    pub fn with_inbox<R>(&self, f: impl FnOnce(&Inbox) -> R) -> Result<R> {
        Ok(f(&self.state()?.ledger.inbox))
    }

    /// Registers an event observer (ARCHITECTURE.md#observers).
    pub fn on_event(
        &self,
        observer: impl Fn(&Event) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.observers)
            .events
            .push(Arc::new(observer) as Arc<EventObserver>);
        self.observed.store(true, Ordering::Release);
    }

    /// Registers an inbox observer (ARCHITECTURE.md#notifications).
    pub fn on_inbox(
        &self,
        observer: impl Fn(&InboxNotice) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.observers)
            .inbox
            .push(Arc::new(observer) as Arc<InboxObserver>);
        self.observed.store(true, Ordering::Release);
    }

    /// Takes the failures of observers recorded since the last call (each one was
    /// contained: the call that committed the event still succeeded). Only the last
    /// [`ObserverFailures::KEPT`] are kept; older ones are counted. Works on a closed
    /// session too.
    pub fn take_observer_failures(&self) -> ObserverFailures {
        lock(&self.failures).take()
    }

    /// Appends a host event. `data` is JSON text, kept byte-for-byte once valid
    /// (whitespace outside strings removed). Reserved types are refused, except
    /// `user/message` with any JSON object as data (an `id` is optional there).
    pub fn append(&self, ty: &str, data: &str, envelope: Envelope) -> Result<Event> {
        let data = host_data(ty, data)?;
        self.transact(|txn| txn.append(ty, data, envelope))
    }

    /// [`Session::append`] of data written by a [`json::Builder`]: valid by
    /// construction, so stored without being parsed again.
    pub fn append_json(&self, ty: &str, data: Json, envelope: Envelope) -> Result<Event> {
        host_type(ty)?;
        self.transact(|txn| txn.append(ty, data.into_string(), envelope))
    }

    /// [`Session::append_json`], unless another call holds the session at this moment:
    /// then [`TryAppend::Busy`], with nothing done. For a caller that must not wait
    /// while it holds something others need, such as a binding holding its
    /// interpreter's lock: it tries first, and releases that lock only to wait.
    pub fn try_append(&self, ty: &str, data: Json, envelope: Envelope) -> TryAppend {
        // Refused as `append` refuses, in the same order.
        if let Err(e) = host_type(ty).and_then(|()| self.refuse_reentry()) {
            return TryAppend::Done(Err(e));
        }
        let Some(guard) = try_lock(&self.state) else {
            return TryAppend::Busy(data, envelope);
        };
        let stage = |txn: &mut Txn<'_>| txn.append(ty, data.into_string(), envelope);
        TryAppend::Done(
            self.opened(guard)
                .and_then(|guard| self.transact_in(guard, stage)),
        )
    }

    /// Makes everything appended so far durable (the barrier of `batched` mode).
    pub fn flush(&self) -> Result<()> {
        let mut st = self.state()?;
        st.writer.as_mut().expect("open").flush()
    }

    /// Flushes and releases the log; later calls fail with `closed`. Closing twice is
    /// fine.
    pub fn close(&self) -> Result<()> {
        let mut st = lock(&self.state);
        match st.writer.as_mut() {
            None => Ok(()),
            Some(_) => {
                // A checkpoint flushes first; without one, the flush is the barrier.
                let closed = if st.writer.as_ref().is_some_and(|w| w.checkpoint_due(true)) {
                    st.write_checkpoint()
                } else {
                    st.writer.as_mut().expect("open").flush()
                };
                st.writer = None;
                closed
            }
        }
    }

    /// `open_turn` (ARCHITECTURE.md#protocol).
    pub fn open_turn(&self) -> Result<u64> {
        self.open_turn_with(&Extra::none())
    }

    /// `open_turn` (ARCHITECTURE.md#protocol) with host extras on its `turn/start` (ARCHITECTURE.md#reserved-events).
    pub fn open_turn_with(&self, extra: &Extra) -> Result<u64> {
        self.transact(|txn| txn.open_turn(extra))
    }

    /// `propose_step` (ARCHITECTURE.md#protocol), after taking posted messages in (ARCHITECTURE.md#posting, [`Session::receive`]).
    pub fn propose_step(&self) -> Result<Proposal> {
        self.propose_step_claiming(TurnClaim::First)
    }

    /// `propose_step` whose first proposal of a turn claims as much of `next-turn` as
    /// `claim` says: [`TurnClaim::Whole`] is a framework run's first step
    /// (ARCHITECTURE.md#framework-integrations). Later proposals claim `next-step` only.
    pub fn propose_step_claiming(&self, claim: TurnClaim) -> Result<Proposal> {
        self.receive()?;
        self.transact(|txn| txn.propose_step(claim))
    }

    /// `decide` (ARCHITECTURE.md#protocol).
    pub fn decide(&self, decision: Decision) -> Result<Decided> {
        self.decide_with(decision, &Extra::none())
    }

    /// `decide` (ARCHITECTURE.md#protocol) with host extras on the event it writes first (`step/start`, or
    /// `turn/end` when the decision ends the turn).
    pub fn decide_with(&self, decision: Decision, extra: &Extra) -> Result<Decided> {
        self.transact(|txn| txn.decide(decision, extra))
    }

    /// `end_step` (ARCHITECTURE.md#protocol): returns whether another step must be proposed.
    pub fn end_step(&self, outcome: StepOutcome) -> Result<bool> {
        self.end_step_with(outcome, &Extra::none())
    }

    /// `end_step` (ARCHITECTURE.md#protocol) with host extras on its `step/end`. Posts
    /// that may wait in the session's mailbox are taken in first
    /// (ARCHITECTURE.md#posting), so steering posted from elsewhere counts as arrived,
    /// and so does an edit taking pending steering back (SPEC §11.3); asking costs no
    /// read when the store knows nothing was posted.
    pub fn end_step_with(&self, outcome: StepOutcome, extra: &Extra) -> Result<bool> {
        self.receive_if_posted()?;
        self.transact(|txn| txn.end_step(outcome, extra))
    }

    /// `close_turn` (ARCHITECTURE.md#protocol).
    pub fn close_turn(&self) -> Result<Decided> {
        self.close_turn_with(&Extra::none())
    }

    /// `close_turn` (ARCHITECTURE.md#protocol) with host extras on its `turn/end`.
    pub fn close_turn_with(&self, extra: &Extra) -> Result<Decided> {
        self.transact(|txn| txn.close_turn(extra))
    }

    /// `cancel` (ARCHITECTURE.md#protocol).
    pub fn cancel(&self, cause: CancelCause, keep_inbox: bool) -> Result<()> {
        self.cancel_with(cause, keep_inbox, &Extra::none())
    }

    /// `cancel` (ARCHITECTURE.md#protocol) with host extras on the `turn/end` of the aborted turn.
    pub fn cancel_with(&self, cause: CancelCause, keep_inbox: bool, extra: &Extra) -> Result<()> {
        self.transact(|txn| txn.cancel(cause, keep_inbox, extra))
    }

    /// `fail` (ARCHITECTURE.md#protocol).
    pub fn fail(&self, error: TurnError) -> Result<()> {
        self.fail_with(error, &Extra::none())
    }

    /// `fail` (ARCHITECTURE.md#protocol) with host extras on the `turn/end` of the failed turn.
    pub fn fail_with(&self, error: TurnError, extra: &Extra) -> Result<()> {
        self.transact(|txn| txn.fail(error, extra))
    }

    /// The model-visible surface's seqs, in the order the model sees them
    /// (ARCHITECTURE.md#the-surface).
    pub fn surface(&self) -> Result<Vec<u64>> {
        Ok(self.state()?.ledger.conversation.surface.seqs())
    }

    /// The messages the model sees, as JSON text (ARCHITECTURE.md#the-surface).
    pub fn messages(&self) -> Result<Vec<String>> {
        Ok(self.state()?.ledger.conversation.surface.messages())
    }

    /// [`Session::surface`] and [`Session::messages`] together, read under one lock.
    pub fn surface_view(&self) -> Result<SurfaceView> {
        Ok(SurfaceView::of(&self.state()?.ledger.conversation.surface))
    }

    /// Whether a turn is open.
    pub fn turn_open(&self) -> Result<Option<u64>> {
        Ok(self.state()?.ledger.log.open_turn)
    }

    /// Runs one public mutation: stage, write once, apply (see `txn`), then publish.
    fn transact<R>(&self, stage: impl FnOnce(&mut Txn<'_>) -> Result<R>) -> Result<R> {
        self.refuse_reentry()?;
        self.transact_in(self.state()?, stage)
    }

    /// [`Session::transact`] in the state `guard` holds (open, locked by the caller).
    fn transact_in<R>(
        &self,
        mut guard: MutexGuard<'_, State>,
        stage: impl FnOnce(&mut Txn<'_>) -> Result<R>,
    ) -> Result<R> {
        let st = &mut *guard;
        let writer = st.writer.as_deref_mut().expect("open");
        let notify = self.observed.load(Ordering::Acquire);
        let outbox = notify.then_some(&mut st.outbox);
        let result = st.ledger.transact(writer, now_ms(), outbox, stage)?;
        st.checkpoint_if_due();
        drop(guard);
        // Only a call that queued notices must see them published before it returns.
        if notify {
            self.publish();
        }
        Ok(result)
    }

    /// Refuses a change made from inside one of this session's observers.
    fn refuse_reentry(&self) -> Result<()> {
        if observer::publishing(self.serial) {
            return Err(Error::new(
                ErrorKind::Reentrant,
                format!(
                    "session \"{}\" cannot be changed from inside one of its observers",
                    self.id()
                ),
            ));
        }
        Ok(())
    }

    /// Publishes committed notices in commit order, with no state lock held.
    fn publish(&self) {
        let _order = lock(&self.publish);
        loop {
            let batch = std::mem::take(&mut lock(&self.state).outbox);
            if batch.is_empty() {
                return;
            }
            let observers = lock(&self.observers).clone();
            let failures = observers.publish(self.serial, &batch);
            if !failures.is_empty() {
                lock(&self.failures).record(failures);
            }
        }
    }
}

#[cfg(test)]
mod tests;

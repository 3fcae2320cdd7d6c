//! Sessions: one log, its inbox and its protocol state behind one writer.
//!
//! Every public mutation runs as a transaction (`txn`): validate and stage events
//! against copies of the state, write them in one durable append, then apply them in
//! memory; this module then publishes them to observers with no lock held (ARCHITECTURE.md#observers,
//! ARCHITECTURE.md#inbox-mutations, ARCHITECTURE.md#durability). The handle's locking, observers and publication live here; creating,
//! opening, forking and checking a stored log in `open`; the inbox operations
//! ([`InboxOps`]) in `inbox_ops`; protocol calls fused into one transaction
//! ([`Session::step_boundary`], [`Session::end_step_and_close`]) in `boundary`.

mod boundary;
mod inbox_ops;
mod intake;
mod open;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::checkpoint::Checkpoint;
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

pub use boundary::StepBoundary;
pub use inbox_ops::InboxOps;
pub(crate) use open::Filled;

/// What opening a stored log found and fixed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Bytes of a torn tail dropped by the store.
    pub torn_bytes: u64,
    /// The turn closed as interrupted (`turn/end {"kind":"interrupted"}`) because the
    /// previous writer left it open; `None` when no turn was open.
    pub repaired_turn: Option<u64>,
}

/// What a read-only check of a stored log found ([`Session::verify`]): the log passes
/// every check [`Session::open`] runs, and these are the repairs opening it for writing
/// would make (none is an error).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The log's header.
    pub header: Header,
    /// Stored complete events.
    pub events: u64,
    /// Bytes of a torn tail that opening would drop.
    pub torn_bytes: u64,
    /// The turn left open, which opening would close as `interrupted`.
    pub open_turn: Option<u64>,
    /// The step left open in that turn, which opening would end first.
    pub open_step: Option<u64>,
    /// Messages pending in `next-turn` after replay.
    pub next_turn: usize,
    /// Messages pending in `next-step` after replay.
    pub next_step: usize,
}

impl VerifyReport {
    /// Whether opening for writing would change the file (drop a torn tail or close an
    /// interrupted turn).
    pub fn needs_repair(&self) -> bool {
        self.torn_bytes > 0 || self.open_turn.is_some()
    }
}

/// What a stored log holds now, read without owning it ([`Session::peek`]): where it
/// ends, the turn and step it left open, and its inbox.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peek {
    /// The log's header.
    pub header: Header,
    /// Stored complete events (the seq the next one gets).
    pub events: u64,
    /// Bytes of a torn tail (ignored by the read, dropped by the next open).
    pub torn_bytes: u64,
    /// The turn left open, if any.
    pub open_turn: Option<u64>,
    /// The step left open in that turn, if any.
    pub open_step: Option<u64>,
    /// The inbox as of the last event (ARCHITECTURE.md#queue-projection).
    pub baseline: Baseline,
}

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
        let cp = Checkpoint::of(&self.ledger.log, &self.ledger.inbox, posts.set());
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
mod tests {
    use super::*;
    use crate::header::SessionMeta;
    use crate::message::Message;
    use crate::splice::Target;
    use crate::store::MemoryStore;

    fn msg(id: &str) -> Message {
        Message::from_json(&format!(r#"{{"id":"{id}","role":"user"}}"#)).unwrap()
    }

    fn log_of(s: &Session) -> Vec<String> {
        s.events(0)
            .unwrap()
            .iter()
            .map(|e| format!("{} {}", e.ty(), e.data()))
            .collect()
    }

    #[test]
    fn a_whole_claim_takes_next_step_then_all_of_next_turn_at_the_first_step_only() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        for id in ["t1", "t2"] {
            s.inbox().append(Target::NextTurn, msg(id)).unwrap();
        }
        s.inbox().append(Target::NextStep, msg("s1")).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step_claiming(TurnClaim::Whole).unwrap();
        let ids: Vec<_> = p.messages.iter().map(|m| m.id().to_owned()).collect();
        assert_eq!(ids, ["s1", "t1", "t2"]);
        assert!(!s.inbox().has_pending().unwrap());
        assert!(log_of(&s).ends_with(&[
            r#"agent/inbox/spliced {"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#.to_owned(),
            r#"agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":2,"inserted":[]}"#.to_owned(),
        ]));
        s.decide(Decision::Enter(p.messages)).unwrap();
        assert!(s.end_step(StepOutcome::Continue).unwrap());
        s.inbox().append(Target::NextTurn, msg("t3")).unwrap();
        let second = s.propose_step_claiming(TurnClaim::Whole).unwrap();
        assert!(
            second.messages.is_empty(),
            "later proposals claim next-step only"
        );
        assert_eq!(s.inbox().next_turn().unwrap().len(), 1);
    }

    #[test]
    fn one_prompt_through_a_turn() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
        assert_eq!(s.open_turn().unwrap(), 1);
        let p = s.propose_step().unwrap();
        assert_eq!((p.turn, p.step, p.messages.len()), (1, 1, 1));
        let d = s.decide(Decision::Enter(p.messages)).unwrap();
        assert_eq!(d, Decided::Step { turn: 1, step: 1 });
        assert!(!s.end_step(StepOutcome::Completed).unwrap());
        s.close_turn().unwrap();
        assert_eq!(
            log_of(&s),
            [
                r#"agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user"}]}"#,
                r#"turn/start {"turn":1}"#,
                r#"agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
                r#"step/start {"turn":1,"step":1}"#,
                r#"user/message {"id":"m1","role":"user"}"#,
                r#"step/end {"turn":1,"step":1}"#,
                r#"turn/end {"turn":1,"reason":{"kind":"completed"}}"#,
            ]
        );
        assert!(
            s.events(4).unwrap()[0]
                .to_json()
                .contains(r#""surfaceOp":"append""#)
        );
    }

    #[test]
    fn try_append_appends_at_once_or_does_nothing() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        let TryAppend::Done(e) = s.try_append("note", built_a1(), Envelope::default()) else {
            panic!("no other call holds the session");
        };
        let e = e.unwrap();
        assert_eq!((e.seq(), e.data()), (0, r#"{"a":1}"#));
        // Another call holds the session: nothing is done.
        let held = lock(&s.state);
        let busy = s.try_append("note", built_a1(), Envelope::default());
        assert!(
            matches!(&busy, TryAppend::Busy(data, _) if data.as_str() == r#"{"a":1}"#),
            "{busy:?}"
        );
        drop(held);
        assert_eq!(log_of(&s), [r#"note {"a":1}"#]);
        // Refusals are answered at once, as `append` answers them.
        for (ty, envelope) in [
            ("turn/start", Envelope::default()),
            (
                "note",
                Envelope {
                    source_event_seqs: Some(vec![0]),
                    ..Envelope::default()
                },
            ),
        ] {
            let TryAppend::Done(Err(err)) = s.try_append(ty, built_a1(), envelope) else {
                panic!("{ty} is refused");
            };
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ty}");
        }
        s.close().unwrap();
        let TryAppend::Done(Err(err)) = s.try_append("note", empty(), Envelope::default()) else {
            panic!("a closed session refuses");
        };
        assert_eq!(err.kind(), ErrorKind::Closed);
    }

    fn built_a1() -> Json {
        let mut b = json::Builder::new();
        b.begin_object().unwrap();
        b.key("a");
        b.int(1);
        b.end();
        b.finish()
    }

    fn empty() -> Json {
        let mut b = json::Builder::new();
        b.begin_object().unwrap();
        b.end();
        b.finish()
    }

    #[test]
    fn built_data_is_stored_as_it_was_written() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        let e = s
            .append_json("note", built_a1(), Envelope::default())
            .unwrap();
        assert_eq!(e.to_json(), s.events(0).unwrap()[0].to_json());
        let err = s
            .append_json("agent/inbox/spliced", empty(), Envelope::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(log_of(&s), [r#"note {"a":1}"#]);
    }

    #[test]
    fn try_append_from_an_observer_is_reentrant() {
        let store = MemoryStore::new();
        let s = Arc::new(Session::create(&store, "s", SessionMeta::default()).unwrap());
        let inner = Arc::downgrade(&s);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        s.on_event(move |_| {
            let s = inner.upgrade().expect("alive");
            let answer = match s.try_append("echo", empty(), Envelope::default()) {
                TryAppend::Done(r) => Some(r.map(|e| e.seq()).map_err(|e| e.kind())),
                TryAppend::Busy(..) => None,
            };
            lock(&record).push(answer);
            Ok(())
        });
        s.append("note", "{}", Envelope::default()).unwrap();
        assert_eq!(*lock(&seen), [Some(Err(ErrorKind::Reentrant))]);
        assert_eq!(log_of(&s), ["note {}"]);
    }

    #[test]
    fn a_baseline_is_the_inbox_at_a_seq_and_refuses_one_past_the_end() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        let err = s.baseline(Some(0)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "upto 0 is past the end of the log (0 events, last seq none)"
        );
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.inbox().append(Target::NextStep, msg("b")).unwrap();
        let at0 = s.baseline(Some(0)).unwrap();
        assert_eq!(
            (at0.seq, at0.next_turn.len(), at0.next_step.len()),
            (Some(0), 1, 0)
        );
        let now = s.baseline(None).unwrap();
        assert_eq!((now.seq, now.next_step), (Some(1), vec![msg("b")]));
        assert_eq!(
            s.baseline(Some(2)).unwrap_err().to_string(),
            "upto 2 is past the end of the log (2 events, last seq 1)"
        );
    }

    #[test]
    fn data_and_messages_at_the_depth_limit_stay_readable() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        let deep = format!(
            "{}{}",
            "[".repeat(crate::MAX_DEPTH),
            "]".repeat(crate::MAX_DEPTH)
        );
        let event = s.append("x/deep", &deep, Envelope::default()).unwrap();
        let nested = format!(r#"{{"id":"m","x":{}}}"#, &deep[2..deep.len() - 2]);
        let m = Message::from_json(&nested).unwrap();
        s.inbox().append(Target::NextTurn, m.clone()).unwrap();
        for e in s.events(0).unwrap() {
            assert_eq!(Event::from_json(&e.to_json()).unwrap(), e);
        }
        assert_eq!(event.data(), deep);
        drop(s);
        let s = Session::open(&store, "s").unwrap();
        assert_eq!(s.inbox().next_turn().unwrap(), vec![m]);
        let too_deep = format!("[{deep}]");
        let err = s
            .append("x/deep", &too_deep, Envelope::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge);
    }

    #[test]
    fn reopen_replays_and_repairs() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.inbox().append(Target::NextTurn, msg("b")).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        drop(s);
        let s = Session::open(&store, "s").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1));
        assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("b")]);
        let tail = log_of(&s);
        assert_eq!(
            &tail[tail.len() - 2..],
            [
                r#"step/end {"turn":1,"step":1}"#,
                r#"turn/end {"turn":1,"reason":{"kind":"interrupted"}}"#
            ]
        );
        drop(s);
        let again = Session::open(&store, "s").unwrap();
        assert_eq!(again.open_report().repaired_turn, None);
        assert_eq!(again.events(0).unwrap().len(), tail.len());
        assert_eq!(again.open_turn().unwrap(), 2);
    }
}

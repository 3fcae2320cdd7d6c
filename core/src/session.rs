//! Sessions: one log, its inbox and its protocol state behind one writer.
//!
//! Every public mutation runs as a transaction: validate and stage events against
//! copies of the state, write them in one durable append, then apply them in memory,
//! then publish them to observers with no lock held (SPEC §1.5, §3.2, §7.2).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::{Body, END_SEED, Envelope, Event, INBOX_SPLICED, is_reserved};
use crate::extra::Extra;
use crate::header::{Header, SessionMeta};
use crate::id::validate_session_id;
use crate::inbox::Inbox;
use crate::json;
use crate::log::LogState;
use crate::message::Message;
use crate::observer::{
    self, EventObserver, FailureLog, InboxNotice, InboxObserver, Notice, ObserverFailures,
    Observers,
};
use crate::protocol::{self, Decided, Decision, Phase, Proposal};
use crate::reason::{CancelCause, StepOutcome, TurnError};
use crate::splice::{SpliceRecord, Target};
use crate::store::{LogWriter, OpenOptions, Store};

/// What opening a stored log found and fixed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenReport {
    /// Bytes of a torn tail dropped by the store.
    pub torn_bytes: u64,
    /// The turn closed as interrupted (`turn/end {"kind":"interrupted"}`) because the
    /// previous writer left it open; `None` when no turn was open.
    pub repaired_turn: Option<u64>,
}

impl OpenReport {
    /// `{"tornBytes":N,"repairedTurn":N|null}`, the one JSON spelling of every binding.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain numbers serialize")
    }
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

    /// The report as the bindings hand it out: `{"header":{…},"events":N,
    /// "tornBytes":N,"openTurn":N|null,"openStep":N|null,"needsRepair":bool,
    /// "nextTurn":N,"nextStep":N}`.
    pub fn to_json(&self) -> String {
        let opt = |n: Option<u64>| n.map_or_else(|| "null".to_owned(), |n| n.to_string());
        format!(
            r#"{{"header":{},"events":{},"tornBytes":{},"openTurn":{},"openStep":{},"needsRepair":{},"nextTurn":{},"nextStep":{}}}"#,
            self.header.to_json(),
            self.events,
            self.torn_bytes,
            opt(self.open_turn),
            opt(self.open_step),
            self.needs_repair(),
            self.next_turn,
            self.next_step
        )
    }
}

/// What reading a stored log back rebuilds: the invariants (§1.3) and the inbox
/// (§3.5). [`Session::open`] and [`Session::verify`] feed it through the same store
/// reader, so they refuse the same logs at the same places.
#[derive(Default)]
struct Rebuilt {
    log: LogState,
    inbox: Inbox,
}

impl Rebuilt {
    /// The store's visitor: checks and applies one stored event.
    fn visit(&mut self, header: &Header, event: &Event) -> Result<()> {
        self.log.advance_after(event)?;
        replay(header, &mut self.inbox, event)
    }
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
    /// Contained observer failures not yet taken (bounded).
    failures: Mutex<FailureLog>,
}

struct State {
    writer: Option<Box<dyn LogWriter>>,
    log: LogState,
    inbox: Inbox,
    phase: Phase,
    /// Committed notices not yet published.
    outbox: Vec<Notice>,
    /// Buffers reused by every transaction (cleared, capacity kept).
    staged: Vec<Event>,
    effects: Vec<Effect>,
}

/// How a staged splice affects notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// A public splice: `discarded` for removed, `inserted` for inserted messages.
    Discard,
    /// A claim for `turn`: `claimed` for each removed message.
    Claim(u64),
}

/// Events staged by one public call, validated against copies of the state.
pub(crate) struct Txn<'a> {
    inbox: &'a Inbox,
    log: LogState,
    /// The protocol state after the call.
    pub phase: Phase,
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

    /// Number of the last `turn/start` in the log.
    pub fn last_turn(&self) -> u64 {
        self.log.last_turn
    }

    /// The step open in the log, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.log.open_step
    }

    /// Stages a library-built event.
    pub fn record(
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
        self.log.advance(&event)?;
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
}

static SERIALS: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // State is only changed after a successful write and in steps that cannot panic
    // halfway, so a mutex poisoned by a panicking observer-free caller is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Unix epoch milliseconds now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn closed(id: &str) -> Error {
    Error::new(ErrorKind::Closed, format!("session \"{id}\" is closed"))
}

impl Session {
    fn assemble(
        header: Header,
        report: OpenReport,
        writer: Box<dyn LogWriter>,
        log: LogState,
        inbox: Inbox,
    ) -> Session {
        Session {
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
            header,
            report,
            state: Mutex::new(State {
                writer: Some(writer),
                log,
                inbox,
                phase: Phase::Idle,
                outbox: Vec::new(),
                staged: Vec::new(),
                effects: Vec::new(),
            }),
            publish: Mutex::new(()),
            observers: Mutex::new(Observers::default()),
            failures: Mutex::new(FailureLog::default()),
        }
    }

    /// Starts a new, empty log `id` in `store`.
    pub fn create(store: &dyn Store, id: &str, meta: SessionMeta) -> Result<Session> {
        Session::create_seeded(store, id, meta, Vec::new(), None)
    }

    /// Starts a new log whose first events are `seed` (from another log or a fork):
    /// every seed event is validated (§1.3), seqs must run from 0, `session/end-seed`
    /// is appended unless the seed ends with one, and `seed_length` is recorded in the
    /// header when given (the inbox replays from there).
    pub fn create_seeded(
        store: &dyn Store,
        id: &str,
        meta: SessionMeta,
        seed: Vec<Event>,
        seed_length: Option<u64>,
    ) -> Result<Session> {
        let mut header = Header::new(id, now_ms(), meta)?;
        header.seed_length = seed_length;
        Session::create_with_header(store, header, seed)
    }

    fn create_with_header(
        store: &dyn Store,
        header: Header,
        mut seed: Vec<Event>,
    ) -> Result<Session> {
        let mut log = LogState::default();
        let mut inbox = Inbox::new();
        for event in &seed {
            log.advance(event)
                .map_err(|e| e.context(format_args!("seed event at seq {}", event.seq())))?;
            replay(&header, &mut inbox, event)?;
        }
        if let Some(open) = log.open_turn {
            return Err(invalid(format!(
                "seed ends inside turn {open}; seed only whole turns"
            )));
        }
        if !seed.is_empty() && seed.last().map(|e| e.ty()) != Some(END_SEED) {
            let end = Event::reserved(
                END_SEED,
                log.next_seq,
                log.last_time,
                "{}".to_owned(),
                Body::EndSeed,
                Envelope::default(),
            );
            log.advance(&end)?;
            seed.push(end);
        }
        if let Some(len) = header.seed_length
            && len > log.next_seq
        {
            return Err(invalid(format!(
                "seedLength {len} is past the end of the seed ({} events)",
                log.next_seq
            )));
        }
        let writer = store.create(&header, &seed)?;
        Ok(Session::assemble(
            header,
            OpenReport::default(),
            writer,
            log,
            inbox,
        ))
    }

    /// Creates a log holding `events` at their own seqs (an import, §7.6). The caller
    /// has checked every event as opening would (`log` advanced and `inbox` replayed
    /// over all of them); a last turn left open is closed as `interrupted` in the same
    /// write, as opening would close it (§7.4).
    pub(crate) fn create_imported(
        store: &dyn Store,
        header: Header,
        mut events: Vec<Event>,
        mut log: LogState,
        inbox: Inbox,
    ) -> Result<Session> {
        let mut report = OpenReport::default();
        if let Some(turn) = log.open_turn {
            let mut txn = Txn {
                inbox: &inbox,
                log: log.clone(),
                phase: Phase::Idle,
                events: Vec::new(),
                effects: Vec::new(),
                time: log.last_time,
                touched: [false; 2],
            };
            protocol::interrupt(&mut txn, turn)?;
            events.append(&mut txn.events);
            log = txn.log;
            report.repaired_turn = Some(turn);
        }
        let writer = store.create(&header, &events)?;
        Ok(Session::assemble(header, report, writer, log, inbox))
    }

    /// Opens a stored log for writing: replays the inbox once (§3.5), and closes a turn
    /// the previous writer left open as `interrupted` (§7.4).
    pub fn open(store: &dyn Store, id: &str) -> Result<Session> {
        Session::open_with(store, id, OpenOptions::default())
    }

    /// [`Session::open`] with options: `takeover` takes the session from a live but
    /// stuck owner (PostgreSQL store, §10.3); other stores refuse it.
    pub fn open_with(store: &dyn Store, id: &str, options: OpenOptions) -> Result<Session> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::default();
        let opened = store.open_with(id, &options, &mut |header, event| {
            rebuilt.visit(header, event)
        })?;
        let Rebuilt { log, inbox } = rebuilt;
        let mut report = OpenReport {
            torn_bytes: opened.torn_bytes,
            repaired_turn: None,
        };
        let session = Session::assemble(
            opened.header,
            OpenReport::default(),
            opened.writer,
            log,
            inbox,
        );
        {
            let mut guard = lock(&session.state);
            let st = &mut *guard;
            if let Some(turn) = st.log.open_turn {
                // Closing it reuses the last event's time: nothing happened since.
                let mut txn = Txn {
                    inbox: &st.inbox,
                    log: st.log.clone(),
                    phase: Phase::Idle,
                    events: Vec::new(),
                    effects: Vec::new(),
                    time: st.log.last_time,
                    touched: [false; 2],
                };
                protocol::interrupt(&mut txn, turn)?;
                let writer = st.writer.as_mut().expect("just opened");
                writer
                    .append(&txn.events)
                    .map_err(|e| e.context(format_args!("repairing interrupted turn {turn}")))?;
                st.log = txn.log;
                report.repaired_turn = Some(turn);
            }
        }
        Ok(Session { report, ..session })
    }

    /// Forks `parent` into a new log `child_id`: the child starts with a copy of the
    /// parent's events (up to, not including, an open turn), an empty inbox, and the
    /// parent's `cwd`; the parent is not changed.
    pub fn fork(
        store: &dyn Store,
        parent: &str,
        child_id: &str,
        meta: SessionMeta,
    ) -> Result<Session> {
        validate_session_id(child_id)?;
        let (parent_header, mut events) = store.inspect(parent)?;
        let mut log = LogState::default();
        let mut cut = events.len();
        for (i, event) in events.iter().enumerate() {
            if log.open_turn.is_none() {
                cut = i;
            }
            log.advance(event).map_err(|e| {
                e.with_kind(ErrorKind::Corrupt)
                    .context(format_args!("parent \"{parent}\""))
            })?;
        }
        if log.open_turn.is_none() {
            cut = events.len();
        }
        events.truncate(cut);
        let mut header = Header::new(
            child_id,
            now_ms(),
            SessionMeta {
                cwd: meta.cwd.or(parent_header.cwd.clone()),
                ..meta
            },
        )?;
        header.parent_session = Some(parent_header.id.clone());
        header.seed_length = Some(events.len() as u64);
        if events.last().map(|e| e.ty()) != Some(END_SEED) {
            let (seq, time) = events
                .last()
                .map_or((0, header.created_at), |e| (e.seq() + 1, e.time()));
            events.push(Event::reserved(
                END_SEED,
                seq,
                time,
                "{}".to_owned(),
                Body::EndSeed,
                Envelope::default(),
            ));
        }
        Session::create_with_header(store, header, events)
    }

    /// Checks a stored log exactly as [`Session::open`] does (header and format
    /// version, every complete record, §1.3, the inbox replay of §3.5), with the same
    /// errors at the same locations, but without locking, repairing or writing. What
    /// opening would repair (a torn tail, an interrupted turn) is reported, not refused.
    /// Whether another writer holds the session is not checked.
    pub fn verify(store: &dyn Store, id: &str) -> Result<VerifyReport> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::default();
        let verified = store.verify(id, &mut |header, event| rebuilt.visit(header, event))?;
        Ok(VerifyReport {
            header: verified.header,
            events: rebuilt.log.next_seq,
            torn_bytes: verified.torn_bytes,
            open_turn: rebuilt.log.open_turn,
            open_step: rebuilt.log.open_step,
            next_turn: rebuilt.inbox.len(Target::NextTurn),
            next_step: rebuilt.inbox.len(Target::NextStep),
        })
    }

    /// Reads a stored log as it is, without locking or repairing.
    pub fn inspect(store: &dyn Store, id: &str) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        store.inspect(id)
    }

    /// Removes stored log `id` for good (SPEC §6): `locked` while a writer holds it,
    /// `not_found` when absent; durable when it returns. A concurrent reader
    /// ([`Session::inspect`], a fork) that started first reads the whole log as it was.
    pub fn delete(store: &dyn Store, id: &str) -> Result<()> {
        validate_session_id(id)?;
        store.delete(id)
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

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        let st = lock(&self.state);
        if st.writer.is_none() {
            return Err(closed(self.id()));
        }
        Ok(st)
    }

    /// Seq of the last event, `None` for an empty log.
    pub fn last_seq(&self) -> Result<Option<u64>> {
        Ok(self.state()?.log.next_seq.checked_sub(1))
    }

    /// The events with `seq >= since`.
    pub fn events(&self, since: u64) -> Result<Vec<Event>> {
        let st = self.state()?;
        st.writer.as_ref().expect("open").read(since)
    }

    /// Reads the inbox under the session lock.
    pub fn with_inbox<R>(&self, f: impl FnOnce(&Inbox) -> R) -> Result<R> {
        Ok(f(&self.state()?.inbox))
    }

    /// The inbox operations of this session (§3.2).
    pub fn inbox(&self) -> InboxOps<'_> {
        InboxOps { session: self }
    }

    /// Registers an event observer (§1.5).
    pub fn on_event(
        &self,
        observer: impl Fn(&Event) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.observers)
            .events
            .push(Arc::new(observer) as Arc<EventObserver>);
    }

    /// Registers an inbox observer (§3.6).
    pub fn on_inbox(
        &self,
        observer: impl Fn(&InboxNotice) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) {
        lock(&self.observers)
            .inbox
            .push(Arc::new(observer) as Arc<InboxObserver>);
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
        if is_reserved(ty) {
            return Err(invalid(format!(
                "event type {ty} is written only by inboxlog; it cannot be appended"
            )));
        }
        let data = json::raw_value(data, "event data")?;
        self.transact(|txn| {
            let event = Event::new(ty, txn.log.next_seq, txn.time, data, envelope)?;
            txn.push(event.clone())?;
            Ok(event)
        })
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
            Some(writer) => {
                let flushed = writer.flush();
                st.writer = None;
                flushed
            }
        }
    }

    /// `open_turn` (§4).
    pub fn open_turn(&self) -> Result<u64> {
        self.open_turn_with(&Extra::none())
    }

    /// `open_turn` (§4) with host extras on its `turn/start` (§1.2).
    pub fn open_turn_with(&self, extra: &Extra) -> Result<u64> {
        self.transact(|txn| protocol::open_turn(txn, extra))
    }

    /// `propose_step` (§4).
    pub fn propose_step(&self) -> Result<Proposal> {
        self.transact(protocol::propose_step)
    }

    /// `decide` (§4).
    pub fn decide(&self, decision: Decision) -> Result<Decided> {
        self.decide_with(decision, &Extra::none())
    }

    /// `decide` (§4) with host extras on the event it writes first (`step/start`, or
    /// `turn/end` when the decision ends the turn).
    pub fn decide_with(&self, decision: Decision, extra: &Extra) -> Result<Decided> {
        self.transact(|txn| protocol::decide(txn, decision, extra))
    }

    /// `end_step` (§4): returns whether another step must be proposed.
    pub fn end_step(&self, outcome: StepOutcome) -> Result<bool> {
        self.end_step_with(outcome, &Extra::none())
    }

    /// `end_step` (§4) with host extras on its `step/end`.
    pub fn end_step_with(&self, outcome: StepOutcome, extra: &Extra) -> Result<bool> {
        self.transact(|txn| protocol::end_step(txn, outcome, extra))
    }

    /// `close_turn` (§4).
    pub fn close_turn(&self) -> Result<Decided> {
        self.close_turn_with(&Extra::none())
    }

    /// `close_turn` (§4) with host extras on its `turn/end`.
    pub fn close_turn_with(&self, extra: &Extra) -> Result<Decided> {
        self.transact(|txn| protocol::close_turn(txn, extra))
    }

    /// `cancel` (§4).
    pub fn cancel(&self, cause: CancelCause, keep_inbox: bool) -> Result<()> {
        self.cancel_with(cause, keep_inbox, &Extra::none())
    }

    /// `cancel` (§4) with host extras on the `turn/end` of the aborted turn.
    pub fn cancel_with(&self, cause: CancelCause, keep_inbox: bool, extra: &Extra) -> Result<()> {
        self.transact(|txn| protocol::cancel(txn, cause, keep_inbox, extra))
    }

    /// `fail` (§4).
    pub fn fail(&self, error: TurnError) -> Result<()> {
        self.fail_with(error, &Extra::none())
    }

    /// `fail` (§4) with host extras on the `turn/end` of the failed turn.
    pub fn fail_with(&self, error: TurnError, extra: &Extra) -> Result<()> {
        self.transact(|txn| protocol::fail(txn, error, extra))
    }

    /// Whether a turn is open.
    pub fn turn_open(&self) -> Result<Option<u64>> {
        Ok(self.state()?.log.open_turn)
    }

    /// Runs one public mutation: stage, write once, apply, publish.
    fn transact<R>(&self, stage: impl FnOnce(&mut Txn<'_>) -> Result<R>) -> Result<R> {
        if observer::publishing(self.serial) {
            return Err(Error::new(
                ErrorKind::Reentrant,
                format!(
                    "session \"{}\" cannot be changed from inside one of its observers",
                    self.id()
                ),
            ));
        }
        let (result, published) = {
            let mut guard = self.state()?;
            let st = &mut *guard;
            let mut txn = Txn {
                inbox: &st.inbox,
                log: st.log.clone(),
                phase: st.phase.clone(),
                events: std::mem::take(&mut st.staged),
                effects: std::mem::take(&mut st.effects),
                time: now_ms(),
                touched: [false; 2],
            };
            let result = stage(&mut txn)?;
            let Txn {
                log,
                phase,
                mut events,
                mut effects,
                ..
            } = txn;
            if !events.is_empty() {
                st.writer.as_mut().expect("open").append(&events)?;
            }
            // Durable: now the state may change.
            st.log = log;
            st.phase = phase;
            let notify = !lock(&self.observers).is_empty();
            let mut effect_of = effects.drain(..);
            for event in events.drain(..) {
                if let Some(record) = event.splice() {
                    let removed = st.inbox.apply(record);
                    let effect = effect_of.next().expect("one effect per splice");
                    if notify {
                        let inserted = record.inserted.clone();
                        st.outbox.push(Notice::Event(event));
                        match effect {
                            Effect::Discard => {
                                st.outbox.extend(
                                    removed
                                        .into_iter()
                                        .map(|m| Notice::Inbox(InboxNotice::Discarded(m))),
                                );
                                st.outbox.extend(
                                    inserted
                                        .into_iter()
                                        .map(|m| Notice::Inbox(InboxNotice::Inserted(m))),
                                );
                            }
                            Effect::Claim(turn) => {
                                st.outbox.extend(
                                    removed
                                        .into_iter()
                                        .map(|m| Notice::Inbox(InboxNotice::Claimed(m, turn))),
                                );
                            }
                        }
                    }
                } else if notify {
                    st.outbox.push(Notice::Event(event));
                }
            }
            drop(effect_of);
            (st.staged, st.effects) = (events, effects);
            (result, notify)
        };
        // Only a call that queued notices must see them published before it returns.
        if published {
            self.publish();
        }
        Ok(result)
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

/// Re-applies one stored event to the inbox during replay-once (§3.5).
pub(crate) fn replay(header: &Header, inbox: &mut Inbox, event: &Event) -> Result<()> {
    if let Some(record) = event.splice()
        && event.seq() >= header.replay_from()
    {
        inbox.apply_checked(record).map_err(|e| {
            Error::new(
                ErrorKind::Corrupt,
                format!(
                    "invalid persisted inbox splice at session seq {}: {}",
                    event.seq(),
                    e.message()
                ),
            )
            .with_seq(event.seq())
        })?;
    }
    Ok(())
}

/// The inbox operations of one session (§3.2), each one durable transaction.
#[derive(Clone, Copy)]
pub struct InboxOps<'a> {
    session: &'a Session,
}

impl InboxOps<'_> {
    /// `splice(target, start, deleteCount, inserted)` with JavaScript coordinate
    /// arithmetic; returns the removed messages (`discarded` notifications).
    pub fn splice(
        &self,
        target: Target,
        start: f64,
        delete_count: f64,
        inserted: Vec<Message>,
    ) -> Result<Vec<Message>> {
        self.session.transact(|txn| {
            match txn
                .inbox()
                .plan(target, start, delete_count, inserted, true)?
            {
                None => Ok(Vec::new()),
                Some(record) => txn.splice(record, Effect::Discard),
            }
        })
    }

    /// Adds `m` at the end of `target`.
    pub fn append(&self, target: Target, m: Message) -> Result<()> {
        self.session.transact(|txn| {
            let end = txn.inbox().len(target) as f64;
            let record = txn
                .inbox()
                .plan(target, end, 0.0, vec![m], true)?
                .expect("an insertion");
            txn.splice(record, Effect::Discard).map(drop)
        })
    }

    /// Adds `m` at the front of `target`.
    pub fn prepend(&self, target: Target, m: Message) -> Result<()> {
        self.splice(target, 0.0, 0.0, vec![m]).map(drop)
    }

    /// Replaces the pending message `id` with `m` (which may have a new id); `false`
    /// when `id` is not pending.
    pub fn replace(&self, id: &str, m: Message) -> Result<bool> {
        self.by_id(id, vec![m])
    }

    /// Removes the pending message `id`; `false` when it is not pending.
    pub fn remove(&self, id: &str) -> Result<bool> {
        self.by_id(id, Vec::new())
    }

    fn by_id(&self, id: &str, inserted: Vec<Message>) -> Result<bool> {
        self.session.transact(|txn| {
            let Some((target, pos)) = txn.inbox().find(id) else {
                return Ok(false);
            };
            let record = txn
                .inbox()
                .plan(target, pos as f64, 1.0, inserted, true)?
                .expect("removes one");
            txn.splice(record, Effect::Discard).map(|_| true)
        })
    }

    /// Cancels everything pending: `next-step` first, then `next-turn`.
    pub fn clear(&self) -> Result<()> {
        self.session.transact(|txn| txn.clear())
    }

    /// A copy of `next-turn`.
    pub fn next_turn(&self) -> Result<Vec<Message>> {
        self.session.with_inbox(|i| i.list(Target::NextTurn))
    }

    /// A copy of `next-step`.
    pub fn next_step(&self) -> Result<Vec<Message>> {
        self.session.with_inbox(|i| i.list(Target::NextStep))
    }

    /// Whether either list holds a message.
    pub fn has_pending(&self) -> Result<bool> {
        self.session.with_inbox(|i| i.has_pending())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

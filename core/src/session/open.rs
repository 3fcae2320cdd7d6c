//! Creating, opening, forking, checking and deleting stored logs: the ways a
//! [`Session`] comes to be, and the read-only looks at a log that need none.

use crate::checkpoint::{self, Checkpoint, Replay};
use crate::conversation::{self, Conversation, SurfaceView};
use crate::error::{ErrorKind, Result, invalid};
use crate::event::{Body, END_SEED, Envelope, Event};
use crate::fleet::post::PostIds;
use crate::header::{Header, SessionMeta};
use crate::id::validate_session_id;
use crate::inbox::Inbox;
use crate::log::LogState;
use crate::splice::Target;
use crate::store::{LogWriter, OpenOptions, Store};
use crate::txn::{INTERRUPTED, Ledger};

use super::{OpenReport, Peek, Session, VerifyReport, now_ms};
use crate::projection::Baseline;

/// What reading a stored log back rebuilds: the invariants (ARCHITECTURE.md#log-invariants) and the inbox
/// (ARCHITECTURE.md#replay). [`Session::open`] and [`Session::verify`] feed it through the same store
/// reader, so they refuse the same logs at the same places.
///
/// Opening starts from the log's checkpoint when the store keeps one
/// (ARCHITECTURE.md#checkpoints-and-reading-without-owning); verifying replays from seq
/// 0 and compares the checkpoint with its state at the checkpoint's seq.
#[derive(Default)]
struct Rebuilt {
    log: LogState,
    inbox: Inbox,
    /// The posts the log holds (ARCHITECTURE.md#posting).
    posts: PostIds,
    /// The surface and the pending tool calls (ARCHITECTURE.md#the-conversation).
    conversation: Conversation,
    /// What a verifying replay found of the conversation: events whose surface ops
    /// break the rules (kept off the surface) and events of an older shape.
    findings: Findings,
    /// Whether this replay starts from a checkpoint (opening) or compares with it
    /// (verifying).
    resumes: bool,
    /// The checkpoint a verifying replay has not reached yet.
    pending: Option<Checkpoint>,
}

impl Rebuilt {
    /// The replay of an open: from the checkpoint, when there is one.
    fn resuming() -> Rebuilt {
        Rebuilt {
            resumes: true,
            ..Rebuilt::default()
        }
    }

    /// Compares the pending checkpoint with the state now, once the replay reached its
    /// seq (`at_end`: no event follows, so a checkpoint past the end is refused too).
    fn compare(&mut self, next: Option<u64>) -> Result<()> {
        let Some(cp) = &self.pending else {
            return Ok(());
        };
        let reached = next.is_none_or(|seq| seq >= cp.seq());
        if !reached {
            return Ok(());
        }
        let cp = self.pending.take().expect("pending");
        if next.is_none() && self.log.next_seq < cp.seq() {
            return Err(checkpoint::corrupt(
                cp.name(),
                format_args!(
                    "it covers seq {} but the log holds {} events",
                    cp.seq(),
                    self.log.next_seq
                ),
            ));
        }
        cp.check_equals(&Checkpoint::of(
            &self.log,
            &self.inbox,
            self.posts.set(),
            &self.conversation,
        ))
    }
}

/// Repairs what the previous writer left (ARCHITECTURE.md#opening-a-stored-log), in
/// one append, each event with the last event's `time` (nothing happened since): ends
/// a compaction left running (`"error":"interrupted"`, ARCHITECTURE.md#compaction),
/// then closes a turn left open unless it is parked on approvals
/// (ARCHITECTURE.md#approvals).
fn repair(ledger: &mut Ledger, writer: &mut dyn LogWriter, report: &mut OpenReport) -> Result<()> {
    let turn = ledger.log.open_turn.filter(|_| !ledger.take_up_parked());
    let compaction = ledger
        .conversation
        .compaction
        .as_ref()
        .map(|r| r.id.clone());
    if turn.is_none() && compaction.is_none() {
        return Ok(());
    }
    let time = ledger.log.last_time;
    ledger
        .transact(writer, time, None, |txn| {
            txn.end_compaction(INTERRUPTED)?;
            match turn {
                Some(turn) => txn.interrupt(turn),
                None => Ok(()),
            }
        })
        .map_err(|e| match turn {
            Some(turn) => e.context(format_args!("repairing interrupted turn {turn}")),
            None => e.context("ending an interrupted compaction"),
        })?;
    report.repaired_turn = turn;
    report.repaired_compaction = compaction;
    Ok(())
}

/// What a verifying replay found of the conversation (see [`VerifyReport`]), the first
/// [`Findings::KEPT`] of each kind.
#[derive(Default)]
struct Findings {
    off_surface: Vec<(u64, String)>,
    older_shapes: Vec<(u64, String)>,
}

impl Findings {
    const KEPT: usize = 100;

    fn keep(list: &mut Vec<(u64, String)>, seq: u64, why: String) {
        if list.len() < Findings::KEPT {
            list.push((seq, why));
        }
    }
}

impl Replay for Rebuilt {
    fn resumes(&self) -> bool {
        self.resumes
    }

    fn checkpoint(&mut self, checkpoint: Checkpoint) -> Result<()> {
        if self.resumes {
            let Checkpoint {
                log,
                inbox,
                posts,
                conversation,
                ..
            } = checkpoint;
            (self.log, self.inbox, self.conversation) = (log, inbox, conversation);
            self.posts = PostIds::from_set(posts);
        } else {
            self.pending = Some(checkpoint);
        }
        Ok(())
    }

    /// Checks and applies one stored event.
    fn visit(&mut self, header: &Header, event: &Event) -> Result<()> {
        if self.pending.is_some() {
            self.compare(Some(event.seq()))?;
        }
        // The store checked seq contiguity itself (a PostgreSQL store may skip host
        // events it need not read); the turn/step rules are checked here.
        self.log.advance_after(event)?;
        self.posts.note(event);
        self.inbox.replay(event, header.replay_from())?;
        let broken = self.conversation.replay(event);
        if !self.resumes {
            let seq = event.seq();
            if let Some(why) = broken {
                Findings::keep(&mut self.findings.off_surface, seq, why);
            }
            if let Err(e) = conversation::check_shape(event.ty(), event.data()) {
                Findings::keep(&mut self.findings.older_shapes, seq, e.message().to_owned());
            }
        }
        Ok(())
    }
}

/// What the events a caller wrote to a new log leave (see [`Session::create_filled`]):
/// the invariants advanced, the inbox replayed and the posts noted over all of them.
pub(crate) struct Filled {
    pub log: LogState,
    pub inbox: Inbox,
    pub posts: PostIds,
    pub conversation: Conversation,
}

impl Session {
    /// Starts a new, empty log `id` in `store`.
    pub fn create(store: &dyn Store, id: &str, meta: SessionMeta) -> Result<Session> {
        Session::create_seeded(store, id, meta, Vec::new(), None)
    }

    /// Starts a new log whose first events are `seed` (from another log or a fork):
    /// every seed event is validated (ARCHITECTURE.md#log-invariants), seqs must run from 0, `session/end-seed`
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
        let mut posts = PostIds::default();
        let mut conversation = Conversation::default();
        for event in &seed {
            log.advance(event)
                .map_err(|e| e.context(format_args!("seed event at seq {}", event.seq())))?;
            posts.note(event);
            inbox.replay(event, header.replay_from())?;
            conversation.replay(event);
        }
        if let Some(open) = log.open_turn {
            return Err(invalid(format!(
                "seed ends inside turn {open}; seed only whole turns"
            )));
        }
        if let Some(running) = &conversation.compaction {
            return Err(invalid(format!(
                "seed ends inside compaction {} (started at seq {}); seed only ended compactions",
                crate::json::quote(&running.id),
                running.seq
            )));
        }
        if !seed.is_empty() && seed.last().map(Event::ty) != Some(END_SEED) {
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
        let id = header.id.clone();
        Session::assemble(
            header,
            OpenReport::default(),
            writer,
            Ledger::new(log, inbox, conversation),
        )
        .with_mailbox(store, &id, posts)
    }

    /// Creates a log for `header` and has `fill` append its events (an import,
    /// ARCHITECTURE.md#import) through the new log's writer, a batch at a time; `fill`
    /// returns the state they leave (the log advanced, the inbox replayed, the posts
    /// noted over all of them). A last turn left open is then closed as `interrupted`,
    /// as opening would close it (ARCHITECTURE.md#opening-a-stored-log). When `fill` or
    /// that repair fails, the new log is deleted again.
    pub(crate) fn create_filled(
        store: &dyn Store,
        header: Header,
        fill: &mut dyn FnMut(&mut dyn LogWriter) -> Result<Filled>,
    ) -> Result<Session> {
        let id = header.id.clone();
        let mut writer = store.create(&header, &[])?;
        let mut report = OpenReport::default();
        let filled = fill(writer.as_mut()).and_then(|filled| {
            let Filled {
                log,
                inbox,
                posts,
                conversation,
            } = filled;
            let mut ledger = Ledger::new(log, inbox, conversation);
            repair(&mut ledger, writer.as_mut(), &mut report)?;
            Ok((ledger, posts))
        });
        let (ledger, posts) = match filled {
            Ok(filled) => filled,
            Err(e) => {
                drop(writer);
                return Err(match store.delete(&id) {
                    Ok(()) => e,
                    Err(gone) => e.context(format_args!(
                        "the partly written session {} could not be removed ({gone})",
                        crate::json::quote(&id)
                    )),
                });
            }
        };
        Session::assemble(header, report, writer, ledger).with_mailbox(store, &id, posts)
    }

    /// Opens a stored log for writing: replays the inbox once (ARCHITECTURE.md#replay), closes a turn
    /// the previous writer left open as `interrupted` (ARCHITECTURE.md#opening-a-stored-log), then takes posted
    /// messages in (ARCHITECTURE.md#posting).
    pub fn open(store: &dyn Store, id: &str) -> Result<Session> {
        Session::open_with(store, id, &OpenOptions::default())
    }

    /// [`Session::open`] with options: `takeover` takes the session from a live but
    /// stuck owner (PostgreSQL store, ARCHITECTURE.md#postgresql); other stores refuse it.
    pub fn open_with(store: &dyn Store, id: &str, options: &OpenOptions) -> Result<Session> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::resuming();
        let opened = store.open(id, options, &mut rebuilt)?;
        let Rebuilt {
            log,
            inbox,
            posts,
            conversation,
            ..
        } = rebuilt;
        let mut report = OpenReport {
            torn_bytes: opened.torn_bytes,
            ..OpenReport::default()
        };
        let mut ledger = Ledger::new(log, inbox, conversation);
        let mut writer = opened.writer;
        repair(&mut ledger, writer.as_mut(), &mut report)?;
        let session = Session::assemble(opened.header, report, writer, ledger)
            .with_mailbox(store, id, posts)?;
        session.receive()?;
        Ok(session)
    }

    /// Forks `parent` into a new log `child_id`: the child starts with a copy of the
    /// parent's events (up to, not including, an open turn or a compaction still
    /// running), an empty inbox, and the
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
        // Where a compaction still running in the parent started: it is not copied
        // either (ARCHITECTURE.md#compaction).
        let mut compacting: Option<usize> = None;
        for (i, event) in events.iter().enumerate() {
            if log.open_turn.is_none() {
                cut = i;
            }
            match event.ty() {
                conversation::COMPACTION_START => compacting = Some(i),
                conversation::COMPACTION_END => compacting = None,
                _ => {}
            }
            log.advance(event).map_err(|e| {
                e.with_kind(ErrorKind::Corrupt)
                    .context(format_args!("parent \"{parent}\""))
            })?;
        }
        if log.open_turn.is_none() {
            cut = events.len();
        }
        if let Some(start) = compacting {
            cut = cut.min(start);
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
        if events.last().map(Event::ty) != Some(END_SEED) {
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
    /// version, every complete record, ARCHITECTURE.md#log-invariants, the inbox replay of ARCHITECTURE.md#replay), with the same
    /// errors at the same locations, but without locking, repairing or writing. What
    /// opening would repair (a torn tail, an interrupted turn) is reported, not refused.
    /// Whether another writer holds the session is not checked.
    pub fn verify(store: &dyn Store, id: &str) -> Result<VerifyReport> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::default();
        let verified = store.verify(id, &mut rebuilt)?;
        rebuilt.compare(None).map_err(|e| e.with_session(id))?;
        Ok(VerifyReport {
            header: verified.header,
            events: rebuilt.log.next_seq,
            torn_bytes: verified.torn_bytes,
            open_turn: rebuilt.log.open_turn,
            open_step: rebuilt.log.open_step,
            parked: rebuilt
                .conversation
                .approvals
                .parked()
                .is_some_and(|p| Some(p.turn) == rebuilt.log.open_turn),
            next_turn: rebuilt.inbox.len(Target::NextTurn),
            next_step: rebuilt.inbox.len(Target::NextStep),
            pending_tool_calls: rebuilt.conversation.calls.pending().len(),
            compaction: rebuilt
                .conversation
                .compaction
                .as_ref()
                .map(|r| r.id.clone()),
            off_surface: rebuilt.findings.off_surface,
            older_shapes: rebuilt.findings.older_shapes,
        })
    }

    /// What stored log `id` holds now, read without locking, repairing or writing, as
    /// [`Session::open`] reads it: from its checkpoint when the store keeps one
    /// (ARCHITECTURE.md#checkpoints-and-reading-without-owning), so that it costs what
    /// follows the checkpoint, with the same checks on every event read. A turn left
    /// open is reported open; a torn tail is measured.
    pub fn peek(store: &dyn Store, id: &str) -> Result<Peek> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::resuming();
        let verified = store.peek(id, &mut rebuilt)?;
        let Rebuilt {
            log,
            inbox,
            conversation,
            ..
        } = rebuilt;
        let approvals = &conversation.approvals;
        Ok(Peek {
            header: verified.header,
            events: log.next_seq,
            torn_bytes: verified.torn_bytes,
            open_turn: log.open_turn,
            open_step: log.open_step,
            baseline: Baseline {
                seq: log.next_seq.checked_sub(1),
                next_turn: inbox.list(Target::NextTurn),
                next_step: inbox.list(Target::NextStep),
            },
            approvals: approvals.pending().iter().map(|a| a.data.clone()).collect(),
            parked: super::ParkedTurn::of(approvals),
        })
    }

    /// The model-visible surface of stored log `id` and its messages
    /// (ARCHITECTURE.md#the-surface), read as [`Session::peek`] reads: without owning
    /// the session, from its checkpoint, so that it costs what the surface holds and
    /// what follows the checkpoint, not the history the surface no longer holds.
    pub fn read_surface(store: &dyn Store, id: &str) -> Result<SurfaceView> {
        validate_session_id(id)?;
        let mut rebuilt = Rebuilt::resuming();
        store.peek(id, &mut rebuilt)?;
        Ok(SurfaceView::of(&rebuilt.conversation.surface))
    }

    /// Reads a stored log as it is, without locking or repairing.
    pub fn inspect(store: &dyn Store, id: &str) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        store.inspect(id)
    }

    /// The events of stored log `id` with `seq >= since` (none when `since` is past its
    /// end), with its header: the same events as [`Session::inspect`] from `since` on,
    /// read without owning the session (no lock, no repair, no write: a writer may be
    /// appending meanwhile) and at the cost of what it returns
    /// (ARCHITECTURE.md#checkpoints-and-reading-without-owning). `not_found` when there
    /// is no log `id`.
    pub fn read(store: &dyn Store, id: &str, since: u64) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        store.read(id, since)
    }

    /// The last `limit` events of stored log `id`, of `types` when given, oldest first,
    /// with its header: the last `limit` such events of [`Session::inspect`], read as
    /// [`Session::read`] reads (without owning the session; the cost of what it returns
    /// and, with `types`, of the events of other types in between). `not_found` when
    /// there is no log `id`.
    pub fn tail(
        store: &dyn Store,
        id: &str,
        limit: usize,
        types: Option<&[&str]>,
    ) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        store.tail(id, limit, types)
    }

    /// Removes stored log `id` for good (ARCHITECTURE.md#seeds-and-forks): `locked` while a writer holds it,
    /// `not_found` when absent; durable when it returns. A concurrent reader
    /// ([`Session::inspect`], a fork) that started first reads the whole log as it was.
    pub fn delete(store: &dyn Store, id: &str) -> Result<()> {
        validate_session_id(id)?;
        store.delete(id)
    }
}

//! Where logs live: the backend contract (ARCHITECTURE.md#stores). The session talks
//! to a [`Store`] and its [`LogWriter`]s only, posting to a [`Mailbox`] and following
//! to a [`Feed`]; every backend (memory, a JSONL directory, PostgreSQL) fills in these
//! four traits in a module of its own and is reached from [`open`], so a new backend
//! is one folder plus one arm there. Nothing here knows a backend's options but
//! [`open`], and no backend imports anything above this contract.

mod backoff;
mod memory;

pub(crate) use backoff::Backoff;
pub use memory::MemoryStore;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use crate::checkpoint::{Binding, Checkpoint, Events, Replay, events};
use crate::conversation::ApprovalOutcome;
use crate::edit::{Edit, Move};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::header::Header;
use crate::json;
use crate::message::Message;
use crate::splice::Target;

/// A place that holds session logs.
pub trait Store: Send + Sync {
    /// Creates a new log holding `header` and the `seed` events, and returns its
    /// exclusive writer. Fails with `already_exists` when the id is taken; never
    /// overwrites.
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>>;

    /// Opens a log for writing: takes the exclusive writer lock (`locked` when another
    /// writer holds it), drops a torn tail, and passes the stored events to `replay` in
    /// seq order together with the log's header: every event, or (a store that can read
    /// by type) every [`REPLAYED`](crate::REPLAYED) event and the last one, after the
    /// store checked by itself that the seqs it skips are contiguous. When `replay`
    /// [resumes](Replay::resumes) and the store keeps a checkpoint of the log
    /// (ARCHITECTURE.md#checkpoints-and-reading-without-owning), the store checks that
    /// it is bound to the log, passes it first and then only the events after it; a
    /// checkpoint that fails its checksum or its binding is `corrupt`, named. An error
    /// from `replay` aborts the open and is reported as corruption at that event's
    /// location; a refused open changes nothing stored. A store whose writers all live in one
    /// machine's reach refuses `options.takeover` ([`OpenOptions::refuse_takeover`]).
    fn open(&self, id: &str, options: &OpenOptions, replay: &mut dyn Replay) -> Result<Opened>;

    /// Reads a log exactly as [`Store::open`] does (the same checks, the same `replay`,
    /// the same errors at the same locations) but without locking, repairing or
    /// writing: a torn tail is measured, not dropped. Always from seq 0: a checkpoint
    /// the store keeps is checked against the log's bytes and passed to
    /// [`Replay::checkpoint`] first, for the replay to compare with its state at the
    /// checkpoint's seq.
    fn verify(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified>;

    /// Reads a log as [`Store::open`] reads it (from its checkpoint, when `replay`
    /// [resumes](Replay::resumes) and the store keeps one; the same checks, the same
    /// errors) but without locking, repairing or writing: a torn tail is measured, not
    /// dropped, and a turn left open stays open
    /// (ARCHITECTURE.md#checkpoints-and-reading-without-owning). What it reads costs
    /// what follows the checkpoint. The default reads every event from seq 0, through
    /// [`Store::verify`], and never hands `replay` a checkpoint.
    fn peek(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        self.verify(
            id,
            &mut crate::checkpoint::events(|h, e| replay.visit(h, e)),
        )
    }

    /// Reads a log as stored, without locking or repairing (complete records only).
    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)>;

    /// The events of log `id` with `seq >= since`, as stored, with its header: exactly
    /// the events of [`Store::inspect`] from `since` on (none when `since` is past the
    /// end), read without locking, repairing or writing
    /// (ARCHITECTURE.md#checkpoints-and-reading-without-owning). A store reads only
    /// what it returns: JSONL from the end of the last complete line backward,
    /// PostgreSQL by one keyed query. `not_found` when there is no log `id`. The default
    /// goes through [`Store::inspect`].
    fn read(&self, id: &str, since: u64) -> Result<(Header, Vec<Event>)> {
        let (header, mut events) = self.inspect(id)?;
        events.retain(|e| e.seq() >= since);
        Ok((header, events))
    }

    /// The last `limit` events of log `id` (of `types`, when given), oldest first, with
    /// its header: exactly the last `limit` such events of [`Store::inspect`], read as
    /// [`Store::read`] reads (without locking, repairing or writing; only what it
    /// returns, and, with `types`, the events of other types in between). `not_found`
    /// when there is no log `id`. The default goes through [`Store::inspect`].
    fn tail(&self, id: &str, limit: usize, types: Option<&[&str]>) -> Result<(Header, Vec<Event>)> {
        let (header, events) = self.inspect(id)?;
        Ok((header, last_of(events, limit, types)))
    }

    /// The headers of every stored log, sorted by id.
    fn list(&self) -> Result<Vec<Header>>;

    /// Removes log `id` for good (ARCHITECTURE.md#seeds-and-forks), durably before it returns. Refused with
    /// `locked` while a writer holds the log (the store takes the writer lock itself
    /// first, so a writer opening at the same time either wins, or finds no log) and
    /// with `not_found` when there is none. A reader that already started reading the
    /// log (`inspect`, `fork`) sees it whole as it was; one that starts after sees none.
    fn delete(&self, id: &str) -> Result<()>;

    /// Delivers `post` to the mailbox of session `id` from anywhere
    /// (ARCHITECTURE.md#posting), whether the session is open or not, and returns the
    /// post's id once the post is acknowledged (durable in the store). Its owner takes
    /// it in as exactly one event carrying `"post":"<post id>"` (an
    /// `agent/inbox/spliced`, or an `agent/inbox/rejected`), in delivery order per
    /// poster, messages and edits alike. `not_found` when the session does not exist;
    /// `too_large` when the splice taking it in would not fit the log's record limit.
    fn deliver(&self, id: &str, post: &Post) -> Result<String>;

    /// Posts `message` to the `target` list of session `id` ([`Store::deliver`]).
    fn post(&self, id: &str, target: Target, message: &Message) -> Result<String> {
        self.deliver(
            id,
            &Post::Message {
                target,
                message: message.clone(),
            },
        )
    }

    /// Posts the removal of the pending message `message_id` of session `id`
    /// ([`Store::deliver`], SPEC §11.3): its owner applies it as the local `remove`, or
    /// records it rejected (`not_found`) when the message is no longer pending.
    fn remove_pending(&self, id: &str, message_id: &str) -> Result<String> {
        self.deliver(id, &Post::Edit(Edit::remove(message_id)?))
    }

    /// Posts the replacement of the pending message `message_id` of session `id` by
    /// `message` ([`Store::deliver`], SPEC §11.3): its owner applies it as the local
    /// `replace`, or records it rejected (`not_found`, or `duplicate_message` when the
    /// new id is pending already).
    fn replace_pending(&self, id: &str, message_id: &str, message: &Message) -> Result<String> {
        self.deliver(id, &Post::Edit(Edit::replace(message_id, message.clone())?))
    }

    /// Posts decision `outcome` on approval `approval_id` of session `id`
    /// ([`Store::deliver`], ARCHITECTURE.md#approvals): its owner writes it as
    /// `approval/decided`, or records it rejected (`not_found`, `already_decided`:
    /// the first decision taken in wins).
    fn decide(&self, id: &str, approval_id: &str, outcome: ApprovalOutcome) -> Result<String> {
        if approval_id.is_empty() {
            return Err(invalid("the approval id must not be empty"));
        }
        self.deliver(
            id,
            &Post::Decision {
                id: approval_id.to_owned(),
                outcome,
            },
        )
    }

    /// Posts the move of the pending message `message_id` of session `id` to `target`
    /// (at `index`, counted without it, or at the end) ([`Store::deliver`],
    /// ARCHITECTURE.md#moving-pending-input): its owner applies it as one removal
    /// (`"outcome":"moved"`) and one insertion in one commit, or records it rejected
    /// (`not_found` when the message is no longer pending, `invalid_splice` for an
    /// index past the end).
    fn move_pending(
        &self,
        id: &str,
        message_id: &str,
        target: Target,
        index: Option<u64>,
    ) -> Result<String> {
        self.deliver(id, &Post::Move(Move::new(message_id, target, index)?))
    }

    /// The mailbox of session `id`, for the session's writer to take posts in
    /// (ARCHITECTURE.md#posting).
    fn mailbox(&self, id: &str) -> Result<Box<dyn Mailbox>>;

    /// A feed of session `id` (ARCHITECTURE.md#following): its events as they are
    /// committed, read without owning the session or slowing its writer; a
    /// `Follower` wraps it. `not_found` when the session does not exist, and from the
    /// first poll after the session was deleted, even if events it had not read yet
    /// were stored: a deleted log is forgotten for every reader at once.
    fn follow(&self, id: &str) -> Result<Box<dyn Feed>>;

    /// Rewrites log `id` in the newest on-disk format, atomically: a JSONL log of format
    /// version 1 becomes version 2 (core/FORMAT.md#upgrading-a-version-1-log); a log
    /// already in it is checked and left as it is. The default, for the stores without
    /// format versions (memory, PostgreSQL), only checks that the log reads.
    fn upgrade(&self, id: &str) -> Result<Upgraded> {
        let (_, events) = self.inspect(id)?;
        Ok(Upgraded {
            from: crate::header::FORMAT_VERSION,
            events: events.len() as u64,
            torn_bytes: 0,
        })
    }
}

/// A decision as a mailbox recorded it: `{"id","outcome"}`.
fn parse_decision(body: &str) -> Result<Post> {
    #[derive(serde::Deserialize)]
    struct Wire {
        id: String,
        outcome: String,
    }
    let wire: Wire = json::from_str(body).map_err(|e| invalid(format!("not a decision: {e}")))?;
    Ok(Post::Decision {
        id: wire.id,
        outcome: ApprovalOutcome::parse(&wire.outcome)?,
    })
}

/// The last `limit` of `events` (of `types`, when given), in their order.
pub(crate) fn last_of(events: Vec<Event>, limit: usize, types: Option<&[&str]>) -> Vec<Event> {
    let mut found: Vec<Event> = match types {
        Some(types) => events
            .into_iter()
            .filter(|e| types.contains(&e.ty()))
            .collect(),
        None => events,
    };
    let from = found.len().saturating_sub(limit);
    found.drain(..from);
    found
}

/// What [`Store::upgrade`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upgraded {
    /// The format version the log had: the newest when there was nothing to do.
    pub from: u64,
    /// How many events the log holds.
    pub events: u64,
    /// The bytes of a torn tail left out of the rewritten log.
    pub torn_bytes: u64,
}

/// What a poster delivers to a session's mailbox (ARCHITECTURE.md#posting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Post {
    /// A message for one of the lists.
    Message {
        /// The list it goes to.
        target: Target,
        /// The message.
        message: Message,
    },
    /// An edit of the pending input.
    Edit(Edit),
    /// A decision on an approval (ARCHITECTURE.md#approvals).
    Decision {
        /// The approval's id.
        id: String,
        /// How it was decided.
        outcome: ApprovalOutcome,
    },
    /// A move of a pending message (ARCHITECTURE.md#moving-pending-input).
    Move(Move),
}

impl Post {
    /// What a mailbox records as the post's kind: the target's wire name, or
    /// `"edit"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Post::Message { target, .. } => target.as_str(),
            Post::Edit(_) => EDIT_KIND,
            Post::Decision { .. } => DECISION_KIND,
            Post::Move(_) => MOVE_KIND,
        }
    }

    /// What a mailbox records as the post's body: the message, or the edit
    /// (`Edit::to_json`), as compact JSON.
    pub fn body(&self) -> Cow<'_, str> {
        match self {
            Post::Message { message, .. } => Cow::Borrowed(message.json()),
            Post::Edit(edit) => Cow::Owned(edit.to_json()),
            Post::Decision { id, outcome } => {
                Cow::Owned(crate::conversation::decided_data(id, *outcome))
            }
            Post::Move(m) => Cow::Owned(m.to_json()),
        }
    }

    /// The post waiting in a mailbox under id `post`.
    pub fn posted(self, post: String) -> Posted {
        match self {
            Post::Message { target, message } => Posted::Message {
                post,
                target,
                message,
            },
            Post::Edit(edit) => Posted::Edit { post, edit },
            Post::Decision { id, outcome } => Posted::Decision { post, id, outcome },
            Post::Move(m) => Posted::Move { post, m },
        }
    }
}

/// The kind a mailbox records for an edit, beside the targets' names.
pub const EDIT_KIND: &str = "edit";

/// The kind a mailbox records for a decision on an approval (body `{"id","outcome"}`).
pub const DECISION_KIND: &str = "decision";

/// The kind a mailbox records for a move of a pending message (body `{"id","target",
/// "index"?}`).
pub const MOVE_KIND: &str = "move";

/// One post waiting in a session's mailbox (ARCHITECTURE.md#posting).
#[derive(Debug)]
pub enum Posted {
    /// A readable post: a message for one of the lists.
    Message {
        /// The post's id, unique in the store, carried into the log as `"post"`.
        post: String,
        /// The list it goes to.
        target: Target,
        /// The posted message.
        message: Message,
    },
    /// A readable edit of the pending input (SPEC §11.3).
    Edit {
        /// The post's id, unique in the store, carried into the log as `"post"`.
        post: String,
        /// The edit.
        edit: Edit,
    },
    /// A readable decision on an approval (ARCHITECTURE.md#approvals).
    Decision {
        /// The post's id, unique in the store, carried into the log as `"post"`.
        post: String,
        /// The approval's id.
        id: String,
        /// How it was decided.
        outcome: ApprovalOutcome,
    },
    /// A readable move of a pending message (ARCHITECTURE.md#moving-pending-input).
    Move {
        /// The post's id, unique in the store, carried into the log as `"post"`.
        post: String,
        /// The move.
        m: Move,
    },
    /// A post that cannot be taken in as it is (not a valid message, an unknown
    /// target): it is recorded as `agent/inbox/rejected` with `error` as the reason.
    Invalid {
        /// The post's id.
        post: String,
        /// What was posted, as JSON text (a JSON string holding the bytes when they
        /// were not JSON at all).
        message: String,
        /// Why it cannot be taken in.
        error: Error,
    },
}

impl Posted {
    /// The post's id.
    pub fn post(&self) -> &str {
        match self {
            Posted::Message { post, .. }
            | Posted::Edit { post, .. }
            | Posted::Decision { post, .. }
            | Posted::Move { post, .. }
            | Posted::Invalid { post, .. } => post,
        }
    }

    /// Reads back post `post` as a mailbox recorded it ([`Post::kind`],
    /// [`Post::body`]); [`Posted::Invalid`] when it does not parse.
    pub fn parse(post: String, kind: &str, body: &str) -> Posted {
        let parsed = if kind == EDIT_KIND {
            Edit::from_json(body).map(Post::Edit)
        } else if kind == DECISION_KIND {
            parse_decision(body)
        } else if kind == MOVE_KIND {
            Move::from_json(body).map(Post::Move)
        } else {
            Target::parse(kind).and_then(|target| {
                Message::from_json(body).map(|message| Post::Message { target, message })
            })
        };
        match parsed {
            Ok(p) => p.posted(post),
            Err(error) => Posted::Invalid {
                post,
                message: body.to_owned(),
                error,
            },
        }
    }
}

/// The posts waiting for one session, as its writer sees them (ARCHITECTURE.md#posting).
///
/// Exactly-once delivery is shared between the mailbox and the session: the session
/// knows the id of every post its log holds (read back when it opens), skips a pending
/// post it already holds, writes the others, makes them durable, and only then calls
/// [`Mailbox::settle`]. A crash between the write and the settle leaves a post that is
/// pending and in the log; the next take-in settles it without writing it again.
pub trait Mailbox: Send {
    /// The posts waiting, in delivery order (each poster's posts in post order). May
    /// include posts already in the log (not settled before a crash).
    fn pending(&mut self) -> Result<Vec<Posted>>;

    /// Removes `posts` (ids from [`Mailbox::pending`]), which are durable in the log.
    fn settle(&mut self, posts: &[String]) -> Result<()>;

    /// Whether posts may be waiting, asked at every step boundary
    /// (ARCHITECTURE.md#posting): `false` only when the store knows that [`Mailbox::pending`] would find none, so
    /// the answer must cost far less than that read when nothing was posted (memory: a
    /// look under a lock; JSONL: one listing of the spool; PostgreSQL: the wake-ups the
    /// handle heard, no query). The default reads the mailbox.
    fn may_hold(&mut self) -> Result<bool> {
        Ok(!self.pending()?.is_empty())
    }
}

/// Reads a log as it grows, for a `Follower` (ARCHITECTURE.md#following).
pub trait Feed: Send {
    /// The committed events with `seq >= from`, in order, waiting up to `timeout` for
    /// the first of them; empty when none came in time. Never an incomplete record.
    fn poll(&mut self, from: u64, timeout: Duration) -> Result<Vec<Event>>;
}

/// How [`Store::open`] opens a log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Take the session from its current owner even when that owner is alive (stuck,
    /// paused, partitioned): the new owner proceeds at once and the old one is fenced
    /// (ARCHITECTURE.md#postgresql). Only for stores whose owners may live on other machines.
    pub takeover: bool,
}

impl OpenOptions {
    /// The options with `takeover` set as given.
    pub fn takeover(takeover: bool) -> OpenOptions {
        OpenOptions { takeover }
    }

    /// The refusal of `takeover` by a store whose locks die with their owner (memory,
    /// JSONL): `invalid_input` naming session `id` when it is set.
    pub fn refuse_takeover(&self, id: &str) -> Result<()> {
        if !self.takeover {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "cannot open session {} with takeover: takeover is for stores whose owner \
                 may be alive on another machine (PostgreSQL)",
                json::quote(id)
            ),
        )
        .with_session(id))
    }
}

/// What [`Store::open`] hands back.
pub struct Opened {
    /// The log's header.
    pub header: Header,
    /// The exclusive writer, positioned after the last stored event.
    pub writer: Box<dyn LogWriter>,
    /// How many bytes of a torn tail were dropped (always 0 for the memory store).
    pub torn_bytes: u64,
}

/// What [`Store::verify`] hands back.
#[derive(Clone, Debug)]
pub struct Verified {
    /// The log's header.
    pub header: Header,
    /// How many bytes of a torn tail [`Store::open`] would drop.
    pub torn_bytes: u64,
}

/// The exclusive writer of one log; dropping it releases the lock.
pub trait LogWriter: Send {
    /// Appends whole events (their seqs continue the stored tail) as one write, made
    /// durable according to the store's durability mode before returning. On failure
    /// nothing of the call stays stored; `poisoned` refuses every later append.
    fn append(&mut self, events: &[Event]) -> Result<()>;

    /// The stored events with `seq >= since`, in order.
    fn read(&self, since: u64) -> Result<Vec<Event>>;

    /// Makes every appended event durable (the barrier of the `batched` mode).
    fn flush(&mut self) -> Result<()>;

    /// Whether a checkpoint of the state after the last appended event should be
    /// written now (ARCHITECTURE.md#checkpoints-and-reading-without-owning): when
    /// `closing`, whether any event was appended since the last one (or the log has
    /// events and none); otherwise whether [`crate::checkpoint::EVERY_BYTES`] or
    /// [`crate::checkpoint::EVERY_EVENTS`] were written since. Always `false` for a
    /// store that keeps no checkpoints (the default).
    fn checkpoint_due(&self, closing: bool) -> bool {
        let _ = closing;
        false
    }

    /// Makes every appended event durable, then stores `checkpoint` (the state after
    /// the last appended event) beside the log, replacing the last one atomically.
    /// The default keeps none.
    fn checkpoint(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let _ = checkpoint;
        Ok(())
    }

    /// Appends the events that take posts in (ARCHITECTURE.md#posting; `posts` are their ids). A
    /// store whose mailbox lives beside its log may remove the posts from the mailbox
    /// in the same atomic step; by default this is [`LogWriter::append`], and the
    /// session settles the mailbox once the events are durable.
    fn append_posted(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
        let _ = posts;
        self.append(events)
    }
}

mod jsonl;
#[cfg(feature = "postgres")]
pub mod postgres;

#[cfg(feature = "postgres")]
pub use self::postgres::{PgOptions, PgStore};

pub use jsonl::JsonlStore;
/// Fault injection for the crash and failure tests (not for hosts), built only with
/// the `testing` feature that the core's own test targets enable: see
/// `JsonlStore::with_faults`.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use jsonl::fault;

/// When an append is made durable. Creation and [`flush`](LogWriter::flush) are
/// durable in every mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Durable before every append returns (fdatasync; a committed transaction): a
    /// returned append survives power loss.
    #[default]
    Sync,
    /// Group commit: appends are made durable within a bounded window (5 ms by
    /// default); `flush()` is the barrier that acknowledges.
    Batched,
    /// Left to the OS page cache (asynchronous commit); only `flush()` waits.
    None,
}

impl Durability {
    /// Parses `"sync"`, `"batched"` or `"none"`.
    pub fn parse(name: &str) -> Result<Durability> {
        match name {
            "sync" => Ok(Durability::Sync),
            "batched" => Ok(Durability::Batched),
            "none" => Ok(Durability::None),
            other => Err(invalid(format!(
                "durability must be \"sync\", \"batched\" or \"none\", got {}",
                json::quote(other)
            ))),
        }
    }

    /// The name [`Durability::parse`] accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Batched => "batched",
            Durability::None => "none",
        }
    }
}

impl FromStr for Durability {
    type Err = Error;

    fn from_str(name: &str) -> Result<Durability> {
        Durability::parse(name)
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How [`open`] makes a store: the options every backend understands, and the few
/// that only some do (a backend refuses one it has no use for, never ignores it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreOptions {
    /// When appends are durable (every store; memory ignores it, as nothing of it is).
    pub durability: Durability,
    /// The largest event line in bytes; `None` for the store's default (64 MiB).
    pub record_limit: Option<u64>,
    /// The PostgreSQL schema holding the tables; `None` for `inboxlog`. Refused by
    /// the other stores.
    pub schema: Option<String>,
    /// The most connections a PostgreSQL store holds at once, however many sessions
    /// it has open (ARCHITECTURE.md#postgresql); `None` for 8, at least 2. Refused by
    /// the other stores.
    pub max_connections: Option<u32>,
}

impl StoreOptions {
    /// The default options with `durability`.
    pub fn durability(durability: Durability) -> StoreOptions {
        StoreOptions {
            durability,
            ..StoreOptions::default()
        }
    }
}

/// What [`open`] reads `url_or_path` as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `memory:` — a new store in process memory.
    Memory,
    /// `postgresql://…` or `postgres://…` — the PostgreSQL store.
    Postgres,
    /// Anything else — a JSONL directory at that path (created if missing).
    Jsonl,
}

impl Backend {
    /// The backend `url_or_path` names.
    pub fn of(url_or_path: &str) -> Backend {
        if url_or_path == "memory:" {
            Backend::Memory
        } else if url_or_path.starts_with("postgresql://") || url_or_path.starts_with("postgres://")
        {
            Backend::Postgres
        } else {
            Backend::Jsonl
        }
    }
}

/// Opens the store `url_or_path` names (see [`Backend::of`]) with `options`: the one
/// place that picks a backend, for the bindings and the command line alike. An option
/// the backend has no use for is refused as `invalid_input`; a URL for a backend this
/// build left out is refused too.
pub fn open(url_or_path: &str, options: &StoreOptions) -> Result<Box<dyn Store>> {
    let backend = Backend::of(url_or_path);
    if options.schema.is_some() && backend != Backend::Postgres {
        return Err(invalid(format!(
            "a schema is an option of PostgreSQL stores only, not of {}",
            json::quote(url_or_path)
        )));
    }
    if options.max_connections.is_some() && backend != Backend::Postgres {
        return Err(invalid(format!(
            "a connection bound is an option of PostgreSQL stores only, not of {}",
            json::quote(url_or_path)
        )));
    }
    match backend {
        Backend::Memory => {
            if options.record_limit.is_some() {
                return Err(invalid(
                    "a record limit is an option of the JSONL and PostgreSQL stores, not of \
                     \"memory:\"",
                ));
            }
            Ok(Box::new(MemoryStore::new()))
        }
        Backend::Jsonl => {
            let store = JsonlStore::open(url_or_path, options.durability)?;
            Ok(Box::new(match options.record_limit {
                Some(limit) => store.with_record_limit(limit),
                None => store,
            }))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => Ok(Box::new(PgStore::connect(
            url_or_path,
            PgOptions::from_store(options),
        )?)),
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => Err(invalid(
            "this build of inboxlog has no PostgreSQL store (the postgres feature is off)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_parses_the_three_names_only() {
        for d in [Durability::Sync, Durability::Batched, Durability::None] {
            assert_eq!(Durability::parse(d.as_str()).unwrap(), d);
            assert_eq!(d.to_string().parse::<Durability>().unwrap(), d);
        }
        assert_eq!(Durability::default(), Durability::Sync);
        let err = Durability::parse("fsync").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "durability must be \"sync\", \"batched\" or \"none\", got \"fsync\""
        );
    }

    #[test]
    fn a_mailbox_entry_reads_back_as_the_post_it_was_or_as_invalid() {
        let m = Message::from_json(r#"{"id":"a"}"#).unwrap();
        let edit = Edit::replace("a", m.clone()).unwrap();
        for post in [
            Post::Message {
                target: Target::NextStep,
                message: m.clone(),
            },
            Post::Edit(edit.clone()),
            Post::Edit(Edit::remove("a").unwrap()),
            Post::Decision {
                id: "ap\"1".into(),
                outcome: ApprovalOutcome::Rejected,
            },
            Post::Move(Move::new("a", Target::NextStep, Some(2)).unwrap()),
            Post::Move(Move::new("a", Target::NextTurn, None).unwrap()),
        ] {
            let read = Posted::parse("p".into(), post.kind(), &post.body());
            let back = match read {
                Posted::Message {
                    target, message, ..
                } => Post::Message { target, message },
                Posted::Edit { edit, .. } => Post::Edit(edit),
                Posted::Decision { id, outcome, .. } => Post::Decision { id, outcome },
                Posted::Move { m, .. } => Post::Move(m),
                Posted::Invalid { error, .. } => panic!("{error}"),
            };
            assert_eq!(back, post);
        }
        assert_eq!(Post::Edit(edit).kind(), "edit");
        for (kind, body, says) in [
            ("edit", r#"{"op":"drop","id":"a"}"#, "op"),
            ("edit", r#"{"id":"a"}"#, "not an edit"),
            ("decision", r#"{"id":"a"}"#, "not a decision"),
            ("move", r#"{"id":"a"}"#, "not a move"),
            ("move", r#"{"id":"a","target":"later"}"#, "target"),
            ("decision", r#"{"id":"a","outcome":"ok"}"#, "got \"ok\""),
            ("later", r#"{"id":"a"}"#, "target"),
            ("next-turn", r#"{"x":1}"#, "id"),
        ] {
            let Posted::Invalid {
                post,
                message,
                error,
            } = Posted::parse("p".into(), kind, body)
            else {
                panic!("{kind} {body} read as valid")
            };
            assert_eq!((post.as_str(), message.as_str()), ("p", body));
            assert_eq!(error.kind(), ErrorKind::InvalidInput);
            assert!(error.message().contains(says), "{error}");
        }
    }

    #[test]
    fn a_url_or_path_names_its_backend() {
        assert_eq!(Backend::of("memory:"), Backend::Memory);
        assert_eq!(Backend::of("postgresql://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("postgres://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("sessions"), Backend::Jsonl);
        assert_eq!(Backend::of("./memory:"), Backend::Jsonl);
    }

    #[test]
    fn open_refuses_an_option_the_backend_has_no_use_for() {
        let schema = StoreOptions {
            schema: Some("s".into()),
            ..StoreOptions::default()
        };
        let err = open("memory:", &schema).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "a schema is an option of PostgreSQL stores only, not of \"memory:\""
        );
        let limit = StoreOptions {
            record_limit: Some(10),
            ..StoreOptions::default()
        };
        let err = open("memory:", &limit).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("record limit"), "{err}");
        assert!(
            open("memory:", &StoreOptions::default())
                .unwrap()
                .list()
                .unwrap()
                .is_empty()
        );
    }
}

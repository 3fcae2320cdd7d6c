//! Where logs live. The session logic (ARCHITECTURE.md#events–ARCHITECTURE.md#seeds-and-forks) talks to a [`Store`] and a [`LogWriter`]
//! only, so the memory store, the durable JSONL store and the PostgreSQL store are
//! interchangeable.

mod memory;

pub use memory::MemoryStore;

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::fleet::Follower;
use crate::header::Header;
use crate::message::Message;
use crate::splice::Target;

/// A place that holds session logs.
pub trait Store: Send + Sync {
    /// Creates a new log holding `header` and the `seed` events, and returns its
    /// exclusive writer. Fails with `already_exists` when the id is taken; never
    /// overwrites.
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>>;

    /// Opens a log for writing: takes the exclusive writer lock (`locked` when another
    /// writer holds it), drops a torn tail, and passes the stored events to `visit` in
    /// seq order together with the log's header: every event, or (the PostgreSQL store)
    /// every reserved event and the last one, after the store checked by itself that
    /// the seqs it skips are contiguous. An error from `visit` aborts the open and is
    /// reported as corruption at that event's location; a refused open changes nothing
    /// stored.
    fn open(
        &self,
        id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Result<Opened>;

    /// [`Store::open`] with options. Stores whose writers all live in one machine's
    /// reach (memory, JSONL) refuse `takeover` as `invalid_input`: their locks die with
    /// their owner.
    fn open_with(
        &self,
        id: &str,
        options: &OpenOptions,
        visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Result<Opened> {
        if options.takeover {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "cannot open session {} with takeover: takeover is for stores whose owner \
                     may be alive on another machine (PostgreSQL)",
                    crate::json::quote(id)
                ),
            )
            .with_session(id));
        }
        self.open(id, visit)
    }

    /// Reads a log exactly as [`Store::open`] does (the same checks, the same `visit`,
    /// the same errors at the same locations) but without locking, repairing or
    /// writing: a torn tail is measured, not dropped.
    fn verify(
        &self,
        id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Result<Verified>;

    /// Reads a log as stored, without locking or repairing (complete records only).
    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)>;

    /// The headers of every stored log, sorted by id.
    fn list(&self) -> Result<Vec<Header>>;

    /// Removes log `id` for good (ARCHITECTURE.md#seeds-and-forks), durably before it returns. Refused with
    /// `locked` while a writer holds the log (the store takes the writer lock itself
    /// first, so a writer opening at the same time either wins, or finds no log) and
    /// with `not_found` when there is none. A reader that already started reading the
    /// log (`inspect`, `fork`) sees it whole as it was; one that starts after sees none.
    fn delete(&self, id: &str) -> Result<()>;

    /// Posts `message` to the `target` list of session `id` from anywhere (ARCHITECTURE.md#posting),
    /// whether the session is open or not, and returns the post's id once the post is
    /// acknowledged (durable in the store). Its owner takes it in as exactly one
    /// `agent/inbox/spliced` event carrying `"post":"<post id>"`, in post order per
    /// poster. `not_found` when the session does not exist. The default refuses:
    /// a store without a mailbox cannot take posts.
    fn post(&self, id: &str, target: Target, message: &Message) -> Result<String> {
        let _ = (target, message);
        Err(unsupported(id, "posting"))
    }

    /// The mailbox of session `id`, for the session's writer to take posts in (SPEC
    /// ARCHITECTURE.md#posting); `None` for a store that takes no posts (the default).
    fn mailbox(&self, id: &str) -> Result<Option<Box<dyn Mailbox>>> {
        let _ = id;
        Ok(None)
    }

    /// Follows session `id` from seq `since` (ARCHITECTURE.md#following): its events as they are
    /// committed, read without owning the session or slowing its writer. `not_found`
    /// when the session does not exist. The default refuses.
    fn follow(&self, id: &str, since: u64) -> Result<Follower> {
        let _ = since;
        Err(unsupported(id, "following"))
    }
}

/// The refusal of a fleet feature (ARCHITECTURE.md#posting) by a store that does not offer it.
fn unsupported(id: &str, what: &str) -> Error {
    invalid(format!(
        "this store does not support {what} yet (session \"{id}\")"
    ))
    .with_session(id)
}

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
            Posted::Message { post, .. } | Posted::Invalid { post, .. } => post,
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
}

/// Reads a log as it grows, for a [`Follower`] (ARCHITECTURE.md#following).
pub trait Feed: Send {
    /// The committed events with `seq >= from`, in order, waiting up to `timeout` for
    /// the first of them; empty when none came in time. Never an incomplete record.
    fn poll(&mut self, from: u64, timeout: Duration) -> Result<Vec<Event>>;
}

/// How [`Store::open_with`] opens a log.
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

/// Fault injection for the crash and failure tests (not for hosts), built only with
/// the `testing` feature that the core's own test targets enable: see
/// `JsonlStore::with_faults`.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use jsonl::fault;
pub use jsonl::{Durability, JsonlStore};

//! Where logs live. The session logic (§1–§6) talks to a [`Store`] and a [`LogWriter`]
//! only, so the memory store, the durable JSONL store and the PostgreSQL store are
//! interchangeable.

mod memory;

pub use memory::MemoryStore;

use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::header::Header;

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

    /// Removes log `id` for good (SPEC §6), durably before it returns. Refused with
    /// `locked` while a writer holds the log (the store takes the writer lock itself
    /// first, so a writer opening at the same time either wins, or finds no log) and
    /// with `not_found` when there is none. A reader that already started reading the
    /// log (`inspect`, `fork`) sees it whole as it was; one that starts after sees none.
    fn delete(&self, id: &str) -> Result<()>;
}

/// How [`Store::open_with`] opens a log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Take the session from its current owner even when that owner is alive (stuck,
    /// paused, partitioned): the new owner proceeds at once and the old one is fenced
    /// (§10.3). Only for stores whose owners may live on other machines.
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
}

mod jsonl;
#[cfg(feature = "postgres")]
pub mod postgres;

#[cfg(feature = "postgres")]
pub use self::postgres::{PgOptions, PgStore};

/// Fault injection for the crash and failure tests (not for hosts): see
/// [`JsonlStore::with_faults`].
#[doc(hidden)]
pub use jsonl::fault;
pub use jsonl::{Durability, JsonlStore};

//! Where logs live. The session logic (§1–§6) talks to a [`Store`] and a [`LogWriter`]
//! only, so the memory store and the durable JSONL store are interchangeable.

mod memory;

pub use memory::MemoryStore;

use crate::error::Result;
use crate::event::Event;
use crate::header::Header;

/// A place that holds session logs.
pub trait Store: Send + Sync {
    /// Creates a new log holding `header` and the `seed` events, and returns its
    /// exclusive writer. Fails with `already_exists` when the id is taken; never
    /// overwrites.
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>>;

    /// Opens a log for writing: takes the exclusive writer lock (`locked` when another
    /// writer holds it), drops a torn tail, and passes every stored event to `visit` in
    /// order together with the log's header. An error from `visit` aborts the open and
    /// is reported as corruption at that event's location; a refused open changes
    /// nothing stored.
    fn open(
        &self,
        id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Result<Opened>;

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

/// Fault injection for the crash and failure tests (not for hosts), built only with
/// the `testing` feature that the core's own test targets enable: see
/// `JsonlStore::with_faults`.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use jsonl::fault;
pub use jsonl::{Durability, JsonlStore};

//! The exclusive writer of one JSONL log (ARCHITECTURE.md#durability, ARCHITECTURE.md#exclusive-writer).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use super::chain;
use super::file::LogFile;
use super::index::SeqIndex;
use super::recovery::{read_error, read_from};
use super::sync::{Queue, SyncCell};
use crate::checkpoint::{self, Binding, Checkpoint};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::store::Durability;
use crate::store::LogWriter;

/// Serialize buffers above this size are not kept between appends.
const KEEP_BUF: usize = 1 << 20;

/// Index entries of lines being written: (seq, offset, chain value before the line).
type Marks = Vec<(u64, u64, u32)>;

/// Where a new writer starts.
pub(crate) struct Tail {
    /// The seq the next event gets.
    pub next_seq: u64,
    /// Length of the file (all complete records).
    pub len: u64,
    /// How many of its bytes are known durable (fdatasynced by this process).
    pub durable: u64,
    /// Offsets of the stored event lines.
    pub index: SeqIndex,
    /// The last line's checksum in a version 2 log; `None` for a version 1 log, whose
    /// writer goes on writing version 1 lines (core/FORMAT.md#versions).
    pub chain: Option<u32>,
    /// The log's checkpoint, if it has one: its seq and the offset of that seq's line.
    pub checkpoint: Option<(u64, u64)>,
}

/// The exclusive writer of one log. It holds the OS lock through `file` (shared with
/// `cell` and, while it syncs, the flusher); the lock is released when it drops.
///
/// Invariant: the file holds exactly `len` bytes of complete records, `next_seq` of
/// them events, unless the writer is poisoned. Every write first checks the file's
/// length against `len`: another program writing behind the advisory lock poisons it.
pub(crate) struct JsonlWriter {
    /// `session "<id>"`, for messages.
    session: String,
    path: PathBuf,
    file: Arc<dyn LogFile>,
    cell: Arc<SyncCell>,
    durability: Durability,
    /// The flusher's queue, in `batched` mode.
    queue: Option<Queue>,
    limit: usize,
    next_seq: u64,
    len: u64,
    index: SeqIndex,
    /// The last line's checksum (version 2), as in [`Tail`].
    chain: Option<u32>,
    /// Reused serialize buffer.
    buf: String,
    /// Why the writer is poisoned by a failed rollback (fsync failures live in `cell`).
    poison: Option<String>,
    /// The last checkpoint, as in [`Tail`].
    checkpoint: Option<(u64, u64)>,
}

impl JsonlWriter {
    pub(crate) fn new(
        id: &str,
        path: PathBuf,
        file: Arc<dyn LogFile>,
        durability: Durability,
        queue: Option<Queue>,
        limit: usize,
        tail: Tail,
    ) -> JsonlWriter {
        let session = format!("session {}", crate::json::quote(id));
        let cell = SyncCell::new(
            file.clone(),
            (tail.len, tail.durable),
            session.clone(),
            path.display().to_string(),
        );
        JsonlWriter {
            session,
            path,
            file,
            cell,
            durability,
            queue,
            limit,
            next_seq: tail.next_seq,
            len: tail.len,
            index: tail.index,
            chain: tail.chain,
            buf: String::new(),
            poison: None,
            checkpoint: tail.checkpoint,
        }
    }

    /// Drops the `torn` bytes after the last complete record and makes that durable.
    pub(crate) fn drop_torn_tail(&self, torn: u64) -> Result<()> {
        self.file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| {
                Error::io(
                    format_args!(
                        "cannot drop the torn tail of {} ({torn} bytes after byte {})",
                        self.path.display(),
                        self.len
                    ),
                    e,
                )
            })
    }

    fn check(&self) -> Result<()> {
        if let Some(p) = &self.poison {
            return Err(Error::new(ErrorKind::Poisoned, p.clone()));
        }
        self.cell.poisoned().map_or(Ok(()), Err)
    }

    /// Refuses to write when the file no longer has the length this writer left: the OS
    /// lock is advisory, so another program may have written to or truncated the file
    /// (ARCHITECTURE.md#exclusive-writer). Writing now would put a second line with the same seq after a
    /// foreign one, or fuse onto a cut record. Nothing is written, the writer is
    /// poisoned, and the file is left for a person to look at (reopening it replays
    /// whatever it now holds, under the usual recovery rules).
    fn check_length(&mut self) -> Result<()> {
        let found = self.file.len().map_err(|e| {
            Error::io(
                format_args!("cannot read the length of {}", self.path.display()),
                e,
            )
        })?;
        if found == self.len {
            return Ok(());
        }
        let what = format!(
            "{} changed behind the writer of {}: expected {} bytes, found {found}",
            self.path.display(),
            self.session,
            self.len
        );
        self.poison = Some(format!(
            "{} is poisoned: {what} (another program wrote to the log); reopen it",
            self.session
        ));
        Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "{what} (another program wrote to the log); nothing was written and the session is poisoned until reopened"
            ),
        ))
    }

    /// Serializes `events` into `buf`, one `\n`-terminated line each (sealed with their
    /// checksums in a version 2 log); returns the index entries the lines add and the
    /// chain value after them.
    fn serialize(&mut self, events: &[Event]) -> Result<(Marks, Option<u32>)> {
        self.buf.clear();
        let mut marks = Vec::new();
        let mut chain = self.chain;
        // Every byte before it was durable before any of these lines was written.
        let synced = self.cell.durable();
        for (seq, event) in (self.next_seq..).zip(events) {
            if event.seq() != seq {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "append at seq {} does not continue the stored tail of {} (next seq {seq})",
                        event.seq(),
                        self.path.display()
                    ),
                ));
            }
            let start = self.buf.len();
            let before = chain.unwrap_or(0);
            event.write_json(&mut self.buf);
            // The limit bounds the event as written, whatever its checksum adds.
            let size = self.buf.len() - start;
            if let Some(prev) = &mut chain {
                *prev = chain::seal(&mut self.buf, start, *prev, Some(synced));
            }
            if size > self.limit {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!(
                        "event seq {seq} of {} is {size} bytes, larger than the record limit of {} bytes",
                        self.session, self.limit
                    ),
                )
                .with_seq(seq));
            }
            self.buf.push('\n');
            if SeqIndex::wants(seq) {
                marks.push((seq, self.len + start as u64, before));
            }
        }
        Ok((marks, chain))
    }

    /// Writes `buf` at the end of the file; on failure truncates back to `len`, and
    /// poisons the writer when that fails too.
    fn write_buf(&mut self) -> Result<()> {
        let Err(err) = self.file.write_all(self.buf.as_bytes()) else {
            return Ok(());
        };
        // Nothing of a failed call may stay: a later append would fuse onto a partial line.
        match self.file.set_len(self.len) {
            Ok(()) => Err(Error::io(
                format_args!("cannot append to {}", self.path.display()),
                err,
            )),
            Err(rollback) => {
                let p = format!(
                    "{} is poisoned after a failed write; reopen it: write {}: {err}; rollback to {} bytes: {rollback}",
                    self.session,
                    self.path.display(),
                    self.len
                );
                self.poison = Some(p.clone());
                Err(Error::new(ErrorKind::Poisoned, p))
            }
        }
    }
}

impl LogWriter for JsonlWriter {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        self.check()?;
        if events.is_empty() {
            return Ok(());
        }
        self.check_length()?;
        let serialized = self.serialize(events);
        let written = serialized.and_then(|marks| self.write_buf().map(|()| marks));
        let end = self.len + self.buf.len() as u64;
        if self.buf.capacity() > KEEP_BUF {
            self.buf = String::new();
        }
        let (marks, chain) = written?;
        match self.durability {
            Durability::Sync => {
                self.cell.wrote(end);
                self.cell.sync()?;
            }
            Durability::Batched => {
                if self.cell.wrote(end) {
                    let queued = self
                        .queue
                        .as_ref()
                        .is_some_and(|q| q.send(self.cell.clone()));
                    if !queued {
                        // No flusher thread: be durable now rather than never.
                        self.cell.sync()?;
                    }
                }
            }
            Durability::None => {
                self.cell.wrote(end);
            }
        }
        self.len = end;
        self.next_seq += events.len() as u64;
        self.chain = chain;
        for (seq, offset, before) in marks {
            self.index.note(seq, offset, before);
        }
        Ok(())
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        if since >= self.next_seq {
            return Ok(Vec::new());
        }
        let Some((first, mark)) = self.index.seek(since) else {
            return Ok(Vec::new());
        };
        let mut file = File::open(&self.path).map_err(|e| read_error(&self.path, e))?;
        file.seek(SeekFrom::Start(mark.offset))
            .map_err(|e| read_error(&self.path, e))?;
        // Only this writer's complete records, whatever follows them.
        let reader = BufReader::with_capacity(64 << 10, file.take(self.len - mark.offset));
        let at = (first, mark, self.chain.is_some());
        read_from(reader, &self.path, self.limit, at, since)
    }

    fn flush(&mut self) -> Result<()> {
        self.check()?;
        self.cell.sync()
    }

    fn checkpoint_due(&self, closing: bool) -> bool {
        // Version 1 logs have no chain to bind a checkpoint to (core/FORMAT.md#checkpoints).
        if self.chain.is_none() || self.next_seq == 0 {
            return false;
        }
        let (seq, offset) = self.checkpoint.unwrap_or((0, 0));
        if closing {
            return self.checkpoint.is_none() || seq != self.next_seq;
        }
        self.next_seq - seq >= checkpoint::EVERY_EVENTS
            || self.len - offset >= checkpoint::EVERY_BYTES
    }

    fn checkpoint(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let Some(chain) = self.chain else {
            return Ok(());
        };
        if checkpoint.seq() != self.next_seq {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "a checkpoint at seq {} is not the state after the last event of {} (next seq {})",
                    checkpoint.seq(),
                    self.path.display(),
                    self.next_seq
                ),
            ));
        }
        // Everything it covers is durable first: its offset proves the lines before it.
        self.flush()?;
        let binding = Binding {
            offset: self.len,
            chain,
            synced: self.cell.durable(),
        };
        super::checkpoint::write(&self.path, &*self.file, &checkpoint.to_json(&binding))?;
        self.checkpoint = Some((self.next_seq, self.len));
        Ok(())
    }
}

impl Drop for JsonlWriter {
    fn drop(&mut self) {
        if self.durability == Durability::Batched && self.poison.is_none() {
            // Closing a batched log is a barrier too; a failure poisons nothing left.
            let _ = self.cell.sync();
        }
        self.cell.close();
    }
}

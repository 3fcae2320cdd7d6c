//! Following a JSONL log from another process (ARCHITECTURE.md#following): read the file's complete
//! lines from where the last look stopped, without any lock.
//!
//! The feed polls the file's length (one `fstat`) rather than watching it with inotify
//! (the `notify` crate): polling needs no thread and no dependency, works on every file
//! system (inotify misses writes made by other machines on NFS), and the reader needs
//! the offset logic anyway, since a change notice says nothing about complete lines.
//! While the log is idle the pause backs off to 20 ms, which bounds the latency; a
//! busy log is read as fast as it grows. The writer is never touched.
//!
//! Only complete lines are read: a torn tail (an owner killed mid-write) is never
//! yielded, and since the next owner's repair truncates exactly that tail, the lines
//! already read stay as they are. A log that shrinks below what was read (a rolled-back
//! write after a failed fsync, a file replaced by hand) and a deleted log are errors,
//! never a silent skip; a deleted log is `not_found` at the first poll after the delete,
//! even where lines the follower had not read yet are still readable through its open
//! file (the contract of every store: `Store::follow`).

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use super::checkpoint;
use super::lines::Lines;
use super::os::unlinked;
use super::recovery::{Chain, Damage, Read, event, header, read_error};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::json;
use crate::store::{Backoff, Feed};

/// At most this many events per poll, so a follower of a long log starts yielding soon.
const BATCH: usize = 4096;

/// A follower's reader of one JSONL log.
pub(super) struct JsonlFeed {
    id: String,
    path: PathBuf,
    file: File,
    limit: usize,
    /// Whether the header line was read (and checked).
    started: bool,
    /// Offset just after the last line read.
    offset: u64,
    /// Lines read so far (the header is line 1).
    lines: u64,
    /// The seq of the event at `offset`.
    next: u64,
    /// The checksum chain of a version 2 log, as of `offset`.
    chain: Chain,
}

impl JsonlFeed {
    /// Starts a follower that wants the events from `from` on at the log's checkpoint,
    /// when the log has one at or before `from` (bound to the log's bytes, as every
    /// reader checks it): the lines before it are not read, as `open` does not read
    /// them. Without one the follower reads from the header.
    fn start_at_checkpoint(&mut self, from: u64) -> Result<()> {
        let Some((cp, binding)) = checkpoint::read(&self.path, self.limit)? else {
            return Ok(());
        };
        if cp.seq() > from {
            return Ok(());
        }
        let len = self
            .file
            .metadata()
            .map_err(|e| read_error(&self.path, e))?
            .len();
        checkpoint::check_binding(&self.file, &self.path, len, (cp.seq(), &binding))?;
        let (header, _) =
            checkpoint::read_first_line(&self.file, &self.path, &self.id, self.limit)?;
        self.chain = (header.version >= 2).then_some(binding.chain);
        (self.started, self.offset) = (true, binding.offset);
        // The header, then one line per event before the checkpoint's seq.
        (self.lines, self.next) = (cp.seq() + 1, cp.seq());
        Ok(())
    }

    pub(super) fn new(id: &str, path: PathBuf, file: File, limit: usize) -> JsonlFeed {
        JsonlFeed {
            id: id.to_owned(),
            path,
            file,
            limit,
            started: false,
            offset: 0,
            lines: 0,
            next: 0,
            chain: None,
        }
    }

    /// Reads the complete lines past `offset`, keeping the events with `seq >= from`.
    fn read(&mut self, from: u64, out: &mut Vec<Event>) -> Result<()> {
        let len = self
            .file
            .metadata()
            .map_err(|e| read_error(&self.path, e))?
            .len();
        if len < self.offset {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "log {} shrank to {len} bytes below the {} bytes this follower already read",
                    self.path.display(),
                    self.offset
                ),
            ));
        }
        if len == self.offset {
            return Ok(());
        }
        let mut file = &self.file;
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| read_error(&self.path, e))?;
        let reader = BufReader::with_capacity(64 << 10, file);
        let mut lines = Lines::resume(
            reader,
            super::chain::line_limit(self.limit),
            self.offset,
            self.lines,
        );
        while out.len() < BATCH {
            let Some(line) = lines.next().map_err(|e| read_error(&self.path, e))? else {
                break;
            };
            if self.started {
                let mut chain = self.chain;
                let read = event(
                    line.number,
                    line.offset,
                    line.checked(),
                    &mut chain,
                    (&self.path, self.next, self.limit),
                )?;
                let e = match read {
                    Read::Event(e) => e,
                    Read::Broken(broken) => {
                        // A version 2 line breaking the chain: a torn tail the next
                        // owner cuts, unless a later line proves it corruption.
                        let mut damage = Damage::new(line.offset, self.next, broken);
                        while let Some(l) = lines.next().map_err(|e| read_error(&self.path, e))? {
                            damage.next(l.number, l.offset, l.checked())?;
                        }
                        break;
                    }
                };
                self.chain = chain;
                self.next += 1;
                if e.seq() >= from {
                    out.push(e);
                }
            } else {
                let (header, chain) = header(line.checked(), &self.path, &self.id, self.limit)?;
                self.chain = (header.version >= 2).then_some(chain);
                self.started = true;
            }
            self.lines = line.number;
            self.offset = lines.end();
        }
        Ok(())
    }
}

impl Feed for JsonlFeed {
    fn poll(&mut self, from: u64, timeout: Duration) -> Result<Vec<Event>> {
        if from < self.next {
            // Asked for events already passed: read again from the start.
            (self.started, self.offset, self.lines, self.next) = (false, 0, 0, 0);
            self.chain = None;
        }
        if !self.started && from > 0 {
            self.start_at_checkpoint(from)
                .map_err(|e| e.with_session(&self.id).with_path(&self.path))?;
        }
        let mut backoff = Backoff::new(timeout);
        let mut out = Vec::new();
        loop {
            self.read(from, &mut out)
                .map_err(|e| e.with_session(&self.id).with_path(&self.path))?;
            // Checked after the read, so nothing read after a delete returned is
            // yielded: a deleted log is gone for every reader at once, as in every store.
            if unlinked(&self.file) {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "session {} was deleted while it was followed ({})",
                        json::quote(&self.id),
                        self.path.display()
                    ),
                )
                .with_session(&self.id)
                .with_path(&self.path));
            }
            if !out.is_empty() {
                return Ok(out);
            }
            if !backoff.wait() {
                return Ok(out);
            }
        }
    }
}

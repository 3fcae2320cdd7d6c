//! The JSONL directory store (ARCHITECTURE.md#stores): one file per session, `<root>/<id>.jsonl`,
//! line 1 the header, then one compact event per `\n`-terminated line. The format and
//! the recovery rules are described byte by byte in `core/FORMAT.md`.
//!
//! Each append is one `write` of whole records, made durable per [`Durability`]; a
//! failed write is rolled back and a failed fsync poisons the writer. A writer holds an
//! exclusive OS lock on its file for its lifetime (taken without waiting), and checks
//! the file's length before every write, since the lock is advisory; a delete takes the
//! same lock before it unlinks. Opening for writing drops a torn
//! tail (bytes after the last `\n`) only after every complete line validated; anything
//! else wrong is refused as corruption, and a refused open leaves the file untouched.

mod backward;
mod chain;
mod checkpoint;
#[cfg(feature = "testing")]
pub mod fault;
mod file;
mod follow;
mod index;
mod lines;
mod os;
mod pipeline;
mod reads;
mod recovery;
mod spool;
mod sync;
mod upgrade;
mod writer;

use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "testing")]
use fault::{FaultPlan, FaultyFile};
use file::LogFile;
use index::SeqIndex;
use os::{is_regular, names, sync_dir, unlinked};
use recovery::{Replayed, incomplete_header, read_error, read_header, replay, replay_pipelined};
use sync::{Flusher, Queue};
use writer::{JsonlWriter, Tail};

use super::{
    Checkpoint, Durability, Feed, LogWriter, Mailbox, Opened, Post, Replay, Store, Upgraded,
    Verified,
};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::header::Header;
use crate::id::validate_session_id;
use crate::json;

/// Reader buffer for replaying a whole log.
const REPLAY_BUF: usize = 1 << 20;

/// Logs from this size on are replayed on two threads (see `pipeline`).
const PIPELINE_MIN: u64 = 4 << 20;

/// Session logs as JSONL files in one directory.
pub struct JsonlStore {
    root: PathBuf,
    durability: Durability,
    /// Largest record (one event line without its `\n`) written or read.
    limit: usize,
    flusher: Flusher,
    /// The test hook every file operation goes through, if any.
    #[cfg(feature = "testing")]
    faults: Option<FaultPlan>,
    /// This handle as a poster to sessions' spools (ARCHITECTURE.md#posting).
    poster: spool::Poster,
}

impl fmt::Debug for JsonlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonlStore")
            .field("root", &self.root)
            .field("durability", &self.durability)
            .field("record_limit", &self.limit)
            .field("batch_window", &self.flusher.window())
            .finish_non_exhaustive()
    }
}

impl JsonlStore {
    /// The default record limit: 64 MiB.
    pub const DEFAULT_RECORD_LIMIT: u64 = 64 << 20;

    /// The default group-commit window of the `batched` mode: 5 ms.
    pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(5);

    /// A store of the logs in `root`, created (with its parents) if missing.
    pub fn open(root: impl Into<PathBuf>, durability: Durability) -> Result<JsonlStore> {
        let root = root.into();
        if !root.is_dir() {
            fs::create_dir_all(&root).map_err(|e| {
                Error::io(
                    format_args!("cannot create the store directory {}", root.display()),
                    e,
                )
            })?;
            let parent = root
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            sync_dir(parent)?;
        }
        Ok(JsonlStore {
            root,
            durability,
            limit: Self::DEFAULT_RECORD_LIMIT as usize,
            flusher: Flusher::new(Self::DEFAULT_BATCH_WINDOW),
            #[cfg(feature = "testing")]
            faults: None,
            poster: spool::Poster::default(),
        })
    }

    /// The same store with another record limit in bytes (one event as JSON: a line
    /// without its `\n` and, in version 2, without its checksum); larger records are
    /// refused on append and reported on open.
    #[must_use]
    pub fn with_record_limit(mut self, bytes: u64) -> JsonlStore {
        self.limit = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
        self
    }

    /// The same store with another group-commit window for the `batched` mode.
    #[must_use]
    pub fn with_batch_window(mut self, window: Duration) -> JsonlStore {
        self.flusher = Flusher::new(window);
        self
    }

    /// Test hook (`testing` feature only): the same store with every file operation
    /// going through `plan`.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    #[must_use]
    pub fn with_faults(mut self, plan: FaultPlan) -> JsonlStore {
        self.faults = Some(plan);
        self
    }

    /// The directory holding the logs.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// When appends are made durable.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The record limit in bytes.
    pub fn record_limit(&self) -> u64 {
        self.limit as u64
    }

    /// The file of session `id` (checked first: a bad id never names a file).
    pub fn path(&self, id: &str) -> Result<PathBuf> {
        validate_session_id(id)?;
        Ok(self.root.join(format!("{id}.jsonl")))
    }

    /// Opens an existing log file, for appending when `write`.
    fn open_file(&self, id: &str, path: &Path, write: bool) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .append(write)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "no session {} ({} does not exist)",
                        json::quote(id),
                        path.display()
                    ),
                ),
                _ => Error::io(format_args!("cannot open {}", path.display()), e),
            })
            .map_err(|e| e.with_session(id).with_path(path))
    }

    /// Takes the exclusive writer lock on the just opened `file` at once (never waits),
    /// then checks that the file was not unlinked meanwhile: between opening a path and
    /// locking it, a delete can take the lock, unlink the file and let go, and a lock on
    /// that orphan would guard nothing (appends to it would vanish).
    fn lock_now(&self, file: &File, path: &Path) -> Result<Locking> {
        #[cfg(feature = "testing")]
        if let Some(plan) = &self.faults {
            plan.run_before_lock(path);
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(Locking::Busy),
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format_args!("cannot lock {}", path.display()), e));
            }
        }
        Ok(if unlinked(file) {
            Locking::Unlinked
        } else {
            Locking::Held
        })
    }

    /// Removes the log file at `path` (through the fault plan in tests).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        #[cfg(feature = "testing")]
        if let Some(plan) = &self.faults {
            return plan.remove_file(path);
        }
        fs::remove_file(path)
    }

    /// The open log file as its writer uses it (wrapped by the fault plan in tests). The
    /// [`File`] keeps the writer's OS lock until the last reference drops.
    fn log_file(&self, file: File) -> Arc<dyn LogFile> {
        #[cfg(feature = "testing")]
        if let Some(plan) = &self.faults {
            return Arc::new(FaultyFile::new(file, plan.clone()));
        }
        Arc::new(file)
    }

    /// The flusher queue a new writer needs in `batched` mode.
    fn queue(&self) -> Result<Option<Queue>> {
        match self.durability {
            Durability::Batched => self.flusher.queue().map(Some),
            Durability::Sync | Durability::None => Ok(None),
        }
    }

    fn writer(
        &self,
        id: &str,
        path: PathBuf,
        file: Arc<dyn LogFile>,
        queue: Option<Queue>,
        tail: Tail,
    ) -> JsonlWriter {
        JsonlWriter::new(id, path, file, self.durability, queue, self.limit, tail)
    }
}

/// A writer whose every error names its session and file (ARCHITECTURE.md#errors), whichever part of
/// the writer made it (a poisoned handle, a foreign write, a failed fsync).
struct Named {
    writer: JsonlWriter,
    id: String,
    path: PathBuf,
}

impl Named {
    fn name(&self, e: Error) -> Error {
        e.with_session(&self.id).with_path(&self.path)
    }
}

impl LogWriter for Named {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        self.writer.append(events).map_err(|e| self.name(e))
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        self.writer.read(since).map_err(|e| self.name(e))
    }

    fn flush(&mut self) -> Result<()> {
        self.writer.flush().map_err(|e| self.name(e))
    }

    fn checkpoint_due(&self, closing: bool) -> bool {
        self.writer.checkpoint_due(closing)
    }

    fn checkpoint(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        self.writer.checkpoint(checkpoint).map_err(|e| self.name(e))
    }
}

/// What trying the writer lock found.
enum Locking {
    /// This handle holds the lock on the file the path names.
    Held,
    /// Another handle holds the lock.
    Busy,
    /// The lock was free, but the file was unlinked since it was opened.
    Unlinked,
}

/// Replays the log in `file` from its start, on two threads when it is large.
fn read_log(
    file: &File,
    path: &Path,
    id: &str,
    limit: usize,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let len = file
        .metadata()
        .map(|m| m.len())
        .map_err(|e| read_error(path, e));
    let reader = BufReader::with_capacity(REPLAY_BUF, file);
    match len {
        Ok(len) if len >= PIPELINE_MIN => replay_pipelined(reader, path, id, limit, visit),
        Ok(_) => replay(reader, path, id, limit, visit),
        Err(e) => Err(e),
    }
    .map_err(|e| e.with_session(id).with_path(path))
}

impl JsonlStore {
    /// [`Store::delete`] of the log at `path`.
    fn delete_file(&self, id: &str, path: &Path) -> Result<()> {
        // Opened (and locked) before it is unlinked: a writer holding the lock is seen.
        let file = self.open_file(id, path, false)?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "no session {} ({} is not a regular file)",
                    json::quote(id),
                    path.display()
                ),
            ));
        }
        match self.lock_now(&file, path)? {
            Locking::Held => {}
            Locking::Busy => {
                return Err(Error::new(
                    ErrorKind::Locked,
                    format!(
                        "session {} is locked by a writer and cannot be deleted ({})",
                        json::quote(id),
                        path.display()
                    ),
                ));
            }
            Locking::Unlinked => return Err(deleted_meanwhile(id, path)),
        }
        // The checkpoint first: a crash between the two leaves a log without one, which
        // opens from seq 0, never a checkpoint without its log.
        checkpoint::remove(path)?;
        self.remove_file(path)
            .map_err(|e| Error::io(format_args!("cannot delete {}", path.display()), e))?;
        sync_dir(&self.root)?;
        // The lock goes only now: an opener that opened the file before the unlink
        // finds it unlinked once it gets the lock.
        drop(file);
        Ok(())
    }
}

/// The `not_found` of a log unlinked while this call opened it.
fn deleted_meanwhile(id: &str, path: &Path) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!(
            "no session {} ({} was deleted while this call opened it)",
            json::quote(id),
            path.display()
        ),
    )
    .with_session(id)
    .with_path(path)
}

/// The header line and the seed as the bytes of a new file (in the header's format
/// version); the tail they leave once written and fdatasynced.
fn first_bytes(header: &Header, seed: &[Event], limit: usize) -> Result<(String, Tail)> {
    let mut buf = header.to_json();
    if buf.len() > limit {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "the header of session {} is {} bytes, larger than the record limit of {limit} bytes",
                json::quote(&header.id),
                buf.len()
            ),
        ));
    }
    let mut chain = (header.version >= 2).then(|| chain::seal(&mut buf, 0, chain::START, None));
    buf.push('\n');
    let mut index = SeqIndex::default();
    for (seq, event) in (0..).zip(seed) {
        if event.seq() != seq {
            return Err(invalid(format!(
                "seed event at index {seq} has seq {} (seeds start at seq 0, contiguous)",
                event.seq()
            )));
        }
        let start = buf.len();
        let before = chain.unwrap_or(0);
        event.write_json(&mut buf);
        if buf.len() - start > limit {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "seed event seq {seq} is {} bytes, larger than the record limit of {limit} bytes",
                    buf.len() - start
                ),
            ));
        }
        if let Some(prev) = &mut chain {
            // Nothing of the file is durable before its first write.
            *prev = chain::seal(&mut buf, start, *prev, Some(0));
        }
        buf.push('\n');
        index.note(seq, start as u64, before);
    }
    let tail = Tail {
        next_seq: seed.len() as u64,
        len: buf.len() as u64,
        durable: buf.len() as u64,
        index,
        chain,
        checkpoint: None,
    };
    Ok((buf, tail))
}

impl Store for JsonlStore {
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>> {
        let path = self.path(&header.id)?;
        let (bytes, tail) = first_bytes(header, seed, self.limit)?;
        let queue = self.queue()?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "session {} already exists ({})",
                        json::quote(&header.id),
                        path.display()
                    ),
                ),
                _ => Error::io(format_args!("cannot create {}", path.display()), e),
            })
            .map_err(|e| e.with_session(&header.id).with_path(&path))?;
        // Locked before the first byte, without waiting like every writer's lock: no other
        // writer can hold a half-written file. Whoever found the new file first (an opener
        // or `list` reading its missing header, a delete) holds its lock for a moment;
        // create then refuses with `locked` and takes back the file it made, if the path
        // still names it (a delete may have removed it, and the id may be taken again).
        let busy = |why: &str| {
            Error::new(
                ErrorKind::Locked,
                format!(
                    "session {} was {why} by another process before its create could lock it ({}); nothing was created",
                    json::quote(&header.id),
                    path.display()
                ),
            )
            .with_session(&header.id)
            .with_path(&path)
        };
        match self.lock_now(&file, &path) {
            Ok(Locking::Held) => {}
            Ok(Locking::Busy) => {
                if names(&path, &file) {
                    let _ = fs::remove_file(&path);
                    let _ = sync_dir(&self.root);
                }
                return Err(busy("locked"));
            }
            Ok(Locking::Unlinked) => return Err(busy("deleted")),
            Err(err) => {
                // The lock call itself failed: nobody else holds it, the file is ours.
                let _ = fs::remove_file(&path);
                let _ = sync_dir(&self.root);
                return Err(err);
            }
        }
        let file = self.log_file(file);
        // A checkpoint left by a log of this id removed behind the store's back (the
        // store's delete removes it first) must not be read as this log's.
        let written = checkpoint::remove(&path)
            .and_then(|()| {
                file.write_all(bytes.as_bytes())
                    .map_err(|e| Error::io(format_args!("cannot write {}", path.display()), e))
            })
            .and_then(|()| {
                file.sync_data()
                    .map_err(|e| Error::io(format_args!("cannot fsync {}", path.display()), e))
            })
            .and_then(|()| sync_dir(&self.root));
        if let Err(err) = written {
            // Nothing was acknowledged and the file is ours (created and locked by this
            // call): remove it rather than leave a half-created log behind.
            let _ = fs::remove_file(&path);
            let _ = sync_dir(&self.root);
            return Err(err);
        }
        let writer = self.writer(&header.id, path.clone(), file, queue, tail);
        Ok(Box::new(Named {
            writer,
            id: header.id.clone(),
            path,
        }))
    }

    fn open(
        &self,
        id: &str,
        options: &super::OpenOptions,
        replay: &mut dyn Replay,
    ) -> Result<Opened> {
        options.refuse_takeover(id)?;
        let path = self.path(id)?;
        let file = self.open_file(id, &path, true)?;
        match self.lock_now(&file, &path)? {
            Locking::Held => {}
            Locking::Busy => {
                return Err(Error::new(
                    ErrorKind::Locked,
                    format!(
                        "session {} is locked by another writer ({})",
                        json::quote(id),
                        path.display()
                    ),
                )
                .with_session(id)
                .with_path(&path));
            }
            Locking::Unlinked => return Err(deleted_meanwhile(id, &path)),
        }
        let queue = self.queue()?;
        let (replayed, taken) =
            checkpoint::replay_log(&file, (&path, id, self.limit), replay, false)?;
        let torn = replayed.torn;
        let tail = Tail {
            next_seq: replayed.next_seq,
            len: replayed.end,
            // Cutting a torn tail fdatasyncs the file; otherwise a killed writer's bytes
            // may still be only in the page cache.
            durable: if torn > 0 { replayed.end } else { 0 },
            index: replayed.index,
            chain: (replayed.header.version >= 2).then_some(replayed.chain),
            checkpoint: taken,
        };
        let writer = self.writer(id, path.clone(), self.log_file(file), queue, tail);
        let writer = Named {
            writer,
            id: id.to_owned(),
            path,
        };
        if torn > 0 {
            // Every complete line validated: only the crash fragment goes.
            writer
                .writer
                .drop_torn_tail(torn)
                .map_err(|e| writer.name(e))?;
        }
        Ok(Opened {
            header: replayed.header,
            writer: Box::new(writer),
            torn_bytes: torn,
        })
    }

    fn verify(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        // `open` without its lock and its writes: the same file, the same reader, the
        // same visitor, so the same refusals at the same places; from seq 0 always.
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        let (replayed, _) = checkpoint::replay_log(&file, (&path, id, self.limit), replay, true)?;
        Ok(Verified {
            header: replayed.header,
            torn_bytes: replayed.torn,
        })
    }

    fn peek(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        // `open` without its lock and its writes, from the checkpoint as `open` starts.
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        let (replayed, _) = checkpoint::replay_log(&file, (&path, id, self.limit), replay, false)?;
        Ok(Verified {
            header: replayed.header,
            torn_bytes: replayed.torn,
        })
    }

    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)> {
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        let mut events = Vec::new();
        let mut replay = super::events(|_, e: &Event| {
            events.push(e.clone());
            Ok(())
        });
        let (replayed, _) =
            checkpoint::replay_log(&file, (&path, id, self.limit), &mut replay, false)?;
        Ok((replayed.header, events))
    }

    fn read(&self, id: &str, since: u64) -> Result<(Header, Vec<Event>)> {
        self.read_from_end(id, reads::Want::Since(since))
    }

    fn tail(&self, id: &str, limit: usize, types: Option<&[&str]>) -> Result<(Header, Vec<Event>)> {
        self.read_from_end(id, reads::Want::Last { limit, types })
    }

    fn delete(&self, id: &str) -> Result<()> {
        let path = self.path(id)?;
        self.delete_file(id, &path)
            .map_err(|e| e.with_session(id).with_path(&path))?;
        spool::remove(&self.root, id);
        Ok(())
    }

    fn deliver(&self, id: &str, post: &Post) -> Result<String> {
        let path = self.path(id)?;
        let dir = spool::dir(&self.root, id);
        self.poster
            .post((id, &path, &dir), post, self.limit)
            .map_err(|e| e.with_session(id))
    }

    fn mailbox(&self, id: &str) -> Result<Box<dyn Mailbox>> {
        validate_session_id(id)?;
        #[allow(unused_mut)]
        let mut spool = spool::Spool::new(spool::dir(&self.root, id));
        #[cfg(feature = "testing")]
        {
            spool.faults = self.faults.clone();
        }
        Ok(Box::new(spool))
    }

    fn follow(&self, id: &str) -> Result<Box<dyn Feed>> {
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        Ok(Box::new(follow::JsonlFeed::new(id, path, file, self.limit)))
    }

    fn upgrade(&self, id: &str) -> Result<Upgraded> {
        upgrade::upgrade(self, id).map_err(|e| e.with_session(id))
    }

    fn list(&self) -> Result<Vec<Header>> {
        let entries = fs::read_dir(&self.root)
            .map_err(|e| Error::io(format_args!("cannot list {}", self.root.display()), e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry
                .map_err(|e| Error::io(format_args!("cannot list {}", self.root.display()), e))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            // Other files (an editor's backup, a hidden file) are not sessions.
            if validate_session_id(id).is_ok() && is_regular(&entry) {
                ids.push(id.to_owned());
            }
        }
        ids.sort_unstable();
        let mut headers = Vec::with_capacity(ids.len());
        for id in ids {
            let path = self.root.join(format!("{id}.jsonl"));
            let file = match File::open(&path) {
                Ok(f) => f,
                // Removed since the directory was read.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(read_error(&path, e)),
            };
            match file.metadata() {
                Ok(m) if m.is_file() => {}
                // Replaced by something else since the directory was read.
                Ok(_) => continue,
                Err(e) => return Err(read_error(&path, e)),
            }
            match read_header(
                BufReader::with_capacity(8 << 10, &file),
                &path,
                &id,
                self.limit,
            )? {
                Ok(header) => headers.push(header),
                // A create in progress holds the lock until its header and seed are
                // written: not a session yet. Unlocked, it is a create that never finished.
                Err(_) if matches!(file.try_lock(), Err(TryLockError::WouldBlock)) => {}
                Err(torn) => return Err(incomplete_header(&path, torn)),
            }
        }
        Ok(headers)
    }
}

//! The JSONL directory store (SPEC §7): one file per session, `<root>/<id>.jsonl`,
//! line 1 the header, then one compact event per `\n`-terminated line. The format and
//! the recovery rules are described byte by byte in `core/FORMAT.md`.
//!
//! Each append is one `write` of whole records, made durable per [`Durability`]; a
//! failed write is rolled back and a failed fsync poisons the writer. A writer holds an
//! exclusive OS lock on its file for its lifetime. Opening for writing drops a torn
//! tail (bytes after the last `\n`) only after every complete line validated; anything
//! else wrong is refused as corruption, and a refused open leaves the file untouched.

mod durability;
pub mod fault;
mod file;
mod index;
mod lines;
mod pipeline;
mod recovery;
mod sync;
mod writer;

use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use durability::Durability;
use fault::FaultPlan;
use file::LogFile;
use index::SeqIndex;
use recovery::{Replayed, incomplete_header, read_error, read_header, replay, replay_pipelined};
use sync::{Flusher, Queue};
use writer::{JsonlWriter, Tail};

use super::{LogWriter, Opened, Store};
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
    faults: Option<FaultPlan>,
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
            faults: None,
        })
    }

    /// The same store with another record limit in bytes (one event line, without its
    /// `\n`); larger records are refused on append and reported on open.
    pub fn with_record_limit(mut self, bytes: u64) -> JsonlStore {
        self.limit = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
        self
    }

    /// The same store with another group-commit window for the `batched` mode.
    pub fn with_batch_window(mut self, window: Duration) -> JsonlStore {
        self.flusher = Flusher::new(window);
        self
    }

    /// Test hook: the same store with every file operation going through `plan`.
    #[doc(hidden)]
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

/// Replays the log in `file` from its start, on two threads when it is large.
fn read_log(
    file: &File,
    path: &Path,
    id: &str,
    limit: usize,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let len = file.metadata().map_err(|e| read_error(path, e))?.len();
    let reader = BufReader::with_capacity(REPLAY_BUF, file);
    if len >= PIPELINE_MIN {
        replay_pipelined(reader, path, id, limit, visit)
    } else {
        replay(reader, path, id, limit, visit)
    }
}

/// Whether a directory entry is a regular file, following a symbolic link: a link to a
/// regular file is a session like any other (opening follows it too); a dangling link or
/// one to a directory is not. An entry that vanished meanwhile is not either.
fn is_regular(entry: &fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(t) if t.is_symlink() => fs::metadata(entry.path()).is_ok_and(|m| m.is_file()),
        Ok(t) => t.is_file(),
        Err(_) => false,
    }
}

/// fsyncs a directory, making the creation of its entries durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format_args!("cannot fsync directory {}", dir.display()), e))
}

/// The header line and the seed as the bytes of a new file; the tail they leave.
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
        buf.push('\n');
        index.note(seq, start as u64);
    }
    let tail = Tail {
        next_seq: seed.len() as u64,
        len: buf.len() as u64,
        index,
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
            })?;
        // Locked before the first byte: no other writer can hold a half-written file. An
        // opener that slipped in between finds no header, refuses and lets go at once.
        let locked = file
            .lock()
            .map_err(|e| Error::io(format_args!("cannot lock {}", path.display()), e));
        let file = file::wrap(file, self.faults.as_ref());
        let written = locked
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
        Ok(Box::new(self.writer(&header.id, path, file, queue, tail)))
    }

    fn open(
        &self,
        id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Result<Opened> {
        let path = self.path(id)?;
        let file = self.open_file(id, &path, true)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::new(
                    ErrorKind::Locked,
                    format!(
                        "session {} is locked by another writer ({})",
                        json::quote(id),
                        path.display()
                    ),
                ));
            }
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format_args!("cannot lock {}", path.display()), e));
            }
        }
        let queue = self.queue()?;
        let replayed = read_log(&file, &path, id, self.limit, visit)?;
        let tail = Tail {
            next_seq: replayed.next_seq,
            len: replayed.end,
            index: replayed.index,
        };
        let torn = replayed.torn;
        let writer = self.writer(
            id,
            path,
            file::wrap(file, self.faults.as_ref()),
            queue,
            tail,
        );
        if torn > 0 {
            // Every complete line validated: only the crash fragment goes.
            writer.drop_torn_tail(torn)?;
        }
        Ok(Opened {
            header: replayed.header,
            writer: Box::new(writer),
            torn_bytes: torn,
        })
    }

    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)> {
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        let mut events = Vec::new();
        let replayed = read_log(&file, &path, id, self.limit, &mut |_, e| {
            events.push(e.clone());
            Ok(())
        })?;
        Ok((replayed.header, events))
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
                Err(_) if matches!(file.try_lock(), Err(TryLockError::WouldBlock)) => continue,
                Err(torn) => return Err(incomplete_header(&path, torn)),
            }
        }
        Ok(headers)
    }
}

//! Importing the reference harness's session logs (ARCHITECTURE.md#import).
//!
//! The TypeScript reference harness writes one JSONL file per session (optionally
//! zstd-compressed): a `{"type":"session","version":0,…}` header, then one event per
//! line, except that runs of token deltas are packed into one record each. An import
//! reads such a file, expands the runs, checks the result exactly as opening a stored
//! log would (ARCHITECTURE.md#log-invariants on every event, the inbox replayed from `seedLength` as in ARCHITECTURE.md#replay) and
//! only then creates the new session with all the events at their source seqs.
//!
//! Memory is bounded whatever the source ([`ImportLimits`]): lines are read one at a
//! time up to a limit, runs are expanded member by member up to a limit, and nothing is
//! kept between records. The first pass checks the whole source and keeps nothing; the
//! second reads it again and writes its events in batches as they come.
//!
//! Every problem of the source is refused before anything is created, naming the
//! file and the source line: content that is not a valid reference log is
//! `invalid_input` (a header from another format or version is
//! `format_unsupported`), a line, a run or a nesting over the limits `too_large`, an
//! unreadable file is `io`, a taken id `already_exists`.
//! A log whose last turn never ended (the harness stopped mid-turn) is imported and
//! that turn closed as `interrupted`, as opening it would (ARCHITECTURE.md#opening-a-stored-log); the session's
//! [`Session::open_report`] says so.

mod header;
mod runs;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

pub use header::reference_session_id;

use crate::conversation::Conversation;
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::fleet::post::PostIds;
use crate::header::Header;
use crate::id::validate_session_id;
use crate::inbox::Inbox;
use crate::json;
use crate::log::LogState;
use crate::session::{Filled, Session};
use crate::store::{LogWriter, Store};
use runs::RunKind;

/// The first bytes of every zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Events are written to the store in batches of about this many bytes of data.
const BATCH_BYTES: usize = 1 << 20;

/// What one import may read and write, bounding the memory it takes whatever the
/// source holds (ARCHITECTURE.md#import).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportLimits {
    /// The longest source line, in bytes (of the decompressed text of a zstd file): a
    /// longer one is refused as `too_large` once this many bytes were read, before it
    /// is held whole. Default: 64 MiB, the stores' default record limit.
    pub line_bytes: u64,
    /// The most one packed run may expand to: the stored lines of all its members
    /// together, in bytes. A larger run is refused as `too_large` before any member is
    /// built. Default: 64 MiB.
    pub run_bytes: u64,
}

impl Default for ImportLimits {
    fn default() -> ImportLimits {
        ImportLimits {
            line_bytes: 64 << 20,
            run_bytes: 64 << 20,
        }
    }
}

/// Imports the reference harness log at `path` (`.jsonl`, or `.jsonl.zstd`
/// compressed) into `store` as a new session and returns it, open for writing, with
/// the default [`ImportLimits`].
///
/// The session id is `id` when given, else the source's id when it is a valid session
/// id, else one derived from it by [`reference_session_id`]. Refuses to overwrite an
/// existing session (`already_exists`); on any error nothing is created.
pub fn import_reference(path: &Path, store: &dyn Store, id: Option<&str>) -> Result<Session> {
    import_reference_with(path, store, id, ImportLimits::default())
}

/// [`import_reference`] within `limits`.
///
/// The source is read twice, one line at a time: the first pass checks all of it and
/// keeps nothing, so a refused source never touches the store; the second reads it
/// again and writes its events to the new session in batches as they come. Memory
/// stays within a few times `limits.line_bytes` plus what the session itself holds
/// (its pending inbox), whatever the size of the source or of its expansion.
pub fn import_reference_with(
    path: &Path,
    store: &dyn Store,
    id: Option<&str>,
    limits: ImportLimits,
) -> Result<Session> {
    let at = |e: Error| {
        e.context(format_args!("cannot import {}", path.display()))
            .with_path(path)
    };
    if let Some(id) = id {
        validate_session_id(id).map_err(at)?;
    }
    // A pipe or a device can be read once only: its bytes (as sent, still compressed)
    // are copied to a temporary file first, which both passes read.
    let spooled = Spooled::of(path).map_err(at)?;
    let source = spooled.as_ref().map_or(path, |s| s.path.as_path());
    let open = || Source::open(source, path);
    let checked = read(open().map_err(at)?, id, limits, &mut |_, _| Ok(())).map_err(at)?;
    let header = checked.header;
    drop((checked.inbox, checked.conversation));
    #[cfg(feature = "testing")]
    BETWEEN_PASSES.with(|hook| hook.take().map(|mut f| f(path)));
    let fill = &mut |writer: &mut dyn LogWriter| {
        let mut batch = Batch {
            writer,
            events: Vec::new(),
            places: Vec::new(),
            bytes: 0,
        };
        let again = read(open()?, Some(&header.id), limits, &mut |event, place| {
            batch.push(event, place)
        })?;
        batch.flush()?;
        if again.header != header || again.log.next_seq != checked.log.next_seq {
            return Err(invalid("the file changed while it was being imported"));
        }
        Ok(Filled {
            log: again.log,
            inbox: again.inbox,
            posts: again.posts,
            conversation: again.conversation,
        })
    };
    Session::create_filled(store, header.clone(), fill).map_err(at)
}

/// What a test runs between the two passes of an import.
#[cfg(feature = "testing")]
type Hook = Box<dyn FnMut(&Path)>;

#[cfg(feature = "testing")]
thread_local! {
    static BETWEEN_PASSES: std::cell::Cell<Option<Hook>> = const { std::cell::Cell::new(None) };
}

/// Test hook (`testing` feature only): `f` runs once, with the source's path, between
/// the two passes of this thread's next import (a test changes the source there).
#[cfg(feature = "testing")]
pub fn between_import_passes(f: impl FnMut(&Path) + 'static) {
    BETWEEN_PASSES.with(|hook| hook.set(Some(Box::new(f))));
}

/// Where an event came from in the source: its line and that line's offset.
type Place = (u64, u64);

/// Events on their way to the store, written a batch at a time.
struct Batch<'w> {
    writer: &'w mut dyn LogWriter,
    events: Vec<Event>,
    /// The source place of each event, so a refusal by the store names its line.
    places: Vec<Place>,
    bytes: usize,
}

impl Batch<'_> {
    fn push(&mut self, event: Event, place: Place) -> Result<()> {
        self.bytes += event.data().len() + 64;
        self.events.push(event);
        self.places.push(place);
        if self.bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the batch; a refusal names the source line of the event the store named
    /// (by its seq), else of the batch's first event.
    fn flush(&mut self) -> Result<()> {
        let Some(first) = self.events.first() else {
            return Ok(());
        };
        if let Err(e) = self.writer.append(&self.events) {
            let index = e
                .seq()
                .and_then(|seq| seq.checked_sub(first.seq()))
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < self.places.len())
                .unwrap_or(0);
            let (line, offset) = self.places[index];
            return Err(line_error(line, offset)(e));
        }
        self.events.clear();
        self.places.clear();
        self.bytes = 0;
        Ok(())
    }
}

/// An opened source: its text, decompressed when it is zstd.
struct Source {
    text: Box<dyn BufRead>,
    compressed: bool,
}

impl Source {
    /// Opens `path`, the source `named` (the same file, or its spooled copy).
    fn open(path: &Path, named: &Path) -> Result<Source> {
        let file = File::open(path)
            .map_err(|e| Error::io(format_args!("cannot open {}", named.display()), e))?;
        let mut reader = BufReader::new(file);
        let head = reader
            .fill_buf()
            .map_err(|e| Error::io(format_args!("cannot read {}", named.display()), e))?;
        let compressed = head.starts_with(&ZSTD_MAGIC);
        let name = named.to_string_lossy();
        if !compressed && (name.ends_with(".zstd") || name.ends_with(".zst")) {
            return Err(invalid(
                "the file name says zstd but it is not zstd-compressed",
            ));
        }
        let text: Box<dyn BufRead> = if compressed {
            // Reads every frame: the harness writes the header and later lines as
            // frames of their own.
            let decoder = zstd::stream::read::Decoder::with_buffer(reader)
                .map_err(|e| Error::io(format_args!("cannot read {}", named.display()), e))?;
            Box::new(BufReader::new(decoder))
        } else {
            Box::new(reader)
        };
        Ok(Source { text, compressed })
    }
}

/// A copy of a source that is no regular file (a pipe, a device), removed on drop.
struct Spooled {
    path: std::path::PathBuf,
}

impl Spooled {
    /// `None` for a regular file (read where it is); else a copy of its bytes in the
    /// temporary directory.
    fn of(path: &Path) -> Result<Option<Spooled>> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let cannot = |what: &str, e| Error::io(format_args!("cannot {what} {}", path.display()), e);
        let meta = std::fs::metadata(path).map_err(|e| cannot("open", e))?;
        if meta.is_file() {
            return Ok(None);
        }
        let mut from = File::open(path).map_err(|e| cannot("open", e))?;
        let copy = std::env::temp_dir().join(format!(
            "inboxlog-import-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&copy)
            .map_err(|e| cannot("copy", e))?;
        let spooled = Spooled { path: copy };
        io::copy(&mut from, &mut to).map_err(|e| cannot("copy", e))?;
        Ok(Some(spooled))
    }
}

impl Drop for Spooled {
    fn drop(&mut self) {
        // Nothing to report: the copy is in the temporary directory either way.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One line read by [`next_line`].
enum Line {
    /// The line is in the buffer; `len` bytes of the source were consumed (with the
    /// newline when `complete`).
    Read { len: usize, complete: bool },
    /// The line goes on past the limit: nothing more was read.
    TooLong,
    /// The end of the source.
    End,
}

/// Reads the next line into `buf` (without its newline), holding at most `limit` bytes
/// of it: a longer line is reported as [`Line::TooLong`] once the limit is passed, so
/// a line of any length (a decompression bomb) costs at most `limit` bytes.
fn next_line(source: &mut dyn BufRead, buf: &mut Vec<u8>, limit: usize) -> io::Result<Line> {
    buf.clear();
    let mut len = 0;
    loop {
        let available = source.fill_buf()?;
        if available.is_empty() {
            return Ok(if len == 0 {
                Line::End
            } else {
                Line::Read {
                    len,
                    complete: false,
                }
            });
        }
        let (take, newline) = match memchr::memchr(b'\n', available) {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        if buf.len() + take > limit {
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        let used = take + usize::from(newline);
        source.consume(used);
        len += used;
        if newline {
            return Ok(Line::Read {
                len,
                complete: true,
            });
        }
    }
}

/// Where a source record came from, in the message and as data: `line` of the source
/// and the `offset` of its first byte (in the decompressed text of a zstd file).
fn line_error(line: u64, offset: u64) -> impl Fn(Error) -> Error {
    move |e: Error| {
        // Problems of the source's content are input problems, whatever layer found
        // them (a bad splice would be `corrupt` in a stored log; here it is not stored);
        // sizes and depths over the limits are `too_large`, as an append says. An error
        // that names its source line already (a store's refusal of a batch) is kept.
        if e.line().is_some() {
            return e;
        }
        let kind = match e.kind() {
            ErrorKind::Io | ErrorKind::FormatUnsupported | ErrorKind::TooLarge => e.kind(),
            _ => ErrorKind::InvalidInput,
        };
        e.with_kind(kind)
            .context(format_args!("line {line}"))
            .with_line(line, offset)
    }
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<std::borrow::Cow<'a, str>>,
}

/// What reading a whole source found.
struct Read {
    header: Header,
    log: LogState,
    inbox: Inbox,
    posts: PostIds,
    conversation: Conversation,
}

/// Reads, expands and checks a whole source log, handing each checked event to `sink`
/// in seq order; holds one line at a time.
fn read(
    mut source: Source,
    id: Option<&str>,
    limits: ImportLimits,
    sink: &mut dyn FnMut(Event, Place) -> Result<()>,
) -> Result<Read> {
    let limit = usize::try_from(limits.line_bytes).unwrap_or(usize::MAX);
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut offset = 0u64;
    let mut header: Option<Header> = None;
    let mut log = LogState::default();
    let mut inbox = Inbox::new();
    let mut posts = PostIds::default();
    let mut conversation = Conversation::default();
    loop {
        let read = next_line(source.text.as_mut(), &mut buf, limit).map_err(|e| {
            // A damaged compressed stream is bad input; a failed read is the OS's.
            let err = if source.compressed {
                invalid(format!("cannot decompress: {e}"))
            } else {
                Error::io("cannot read", e)
            };
            line_error(line + 1, offset)(err)
        })?;
        let (n, complete) = match read {
            Line::End => break,
            Line::Read { len, complete } => (len, complete),
            Line::TooLong => {
                return Err(line_error(line + 1, offset)(Error::new(
                    ErrorKind::TooLarge,
                    format!(
                        "the line is longer than the limit of {limit} bytes (not read past the limit)"
                    ),
                )));
            }
        };
        line += 1;
        let fail = line_error(line, offset);
        offset += n as u64;
        let text = std::str::from_utf8(&buf)
            .map_err(|e| fail(invalid(format!("not valid UTF-8: {e}"))))?;
        let parsed = match &header {
            None => header::parse(text, id).map(|h| header = Some(h)),
            Some(h) => {
                let from = h.replay_from();
                let place = (line, offset - n as u64);
                record(text, limits.run_bytes, &mut |event| {
                    log.advance(&event)?;
                    inbox.replay(&event, from)?;
                    posts.note(&event);
                    conversation.replay(&event);
                    sink(event, place)
                })
            }
        };
        parsed.map_err(|e| {
            if complete {
                fail(e)
            } else {
                fail(e.context("the last line has no newline (a torn write)"))
            }
        })?;
    }
    let header = header.ok_or_else(|| invalid("the file is empty (no session header)"))?;
    if let Some(len) = header.seed_length
        && len > log.next_seq
    {
        return Err(line_error(1, 0)(invalid(format!(
            "seedLength {len} is past the end of the log ({} events)",
            log.next_seq
        ))));
    }
    Ok(Read {
        header,
        log,
        inbox,
        posts,
        conversation,
    })
}

/// One source record: an event, or a packed run expanded into its events, each handed
/// to `take`.
fn record(text: &str, run_limit: u64, take: &mut dyn FnMut(Event) -> Result<()>) -> Result<()> {
    if text.is_empty() {
        return Err(invalid("empty line"));
    }
    let compacted = json::compact_within(text, json::MAX_RECORD_DEPTH)?;
    let peek: Peek<'_> = json::from_str(&compacted)
        .map_err(|e| invalid(format!("not a JSON object with a string \"type\": {e}")))?;
    match peek.ty.as_deref().and_then(RunKind::of) {
        Some(kind) => runs::expand(kind, &compacted, run_limit, take),
        None => take(Event::from_json(&compacted)?),
    }
}

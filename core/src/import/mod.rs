//! Importing the reference harness's session logs (ARCHITECTURE.md#import).
//!
//! The TypeScript reference harness writes one JSONL file per session (optionally
//! zstd-compressed): a `{"type":"session","version":0,…}` header, then one event per
//! line, except that runs of token deltas are packed into one record each. An import
//! reads such a file, expands the runs, checks the result exactly as opening a stored
//! log would (ARCHITECTURE.md#log-invariants on every event, the inbox replayed from `seedLength` as in ARCHITECTURE.md#replay) and
//! only then creates the new session with all the events at their source seqs.
//!
//! Every problem of the source is refused before anything is created, naming the
//! file and the source line: content that is not a valid reference log is
//! `invalid_input` (a header from another format or version is
//! `format_unsupported`), an unreadable file is `io`, a taken id `already_exists`.
//! A log whose last turn never ended (the harness stopped mid-turn) is imported and
//! that turn closed as `interrupted`, as opening it would (ARCHITECTURE.md#opening-a-stored-log); the session's
//! [`Session::open_report`] says so.

mod header;
mod runs;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

pub use header::reference_session_id;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::header::Header;
use crate::id::validate_session_id;
use crate::inbox::Inbox;
use crate::json;
use crate::log::LogState;
use crate::session::Session;
use crate::store::Store;
use runs::RunKind;

/// The first bytes of every zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Imports the reference harness log at `path` (`.jsonl`, or `.jsonl.zstd`
/// compressed) into `store` as a new session and returns it, open for writing.
///
/// The session id is `id` when given, else the source's id when it is a valid session
/// id, else one derived from it by [`reference_session_id`]. Refuses to overwrite an
/// existing session (`already_exists`); on any error nothing is created.
pub fn import_reference(path: &Path, store: &dyn Store, id: Option<&str>) -> Result<Session> {
    let at = |e: Error| {
        e.context(format_args!("cannot import {}", path.display()))
            .with_path(path)
    };
    if let Some(id) = id {
        validate_session_id(id).map_err(at)?;
    }
    let file = File::open(path)
        .map_err(|e| Error::io(format_args!("cannot open {}", path.display()), e))?;
    let mut reader = BufReader::new(file);
    let head = reader
        .fill_buf()
        .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))?;
    let compressed = head.starts_with(&ZSTD_MAGIC);
    let name = path.to_string_lossy();
    if !compressed && (name.ends_with(".zstd") || name.ends_with(".zst")) {
        return Err(at(invalid(
            "the file name says zstd but it is not zstd-compressed",
        )));
    }
    let (header, events, log, inbox) = if compressed {
        // Reads every frame: the harness writes the header and later lines as frames
        // of their own.
        let decoder = zstd::stream::read::Decoder::with_buffer(reader)
            .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))?;
        read(BufReader::new(decoder), id, true)
    } else {
        read(reader, id, false)
    }
    .map_err(at)?;
    Session::create_imported(store, header, events, log, inbox).map_err(at)
}

/// Where a source record came from, in the message and as data: `line` of the source
/// and the `offset` of its first byte (in the decompressed text of a zstd file).
fn line_error(line: u64, offset: u64) -> impl Fn(Error) -> Error {
    move |e: Error| {
        // Problems of the source's content are input problems, whatever layer found
        // them (a bad splice would be `corrupt` in a stored log; here it is not stored).
        let kind = match e.kind() {
            ErrorKind::Io | ErrorKind::FormatUnsupported => e.kind(),
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

/// Reads, expands and checks a whole source log.
fn read(
    mut source: impl BufRead,
    id: Option<&str>,
    compressed: bool,
) -> Result<(Header, Vec<Event>, LogState, Inbox)> {
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut offset = 0u64;
    let mut header: Option<Header> = None;
    let mut events = Vec::new();
    let mut log = LogState::default();
    let mut inbox = Inbox::new();
    loop {
        buf.clear();
        let n = source.read_until(b'\n', &mut buf).map_err(|e| {
            // A damaged compressed stream is bad input; a failed read is the OS's.
            let err = if compressed {
                invalid(format!("cannot decompress: {e}"))
            } else {
                Error::io("cannot read", e)
            };
            line_error(line + 1, offset)(err)
        })?;
        if n == 0 {
            break;
        }
        line += 1;
        let fail = line_error(line, offset);
        offset += n as u64;
        let complete = buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        let text = std::str::from_utf8(&buf)
            .map_err(|e| fail(invalid(format!("not valid UTF-8: {e}"))))?;
        let parsed = match &header {
            None => header::parse(text, id).map(|h| header = Some(h)),
            Some(h) => record(text).and_then(|expanded| {
                for event in expanded {
                    log.advance(&event)?;
                    inbox.replay(&event, h.replay_from())?;
                    events.push(event);
                }
                Ok(())
            }),
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
    Ok((header, events, log, inbox))
}

/// One source record: an event, or a packed run expanded into its events.
fn record(text: &str) -> Result<Vec<Event>> {
    if text.is_empty() {
        return Err(invalid("empty line"));
    }
    let compacted = json::compact_within(text, json::MAX_RECORD_DEPTH)?;
    let peek: Peek<'_> = json::from_str(&compacted)
        .map_err(|e| invalid(format!("not a JSON object with a string \"type\": {e}")))?;
    match peek.ty.as_deref().and_then(RunKind::of) {
        Some(kind) => runs::expand(kind, &compacted),
        None => Ok(vec![Event::from_json(&compacted)?]),
    }
}

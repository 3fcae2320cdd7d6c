//! Reading a stored log back (ARCHITECTURE.md#opening-a-stored-log): the header, then every complete line as a
//! validated event, each failure named by file, line, byte offset and seq. Pure: works
//! on any [`BufRead`], never repairs; the caller decides what to do with the torn tail.

use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;
use std::sync::mpsc::Receiver;

use super::index::SeqIndex;
use super::lines::{Checked, Fault, Lines};
use super::pipeline::{self, Msg};
use crate::error::{Error, ErrorKind, Result};
use crate::event::{self, Event, Shape};
use crate::header::Header;
use crate::json;

/// What reading a whole log found.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// The header (line 1).
    pub header: Header,
    /// The seq the next appended event gets (= number of stored events).
    pub next_seq: u64,
    /// Bytes of complete lines: where the torn tail starts.
    pub end: u64,
    /// Bytes after the last `\n`.
    pub torn: u64,
    /// Offsets of the event lines.
    pub index: SeqIndex,
}

/// A read error of `path`.
pub(crate) fn read_error(path: &Path, err: io::Error) -> Error {
    Error::io(format_args!("cannot read {}", path.display()), err)
}

/// Where a line is, for error messages: `corrupt log <path> line N (byte B, seq S)`.
struct At<'a> {
    path: &'a Path,
    number: u64,
    offset: u64,
    /// `None` for the header line.
    seq: Option<u64>,
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt log {} line {} (byte {}, ",
            self.path.display(),
            self.number,
            self.offset
        )?;
        match self.seq {
            Some(seq) => write!(f, "seq {seq})"),
            None => f.write_str("header)"),
        }
    }
}

impl At<'_> {
    fn corrupt(&self, cause: impl fmt::Display) -> Error {
        self.locate(Error::new(ErrorKind::Corrupt, format!("{self}: {cause}")))
    }

    /// `err` (from parsing or from the caller's visitor) as corruption at this line; a
    /// depth over ARCHITECTURE.md#limits stays `too_large`, as an append would refuse it.
    fn wrap(&self, err: Error) -> Error {
        let kind = match err.kind() {
            ErrorKind::TooLarge => ErrorKind::TooLarge,
            _ => ErrorKind::Corrupt,
        };
        self.locate(err.context(self).with_kind(kind))
    }

    /// `err` with this location as data (ARCHITECTURE.md#errors), the same the message names.
    fn locate(&self, err: Error) -> Error {
        let err = err.with_path(self.path).with_line(self.number, self.offset);
        match self.seq {
            Some(seq) => err.with_seq(seq),
            None => err,
        }
    }
}

/// The text of a complete line, or why it cannot be one.
fn text<'l>(checked: Checked<'l>, at: &At<'_>, limit: usize) -> Result<&'l str> {
    checked.map_err(|fault| match fault {
        Fault::TooLong(len) => at.corrupt(format_args!(
            "record of {len} bytes is larger than the limit of {limit} bytes"
        )),
        Fault::NotUtf8(e) => at.corrupt(format_args!("record is not UTF-8: {e}")),
    })
}

/// The error for a file without a complete header line (`torn` bytes, no `\n`).
pub(crate) fn incomplete_header(path: &Path, torn: u64) -> Error {
    // Only a create that never returned leaves this: it writes the header and the seed
    // in one write before it returns. Nothing was acknowledged, but the file is not ours
    // to delete.
    At {
        path,
        number: 1,
        offset: 0,
        seq: None,
    }
    .corrupt(format_args!(
        "no complete header line ({torn} bytes, no newline): a create that never finished; \
         nothing was changed, remove the file to reuse the id"
    ))
}

/// Parses and checks the header line; `id` is the session the file is named after.
pub(crate) fn header(text: Checked<'_>, path: &Path, id: &str, limit: usize) -> Result<Header> {
    let at = At {
        path,
        number: 1,
        offset: 0,
        seq: None,
    };
    let header = Header::from_json(self::text(text, &at, limit)?).map_err(|e| match e.kind() {
        ErrorKind::FormatUnsupported => e
            .context(format_args!("{} line 1", path.display()))
            .with_path(path)
            .with_line(1, 0),
        _ => at.wrap(e),
    })?;
    if header.id != id {
        return Err(at.corrupt(format_args!(
            "header names session {}, but the file is named for {}",
            json::quote(&header.id),
            json::quote(id)
        )));
    }
    Ok(header)
}

/// Reads only the header of the log in `reader` (file `path`, session `id`); `Ok(None)`
/// when the file holds no complete line yet, with its length (see [`incomplete_header`]).
pub(crate) fn read_header<R: BufRead>(
    reader: R,
    path: &Path,
    id: &str,
    limit: usize,
) -> Result<Result<Header, u64>> {
    let mut lines = Lines::new(reader, limit);
    match lines.next().map_err(|e| read_error(path, e))? {
        Some(line) => header(line.checked(), path, id, limit).map(Ok),
        None => Ok(Err(lines.torn())),
    }
}

/// Parses the event line `number` at `offset`, which must hold seq `expected`.
pub(crate) fn event(
    number: u64,
    offset: u64,
    text: Checked<'_>,
    path: &Path,
    expected: u64,
    limit: usize,
) -> Result<Event> {
    checked_event(number, offset, text, None, path, expected, limit)
}

/// What the reader thread found out about an event line ahead of the replay: its
/// [`Shape`] when it is in the library's spelling.
type Ahead = Option<Shape>;

/// [`event`], with the line's shape maybe found already (by the reader thread).
fn checked_event(
    number: u64,
    offset: u64,
    text: Checked<'_>,
    ahead: Option<Ahead>,
    path: &Path,
    expected: u64,
    limit: usize,
) -> Result<Event> {
    let mut at = At {
        path,
        number,
        offset,
        seq: Some(expected),
    };
    let text = self::text(text, &at, limit)?;
    let event = match ahead {
        Some(Some(shape)) => Event::from_shape(text, &shape),
        _ => Event::from_json(text),
    }
    .map_err(|e| at.wrap(e))?;
    if event.seq() != expected {
        at.seq = Some(event.seq());
        return Err(at.corrupt(format_args!(
            "seq {} does not continue the log (expected seq {expected})",
            event.seq()
        )));
    }
    Ok(event)
}

/// A replay in progress, fed the complete lines in file order.
struct Replay<'a> {
    path: &'a Path,
    id: &'a str,
    limit: usize,
    visit: &'a mut dyn FnMut(&Header, &Event) -> Result<()>,
    /// Set by line 1.
    header: Option<Header>,
    next_seq: u64,
    index: SeqIndex,
}

impl<'a> Replay<'a> {
    fn new(
        path: &'a Path,
        id: &'a str,
        limit: usize,
        visit: &'a mut dyn FnMut(&Header, &Event) -> Result<()>,
    ) -> Replay<'a> {
        Replay {
            path,
            id,
            limit,
            visit,
            header: None,
            next_seq: 0,
            index: SeqIndex::default(),
        }
    }

    /// Line `number` at `offset`; `ahead` is what the reader thread found, if it looked.
    fn line(
        &mut self,
        number: u64,
        offset: u64,
        text: Checked<'_>,
        ahead: Option<Ahead>,
    ) -> Result<()> {
        let Some(header) = &self.header else {
            self.header = Some(self::header(text, self.path, self.id, self.limit)?);
            return Ok(());
        };
        let event = checked_event(
            number,
            offset,
            text,
            ahead,
            self.path,
            self.next_seq,
            self.limit,
        )?;
        (self.visit)(header, &event).map_err(|e| {
            At {
                path: self.path,
                number,
                offset,
                seq: Some(self.next_seq),
            }
            .wrap(e)
        })?;
        self.index.note(self.next_seq, offset);
        self.next_seq += 1;
        Ok(())
    }

    fn finish(self, end: u64, torn: u64) -> Result<Replayed> {
        let Some(header) = self.header else {
            return Err(incomplete_header(self.path, torn));
        };
        Ok(Replayed {
            header,
            next_seq: self.next_seq,
            end,
            torn,
            index: self.index,
        })
    }
}

/// Reads the whole log in `reader` (file `path`, session `id`): the header, then every
/// complete line as an event with a contiguous seq, each passed to `visit` in order.
/// Any failure on a complete line, including one returned by `visit`, is corruption
/// named by its location; the torn tail is measured, not judged. The header is checked
/// before any event line is looked at.
pub(crate) fn replay<R: BufRead>(
    reader: R,
    path: &Path,
    id: &str,
    limit: usize,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let mut replay = Replay::new(path, id, limit, visit);
    let mut lines = Lines::new(reader, limit);
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        replay.line(line.number, line.offset, line.checked(), None)?;
    }
    replay.finish(lines.end(), lines.torn())
}

/// [`replay`] with reading, line splitting and UTF-8 checks on a helper thread: the same
/// result, in less time for a large log on a machine with a spare core.
pub(crate) fn replay_pipelined<R: BufRead + Send>(
    reader: R,
    path: &Path,
    id: &str,
    limit: usize,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let mut replay = Replay::new(path, id, limit, visit);
    // The reader thread checks lines ahead (no allocation: events are built and
    // dropped on this thread). Line 1 is the header, which the replay reads itself.
    let look_ahead = |number: u64, text: &str| (number > 1).then(|| event::shape(text)).flatten();
    let consume = |rx: Receiver<Msg<Ahead>>| {
        for msg in rx {
            match msg {
                Msg::Lines(batch) => {
                    let mut ahead = batch.prepared.into_iter();
                    for (number, offset, item) in &batch.lines {
                        let text = item.clone().map(|range| &batch.text[range]);
                        let found = if text.is_ok() { ahead.next() } else { None };
                        replay.line(*number, *offset, text, found)?;
                    }
                }
                Msg::End { end, torn } => return replay.finish(end, torn),
                Msg::Failed(e) => return Err(read_error(path, e)),
            }
        }
        Err(read_error(
            path,
            io::Error::other("the reader thread stopped"),
        ))
    };
    pipeline::run(reader, limit, look_ahead, consume)
        .map_err(|e| Error::io("cannot start the log reader thread", e))?
}

/// Reads the events with `seq >= since` from `reader`, which starts at the line of
/// seq `first` (at byte `offset`) and ends at the end of the last complete record.
pub(crate) fn read_from<R: BufRead>(
    reader: R,
    path: &Path,
    limit: usize,
    (first, offset): (u64, u64),
    since: u64,
) -> Result<Vec<Event>> {
    let mut lines = Lines::resume(reader, limit, offset, first + 1);
    let mut events = Vec::new();
    let mut seq = first;
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        if seq >= since {
            events.push(event(
                line.number,
                line.offset,
                line.checked(),
                path,
                seq,
                limit,
            )?);
        }
        seq += 1;
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"format":"inboxlog","version":1,"id":"s","createdAt":0}"#;

    fn ev(seq: u64) -> String {
        format!(r#"{{"type":"x/y","seq":{seq},"time":5,"data":{{"n":"é\"\\"}}}}"#)
    }

    fn log(events: &[String], tail: &str) -> Vec<u8> {
        let mut s = format!("{HEADER}\n");
        for e in events {
            s.push_str(e);
            s.push('\n');
        }
        s.push_str(tail);
        s.into_bytes()
    }

    /// Replays `bytes` both ways (one thread, two threads) and checks they agree.
    fn run(bytes: &[u8]) -> Result<(Replayed, Vec<u64>)> {
        let once = |pipelined: bool| {
            let mut seen = Vec::new();
            let path = Path::new("/r/s.jsonl");
            let mut visit = |_: &Header, e: &Event| {
                seen.push(e.seq());
                Ok(())
            };
            let r = if pipelined {
                replay_pipelined(bytes, path, "s", 1 << 20, &mut visit)
            } else {
                replay(bytes, path, "s", 1 << 20, &mut visit)
            };
            r.map(|r| (r, seen))
        };
        let (one, two) = (once(false), once(true));
        match (&one, &two) {
            (Ok((a, sa)), Ok((b, sb))) => {
                assert_eq!(
                    (&a.header, a.next_seq, a.end, a.torn, sa),
                    (&b.header, b.next_seq, b.end, b.torn, sb)
                );
            }
            (Err(a), Err(b)) => assert_eq!((a.kind(), a.to_string()), (b.kind(), b.to_string())),
            _ => panic!("one thread and two disagree: {one:?} / {two:?}"),
        }
        one
    }

    #[test]
    fn a_clean_log_replays_in_order() {
        let bytes = log(&[ev(0), ev(1), ev(2)], "");
        let (r, seen) = run(&bytes).unwrap();
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!((r.next_seq, r.end, r.torn), (3, bytes.len() as u64, 0));
        assert_eq!(r.header.id, "s");
        assert_eq!(r.index.seek(0), Some((0, HEADER.len() as u64 + 1)));
    }

    #[test]
    fn every_cut_of_the_last_record_is_a_torn_tail() {
        let full = log(&[ev(0), ev(1)], "");
        let keep = log(&[ev(0)], "");
        for cut in keep.len()..full.len() {
            let (r, seen) = run(&full[..cut]).unwrap();
            assert_eq!(seen, [0], "cut {cut}");
            assert_eq!(
                (r.end, r.torn),
                (keep.len() as u64, (cut - keep.len()) as u64),
                "cut {cut}"
            );
        }
        let (r, _) = run(&log(&[ev(0)], "\0\0\0\0")).unwrap();
        assert_eq!((r.next_seq, r.torn), (1, 4));
    }

    #[test]
    fn a_bad_complete_line_is_named() {
        let bytes = log(&[ev(0), "\0\0\0".into(), ev(2)], "");
        let err = run(&bytes).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        let offset = HEADER.len() + 1 + ev(0).len() + 1;
        assert!(
            err.to_string().starts_with(&format!(
                "corrupt log /r/s.jsonl line 3 (byte {offset}, seq 1): invalid event"
            )),
            "{err}"
        );
        assert_eq!(
            (err.path(), err.line(), err.offset(), err.seq()),
            (
                Some(Path::new("/r/s.jsonl")),
                Some(3),
                Some(offset as u64),
                Some(1)
            )
        );

        let err = run(&log(&[ev(0), ev(2)], "")).unwrap_err();
        assert!(err.to_string().contains("line 3 (byte "), "{err}");
        assert!(
            err.to_string()
                .ends_with("seq 2): seq 2 does not continue the log (expected seq 1)"),
            "{err}"
        );

        let err = run(&log(&[ev(0), ev(0)], "")).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("seq 0): seq 0 does not continue the log (expected seq 1)"),
            "{err}"
        );

        let mut bad_utf8 = log(&[ev(0)], "");
        bad_utf8.extend_from_slice(b"\xff\n");
        let err = run(&bad_utf8).unwrap_err();
        assert!(
            err.to_string().contains("seq 1): record is not UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn a_visitor_error_is_corruption_at_its_event() {
        let bytes = log(&[ev(0), ev(1)], "");
        let err = replay(
            &bytes[..],
            Path::new("/r/s.jsonl"),
            "s",
            1 << 20,
            &mut |_, e| {
                if e.seq() == 1 {
                    Err(crate::error::invalid("no thanks"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.to_string().ends_with(", seq 1): no thanks"), "{err}");
        assert_eq!((err.line(), err.seq()), (Some(3), Some(1)));
    }

    #[test]
    fn the_header_is_checked_first() {
        let err = run(b"").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(
            err.to_string()
                .contains("line 1 (byte 0, header): no complete header line (0 bytes"),
            "{err}"
        );
        let err = run(&HEADER.as_bytes()[..20]).unwrap_err();
        assert!(
            err.to_string()
                .contains("(20 bytes, no newline): a create that never finished"),
            "{err}"
        );

        let newer =
            b"{\"format\":\"inboxlog\",\"version\":9,\"id\":\"s\",\"createdAt\":0}\n\0garbage\n";
        let err = run(newer).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FormatUnsupported);
        assert!(
            err.to_string().starts_with(
                "/r/s.jsonl line 1: log format version 9 was written by a newer inboxlog"
            ),
            "{err}"
        );
        assert_eq!(
            (err.path(), err.line(), err.offset(), err.seq()),
            (Some(Path::new("/r/s.jsonl")), Some(1), Some(0), None)
        );

        let other = run(b"{\"type\":\"session\",\"id\":\"s\"}\n").unwrap_err();
        assert_eq!(other.kind(), ErrorKind::FormatUnsupported);
        assert!(other.to_string().contains("not an inboxlog log"), "{other}");

        let renamed = HEADER.replace("\"s\"", "\"t\"") + "\n";
        let err = run(renamed.as_bytes()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(
            err.to_string()
                .ends_with("header names session \"t\", but the file is named for \"s\""),
            "{err}"
        );

        let extra = HEADER.replace("}", ",\"extra\":1}") + "\n";
        let err = run(extra.as_bytes()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(
            err.to_string().contains("(byte 0, header): invalid header"),
            "{err}"
        );
    }

    #[test]
    fn over_long_records_are_refused_where_complete_and_torn_otherwise() {
        let big = format!(
            r#"{{"type":"x/y","seq":0,"time":5,"data":"{}"}}"#,
            "a".repeat(200)
        );
        let bytes = log(std::slice::from_ref(&big), "");
        let err = replay(
            &bytes[..],
            Path::new("/r/s.jsonl"),
            "s",
            big.len() - 1,
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        let msg = format!(
            "seq 0): record of {} bytes is larger than the limit of {} bytes",
            big.len(),
            big.len() - 1
        );
        assert!(err.to_string().ends_with(&msg), "{err}");
        assert!(
            replay(
                &bytes[..],
                Path::new("/r/s.jsonl"),
                "s",
                big.len(),
                &mut |_, _| Ok(())
            )
            .is_ok()
        );
        let torn = log(&[], &"x".repeat(10_000));
        let r = replay(&torn[..], Path::new("/r/s.jsonl"), "s", 100, &mut |_, _| {
            Ok(())
        })
        .unwrap();
        assert_eq!(r.torn, 10_000);
    }

    #[test]
    fn read_from_skips_to_since() {
        let bytes = log(&[ev(0), ev(1), ev(2), ev(3)], "");
        let start = HEADER.len() as u64 + 1;
        let events = read_from(
            &bytes[start as usize..],
            Path::new("/r/s.jsonl"),
            1 << 20,
            (0, start),
            2,
        )
        .unwrap();
        assert_eq!(events.iter().map(Event::seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(events[0].to_json(), ev(2));
    }
}

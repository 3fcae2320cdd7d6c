//! Reading a stored log back (ARCHITECTURE.md#opening-a-stored-log): the header, then every complete line as a
//! validated event, each failure named by file, line, byte offset and seq. Pure: works
//! on any [`BufRead`], never repairs; the caller decides what to do with the torn tail.

use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;
use std::sync::mpsc::Receiver;

use super::chain::{self, Framed};
use super::index::{Mark, SeqIndex};
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
    /// The last intact line's checksum (version 2; 0 in a version 1 log).
    pub chain: u32,
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

/// Refuses an object (a version 1 line, or a version 2 line's without its checksum) of
/// `len` bytes over the record limit.
fn within(len: usize, at: &At<'_>, limit: usize) -> Result<()> {
    if len > limit {
        return Err(too_long(len as u64, at, limit));
    }
    Ok(())
}

fn too_long(len: u64, at: &At<'_>, limit: usize) -> Error {
    at.corrupt(format_args!(
        "record of {len} bytes is larger than the limit of {limit} bytes"
    ))
}

/// The text of a complete line, or why it cannot be one.
fn text<'l>(checked: Checked<'l>, at: &At<'_>, limit: usize) -> Result<&'l str> {
    checked.map_err(|fault| match fault {
        Fault::TooLong(len) => too_long(len, at, limit),
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
/// Returns the header and the checksum chain's value after it (version 2; 0 for a
/// version 1 log).
pub(crate) fn header(
    text: Checked<'_>,
    path: &Path,
    id: &str,
    limit: usize,
) -> Result<(Header, u32)> {
    let at = At {
        path,
        number: 1,
        offset: 0,
        seq: None,
    };
    let text = self::text(text, &at, limit)?;
    let unsupported = |e: Error| match e.kind() {
        ErrorKind::FormatUnsupported => e
            .context(format_args!("{} line 1", path.display()))
            .with_path(path)
            .with_line(1, 0),
        _ => at.wrap(e),
    };
    // The version first, whatever else the line holds (ARCHITECTURE.md#header).
    let version = Header::stored_version(text).map_err(unsupported)?;
    let (header, chain) = if version >= 2 {
        let framed = chain::split(text, false).ok_or_else(|| at.corrupt(chain::MALFORMED))?;
        if !framed.continues(chain::START) {
            return Err(at.corrupt(mismatch(&framed, chain::START)));
        }
        within(framed.body.len() + 1, &at, limit)?;
        (Header::from_json(&framed.object()), framed.stored)
    } else {
        within(text.len(), &at, limit)?;
        (Header::from_json(text), 0)
    };
    let header = header.map_err(unsupported)?;
    if header.version != version {
        return Err(at.corrupt(format_args!(
            "header names version {} after version {version}",
            header.version
        )));
    }
    if header.id != id {
        return Err(at.corrupt(format_args!(
            "header names session {}, but the file is named for {}",
            json::quote(&header.id),
            json::quote(id)
        )));
    }
    Ok((header, chain))
}

/// Why a version 2 line's checksum is refused.
fn mismatch(framed: &Framed<'_>, prev: u32) -> String {
    format!(
        "checksum {:08x} does not match the record (expected {:08x}): a changed, lost, duplicated or reordered record",
        framed.stored,
        chain::link(prev, framed.covered)
    )
}

/// Reads only the header of the log in `reader` (file `path`, session `id`); `Ok(None)`
/// when the file holds no complete line yet, with its length (see [`incomplete_header`]).
pub(crate) fn read_header<R: BufRead>(
    reader: R,
    path: &Path,
    id: &str,
    limit: usize,
) -> Result<Result<Header, u64>> {
    let mut lines = Lines::new(reader, chain::line_limit(limit));
    match lines.next().map_err(|e| read_error(path, e))? {
        Some(line) => header(line.checked(), path, id, limit).map(|(h, _)| Ok(h)),
        None => Ok(Err(lines.torn())),
    }
}

/// The chain a reader of a version 2 log keeps: the last intact line's checksum. `None`
/// for a version 1 log, which has no checksums.
pub(crate) type Chain = Option<u32>;

/// A line that breaks the chain of a version 2 log: where it is and why. Whether it is
/// corruption or the start of a torn tail depends on the lines after it ([`Damage`]).
#[derive(Debug)]
pub(crate) struct Broken {
    /// The refusal naming the line, if it turns out to be corruption.
    pub error: Error,
    /// Values the next line may continue: the checksum the line carries and the one its
    /// bytes give, each when it can be read (one of them is wrong, or both).
    pub next: Vec<u32>,
}

impl Broken {
    /// Line `text` (or a line without text) broke the chain at `prev`, for `error`.
    fn new(error: Error, text: Option<&str>, prev: u32) -> Broken {
        let (covered, stored) = text.map_or((None, None), chain::loose);
        let computed = covered.map(|c| chain::link(prev, c));
        Broken {
            error,
            next: stored.into_iter().chain(computed).collect(),
        }
    }
}

/// What reading one event line found.
pub(crate) enum Read {
    /// An intact event; the chain moved on.
    Event(Event),
    /// A line that breaks the checksum chain (version 2 only).
    Broken(Broken),
}

/// Parses the event line `number` at `offset`, which must hold seq `expected`; in a
/// version 2 log (`chain` is `Some`) its checksum must continue `chain`, which then
/// moves on. Any failure of a line whose checksum matches (or of any line of a version 1
/// log) is corruption, named; a line whose checksum does not match is [`Read::Broken`].
pub(crate) fn event(
    number: u64,
    offset: u64,
    text: Checked<'_>,
    chain: &mut Chain,
    (path, expected, limit): (&Path, u64, usize),
) -> Result<Read> {
    checked_event(
        number,
        offset,
        text,
        (None, None),
        chain,
        (path, expected, limit),
    )
}

/// What the reader thread found out about an event line ahead of the replay: its
/// [`Shape`] when it is in the library's spelling, and whether that is the shape of a
/// version 2 line's body (`true`) or of the whole line.
type Ahead = Option<(bool, Shape)>;

/// What the reader thread found of a version 2 event line, checked in order against the
/// line before it: the length of its body and its checksum, when its checksum continues
/// the previous line's. The replay uses it only while every line before was intact, so
/// it is exactly the check [`checked_event`] would make.
type Sealed = Option<(usize, u32)>;

/// The reader thread's check of every line, in order (see [`Sealed`]).
fn seal_check() -> impl FnMut(u64, &str) -> Sealed + Send {
    let mut prev: Option<u32> = None;
    move |number, text| {
        let framed = chain::split(text, number > 1);
        let intact = match (framed, prev) {
            (Some(f), Some(p)) if number > 1 && f.continues(p) => Some((f.body.len(), f.stored)),
            _ => None,
        };
        prev = framed.map(|f| f.stored);
        intact
    }
}

/// The reader thread's look at line `number`.
fn look_ahead(number: u64, text: &str) -> Ahead {
    if number == 1 {
        return None; // the header, which the replay reads itself
    }
    match chain::split(text, true) {
        Some(framed) => event::shape_open(framed.body).map(|s| (true, s)),
        None => event::shape(text).map(|s| (false, s)),
    }
}

/// [`event`], with the line's shape and seal maybe found already (by the reader thread).
fn checked_event(
    number: u64,
    offset: u64,
    text: Checked<'_>,
    (ahead, sealed): (Option<&Ahead>, Option<Sealed>),
    chain: &mut Chain,
    (path, expected, limit): (&Path, u64, usize),
) -> Result<Read> {
    let at = At {
        path,
        number,
        offset,
        seq: Some(expected),
    };
    let shape = |open: bool| match ahead {
        Some(Some((o, shape))) if *o == open => Some(shape),
        _ => None,
    };
    let event = match chain {
        None => {
            let text = self::text(text, &at, limit)?;
            within(text.len(), &at, limit)?;
            match shape(false) {
                Some(shape) => Event::from_shape(text, shape),
                None => Event::from_json(text),
            }
        }
        Some(prev) => {
            if let (Ok(text), Some(Some((len, stored)))) = (text, sealed) {
                // Checked on the reader thread against the line before, which was intact.
                within(len + 1, &at, limit)?;
                *prev = stored;
                return check_seq(
                    Event::from_open(&text[..len], shape(true)).map_err(|e| at.wrap(e))?,
                    at,
                    expected,
                );
            }
            let text = match text {
                // Over this reader's limit, maybe not the writer's: never cut as torn.
                Err(Fault::TooLong(len)) => return Err(too_long(len, &at, limit)),
                _ => match self::text(text, &at, limit) {
                    Ok(text) => text,
                    Err(error) => return Ok(Read::Broken(Broken::new(error, None, *prev))),
                },
            };
            let Some(framed) = chain::split(text, true) else {
                let error = at.corrupt(chain::MALFORMED);
                return Ok(Read::Broken(Broken::new(error, Some(text), *prev)));
            };
            if !framed.continues(*prev) {
                let error = at.corrupt(mismatch(&framed, *prev));
                return Ok(Read::Broken(Broken::new(error, Some(text), *prev)));
            }
            within(framed.body.len() + 1, &at, limit)?;
            *prev = framed.stored;
            Event::from_open(framed.body, shape(true))
        }
    }
    .map_err(|e| at.wrap(e))?;
    check_seq(event, at, expected)
}

/// The event read at `at`, unless it does not hold the `expected` seq.
fn check_seq(event: Event, mut at: At<'_>, expected: u64) -> Result<Read> {
    if event.seq() != expected {
        at.seq = Some(event.seq());
        return Err(at.corrupt(format_args!(
            "seq {} does not continue the log (expected seq {expected})",
            event.seq()
        )));
    }
    Ok(Read::Event(event))
}

/// The lines after the first broken line of a version 2 log, read to decide what it is
/// (core/FORMAT.md#torn-or-corrupt-version-2): the start of a torn tail, cut on open, unless a
/// later line proves that the broken bytes had been durable before it was written.
#[derive(Debug)]
pub(crate) struct Damage {
    /// The first broken line's offset and the seq it should hold.
    offset: u64,
    seq: u64,
    /// The refusal naming it.
    error: Error,
    /// The values the next line may continue (see [`Broken::next`]).
    prev: Vec<u32>,
}

impl Damage {
    /// Damage starting at the broken line at `offset`, which should hold `seq`.
    pub(crate) fn new(offset: u64, seq: u64, broken: Broken) -> Damage {
        Damage {
            offset,
            seq,
            error: broken.error,
            prev: broken.next,
        }
    }

    /// Looks at the next line (`number` at `offset`): the error when it proves the
    /// damage is corruption. A crash cannot write a line that continues its
    /// predecessor's checksum and either says the damaged bytes were already durable
    /// (`synced` beyond their offset) or holds a seq at or before the damaged line's.
    pub(crate) fn next(&mut self, number: u64, offset: u64, text: Checked<'_>) -> Result<()> {
        let framed = text.ok().and_then(|t| chain::split(t, true));
        if let Some(f) = framed
            && self.prev.iter().any(|&p| f.continues(p))
        {
            let seq = event::shape_open(f.body)
                .map(|shape| shape.seq())
                .or_else(|| Event::from_open(f.body, None).ok().map(|e| e.seq()));
            let why = if f.synced > self.offset {
                Some(format!(
                    "says the log was durable up to byte {} when it was written",
                    f.synced
                ))
            } else {
                seq.filter(|&s| s <= self.seq)
                    .map(|s| format!("holds seq {s}, which the damaged line should"))
            };
            if let Some(why) = why {
                let error = std::mem::replace(&mut self.error, Error::new(ErrorKind::Corrupt, ""));
                return Err(error.context_after(format_args!(
                    "; the intact line {number} (byte {offset}) after it {why}, so this is not a torn tail left by a crash"
                )));
            }
        }
        let (covered, stored) = text.ok().map_or((None, None), chain::loose);
        let computed = covered.and_then(|c| Some(chain::link(*self.prev.first()?, c)));
        self.prev = stored.into_iter().chain(computed).collect();
        Ok(())
    }
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
    chain: Chain,
    /// The first broken line of a version 2 log, and what the lines after it showed.
    damage: Option<Damage>,
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
            chain: None,
            damage: None,
        }
    }

    /// Line `number` at `offset`; `found` is what the reader thread found, if it looked.
    fn line(
        &mut self,
        number: u64,
        offset: u64,
        text: Checked<'_>,
        found: (Option<&Ahead>, Option<Sealed>),
    ) -> Result<()> {
        if let Some(damage) = &mut self.damage {
            return damage.next(number, offset, text);
        }
        let Some(header) = &self.header else {
            let (header, chain) = self::header(text, self.path, self.id, self.limit)?;
            self.chain = (header.version >= 2).then_some(chain);
            self.header = Some(header);
            return Ok(());
        };
        let before = self.chain.unwrap_or(0);
        let read = checked_event(
            number,
            offset,
            text,
            found,
            &mut self.chain,
            (self.path, self.next_seq, self.limit),
        )?;
        let event = match read {
            Read::Event(event) => event,
            Read::Broken(broken) => {
                self.damage = Some(Damage::new(offset, self.next_seq, broken));
                return Ok(());
            }
        };
        (self.visit)(header, &event).map_err(|e| {
            At {
                path: self.path,
                number,
                offset,
                seq: Some(self.next_seq),
            }
            .wrap(e)
        })?;
        self.index.note(self.next_seq, offset, before);
        self.next_seq += 1;
        Ok(())
    }

    fn finish(self, end: u64, torn: u64) -> Result<Replayed> {
        let Some(header) = self.header else {
            return Err(incomplete_header(self.path, torn));
        };
        // A broken line nothing after it vouched for starts the torn tail.
        let (end, torn) = match &self.damage {
            Some(damage) => (damage.offset, end + torn - damage.offset),
            None => (end, torn),
        };
        Ok(Replayed {
            header,
            next_seq: self.next_seq,
            end,
            torn,
            index: self.index,
            chain: self.chain.unwrap_or(0),
        })
    }
}

/// Reads the whole log in `reader` (file `path`, session `id`): the header, then every
/// complete line as an event with a contiguous seq, each passed to `visit` in order.
/// Any failure on a complete line, including one returned by `visit`, is corruption
/// named by its location; the torn tail is measured, not judged. In a version 2 log a
/// stretch of lines breaking the checksum chain at the end, which no later line proves
/// durable, is part of the torn tail (core/FORMAT.md#torn-or-corrupt-version-2). The header is
/// checked before any event line is looked at.
pub(crate) fn replay<R: BufRead>(
    reader: R,
    path: &Path,
    id: &str,
    limit: usize,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let mut replay = Replay::new(path, id, limit, visit);
    let mut lines = Lines::new(reader, chain::line_limit(limit));
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        replay.line(line.number, line.offset, line.checked(), (None, None))?;
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
    // dropped on this thread).
    let consume = |rx: Receiver<Msg<Ahead, Sealed>>| {
        for msg in rx {
            match msg {
                Msg::Lines(batch) => {
                    let mut ahead = batch.prepared.into_iter();
                    let mut sealed = batch.checked.into_iter();
                    for (number, offset, item) in &batch.lines {
                        let text = item.clone().map(|range| &batch.text[range]);
                        let (found, seal) = if text.is_ok() {
                            (ahead.next(), sealed.next())
                        } else {
                            (None, None)
                        };
                        replay.line(*number, *offset, text, (found.as_ref(), seal))?;
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
    pipeline::run(
        reader,
        chain::line_limit(limit),
        (look_ahead, seal_check()),
        consume,
    )
    .map_err(|e| Error::io("cannot start the log reader thread", e))?
}

/// Reads the events with `seq >= since` from `reader`, which starts at the line of
/// seq `first` (at `mark`) and ends at the end of the last complete record; in a
/// version 2 log (`v2`) every line's checksum is checked from the mark's chain value.
pub(crate) fn read_from<R: BufRead>(
    reader: R,
    path: &Path,
    limit: usize,
    (first, mark, v2): (u64, Mark, bool),
    since: u64,
) -> Result<Vec<Event>> {
    let mut lines = Lines::resume(reader, chain::line_limit(limit), mark.offset, first + 1);
    let mut events = Vec::new();
    let mut seq = first;
    let mut chain = v2.then_some(mark.chain);
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        if seq < since {
            // Before `since`: only the chain is carried on (nothing to parse in version 1).
            let framed = line.checked().ok().and_then(|t| chain::split(t, true));
            match (&mut chain, framed) {
                (None, _) => {}
                (Some(prev), Some(f)) if f.continues(*prev) => *prev = f.stored,
                (Some(_), _) => {
                    let read = event(
                        line.number,
                        line.offset,
                        line.checked(),
                        &mut chain,
                        (path, seq, limit),
                    )?;
                    if let Read::Broken(broken) = read {
                        return Err(broken.error);
                    }
                }
            }
            seq += 1;
            continue;
        }
        let read = event(
            line.number,
            line.offset,
            line.checked(),
            &mut chain,
            (path, seq, limit),
        )?;
        match read {
            // The writer's own records, checked when it opened or wrote them: changed since.
            Read::Broken(broken) => return Err(broken.error),
            Read::Event(e) if seq >= since => events.push(e),
            Read::Event(_) => {}
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
        let mark = Mark {
            offset: HEADER.len() as u64 + 1,
            chain: 0,
        };
        assert_eq!(r.index.seek(0), Some((0, mark)));
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
            (
                0,
                Mark {
                    offset: start,
                    chain: 0,
                },
                false,
            ),
            2,
        )
        .unwrap();
        assert_eq!(events.iter().map(Event::seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(events[0].to_json(), ev(2));
    }

    const HEADER2: &str = r#"{"format":"inboxlog","version":2,"id":"s","createdAt":0}"#;

    /// A version 2 log of `events`, each line's `synced` given by `synced(i, offset)`.
    fn log2(events: &[String], synced: impl Fn(usize, u64) -> u64) -> Vec<u8> {
        let mut s = HEADER2.to_owned();
        let mut chain = chain::seal(&mut s, 0, chain::START, None);
        s.push('\n');
        for (i, e) in events.iter().enumerate() {
            let start = s.len();
            s.push_str(e);
            chain = chain::seal(&mut s, start, chain, Some(synced(i, start as u64)));
            s.push('\n');
        }
        s.into_bytes()
    }

    /// Byte offsets of the lines of `bytes`.
    fn starts(bytes: &[u8]) -> Vec<usize> {
        let mut v = vec![0];
        v.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
        v.pop();
        v
    }

    #[test]
    fn a_version_2_log_replays_without_its_checksums() {
        let events = [ev(0), ev(1), ev(2)];
        let bytes = log2(&events, |_, at| at);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.lines().all(|l| l.contains(",\"crc32c\":\"")), "{text}");
        let (r, seen) = run(&bytes).unwrap();
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!(
            (r.header.version, r.end, r.torn),
            (2, bytes.len() as u64, 0)
        );
        let all = read_from(
            &bytes[..],
            Path::new("/r/s.jsonl"),
            1 << 20,
            (0, r.index.seek(0).unwrap().1, true),
            0,
        );
        assert!(all.is_err(), "read_from starts at the mark, not the header");
        let mark = r.index.seek(0).unwrap().1;
        let events2 = read_from(
            &bytes[mark.offset as usize..],
            Path::new("/r/s.jsonl"),
            1 << 20,
            (0, mark, true),
            1,
        )
        .unwrap();
        assert_eq!(
            events2[0].to_json(),
            ev(1),
            "the event is the version 1 text"
        );
    }

    #[test]
    fn read_from_checks_the_chain_before_and_after_since() {
        let bytes = log2(&[ev(0), ev(1), ev(2), ev(3)], |_, at| at);
        let (r, _) = run(&bytes).unwrap();
        let (first, mark) = r.index.seek(0).unwrap();
        let read = |b: &[u8], since| {
            read_from(
                &b[mark.offset as usize..],
                Path::new("/r/s.jsonl"),
                1 << 20,
                (first, mark, true),
                since,
            )
        };
        assert_eq!(read(&bytes, 2).unwrap().len(), 2);
        let at = starts(&bytes);
        for (line, since) in [(2, 3), (4, 1)] {
            let mut bad = bytes.clone();
            bad[at[line] + 12] ^= 0x02;
            let err = read(&bad, since).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert!(err.to_string().contains("checksum"), "{err}");
            assert_eq!(err.line(), Some(line as u64 + 1), "{err}");
        }
    }

    #[test]
    fn a_changed_byte_before_a_vouching_line_is_corruption_and_at_the_end_a_torn_tail() {
        let events = [ev(0), ev(1), ev(2)];
        let bytes = log2(&events, |_, at| at);
        let at = starts(&bytes);
        for i in 0..bytes.len() {
            if bytes[i] == b'\n' {
                continue;
            }
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            let line = at.iter().rposition(|&s| s <= i).unwrap();
            match run(&bad) {
                Ok((r, seen)) => {
                    // Only a change to the last line may read as a torn tail, cut whole.
                    assert_eq!(line, 3, "byte {i} accepted");
                    assert_eq!(seen, [0, 1], "byte {i}");
                    assert_eq!(
                        (r.end, r.torn),
                        (at[3] as u64, (bytes.len() - at[3]) as u64)
                    );
                }
                Err(e) if line == 0 => {
                    assert!(e.line() == Some(1), "byte {i}: {e}");
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "byte {i}: {e}");
                    // The damaged line, or (a changed checksum) the one after it.
                    let named = e.line().unwrap() as usize;
                    assert!(named == line + 1 || named == line + 2, "byte {i}: {e}");
                }
            }
        }
    }

    #[test]
    fn unsynced_lines_after_damage_are_a_torn_tail_and_a_duplicate_is_not() {
        let events = [ev(0), ev(1), ev(2), ev(3)];
        // Lines 1 to 3 written after the log was durable to the end of seq 0.
        let bytes = log2(&events, |i, at| if i == 0 { at } else { 200 });
        let at = starts(&bytes);
        let synced_end = at[2] as u64;
        let bytes = log2(&events, |i, at| if i == 0 { at } else { synced_end });
        let mut zeroed = bytes.clone();
        zeroed[at[2] + 3..at[3] + 5].fill(0); // seq 1 and the start of seq 2 lost
        let (r, seen) = run(&zeroed).unwrap();
        assert_eq!(seen, [0]);
        assert_eq!((r.end, r.torn), (synced_end, (bytes.len() - at[2]) as u64));

        // The same damage where seq 3 says seq 1 was durable: corruption.
        let bytes = log2(&events, |_, at| at);
        let mut zeroed = bytes.clone();
        zeroed[at[2] + 3..at[2] + 9].fill(b'x');
        let err = run(&zeroed).unwrap_err();
        assert_eq!(
            (err.kind(), err.line()),
            (ErrorKind::Corrupt, Some(3)),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("is not a torn tail left by a crash"),
            "{err}"
        );

        // A line repeated: the copy breaks the chain, the next line holds its seq.
        let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
        let dup = [lines[0], lines[1], lines[2], lines[2], lines[3], lines[4]].concat();
        let flat = log2(&events, |_, _| 0);
        let flat_lines: Vec<&[u8]> = flat.split_inclusive(|&b| b == b'\n').collect();
        let flat_dup = [flat_lines[0], flat_lines[1], flat_lines[1], flat_lines[2]].concat();
        for d in [dup, flat_dup] {
            let err = run(&d).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert!(err.to_string().contains("checksum"), "{err}");
        }
    }
}

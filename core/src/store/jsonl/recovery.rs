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
    /// The refusal naming the first broken line, when the torn tail starts with one
    /// that nothing in the file proved durable (a checkpoint may: core/FORMAT.md#checkpoints).
    pub broken: Option<Error>,
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

/// The reader thread's check of every line, in order (see [`Sealed`]). After a line that
/// is not intact nothing more is checked: the replay stops using these results there (it
/// reads that line as broken or corrupt), so the rest of a damaged log costs no checksums.
fn seal_check() -> impl FnMut(u64, &str) -> Sealed + Send {
    let mut prev: Option<u32> = None;
    move |number, text| {
        if number == 1 {
            // The header, which the replay checks itself: only where the chain starts.
            prev = chain::split(text, false).map(|f| f.stored);
            return None;
        }
        let sealed = prev.and_then(|p| chain::intact(text, true, p));
        prev = sealed.map(|(_, value)| value);
        sealed
    }
}

/// The reader thread's look at line `number`, after its check found `sealed`: the body
/// of an intact line is known, so the line is not taken apart again.
fn look_ahead(number: u64, text: &str, sealed: &Sealed) -> Ahead {
    if number == 1 {
        return None; // the header, which the replay reads itself
    }
    if let Some((len, _)) = sealed {
        return event::shape_open(&text[..*len]).map(|s| (true, s));
    }
    match chain::split(text, true) {
        Some(framed) => event::shape_open(framed.body).map(|s| (true, s)),
        None => event::shape(text).map(|s| (false, s)),
    }
}

/// [`event()`], with the line's shape and seal maybe found already (by the reader thread).
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
            let text = match text {
                // Over this reader's limit, maybe not the writer's: never cut as torn.
                Err(Fault::TooLong(len)) => return Err(too_long(len, &at, limit)),
                _ => match self::text(text, &at, limit) {
                    Ok(text) => text,
                    Err(error) => return Ok(Read::Broken(Broken::new(error, None, *prev))),
                },
            };
            // Checked on the reader thread against the line before, which was intact, or
            // here.
            let sealed = sealed.unwrap_or_else(|| chain::intact(text, true, *prev));
            let Some((len, stored)) = sealed else {
                return Ok(Read::Broken(broken(text, &at, *prev)));
            };
            within(len + 1, &at, limit)?;
            *prev = stored;
            Event::from_open(&text[..len], shape(true))
        }
    }
    .map_err(|e| at.wrap(e))?;
    check_seq(event, at, expected)
}

/// The version 2 event line `text` at `at`, which does not continue the chain `prev`:
/// why, as [`chain::split`] and [`Framed::continues`] tell it.
fn broken(text: &str, at: &At<'_>, prev: u32) -> Broken {
    let error = match chain::split(text, true) {
        None => at.corrupt(chain::MALFORMED),
        Some(framed) => at.corrupt(mismatch(&framed, prev)),
    };
    Broken::new(error, Some(text), prev)
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
    /// Where the first broken line starts, and the refusal naming it.
    pub(crate) fn into_parts(self) -> (u64, Error) {
        (self.offset, self.error)
    }

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
        let (end, torn, broken) = match self.damage {
            Some(damage) => (
                damage.offset,
                end + torn - damage.offset,
                Some(damage.error),
            ),
            None => (end, torn, None),
        };
        Ok(Replayed {
            header,
            next_seq: self.next_seq,
            end,
            torn,
            index: self.index,
            chain: self.chain.unwrap_or(0),
            broken,
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

/// [`replay`] from a checkpoint (core/FORMAT.md#checkpoints) of a version 2 log:
/// `header` was read from line 1, which ends at `first` (the mark of seq 0); `reader`
/// starts at the line of seq `seq`, at `mark`, whose chain value the checkpoint's
/// binding gives. Every line from there is read, checked and visited as [`replay`]
/// does, under the same torn-or-corrupt rules.
pub(crate) fn replay_resumed<R: BufRead>(
    reader: R,
    (path, id, limit): (&Path, &str, usize),
    (header, first): (Header, Mark),
    (seq, mark): (u64, Mark),
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<Replayed> {
    let mut replay = Replay::new(path, id, limit, visit);
    replay.header = Some(header);
    replay.chain = Some(mark.chain);
    replay.next_seq = seq;
    replay.index.pin(0, first);
    replay.index.pin(seq, mark);
    let mut lines = Lines::resume(reader, chain::line_limit(limit), mark.offset, seq + 1);
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        replay.line(line.number, line.offset, line.checked(), (None, None))?;
    }
    replay.finish(lines.end(), lines.torn())
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
            let checked = line.checked().ok();
            match &mut chain {
                None => {}
                Some(prev) => match checked.and_then(|t| chain::intact(t, true, *prev)) {
                    Some((_, value)) => *prev = value,
                    None => {
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
                },
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
mod tests;

//! Reading without owning, from the end (ARCHITECTURE.md#checkpoints-and-reading-without-owning):
//! `Store::read` and `Store::tail` of a JSONL log, which read what they return and
//! return exactly the corresponding slice of what `inspect` returns on the same bytes.
//!
//! The lines are first scanned backward from the last complete line, for an *anchor*:
//! a line before every line to return whose chain value and seq the lines after it are
//! checked from. Then the lines after the anchor are read forward with `inspect`'s own
//! rules (`recovery::event`, `recovery::Damage`): each line's checksum continues the one
//! before it, seqs are contiguous, and a broken stretch at the end that no later line
//! proves durable is a torn tail, ignored; proven damage is `corrupt`, named.
//!
//! `inspect` cuts a version 2 log at its first broken line unless a later line proves
//! it, and only bytes written after the last finished fdatasync can be lost by a crash
//! (core/FORMAT.md#torn-or-corrupt-version-2). So the anchor must lie before every byte
//! that was not known durable: before the largest `synced` of the lines scanned that
//! continue the line before them (a crash cannot make such a line, and nothing it
//! vouches for was lost). In `sync` mode that is the start of the last append; in
//! `batched` and `none` mode the last finished fsync, which may lie further back. A
//! version 1 log has no checksums: every complete line is an event, anchors anywhere.

use std::io::BufReader;
use std::path::Path;

use super::JsonlStore;

use super::backward::{BLOCK, Backward, ReadAt, Window};
use super::chain;
use super::checkpoint;
use super::lines::Lines;
use super::recovery::{self, Damage, Read, incomplete_header, read_error};
use crate::error::Result;
use crate::event::{self, Event};
use crate::header::Header;
use crate::store::last_of;

/// Reader buffer for the lines after the anchor.
const FORWARD_BUF: usize = 64 << 10;

/// What a read from the end returns.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Want<'a> {
    /// The events with `seq >= since`.
    Since(u64),
    /// The last `limit` events, of `types` when given.
    Last {
        /// How many.
        limit: usize,
        /// Of which types; every type when `None`.
        types: Option<&'a [&'a str]>,
    },
}

/// The line the lines after it are checked from.
struct Anchor {
    /// Where the line after it starts.
    end: u64,
    /// The line's number (1 for the header).
    number: u64,
    /// The seq of the line after it.
    next_seq: u64,
    /// The chain value it carries (version 2).
    chain: u32,
    /// Whether it is the header: nothing before it to read.
    header: bool,
}

/// A scanned line's checksum, for the line before it.
struct Later {
    covered: Vec<u8>,
    stored: u32,
    synced: u64,
}

/// What one scanned line gives: its chain value, its seq, and itself as a [`Later`].
struct Scanned {
    stored: Option<u32>,
    seq: Option<u64>,
    later: Option<Later>,
}

/// Looks at a scanned line's text (`None` when it has none) of a version 2 log (`v2`)
/// or a version 1 log, without checking it.
fn scan(text: Option<&str>, v2: bool) -> Scanned {
    let Some(text) = text else {
        return Scanned {
            stored: None,
            seq: None,
            later: None,
        };
    };
    if !v2 {
        let seq = event::shape(text)
            .map(|s| s.seq())
            .or_else(|| Event::from_json(text).ok().map(|e| e.seq()));
        return Scanned {
            stored: None,
            seq,
            later: None,
        };
    }
    let (covered, stored) = chain::loose(text);
    let framed = chain::split(text, true);
    let seq = framed.and_then(|f| {
        event::shape_open(f.body)
            .map(|s| s.seq())
            .or_else(|| Event::from_open(f.body, None).ok().map(|e| e.seq()))
    });
    let later = match (covered, stored) {
        (Some(covered), Some(stored)) => Some(Later {
            covered: covered.to_vec(),
            stored,
            synced: framed.map_or(0, |f| f.synced),
        }),
        _ => None,
    };
    Scanned { stored, seq, later }
}

impl JsonlStore {
    /// `Store::read` and `Store::tail`: `want` of log `id`, read from the end without
    /// locking or repairing (every error names the session and the file).
    pub(super) fn read_from_end(&self, id: &str, want: Want<'_>) -> Result<(Header, Vec<Event>)> {
        let path = self.path(id)?;
        let file = self.open_file(id, &path, false)?;
        let len = file
            .metadata()
            .map_err(|e| read_error(&path, e))
            .map(|m| m.len());
        len.and_then(|len| {
            // What `inspect` owes the checkpoint, so is this: its binding, and the offset
            // it says was durable, which proves a broken line before it corruption.
            let proof = checkpoint::bound(&file, &path, len, self.limit)?
                .map(|b| (b.synced, checkpoint::path(&path).display().to_string()));
            let proof = proof
                .as_ref()
                .map(|(synced, name)| (*synced, name.as_str()));
            read(&file, len, (&path, id, self.limit), want, (BLOCK, proof))
        })
        .map_err(|e| e.with_session(id).with_path(&path))
    }
}

/// Reads `want` of the log in `file` (`len` bytes, file `path`, session `id`, record
/// limit `limit`), scanning back `block` bytes at a time. The header is read and
/// checked as `inspect` checks it; what follows is the slice of `inspect`'s events
/// that `want` names. `proof` is the offset the log's checkpoint says was durable and
/// the checkpoint's name, when it has one: a broken line before it is `corrupt`.
pub(crate) fn read<R: ReadAt + ?Sized>(
    file: &R,
    len: u64,
    (path, id, limit): (&Path, &str, usize),
    want: Want<'_>,
    (block, proof): (usize, Option<(u64, &str)>),
) -> Result<(Header, Vec<Event>)> {
    let line_limit = chain::line_limit(limit);
    let (header, header_chain, start) = {
        let reader = BufReader::with_capacity(8 << 10, Window::new(file, 0, len));
        let mut lines = Lines::new(reader, line_limit);
        let Some(line) = lines.next().map_err(|e| read_error(path, e))? else {
            return Err(incomplete_header(path, lines.torn()));
        };
        let (header, chain) = recovery::header(line.checked(), path, id, limit)?;
        (
            header,
            chain,
            line.offset + line.bytes.map_or_else(|n| n, |b| b.len() as u64) + 1,
        )
    };
    if let Want::Last { limit: 0, .. } = want {
        return Ok((header, Vec::new()));
    }
    let v2 = header.version >= 2;
    let mut back =
        Backward::new(file, start, len, block, line_limit).map_err(|e| read_error(path, e))?;
    let end = back.end();
    // Bytes before `floor` were durable before a line that continues its predecessor
    // was written (version 1: every complete line is read as an event).
    let mut floor = if v2 {
        proof.map_or(0, |(synced, _)| synced)
    } else {
        u64::MAX
    };
    let mut later: Option<Later> = None;
    let mut scanned = 0usize;
    let mut want_lines = match want {
        Want::Since(_) => 0,
        Want::Last { limit, .. } => limit,
    };
    loop {
        let anchor = loop {
            let Some(line) = back.prev().map_err(|e| read_error(path, e))? else {
                break Anchor {
                    end: start,
                    number: 1,
                    next_seq: 0,
                    chain: header_chain,
                    header: true,
                };
            };
            let offset = line.offset;
            let line_end = offset + line.bytes.map_or_else(|n| n, |b| b.len() as u64) + 1;
            let this = scan(line.checked().ok(), v2);
            if let (Some(l), Some(stored)) = (&later, this.stored)
                && chain::link(stored, &l.covered) == l.stored
            {
                floor = floor.max(l.synced);
            }
            let after = scanned;
            scanned += 1;
            later = this.later;
            let enough = match want {
                Want::Since(since) => this.seq.is_some_and(|s| s < since),
                Want::Last { .. } => after >= want_lines,
            };
            let usable = offset < floor && (!v2 || this.stored.is_some());
            if let (true, true, Some(seq)) = (enough, usable, this.seq) {
                // A seq no writer gives (near u64::MAX) fails the forward check.
                break Anchor {
                    end: line_end,
                    number: seq.saturating_add(2),
                    next_seq: seq.saturating_add(1),
                    chain: this.stored.unwrap_or(0),
                    header: false,
                };
            }
        };
        let (events, broken) = forward(file, (path, limit), &anchor, end, v2)?;
        if let (Some((offset, error)), Some((synced, name))) = (broken, proof)
            && offset < synced
        {
            return Err(checkpoint::refused(error, synced, name));
        }
        match want {
            Want::Since(since) => {
                let mut events = events;
                events.retain(|e| e.seq() >= since);
                return Ok((header, events));
            }
            Want::Last { limit, types } => {
                let found = last_of(events, limit, types);
                if found.len() >= limit || anchor.header {
                    return Ok((header, found));
                }
                // Too few: twice as far back (the lines after the anchor are read again).
                want_lines = want_lines
                    .saturating_mul(2)
                    .max(scanned.saturating_add(limit));
            }
        }
    }
}

/// The first broken line nothing after it proved: where it starts, and the refusal
/// naming it.
type Unproven = (u64, crate::error::Error);

/// The events after `anchor` up to `end`, read and checked as `inspect` reads them:
/// the events before the first broken line (with where it starts and the refusal
/// naming it, for a checkpoint that may prove it), or `corrupt` when a later line
/// proves it.
fn forward<R: ReadAt + ?Sized>(
    file: &R,
    (path, limit): (&Path, usize),
    anchor: &Anchor,
    end: u64,
    v2: bool,
) -> Result<(Vec<Event>, Option<Unproven>)> {
    let reader = BufReader::with_capacity(FORWARD_BUF, Window::new(file, anchor.end, end));
    let mut lines = Lines::resume(reader, chain::line_limit(limit), anchor.end, anchor.number);
    let mut chain = v2.then_some(anchor.chain);
    let mut seq = anchor.next_seq;
    let mut damage: Option<Damage> = None;
    let mut events = Vec::new();
    while let Some(line) = lines.next().map_err(|e| read_error(path, e))? {
        if let Some(damage) = &mut damage {
            damage.next(line.number, line.offset, line.checked())?;
            continue;
        }
        let read = recovery::event(
            line.number,
            line.offset,
            line.checked(),
            &mut chain,
            (path, seq, limit),
        )?;
        match read {
            Read::Event(event) => {
                events.push(event);
                seq = seq.saturating_add(1);
            }
            Read::Broken(broken) => damage = Some(Damage::new(line.offset, seq, broken)),
        }
    }
    Ok((events, damage.map(Damage::into_parts)))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::fs::{File, OpenOptions};
    use std::io::{self, Write};

    use super::*;
    use crate::store::{Durability, Store};
    use crate::{Session, SessionMeta};

    /// A log file that counts the bytes read from it.
    struct Counted {
        file: File,
        read: Cell<u64>,
    }

    impl ReadAt for Counted {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.file.read_at(offset, buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    /// A version 2 log "s" of `n` host events in `dir`, sealed as a `sync` writer
    /// seals one event per append (each line's `synced` its own offset); its length.
    fn log(dir: &Path, n: u64) -> (JsonlStore, u64) {
        let store = JsonlStore::open(dir, Durability::None).unwrap();
        Session::create(&store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let path = store.path("s").unwrap();
        let head = std::fs::read_to_string(&path).unwrap();
        let hex = &head[head.len() - 11..head.len() - 3];
        let mut prev = u32::from_str_radix(hex, 16).unwrap();
        let mut buf = String::new();
        let mut offset = head.len();
        for i in 0..n {
            let start = buf.len();
            let ty = if i % 100 == 0 { "host/rare" } else { "host/a" };
            buf.push_str(&format!(
                r#"{{"type":"{ty}","seq":{i},"time":1,"data":{{"i":{i},"text":"an event of some length"}}}}"#
            ));
            prev = chain::seal(&mut buf, start, prev, Some((offset + start) as u64));
            buf.push('\n');
        }
        offset += buf.len();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(buf.as_bytes()).unwrap();
        (store, offset as u64)
    }

    /// What `want` of "s" returns and the bytes it read.
    fn counted(store: &JsonlStore, want: Want<'_>) -> (Vec<Event>, u64) {
        let path = store.path("s").unwrap();
        let file = Counted {
            file: File::open(&path).unwrap(),
            read: Cell::new(0),
        };
        let len = file.file.metadata().unwrap().len();
        let (_, events) = read(&file, len, (&path, "s", store.limit), want, (BLOCK, None)).unwrap();
        (events, file.read.get())
    }

    #[test]
    fn the_last_events_cost_what_they_are_not_what_the_log_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut costs = Vec::new();
        for n in [10_000u64, 100_000] {
            let (store, len) = log(&dir.path().join(n.to_string()), n);
            let (_, all) = store.inspect("s").unwrap();
            assert_eq!(all.len() as u64, n);
            let last = Want::Last {
                limit: 20,
                types: None,
            };
            let (tail, tail_cost) = counted(&store, last);
            assert_eq!(tail, all[all.len() - 20..]);
            let (read, read_cost) = counted(&store, Want::Since(n - 20));
            assert_eq!(read, tail);
            // One in a hundred events is "host/rare": the last 3 lie within 300 events.
            let types: &[&str] = &["host/rare"];
            let rare = Want::Last {
                limit: 3,
                types: Some(types),
            };
            let (found, rare_cost) = counted(&store, rare);
            assert_eq!(
                found.iter().map(Event::seq).collect::<Vec<_>>(),
                [n - 300, n - 200, n - 100]
            );
            // A read of everything reads the file, once backward and once forward.
            let (every, every_cost) = counted(&store, Want::Since(0));
            assert_eq!(every.len() as u64, n);
            assert!(every_cost >= len, "{every_cost} < {len}");
            // The header's buffer, a block backward, the 20 lines again forward.
            let bound = (8 << 10) + 2 * BLOCK as u64;
            for cost in [tail_cost, read_cost] {
                assert!(cost <= bound, "{cost} bytes of {len} read for {n} events");
            }
            // The 300 lines it passes, read forward again each time the reach doubles
            // (at most four times their bytes in all).
            let line = len / n;
            assert!(
                rare_cost <= bound + 4 * 300 * line,
                "{rare_cost} bytes of {len} read for the last 3 rare events of {n}"
            );
            eprintln!(
                "{n} events, {len} bytes: tail(20) read {tail_cost} bytes, read(n - 20) \
                 {read_cost}, the last 3 of a type 1 in 100 {rare_cost}, read(0) {every_cost}"
            );
            costs.push((tail_cost, read_cost, rare_cost));
        }
        // Flat: about the same bytes read from a log ten times longer (its lines hold
        // one more digit).
        let (small, large) = (costs[0], costs[1]);
        for (a, b) in [(small.0, large.0), (small.1, large.1), (small.2, large.2)] {
            assert!(
                b <= a + a / 20,
                "{small:?} for 10,000 events, {large:?} for 100,000"
            );
        }
    }
}

//! Reading without owning (ARCHITECTURE.md#checkpoints-and-reading-without-owning):
//! `Store::read` and `Store::tail` of a PostgreSQL session, keyed statements that return
//! the session row and the rows asked for, read through the primary key `(session,
//! seq)`, each row checked as `inspect` checks it (its `crc`, its event, its seq and type
//! columns) and the seqs checked against the session row. A read is one statement; a
//! tail of some types reads the last rows backward in chunks twice as long each time
//! (rows never change once stored), keeping those of its types.

use super::PgStore;
use super::conn::Stmt;
use super::read::{At, event, reading};
use crate::error::{ErrorKind, Result};
use crate::event::Event;
use crate::header::Header;
use crate::json;

/// What a read from the end returns.
#[derive(Clone, Copy, Debug)]
pub(super) enum End<'a> {
    /// The events with `seq >= since`.
    Since(u64),
    /// The last `limit` events, of `types` when given.
    Last(usize, Option<&'a [&'a str]>),
}

/// A stored row: `(seq, type, line, crc)`.
type Row = (i64, String, String, Option<i32>);

impl PgStore {
    /// `Store::read` and `Store::tail` of session `id`: one statement, then the checks.
    pub(super) fn read_end(&self, id: &str, end: End<'_>) -> Result<(Header, Vec<Event>)> {
        let inner = &*self.inner;
        // This handle's own staged appends are visible to its reads.
        inner.settle(id);
        let (header, next_seq, mut rows) = inner.with_conn(id, |conn, inner| {
            let fail = |e: postgres::Error| inner.connector.fail(reading(id), &e, Stmt::Read);
            let mut header = None;
            let mut rows: Vec<Row> = Vec::new();
            // The tail's rows before this seq, this many at a time.
            let (mut before, mut chunk) = (i64::MAX, 0i64);
            loop {
                let found = match end {
                    End::Since(since) => {
                        let since = i64::try_from(since).unwrap_or(i64::MAX);
                        conn.prepared(&inner.sql.read_since)
                            .and_then(|st| conn.client.query(&st, &[&id, &since]))
                    }
                    End::Last(limit, types) => {
                        // Half the range: the statement's lower bound never overflows.
                        let limit = i64::try_from(limit).unwrap_or(i64::MAX).min(i64::MAX / 2);
                        chunk = match types {
                            None => limit,
                            Some(_) => chunk
                                .saturating_mul(2)
                                .max(limit.saturating_mul(2).max(64))
                                .min(i64::MAX / 2),
                        };
                        conn.prepared(&inner.sql.tail)
                            .and_then(|st| conn.client.query(&st, &[&id, &chunk, &before]))
                    }
                }
                .map_err(fail)?;
                let mut scanned = 0i64;
                for row in found {
                    match row.get::<_, Option<i64>>(0) {
                        None => header = Some((row.get::<_, String>(2), row.get::<_, i64>(4))),
                        Some(seq) => {
                            scanned += 1;
                            before = before.min(seq);
                            rows.push((seq, row.get(1), row.get(2), row.get(3)));
                        }
                    }
                }
                if header.is_none() {
                    return Err(inner.not_found(id));
                }
                let End::Last(limit, Some(types)) = end else {
                    break;
                };
                let kept = rows
                    .iter()
                    .filter(|r| types.contains(&r.1.as_str()))
                    .count();
                if kept >= limit || scanned < chunk || before <= 0 {
                    break;
                }
            }
            let (header, next_seq) = header.ok_or_else(|| inner.not_found(id))?;
            Ok((header, next_seq, rows))
        })?;
        let at = inner.at(id);
        let header = Header::from_json(&header).map_err(|e| match e.kind() {
            ErrorKind::FormatUnsupported => e
                .context(format_args!("session {}", json::quote(id)))
                .with_session(id),
            _ => at.corrupt(None, format_args!("its header: {}", e.message())),
        })?;
        if header.id != id {
            return Err(at.corrupt(
                None,
                format_args!("its header names session {}", json::quote(&header.id)),
            ));
        }
        let next_seq = u64::try_from(next_seq)
            .map_err(|_| at.corrupt(None, format_args!("its next seq {next_seq} is negative")))?;
        rows.sort_unstable_by_key(|r| r.0);
        // Every row scanned is one of the last ones, without a gap.
        let scanned = match end {
            End::Last(_, Some(_)) => End::Last(rows.len(), None),
            end => end,
        };
        check_extent(&at, &rows, next_seq, scanned)?;
        if let End::Last(limit, Some(types)) = end {
            rows.retain(|r| types.contains(&r.1.as_str()));
            rows.drain(..rows.len().saturating_sub(limit));
        }
        let events = rows
            .iter()
            .map(|(seq, ty, line, crc)| event(&at, *seq, ty, line, *crc))
            .collect::<Result<Vec<Event>>>()?;
        Ok((header, events))
    }
}

/// Checks that `rows` (in seq order) are what `end` asks of a log whose session row
/// says the next seq is `next_seq`: from `since` without a gap to its end, or its last
/// `limit` rows without a gap (of the types asked for: before its end).
fn check_extent(at: &At<'_>, rows: &[Row], next_seq: u64, end: End<'_>) -> Result<()> {
    if let Some(&(seq, ..)) = rows.first()
        && seq < 0
    {
        return Err(at.corrupt(None, format_args!("a row has the negative seq {seq}")));
    }
    let short = |stored: u64| {
        at.corrupt(
            Some(stored.min(next_seq)),
            format_args!(
                "the session row says the next seq is {next_seq}, but the stored events end before seq {stored}"
            ),
        )
    };
    let last = rows.last().map(|r| r.0 as u64);
    if let Some(last) = last
        && last >= next_seq
    {
        return Err(at.corrupt(
            Some(last),
            format_args!(
                "a row has seq {last}, but the session row says the next seq is {next_seq}"
            ),
        ));
    }
    let first = match end {
        End::Since(since) => since,
        End::Last(limit, None) => next_seq.saturating_sub(limit as u64),
        // Rows of some types: gaps between them are other types' rows.
        End::Last(_, Some(_)) => return Ok(()),
    };
    let mut expected = first;
    for &(seq, ..) in rows {
        let seq = seq as u64;
        if seq != expected {
            return Err(at.corrupt(
                Some(seq),
                format_args!("seq {seq} does not continue the log (expected seq {expected})"),
            ));
        }
        expected += 1;
    }
    if expected < next_seq {
        return Err(short(expected));
    }
    Ok(())
}

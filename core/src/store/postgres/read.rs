//! Reading stored rows back: every row parsed and checked against its own columns, the
//! log's extent checked for gaps, each failure named by session and seq (ARCHITECTURE.md#opening-a-stored-log,
//! ARCHITECTURE.md#postgresql). Opening reads the replayed events alone ([`read_for_open`]); verify, inspect
//! and `events(since)` read every row ([`read_all`]).

use std::fmt;

use postgres::GenericClient;
use postgres::types::Type;

use super::conn::{Connector, Stmt};
use super::schema::{self, Sql};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::header::Header;
use crate::json;

/// Where a stored row is, for messages: `corrupt session "s" in PostgreSQL schema
/// "inboxlog" at seq 5`.
pub(super) struct At<'a> {
    pub schema: &'a str,
    pub id: &'a str,
}

impl At<'_> {
    /// `cause` as the `corrupt` error of the row at `seq` (or of the session row).
    pub fn corrupt(&self, seq: Option<u64>, cause: impl fmt::Display) -> Error {
        let at = match seq {
            Some(seq) => format!(" at seq {seq}"),
            None => String::new(),
        };
        let e = Error::new(
            ErrorKind::Corrupt,
            format!(
                "corrupt session {} in PostgreSQL schema {}{at}: {cause}",
                json::quote(self.id),
                json::quote(self.schema)
            ),
        )
        .with_session(self.id);
        match seq {
            Some(seq) => e.with_seq(seq),
            None => e,
        }
    }

    /// An error of a visitor (or of parsing) as corruption at `seq`.
    pub fn wrap(&self, seq: u64, e: Error) -> Error {
        match e.kind() {
            ErrorKind::TooLarge | ErrorKind::FormatUnsupported => e
                .context(format_args!(
                    "session {} at seq {seq}",
                    json::quote(self.id)
                ))
                .with_session(self.id)
                .with_seq(seq),
            _ => self.corrupt(Some(seq), e.message()),
        }
    }
}

/// The header, epoch and next seq of a session row.
pub(super) struct SessionRow {
    pub header: Header,
    pub epoch: i64,
    pub next_seq: u64,
}

/// Reads and checks the session row of `id`; `None` when there is none.
pub(super) fn session_row(
    client: &mut impl GenericClient,
    sql: &Sql,
    at: &At<'_>,
    connector: &Connector,
) -> Result<Option<SessionRow>> {
    let row = client
        .query_typed_opt(&sql.session, &[(&at.id, Type::TEXT)])
        .map_err(|e| connector.fail(reading(at.id), &e, Stmt::Read))?;
    let Some(row) = row else { return Ok(None) };
    let text: String = row.get(0);
    let header = Header::from_json(&text).map_err(|e| match e.kind() {
        ErrorKind::FormatUnsupported => e
            .context(format_args!("session {}", json::quote(at.id)))
            .with_session(at.id),
        _ => at.corrupt(None, format_args!("its header: {}", e.message())),
    })?;
    if header.id != at.id {
        return Err(at.corrupt(
            None,
            format_args!("its header names session {}", json::quote(&header.id)),
        ));
    }
    let next_seq: i64 = row.get(2);
    let next_seq = u64::try_from(next_seq)
        .map_err(|_| at.corrupt(None, format_args!("its next seq {next_seq} is negative")))?;
    Ok(Some(SessionRow {
        header,
        epoch: row.get(1),
        next_seq,
    }))
}

/// The message part naming what was being read.
pub(super) fn reading(id: &str) -> String {
    format!("cannot read session {}", json::quote(id))
}

/// Parses one stored row `(seq, type, line, crc)`: the line must match its checksum
/// (when the row has one: rows written before schema version 5 have none) and be a
/// valid event whose seq and type are the row's columns.
pub(super) fn event(
    at: &At<'_>,
    seq: i64,
    ty: &str,
    line: &str,
    crc: Option<i32>,
) -> Result<Event> {
    let Ok(seq) = u64::try_from(seq) else {
        return Err(at.corrupt(None, format_args!("a row has the negative seq {seq}")));
    };
    if let Some(stored) = crc
        && stored != schema::crc(line)
    {
        return Err(at.corrupt(
            Some(seq),
            format_args!(
                "the row of seq {seq} does not match its checksum (crc {stored:#010x}, its line gives {:#010x}): the line was changed after it was written",
                schema::crc(line)
            ),
        ));
    }
    let event = Event::from_json(line).map_err(|e| at.wrap(seq, e))?;
    if event.seq() != seq {
        return Err(at.corrupt(
            Some(seq),
            format_args!("the row of seq {seq} holds an event of seq {}", event.seq()),
        ));
    }
    if event.ty() != ty {
        return Err(at.corrupt(
            Some(seq),
            format_args!(
                "the row's type column says {} but its event is of type {}",
                json::quote(ty),
                json::quote(event.ty())
            ),
        ));
    }
    Ok(event)
}

/// The `seq X does not continue the log (expected seq Y)` refusal, as every store words
/// it.
fn gap(at: &At<'_>, seq: u64, expected: u64) -> Error {
    at.corrupt(
        Some(seq),
        format_args!("seq {seq} does not continue the log (expected seq {expected})"),
    )
}

/// Reads every row of `id` with `seq >= since` in order, each parsed and checked, the
/// seqs contiguous from `since`; `end` (the session row's next seq), when given, must be
/// where they stop. Each event goes to `visit` as it arrives.
pub(super) fn read_all(
    client: &mut impl GenericClient,
    sql: &Sql,
    at: &At<'_>,
    since: u64,
    end: Option<u64>,
    connector: &Connector,
    visit: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<()> {
    use postgres::fallible_iterator::FallibleIterator;
    let since_i = i64::try_from(since).unwrap_or(i64::MAX);
    let fail = |e: postgres::Error| connector.fail(reading(at.id), &e, Stmt::Read);
    let mut rows = client
        .query_raw(
            sql.events_from.as_str(),
            [&at.id as &dyn postgres::types::ToSql, &since_i],
        )
        .map_err(fail)?;
    let mut expected = since;
    while let Some(row) = rows.next().map_err(fail)? {
        let seq: i64 = row.get(0);
        if u64::try_from(seq).is_ok_and(|s| s != expected) {
            return Err(gap(at, seq as u64, expected));
        }
        let event = event(at, seq, row.get(1), row.get(2), row.get(3))?;
        visit(event)?;
        expected += 1;
    }
    if let Some(end) = end
        && end != expected
    {
        return Err(at.corrupt(
            Some(expected.min(end)),
            format_args!(
                "the session row says the next seq is {end}, but the stored events end before seq {expected}"
            ),
        ));
    }
    Ok(())
}

/// What opening reads: the replayed (reserved) events with `seq >= since` and the last
/// event, in seq order, after checking by count, min and max that the seqs run from
/// `since` (0, or a checkpoint's seq) to `next_seq - 1` without a gap. A gap is
/// reported after the replayed events before it were visited, so the first problem in
/// log order is the one named (from seq 0 when a checkpoint's range has one).
pub(super) fn read_for_open(
    client: &mut impl GenericClient,
    sql: &Sql,
    at: &At<'_>,
    (since, next_seq): (u64, u64),
    connector: &Connector,
    visit: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<()> {
    let fail = |e: postgres::Error| connector.fail(reading(at.id), &e, Stmt::Read);
    let extent_from = |client: &mut _, from: u64| -> Result<(i64, i64, i64)> {
        let row = GenericClient::query_typed_one(
            client,
            &sql.extent,
            &[(&at.id, Type::TEXT), (&(from as i64), Type::INT8)],
        )
        .map_err(fail)?;
        Ok((row.get(0), row.get(1), row.get(2)))
    };
    let (count, min, max) = extent_from(client, since)?;
    let (n, from) = (next_seq as i64, since as i64);
    let broken = if count == n - from && (count == 0 || (min == from && max == n - 1)) {
        None
    } else {
        let whole = if since == 0 {
            (count, min, max)
        } else {
            extent_from(client, 0)?
        };
        Some(first_break(client, sql, at, whole, next_seq, connector)?)
    };
    let stop = broken.as_ref().map_or(u64::MAX, |(seq, _)| *seq);
    let rows = client
        .query_typed(
            &sql.replayed,
            &[(&at.id, Type::TEXT), (&(since as i64), Type::INT8)],
        )
        .map_err(fail)?;
    let mut seen = None;
    for row in rows {
        let seq: i64 = row.get(0);
        if seq >= 0 && seq as u64 >= stop {
            break;
        }
        let event = event(at, seq, row.get(1), row.get(2), row.get(3))?;
        seen = Some(event.seq());
        visit(event)?;
    }
    if let Some((_, e)) = broken {
        return Err(e);
    }
    if let Some(last) = client
        .query_typed_opt(
            &sql.last,
            &[(&at.id, Type::TEXT), (&(since as i64), Type::INT8)],
        )
        .map_err(fail)?
    {
        let seq: i64 = last.get(0);
        // Not the event before a checkpoint at the end: the checkpoint holds it.
        if seen != u64::try_from(seq).ok() && seq >= since as i64 {
            visit(event(at, seq, last.get(1), last.get(2), last.get(3))?)?;
        }
    }
    Ok(())
}

/// Where the seqs stop running from 0 to `next_seq - 1`, and the error naming it.
fn first_break(
    client: &mut impl GenericClient,
    sql: &Sql,
    at: &At<'_>,
    (count, min, max): (i64, i64, i64),
    next_seq: u64,
    connector: &Connector,
) -> Result<(u64, Error)> {
    if min < 0 {
        return Err(at.corrupt(None, format_args!("a row has the negative seq {min}")));
    }
    if count > 0 && min != 0 {
        return Ok((0, gap(at, min as u64, 0)));
    }
    let gap_at: Option<i64> = client
        .query_opt(sql.first_gap.as_str(), &[&at.id])
        .map_err(|e| connector.fail(reading(at.id), &e, Stmt::Read))?
        .map(|row| row.get(0));
    if let Some(seq) = gap_at {
        let seq = seq as u64;
        // The row before the gap is the last contiguous one.
        let expected = client
            .query_one(
                &format!(
                    "SELECT max(seq) FROM \"{}\".events WHERE session = $1 AND seq < $2",
                    sql.schema
                ),
                &[&at.id, &(seq as i64)],
            )
            .map_err(|e| connector.fail(reading(at.id), &e, Stmt::Read))?
            .get::<_, i64>(0) as u64
            + 1;
        return Ok((expected, gap(at, seq, expected)));
    }
    let stored = (max + 1) as u64;
    Ok((
        stored.min(next_seq),
        at.corrupt(
            Some(stored.min(next_seq)),
            format_args!(
                "the session row says the next seq is {next_seq}, but the stored events end before seq {stored}"
            ),
        ),
    ))
}

/// The `invalid_input` for a seed whose seqs do not run from 0.
pub(super) fn seed_gap(index: usize, seq: u64) -> Error {
    invalid(format!(
        "seed event at index {index} has seq {seq} (seeds start at seq 0, contiguous)"
    ))
}

//! One writer at a time, across machines (ARCHITECTURE.md#postgresql): a live owner is a
//! store handle whose home connection holds its owner lock, plus an epoch fence on every
//! append.
//!
//! Every `PgStore` handle that writes has an **owner id**, a number from the schema's
//! `epochs` sequence (never handed out twice), and holds one session-level advisory lock
//! keyed by it on its home connection (`home.rs`) for as long as that connection lives.
//! A session row names its current **epoch** (the identity of its current writer) and
//! the **owner** (the handle of that writer; NULL once the writer closed). One lock per
//! handle, however many sessions it has open, so ownership costs no connection per
//! session.
//!
//! An epoch is an identity, not a clock: when two takeovers race, the one whose update
//! reaches the server last wins, and its epoch may be the smaller number; nothing here
//! compares epochs by size, only for equality.
//!
//! **Open** probes the row in one statement: its epoch, owner and next seq, and whether
//! the owner's lock is held (a shared, transaction-level try of it, released at once, so
//! any number of openers may probe together). Held means a live owner, and the open is
//! refused at once with `locked` (first bullet of the contract); so is a session the
//! opening handle itself has open. Otherwise the owner is gone for good (its id is never
//! used again) or the session was closed: the opener reads and checks the log, then moves
//! the row to a new epoch and its own owner id only if it still holds the epoch, owner
//! and next seq it probed (a racing opener or a takeover that got there first makes this
//! a `locked`). **Takeover** moves the row to a new epoch and owner unconditionally,
//! without waiting for the stuck owner. **Every append** is one statement, so one
//! transaction: it updates `next_seq` only where the row still holds this writer's epoch
//! and the seq its tail expects, and inserts its rows only if that update happened
//! (second bullet). A writer whose epoch moved gets `fenced`, writes nothing and stays
//! fenced; one whose tail moved under the same epoch met a foreign writer: `corrupt`,
//! naming both seqs. Row locking serializes an append with a takeover's update, so the
//! old owner's append either committed before the takeover (and the new owner, which
//! reads after its update, sees it) or finds the epoch moved and writes nothing (fourth
//! bullet). A handle that dies releases its lock with its home connection: a killed
//! process's socket is closed by the kernel and its backend exits at once; for a machine
//! that vanished the server's TCP keepalives (1 s idle, 1 s interval, 1 probe, and
//! `tcp_user_timeout` 2 s, set on every connection) end the backend within about 2 s of
//! the silence (third bullet). A handle whose home connection alone was lost (a
//! terminated backend, a network blip) takes a new owner id and re-owns, in one
//! statement, the sessions still at its epochs; any that another worker opened in
//! between were moved to a new epoch, so their old writers are fenced: never two
//! writers. Opening then repairs an interrupted turn through the same fenced append
//! (fifth bullet).

use std::sync::Arc;

use postgres::Client;

use super::conn::{Connector, Stmt};
use super::schema::Sql;
use super::writer::PgWriter;
use super::{Inner, PgStore, read_owned};
use crate::error::{Error, ErrorKind, Result};
use crate::header::Header;
use crate::id::validate_session_id;
use crate::json;
use crate::store::{Opened, Replay};

/// The salt of `schema`'s owner lock keys: 64-bit FNV-1a over the schema and a tag,
/// stable across processes, machines and versions. The key of owner `n` is
/// `salt ^ n` (SQL `#`), so owners of one schema never share a key.
pub(super) fn salt(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in schema.as_bytes().iter().chain(b"\0inboxlog owner") {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

/// What an open learns of a session row in one statement.
#[derive(Clone, Copy, Debug)]
pub(super) struct Probe {
    pub epoch: i64,
    /// The handle whose writer holds the epoch; `None` once it closed.
    pub owner: Option<i64>,
    pub next_seq: i64,
    /// Whether that handle's lock is held: it lives.
    pub alive: bool,
}

/// The row of `id` and whether its owner lives; `None` when there is no such session.
pub(super) fn probe(
    client: &mut Client,
    sql: &Sql,
    salt: i64,
    id: &str,
    connector: &Connector,
) -> Result<Option<Probe>> {
    client
        .query_opt(sql.probe.as_str(), &[&id, &salt])
        .map(|row| {
            row.map(|r| Probe {
                epoch: r.get(0),
                owner: r.get(1),
                next_seq: r.get(2),
                alive: r.get(3),
            })
        })
        .map_err(|e| connector.fail(doing("read the owner of", id), &e, Stmt::Read))
}

/// Moves `id` from what `probe` saw to a new epoch owned by `me`; the new epoch, or
/// `None` when the row moved meanwhile.
pub(super) fn claim(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    seen: &Probe,
    me: i64,
    connector: &Connector,
) -> Result<Option<i64>> {
    client
        .query_opt(
            sql.claim.as_str(),
            &[&id, &seen.epoch, &seen.owner, &seen.next_seq, &me],
        )
        .map(|row| row.map(|r| r.get(0)))
        .map_err(|e| connector.fail(doing("take ownership of", id), &e, Stmt::Write))
}

/// Moves `id` to a new epoch owned by `me` whatever its state (a takeover); `None` when
/// there is no such session.
pub(super) fn take_over(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    me: i64,
    connector: &Connector,
) -> Result<Option<i64>> {
    client
        .query_opt(sql.take_over.as_str(), &[&id, &me])
        .map(|row| row.map(|r| r.get(0)))
        .map_err(|e| connector.fail(doing("take over", id), &e, Stmt::Write))
}

/// Marks `id` closed by the writer of `epoch` (no row changes if another took it).
pub(super) fn release(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    epoch: i64,
    connector: &Connector,
) -> Result<()> {
    client
        .execute(sql.release.as_str(), &[&id, &epoch])
        .map(drop)
        .map_err(|e| connector.fail(doing("close", id), &e, Stmt::Write))
}

/// The current epoch and next seq of `id`, `None` when there is no such session.
pub(super) fn current(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    connector: &Connector,
) -> Result<Option<(i64, i64)>> {
    client
        .query_opt(sql.owner.as_str(), &[&id])
        .map(|row| row.map(|r| (r.get(0), r.get(1))))
        .map_err(|e| connector.fail(doing("read the owner of", id), &e, Stmt::Read))
}

fn doing(verb: &str, id: &str) -> String {
    format!("cannot {verb} session {}", json::quote(id))
}

/// The `locked` error of an open.
pub(super) fn locked(id: &str, why: &str) -> Error {
    Error::new(
        ErrorKind::Locked,
        format!(
            "session {} is locked by another writer ({why}); open it with takeover if that \
             writer is stuck",
            json::quote(id)
        ),
    )
    .with_session(id)
}

/// The ownership steps of opening a session for writing.
impl PgStore {
    /// Opening for writing; see [`Store::open`](crate::store::Store::open).
    pub(super) fn open_owned(
        &self,
        id: &str,
        takeover: bool,
        replay: &mut dyn Replay,
    ) -> Result<Opened> {
        validate_session_id(id)?;
        let inner = &*self.inner;
        let me = inner.home.owner().map_err(|e| e.with_session(id))?;
        if !takeover && !inner.home.reserve(id) {
            return Err(locked(id, "this store handle has it open"));
        }
        let owned = inner.with_client(id, |client, inner| {
            if takeover {
                take_over_and_read(inner, client, id, me, replay)
            } else {
                take_free(inner, client, id, me, replay)
            }
        });
        match owned {
            Ok((header, epoch, next_seq, checkpoint)) => {
                let writer = PgWriter::new(Arc::clone(&self.inner), id, epoch, next_seq)
                    .with_checkpoint(checkpoint);
                Ok(Opened {
                    header,
                    writer: Box::new(writer),
                    torn_bytes: 0,
                })
            }
            Err(e) => {
                if !takeover {
                    inner.home.unreserve(id);
                }
                Err(e.with_session(id))
            }
        }
    }
}

/// An ordinary open: refused with `locked` at once while the owner of the session lives;
/// otherwise the log is read, then the session moves to a new epoch owned by this handle,
/// only if nobody moved it meanwhile (see the head of this file). A refused open changes nothing.
fn take_free(
    inner: &Inner,
    client: &mut Client,
    id: &str,
    me: i64,
    replay: &mut dyn Replay,
) -> Result<(Header, i64, u64, Option<u64>)> {
    let (sql, connector) = (&inner.sql, &inner.connector);
    let seen = probe(client, sql, inner.salt, id, connector)?.ok_or_else(|| inner.not_found(id))?;
    // This handle's own sessions are free once their writer closed (the reservation
    // made by the caller refused one still open).
    if seen.alive && seen.owner != Some(me) {
        return Err(locked(id, "its owner is alive"));
    }
    let (row, checkpoint) = read_owned(inner, client, id, replay)?;
    if row.epoch != seen.epoch {
        return Err(locked(
            id,
            "another writer took it while it was being opened",
        ));
    }
    let fresh = claim(client, sql, id, &seen, me, connector)?
        .ok_or_else(|| locked(id, "another writer took it while it was being opened"))?;
    Ok((row.header, fresh, row.next_seq, checkpoint))
}

/// A takeover: the session moves to a new epoch owned by this handle at once, fencing
/// its writer whatever state it is in, then the log is read (after every append of the
/// old writer that committed before the move).
fn take_over_and_read(
    inner: &Inner,
    client: &mut Client,
    id: &str,
    me: i64,
    replay: &mut dyn Replay,
) -> Result<(Header, i64, u64, Option<u64>)> {
    let (sql, connector) = (&inner.sql, &inner.connector);
    let fresh = take_over(client, sql, id, me, connector)?.ok_or_else(|| inner.not_found(id))?;
    let (row, checkpoint) = read_owned(inner, client, id, replay)?;
    if row.epoch != fresh {
        return Err(locked(id, "another takeover came after this one"));
    }
    Ok((row.header, fresh, row.next_seq, checkpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_are_stable_and_tell_schemas_apart() {
        // Pinned: another process, machine or version must compute the same key.
        assert_eq!(salt("inboxlog"), salt("inboxlog"));
        assert_eq!(salt("inboxlog"), -7_165_426_122_119_391_284);
        assert_ne!(salt("inboxlog"), salt("other"));
        assert_ne!(salt("inboxlog") ^ 1, salt("inboxlog") ^ 2);
    }
}

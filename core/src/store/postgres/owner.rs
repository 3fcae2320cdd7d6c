//! One writer at a time, across machines (ARCHITECTURE.md#postgresql): an advisory lock keyed by the
//! ownership epoch, plus an epoch fence on every append.
//!
//! Every open session has a connection of its own. `sessions.epoch` names the current
//! owner; epochs come from the schema's `epochs` sequence, so an epoch is never used
//! twice, not even after a session is deleted and its id created again. An epoch is an
//! identity, not a clock: when two takeovers race, the one whose update reaches the
//! server last wins, and its epoch may be the smaller number (the row moves from 3 to
//! 2); nothing here compares epochs by size, only for equality. The owner of
//! epoch `e` holds the session-level advisory lock `key(schema, id, e)` on its
//! connection. **Open** reads `e` and tries that lock without waiting: refused means a
//! live owner holds it, and the open is refused at once with `locked` (first bullet).
//! Granted means the owner of `e` is gone: the opener reads and checks the log under
//! the lock, then takes a new epoch `n`, its lock, and moves the row from `e` to `n`
//! only if it still says `e` and the same next seq (a racing opener or a takeover that
//! got there first makes this a `locked`). **Takeover** moves the row to a new epoch
//! unconditionally and takes that epoch's lock, without waiting for the stuck owner,
//! whose lock now guards an epoch nobody looks at. **Every append** is one statement,
//! so one transaction: it updates `next_seq` only where the row still holds this
//! writer's epoch and the seq its tail expects, and inserts its rows only if that update
//! happened (second bullet). A writer whose epoch moved gets `fenced`, writes nothing,
//! releases its lock and stays fenced; one whose tail moved under the same epoch met a
//! foreign writer: `corrupt`, naming both seqs. Row locking serializes an append with a
//! takeover's update, so the old owner's append either committed before the takeover
//! (and the new owner, which reads after its update, sees it) or finds the epoch moved
//! and writes nothing (fourth bullet). An owner that dies releases its lock with its
//! connection: a killed process's socket is closed by the kernel and its backend exits
//! at once; for a machine that vanished the server's TCP keepalives (set per connection
//! to 1 s idle, 1 s interval, 1 probe, and `tcp_user_timeout` 2 s) end the backend
//! within about 2 s of the silence, bounded by the server's and the network's honouring
//! of those settings (third bullet). Opening then repairs an interrupted turn through
//! the same fenced append (fifth bullet).

use postgres::Client;

use super::conn::{Connector, Stmt};
use super::schema::Sql;
use crate::error::{Error, ErrorKind, Result};
use crate::json;

/// The advisory lock key of `id`'s owner of `epoch` in `schema`: 64-bit FNV-1a over
/// the three, stable across processes, machines and versions.
pub(super) fn key(schema: &str, id: &str, epoch: i64) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(schema.as_bytes());
    eat(&[0]);
    eat(id.as_bytes());
    eat(&[0]);
    eat(&epoch.to_le_bytes());
    hash as i64
}

/// Tries the owner lock of `epoch` on `client` without waiting.
pub(super) fn try_lock(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    epoch: i64,
    connector: &Connector,
) -> Result<bool> {
    client
        .query_one(
            "SELECT pg_try_advisory_lock($1)",
            &[&key(&sql.schema, id, epoch)],
        )
        .map(|row| row.get(0))
        .map_err(|e| connector.fail(doing("lock", id), &e, Stmt::Read))
}

/// Releases the owner lock of `epoch` held on `client`.
pub(super) fn unlock(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    epoch: i64,
    connector: &Connector,
) -> Result<()> {
    client
        .execute(
            "SELECT pg_advisory_unlock($1)",
            &[&key(&sql.schema, id, epoch)],
        )
        .map(drop)
        .map_err(|e| connector.fail(doing("unlock", id), &e, Stmt::Read))
}

/// A fresh epoch from the schema's sequence, locked on `client` (nobody else can hold
/// it: it was never handed out before).
pub(super) fn fresh_epoch(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    connector: &Connector,
) -> Result<i64> {
    let epoch: i64 = client
        .query_one(sql.next_epoch.as_str(), &[])
        .map(|row| row.get(0))
        .map_err(|e| connector.fail(doing("take an epoch for", id), &e, Stmt::Read))?;
    if !try_lock(client, sql, id, epoch, connector)? {
        // Only a hash collision with another lock could do this.
        return Err(locked(id, "its new epoch's lock is held elsewhere"));
    }
    Ok(epoch)
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

/// Moves `id` from `from` (with `next_seq` unchanged) to the locked epoch `to`; `false`
/// when the row moved meanwhile.
pub(super) fn claim(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    (from, next_seq): (i64, i64),
    to: i64,
    connector: &Connector,
) -> Result<bool> {
    client
        .execute(sql.bump.as_str(), &[&id, &to, &from, &next_seq])
        .map(|n| n == 1)
        .map_err(|e| connector.fail(doing("take ownership of", id), &e, Stmt::Write))
}

/// Moves `id` to the locked epoch `to` whatever its epoch (a takeover); `false` when
/// there is no such session.
pub(super) fn take_over(
    client: &mut Client,
    sql: &Sql,
    id: &str,
    to: i64,
    connector: &Connector,
) -> Result<bool> {
    client
        .execute(sql.bump_any.as_str(), &[&id, &to])
        .map(|n| n == 1)
        .map_err(|e| connector.fail(doing("take over", id), &e, Stmt::Write))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_tell_apart_schema_id_and_epoch() {
        // Pinned: another process, machine or version must compute the same key.
        assert_eq!(key("inboxlog", "s", 1), key("inboxlog", "s", 1));
        assert_eq!(key("inboxlog", "s", 1), 2_990_799_446_248_234_355);
        let keys = [
            key("inboxlog", "s", 1),
            key("inboxlog", "s", 2),
            key("inboxlog", "t", 1),
            key("other", "s", 1),
            key("inboxlo", "gs", 1),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}

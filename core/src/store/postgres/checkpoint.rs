//! A session's checkpoint in the PostgreSQL store
//! (ARCHITECTURE.md#checkpoints-and-reading-without-owning): one row of
//! `<schema>.checkpoints`, keyed by session, holding `Checkpoint::to_json` bound by the
//! stored `crc` of the event before it. Read in the snapshot that reads the events;
//! written by the writer, fenced by its epoch.

use postgres::GenericClient;
use postgres::types::Type;

use super::conn::{Connector, Stmt};
use super::read::{At, reading};
use super::schema::Sql;
use crate::checkpoint::{Checkpoint, corrupt};
use crate::error::Result;

/// How errors name the checkpoint of the session `at` names.
fn name(sql: &Sql, at: &At<'_>) -> String {
    format!(
        "of session {} (\"{}\".checkpoints)",
        crate::json::quote(at.id),
        sql.schema
    )
}

/// The checkpoint of the session `at` names, if it has one, checked against the stored
/// events: its checksum, its seq (the row's), and its binding (the stored `crc` of the
/// event at `seq - 1`). Any mismatch is `corrupt`, naming it.
pub(super) fn read(
    client: &mut impl GenericClient,
    sql: &Sql,
    at: &At<'_>,
    connector: &Connector,
) -> Result<Option<Checkpoint>> {
    let row = client
        .query_typed_opt(&sql.checkpoint, &[(&at.id, Type::TEXT)])
        .map_err(|e| connector.fail(reading(at.id), &e, Stmt::Read))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (seq, body, crc): (i64, String, Option<i32>) = (row.get(0), row.get(1), row.get(2));
    let name = name(sql, at);
    let refuse = |why: String| corrupt(&name, why).with_session(at.id);
    let Some((checkpoint, binding)) =
        Checkpoint::parse(&body, &name).map_err(|e| e.with_session(at.id))?
    else {
        // Of an earlier release: the log is read from seq 0, the next close replaces it.
        return Ok(None);
    };
    if checkpoint.seq() as i64 != seq || seq < 1 {
        return Err(refuse(format!(
            "its row says seq {seq}, its state seq {}",
            checkpoint.seq()
        )));
    }
    match crc {
        Some(crc) if crc as u32 == binding.chain => Ok(Some(checkpoint)),
        Some(crc) => Err(refuse(format!(
            "it is not a checkpoint of this log (it is bound to checksum {:08x}, the event at seq {} has {:08x})",
            binding.chain,
            seq - 1,
            crc as u32
        ))
        .with_seq(seq as u64 - 1)),
        None => Err(refuse(format!(
            "it is not a checkpoint of this log (no event at seq {} with a checksum to bind it)",
            seq - 1
        ))
        .with_seq(seq as u64 - 1)),
    }
}

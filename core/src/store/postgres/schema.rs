//! The tables (ARCHITECTURE.md#postgresql), created on first use and versioned, and the SQL text of
//! every statement the store runs, with the schema's name put in once.
//!
//! ```sql
//! CREATE TABLE <schema>.schema_version (version integer NOT NULL);   -- one row: 2
//! CREATE SEQUENCE <schema>.epochs;             -- ownership epochs, never reused
//! CREATE TABLE <schema>.sessions (
//!     id text PRIMARY KEY, header text NOT NULL,   -- the ARCHITECTURE.md#header header, compact JSON
//!     epoch bigint NOT NULL,                       -- the owner's epoch (see owner.rs)
//!     next_seq bigint NOT NULL);                   -- the seq the next event gets
//! CREATE TABLE <schema>.events (
//!     session text NOT NULL REFERENCES <schema>.sessions (id) ON DELETE CASCADE,
//!     seq bigint NOT NULL, type text NOT NULL,
//!     line text NOT NULL,                          -- the ARCHITECTURE.md#events event, compact JSON text
//!     PRIMARY KEY (session, seq));
//! CREATE INDEX events_reserved ON <schema>.events (session, seq)
//!     WHERE type IN ('turn/start', 'turn/end', 'step/start', 'step/end',
//!                    'agent/inbox/spliced', 'session/end-seed');
//! CREATE SEQUENCE <schema>.post_numbers;       -- the global post order (version 2)
//! CREATE TABLE <schema>.posts (                -- the mailboxes (ARCHITECTURE.md#posting)
//!     session text NOT NULL REFERENCES <schema>.sessions (id) ON DELETE CASCADE,
//!     post text PRIMARY KEY,                       -- "pg-<n>", carried into the log
//!     n bigint NOT NULL,                           -- post order (per poster too)
//!     target text NOT NULL, message text NOT NULL, -- the ARCHITECTURE.md#inbox message, compact JSON
//!     posted_at timestamptz NOT NULL DEFAULT now());
//! CREATE INDEX posts_pending ON <schema>.posts (session, n);
//! ```
//!
//! Version 1 had no mailbox: a store meeting version-1 tables adds `post_numbers` and
//! `posts` and sets the version to 2, in the same transaction under the same lock as
//! creation (every statement is `IF NOT EXISTS`, so workers upgrading at once agree).
//!
//! `line` is text, never `jsonb`: it is byte for byte the line the JSONL store would
//! write (key order and big integers survive), so `SELECT line FROM
//! inboxlog.events WHERE session = 's' ORDER BY seq` is the log. The partial index lets
//! opening read the events that rebuild the inbox and the protocol state without
//! touching host events.

use postgres::Client;

use super::conn::{Connector, Stmt};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::REPLAYED;
use crate::json;

/// The version of the tables this library reads and writes.
pub const SCHEMA_VERSION: i32 = 2;

/// The version before the mailbox; upgraded in place to [`SCHEMA_VERSION`].
const VERSION_WITHOUT_POSTS: i32 = 1;

/// The default schema.
pub const DEFAULT_SCHEMA: &str = "inboxlog";

/// Held (per transaction) while the tables are created: workers starting at once
/// create them one after the other, and all but the first find them made.
const CREATE_LOCK: i64 = 0x696e_626f_786c_6f67; // "inboxlog"

/// Checks a schema name: a plain SQL identifier `[a-z_][a-z0-9_]*`, at most 63 bytes.
pub fn validate_schema(name: &str) -> Result<()> {
    let plain = name
        .bytes()
        .enumerate()
        .all(|(i, b)| b == b'_' || b.is_ascii_lowercase() || (i > 0 && b.is_ascii_digit()));
    if name.is_empty() || name.len() > 63 || !plain {
        return Err(invalid(format!(
            "schema name {} is not a plain SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes)",
            json::quote(name)
        )));
    }
    Ok(())
}

/// The `IN (…)` list of [`REPLAYED`], as SQL.
fn replayed_list() -> String {
    let quoted: Vec<String> = REPLAYED.iter().map(|t| format!("'{t}'")).collect();
    quoted.join(", ")
}

/// Every statement, for one schema.
#[derive(Debug)]
pub(super) struct Sql {
    pub schema: String,
    pub version: String,
    pub create: String,
    pub next_epoch: String,
    pub session: String,
    pub insert_session: String,
    pub insert_events: String,
    pub append: String,
    pub owner: String,
    pub bump: String,
    pub bump_any: String,
    pub extent: String,
    pub replayed: String,
    pub last: String,
    pub first_gap: String,
    pub events_from: String,
    pub list: String,
    pub delete: String,
    pub append_posted: String,
    pub post: String,
    pub pending: String,
    pub settle: String,
    pub exists: String,
    /// The LISTEN/NOTIFY channel of the schema's appends (payload: the session id).
    pub channel: String,
}

impl Sql {
    pub fn new(schema: &str) -> Sql {
        let s = format!("\"{schema}\"");
        let events_cols = "seq, type, line";
        Sql {
            schema: schema.to_owned(),
            version: format!("SELECT version FROM {s}.schema_version"),
            create: format!(
                "CREATE SCHEMA IF NOT EXISTS {s};
                 CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL);
                 CREATE SEQUENCE IF NOT EXISTS {s}.epochs;
                 CREATE TABLE IF NOT EXISTS {s}.sessions (
                     id text PRIMARY KEY,
                     header text NOT NULL,
                     epoch bigint NOT NULL,
                     next_seq bigint NOT NULL);
                 CREATE TABLE IF NOT EXISTS {s}.events (
                     session text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                     seq bigint NOT NULL,
                     type text NOT NULL,
                     line text NOT NULL,
                     PRIMARY KEY (session, seq));
                 CREATE INDEX IF NOT EXISTS events_reserved ON {s}.events (session, seq)
                     WHERE type IN ({});
                 CREATE SEQUENCE IF NOT EXISTS {s}.post_numbers;
                 CREATE TABLE IF NOT EXISTS {s}.posts (
                     session text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                     post text PRIMARY KEY,
                     n bigint NOT NULL,
                     target text NOT NULL,
                     message text NOT NULL,
                     posted_at timestamptz NOT NULL DEFAULT now());
                 CREATE INDEX IF NOT EXISTS posts_pending ON {s}.posts (session, n);",
                replayed_list()
            ),
            next_epoch: format!("SELECT nextval('{s}.epochs')"),
            session: format!("SELECT header, epoch, next_seq FROM {s}.sessions WHERE id = $1"),
            insert_session: format!(
                "INSERT INTO {s}.sessions (id, header, epoch, next_seq) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (id) DO NOTHING"
            ),
            insert_events: format!(
                "INSERT INTO {s}.events (session, seq, type, line)
                 SELECT $1, x.s, x.t, x.l FROM unnest($2::bigint[], $3::text[], $4::text[]) AS x(s, t, l)"
            ),
            // One statement, so one transaction: the fence (this writer's epoch), the
            // tail check (its next seq) and the rows commit together or not at all.
            // The NOTIFY of followers (delivered on commit) is the RETURNING of the
            // fence, so it runs exactly when the append does.
            append: format!(
                "WITH owner AS (
                     UPDATE {s}.sessions SET next_seq = $4
                     WHERE id = $1 AND epoch = $2 AND next_seq = $3
                     RETURNING pg_notify('{schema}', $1))
                 INSERT INTO {s}.events (session, seq, type, line)
                 SELECT $1, x.s, x.t, x.l FROM unnest($5::bigint[], $6::text[], $7::text[]) AS x(s, t, l)
                 WHERE EXISTS (SELECT 1 FROM owner)"
            ),
            // The append that takes posts in ($8, their ids) also removes them from the
            // mailbox: one statement, so the events and the removal commit together.
            append_posted: format!(
                "WITH owner AS (
                     UPDATE {s}.sessions SET next_seq = $4
                     WHERE id = $1 AND epoch = $2 AND next_seq = $3
                     RETURNING pg_notify('{schema}', $1)),
                 gone AS (
                     DELETE FROM {s}.posts
                     WHERE session = $1 AND post = ANY($8::text[]) AND EXISTS (SELECT 1 FROM owner))
                 INSERT INTO {s}.events (session, seq, type, line)
                 SELECT $1, x.s, x.t, x.l FROM unnest($5::bigint[], $6::text[], $7::text[]) AS x(s, t, l)
                 WHERE EXISTS (SELECT 1 FROM owner)"
            ),
            post: format!(
                "WITH k AS (SELECT nextval('{s}.post_numbers') AS n)
                 INSERT INTO {s}.posts (session, post, n, target, message)
                 SELECT $1, 'pg-' || lpad(k.n::text, 16, '0'), k.n, $2, $3 FROM k
                 WHERE EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)
                 RETURNING post"
            ),
            pending: format!(
                "SELECT post, target, message FROM {s}.posts WHERE session = $1 ORDER BY n"
            ),
            settle: format!("DELETE FROM {s}.posts WHERE session = $1 AND post = ANY($2::text[])"),
            exists: format!("SELECT 1 FROM {s}.sessions WHERE id = $1"),
            channel: format!("\"{schema}\""),
            owner: format!("SELECT epoch, next_seq FROM {s}.sessions WHERE id = $1"),
            bump: format!(
                "UPDATE {s}.sessions SET epoch = $2 WHERE id = $1 AND epoch = $3 AND next_seq = $4"
            ),
            bump_any: format!("UPDATE {s}.sessions SET epoch = $2 WHERE id = $1"),
            extent: format!(
                "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), -1)
                 FROM {s}.events WHERE session = $1"
            ),
            replayed: format!(
                "SELECT {events_cols} FROM {s}.events
                 WHERE session = $1 AND type IN ({}) ORDER BY seq",
                replayed_list()
            ),
            last: format!(
                "SELECT {events_cols} FROM {s}.events WHERE session = $1 ORDER BY seq DESC LIMIT 1"
            ),
            first_gap: format!(
                "SELECT e.seq FROM {s}.events e WHERE e.session = $1 AND e.seq <> 0
                   AND NOT EXISTS (SELECT 1 FROM {s}.events p
                                   WHERE p.session = $1 AND p.seq = e.seq - 1)
                 ORDER BY e.seq LIMIT 1"
            ),
            events_from: format!(
                "SELECT {events_cols} FROM {s}.events WHERE session = $1 AND seq >= $2 ORDER BY seq"
            ),
            list: format!("SELECT id, header FROM {s}.sessions ORDER BY id COLLATE \"C\""),
            delete: format!("DELETE FROM {s}.sessions WHERE id = $1 AND epoch = $2"),
        }
    }
}

/// Makes sure the tables exist in the store's schema at [`SCHEMA_VERSION`]: a quick read
/// when they do; otherwise one transaction that takes [`CREATE_LOCK`] first, so that
/// workers starting at once all succeed. A newer version is refused.
pub(super) fn ensure(client: &mut Client, sql: &Sql, connector: &Connector) -> Result<()> {
    let found = match client.query_opt(sql.version.as_str(), &[]) {
        Ok(row) => Some(row.map(|r| r.get::<_, i32>(0))),
        // No schema or no table yet (42P01 undefined table, 3F000 undefined schema).
        Err(e) if matches!(e.code().map(|c| c.code()), Some("42P01" | "3F000")) => None,
        Err(e) => return Err(connector.fail(what(sql), &e, Stmt::Read)),
    };
    let version = match found {
        Some(Some(v)) if v != VERSION_WITHOUT_POSTS => v,
        _ => create(client, sql, connector)?,
    };
    check_version(version, &sql.schema)
}

fn what(sql: &Sql) -> String {
    format!(
        "cannot set up the inboxlog tables in schema {}",
        json::quote(&sql.schema)
    )
}

fn create(client: &mut Client, sql: &Sql, connector: &Connector) -> Result<i32> {
    let fail = |e: postgres::Error| connector.fail(what(sql), &e, Stmt::Read);
    let mut tx = client.transaction().map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK])
        .map_err(fail)?;
    tx.batch_execute(&sql.create).map_err(fail)?;
    let stored = tx.query_opt(sql.version.as_str(), &[]).map_err(fail)?;
    let version = match stored.map(|row| row.get::<_, i32>(0)) {
        Some(v) if v != VERSION_WITHOUT_POSTS => v,
        None => {
            tx.execute(
                &format!(
                    "INSERT INTO \"{}\".schema_version (version) VALUES ($1)",
                    sql.schema
                ),
                &[&SCHEMA_VERSION],
            )
            .map_err(fail)?;
            SCHEMA_VERSION
        }
        Some(_) => {
            // Version 1: the mailbox was created just above: the upgrade is complete.
            tx.execute(
                &format!("UPDATE \"{}\".schema_version SET version = $1", sql.schema),
                &[&SCHEMA_VERSION],
            )
            .map_err(fail)?;
            SCHEMA_VERSION
        }
    };
    tx.commit().map_err(fail)?;
    Ok(version)
}

/// Refuses tables of another version, naming both and the direction.
pub(super) fn check_version(found: i32, schema: &str) -> Result<()> {
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let direction = if found > SCHEMA_VERSION {
        "written by a newer inboxlog"
    } else {
        "older format, no upgrade path"
    };
    Err(Error::new(
        ErrorKind::FormatUnsupported,
        format!(
            "PostgreSQL schema {} holds inboxlog tables of version {found} ({direction}); \
             this inboxlog reads version {SCHEMA_VERSION}",
            json::quote(schema)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["inboxlog", "_x", "a1_b2", &"a".repeat(63)] {
            validate_schema(good).unwrap();
        }
        for bad in [
            "",
            "1a",
            "Inboxlog",
            "a-b",
            "a b",
            "a\"b",
            "x;drop",
            "é",
            &"a".repeat(64),
        ] {
            let err = validate_schema(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
            assert!(
                err.to_string().contains("not a plain SQL identifier"),
                "{err}"
            );
        }
    }

    #[test]
    fn versions_other_than_ours_are_refused_naming_both() {
        check_version(SCHEMA_VERSION, "s").unwrap();
        let newer = check_version(3, "s").unwrap_err();
        assert_eq!(newer.kind(), ErrorKind::FormatUnsupported);
        assert_eq!(
            newer.to_string(),
            "PostgreSQL schema \"s\" holds inboxlog tables of version 3 (written by a newer \
             inboxlog); this inboxlog reads version 2"
        );
        let older = check_version(0, "s").unwrap_err();
        assert!(
            older.to_string().contains("version 0 (older format"),
            "{older}"
        );
    }

    #[test]
    fn the_index_and_the_query_name_the_same_types() {
        let sql = Sql::new("s");
        let list = replayed_list();
        assert!(sql.create.contains(&list) && sql.replayed.contains(&list));
        assert_eq!(
            list,
            "'turn/start', 'turn/end', 'step/start', 'step/end', 'agent/inbox/spliced', \
             'session/end-seed'"
        );
    }
}

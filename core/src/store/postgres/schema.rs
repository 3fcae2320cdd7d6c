//! The tables (ARCHITECTURE.md#postgresql), created on first use and versioned, and the SQL text of
//! every statement the store runs, with the schema's name put in once.
//!
//! ```sql
//! CREATE TABLE <schema>.schema_version (version integer NOT NULL);   -- one row: 7
//! CREATE SEQUENCE <schema>.epochs;             -- ownership epochs and owner ids, never reused
//! CREATE TABLE <schema>.sessions (
//!     id text PRIMARY KEY, header text NOT NULL,   -- the ARCHITECTURE.md#header header, compact JSON
//!     epoch bigint NOT NULL,                       -- the owner's epoch (see owner.rs)
//!     next_seq bigint NOT NULL,                    -- the seq the next event gets
//!     owner bigint);                               -- the owning store handle (version 3)
//! CREATE TABLE <schema>.events (
//!     session text NOT NULL,                       -- a session's id (no foreign key: below)
//!     seq bigint NOT NULL, type text NOT NULL,
//!     line text NOT NULL,                          -- the ARCHITECTURE.md#events event, compact JSON text
//!     crc integer,                                 -- CRC-32C of `line`'s bytes (version 5; NULL before)
//!     PRIMARY KEY (session, seq));
//! CREATE INDEX events_replay ON <schema>.events (session, seq)  -- version 8
//!     WHERE type IN ('turn/start', 'turn/end', 'step/start', 'step/end',
//!                    'agent/inbox/spliced', 'session/end-seed', 'user/message',
//!                    'assistant/message', 'tool/call', 'tool/result',
//!                    'approval/asked', 'approval/decided', 'turn/parked',
//!                    'turn/resumed', 'compaction/start', 'compaction/end');
//! CREATE SEQUENCE <schema>.post_numbers;       -- the global post order (version 2)
//! CREATE TABLE <schema>.posts (                -- the mailboxes (ARCHITECTURE.md#posting)
//!     session text NOT NULL REFERENCES <schema>.sessions (id) ON DELETE CASCADE,
//!     post text PRIMARY KEY,                       -- "pg-<n>", carried into the log
//!     n bigint NOT NULL,                           -- post order (per poster too)
//!     target text NOT NULL, message text NOT NULL, -- the ARCHITECTURE.md#inbox message, compact JSON;
//!                                                  -- an edit (SPEC §11.3): target 'edit', its JSON
//!     posted_at timestamptz NOT NULL DEFAULT now());
//! CREATE INDEX posts_pending ON <schema>.posts (session, n);
//! CREATE TABLE <schema>.checkpoints (          -- version 6 (ARCHITECTURE.md#checkpoints-and-reading-without-owning)
//!     session text PRIMARY KEY,                    -- a session's id (deleted with it)
//!     seq bigint NOT NULL,                         -- the seq of the first event after it
//!     body text NOT NULL);                         -- `Checkpoint::to_json`, bound by the
//!                                                  -- `crc` of the event at seq - 1
//! ```
//!
//! Version 1 had no mailbox, version 2 no `owner` column (it locked each session on a
//! connection of its own), and version 3 a foreign key from `events.session` to
//! `sessions`: a store meeting any of them adds what is missing, drops the key and sets
//! the version to 4, in the same transaction under the same lock as creation (every
//! statement is `IF NOT EXISTS` or `IF EXISTS`, so workers upgrading at once agree).
//! Stop the workers of an older version first: they read the version only when they
//! connect, and one of version 3 would delete a session's row without its events.
//!
//! Version 5 adds `events.crc`, the CRC-32C of the line's UTF-8 bytes (as a signed
//! 32-bit integer, [`crc`]) that the library computes and writes with every row and
//! checks on every read (`verify`, `inspect`, `open`, follow): a line changed after it
//! was written — by hand, by a restore or a replica, anything the server's page
//! checksums do not see — is refused as `corrupt`, named by session and seq. Upgrading
//! a version 4 schema adds the column (`ADD COLUMN IF NOT EXISTS`, no rewrite of the
//! table); the rows written before have no checksum (NULL) and are read as before.
//! Workers of version 4 must be stopped first: they would write rows without one.
//!
//! Version 6 adds `checkpoints`, one row per session: the replay state after the event
//! at `seq - 1`, so that opening reads only the events from `seq` on. Its binding is the
//! stored `crc` of that event; a session whose rows have no `crc` (written before
//! version 5) gets none. Upgrading a version 5 schema creates the table; workers of
//! version 5 would not delete a session's checkpoint with it, so stop them first.
//!
//! Version 7 reads the conversation on open (ARCHITECTURE.md#the-conversation): the
//! partial index `events_replayed` names the conversation's types beside the reserved
//! ones and replaces version 6's `events_reserved`. Upgrading builds the new index
//! (one pass over `events`, under the set-up lock) and drops the old one; workers of
//! version 6 would write checkpoints without the conversation, so stop them first.
//!
//! Version 8 reads approvals and compactions on open (ARCHITECTURE.md#approvals): the
//! partial index `events_replay` adds their types and replaces version 7's
//! `events_replayed`, built and dropped as above; stop version 7 workers first (they
//! would write checkpoints without the approvals).
//!
//! `events` has no foreign key: the key cost every inserted row a row-locking lookup of
//! its session (about three times the insert's own cost in a bulk insert), and proved
//! nothing an append does not prove already, since every append moves its session's row
//! in the same statement (`append`: the fence). Deleting a session removes its events in
//! the same transaction (`delete`, then `delete_events`). `posts` keeps its key: a post
//! is one row, and its key refuses a post to a session deleted meanwhile.
//!
//! Every statement but the schema's own set-up and `list` names the sessions it touches
//! by id (a test holds this), so sessions can be spread over servers by id
//! (docs/SCALING.md).
//!
//! `line` is text, never `jsonb`: it is byte for byte the event the JSONL store would
//! write (key order and big integers survive; a JSONL line of format version 2 adds its
//! checksum after it, which here is the `crc` column), so `SELECT line FROM
//! inboxlog.events WHERE session = 's' ORDER BY seq` is the log. The partial index lets
//! opening read the events that rebuild the inbox and the protocol state without
//! touching host events.

use postgres::Client;

use super::conn::{Connector, Stmt};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::REPLAYED;
use crate::json;

/// The version of the tables this library reads and writes.
pub const SCHEMA_VERSION: i32 = 8;

/// The versions upgraded in place to [`SCHEMA_VERSION`]: 1 (no mailbox), 2 (no `owner`
/// column), 3 (a foreign key on `events.session`), 4 (no `events.crc`), 5 (no
/// `checkpoints`), 6 (the replayed index without the conversation's types) and 7 (the
/// replayed index without the approvals' and compactions' types).
const UPGRADED: [i32; 7] = [1, 2, 3, 4, 5, 6, 7];

/// The checksum stored beside an event's line: the CRC-32C of its bytes, as the signed
/// 32-bit integer PostgreSQL's `integer` holds (the same bits).
pub(super) fn crc(line: &str) -> i32 {
    crc32c::crc32c(line.as_bytes()) as i32
}

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
    pub session: String,
    pub insert_session: String,
    pub insert_events: String,
    pub append: String,
    pub append_row: String,
    pub append_group: String,
    pub owner: String,
    pub probe: String,
    pub claim: String,
    pub take_over: String,
    pub reacquire: String,
    pub release: String,
    pub notify: String,
    pub home: String,
    pub extent: String,
    pub replayed: String,
    pub last: String,
    pub first_gap: String,
    pub events_from: String,
    pub read_since: String,
    pub tail: String,
    pub list: String,
    pub delete: String,
    pub delete_events: String,
    pub checkpoint: String,
    pub checkpoint_crc: String,
    pub save_checkpoint: String,
    pub delete_checkpoint: String,
    pub append_posted: String,
    pub post: String,
    pub pending: String,
    pub settle: String,
    pub exists: String,
    /// The LISTEN/NOTIFY channel of the schema's appends (payload: the session id).
    pub channel: String,
    /// The channel of the schema's posts (payload: the session posted to), quoted for
    /// LISTEN; [`Sql::posts_channel_name`] is its name.
    pub posts_channel: String,
}

/// The name of the posts channel of `schema`: `<schema>.posts`, the schema cut to fit
/// PostgreSQL's 63-byte names. A schema name has no `.`, so it is no schema's commit
/// channel; two long schemas that share their first 57 bytes share it, which costs
/// their owners a read that finds nothing, never a post.
fn posts_channel_name(schema: &str) -> String {
    format!("{}.posts", &schema[..schema.len().min(57)])
}

impl Sql {
    /// The name of [`Sql::posts_channel`], as a notification names its channel.
    pub fn posts_channel_name(&self) -> String {
        posts_channel_name(&self.schema)
    }

    pub fn new(schema: &str) -> Sql {
        let s = format!("\"{schema}\"");
        let events_cols = "seq, type, line, crc";
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
                     next_seq bigint NOT NULL,
                     owner bigint);
                 ALTER TABLE {s}.sessions ADD COLUMN IF NOT EXISTS owner bigint;
                 CREATE TABLE IF NOT EXISTS {s}.events (
                     session text NOT NULL,
                     seq bigint NOT NULL,
                     type text NOT NULL,
                     line text NOT NULL,
                     crc integer,
                     PRIMARY KEY (session, seq));
                 ALTER TABLE {s}.events DROP CONSTRAINT IF EXISTS events_session_fkey;
                 ALTER TABLE {s}.events ADD COLUMN IF NOT EXISTS crc integer;
                 CREATE INDEX IF NOT EXISTS events_replay ON {s}.events (session, seq)
                     WHERE type IN ({});
                 DROP INDEX IF EXISTS {s}.events_reserved;
                 DROP INDEX IF EXISTS {s}.events_replayed;
                 CREATE SEQUENCE IF NOT EXISTS {s}.post_numbers;
                 CREATE TABLE IF NOT EXISTS {s}.posts (
                     session text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                     post text PRIMARY KEY,
                     n bigint NOT NULL,
                     target text NOT NULL,
                     message text NOT NULL,
                     posted_at timestamptz NOT NULL DEFAULT now());
                 CREATE INDEX IF NOT EXISTS posts_pending ON {s}.posts (session, n);
                 CREATE TABLE IF NOT EXISTS {s}.checkpoints (
                     session text PRIMARY KEY,
                     seq bigint NOT NULL,
                     body text NOT NULL);",
                replayed_list()
            ),
            session: format!("SELECT header, epoch, next_seq FROM {s}.sessions WHERE id = $1"),
            insert_session: format!(
                "INSERT INTO {s}.sessions (id, header, epoch, next_seq, owner)
                 VALUES ($1, $2, nextval('{s}.epochs'), $3, $4)
                 ON CONFLICT (id) DO NOTHING RETURNING epoch"
            ),
            insert_events: format!(
                "INSERT INTO {s}.events (session, seq, type, line, crc)
                 SELECT $1, x.s, x.t, x.l, x.c
                 FROM unnest($2::bigint[], $3::text[], $4::text[], $5::integer[]) AS x(s, t, l, c)"
            ),
            // One statement, so one transaction: the fence (this writer's epoch), the
            // tail check (its next seq) and the rows commit together or not at all.
            // Followers are woken after the commit, never inside it (`notify.rs`).
            append: format!(
                "WITH owner AS (
                     UPDATE {s}.sessions SET next_seq = $4
                     WHERE id = $1 AND epoch = $2 AND next_seq = $3
                     RETURNING 1)
                 INSERT INTO {s}.events (session, seq, type, line, crc)
                 SELECT $1, x.s, x.t, x.l, x.c
                 FROM unnest($5::bigint[], $6::text[], $7::text[], $8::integer[]) AS x(s, t, l, c)
                 WHERE EXISTS (SELECT 1 FROM owner)"
            ),
            // `append` for one row, the common `sync` append: the row as plain
            // parameters, so the server decodes no arrays and scans no function.
            append_row: format!(
                "WITH owner AS (
                     UPDATE {s}.sessions SET next_seq = $3 + 1
                     WHERE id = $1 AND epoch = $2 AND next_seq = $3
                     RETURNING 1)
                 INSERT INTO {s}.events (session, seq, type, line, crc)
                 SELECT $1::text, $3::bigint, $4::text, $5::text, $6::integer
                 WHERE EXISTS (SELECT 1 FROM owner)"
            ),
            // The append that takes posts in ($9, their ids) also removes them from the
            // mailbox: one statement, so the events and the removal commit together.
            append_posted: format!(
                "WITH owner AS (
                     UPDATE {s}.sessions SET next_seq = $4
                     WHERE id = $1 AND epoch = $2 AND next_seq = $3
                     RETURNING 1),
                 gone AS (
                     DELETE FROM {s}.posts
                     WHERE session = $1 AND post = ANY($9::text[]) AND EXISTS (SELECT 1 FROM owner))
                 INSERT INTO {s}.events (session, seq, type, line, crc)
                 SELECT $1, x.s, x.t, x.l, x.c
                 FROM unnest($5::bigint[], $6::text[], $7::text[], $8::integer[]) AS x(s, t, l, c)
                 WHERE EXISTS (SELECT 1 FROM owner)"
            ),
            // Many sessions' appends in one statement, each fenced on its own: request k
            // is ($1[k], $2[k], $3[k], $4[k]) = (id, epoch, first seq, next seq after), and
            // its rows are those of ($5..$9) with k. Returns (k, rows inserted) for each
            // request whose fence held; the others wrote nothing.
            append_group: format!(
                "WITH r AS (
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                         WITH ORDINALITY AS r(id, epoch, first, next, k)),
                 owner AS (
                     UPDATE {s}.sessions s SET next_seq = r.next FROM r
                     WHERE s.id = r.id AND s.epoch = r.epoch AND s.next_seq = r.first
                     RETURNING r.k, r.id),
                 ins AS (
                     INSERT INTO {s}.events (session, seq, type, line, crc)
                     SELECT o.id, x.s, x.t, x.l, x.c
                     FROM unnest($5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::integer[])
                         AS x(k, s, t, l, c)
                     JOIN owner o ON o.k = x.k
                     RETURNING session)
                 SELECT o.k, (SELECT count(*) FROM ins WHERE ins.session = o.id) FROM owner o"
            ),
            // The post's wake-up (`fleet.rs`) commits with it: a poster that dies after
            // its commit cannot leave a post its owner was never told of.
            post: format!(
                "WITH k AS (SELECT nextval('{s}.post_numbers') AS n),
                 ins AS (
                     INSERT INTO {s}.posts (session, post, n, target, message)
                     SELECT $1, 'pg-' || lpad(k.n::text, 16, '0'), k.n, $2, $3 FROM k
                     WHERE EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)
                     RETURNING post)
                 SELECT post, pg_notify('{posts}', $1) FROM ins",
                posts = posts_channel_name(schema)
            ),
            pending: format!(
                "SELECT post, target, message FROM {s}.posts WHERE session = $1 ORDER BY n"
            ),
            settle: format!("DELETE FROM {s}.posts WHERE session = $1 AND post = ANY($2::text[])"),
            exists: format!("SELECT 1 FROM {s}.sessions WHERE id = $1"),
            channel: format!("\"{schema}\""),
            posts_channel: format!("\"{}\"", posts_channel_name(schema)),
            owner: format!("SELECT epoch, next_seq FROM {s}.sessions WHERE id = $1"),
            // The session's epoch, owner and next seq, and whether that owner's handle is
            // alive: its lock is held ($2 salts the owner id into the lock key, see
            // owner.rs). A shared transaction-level try, so any number of openers may
            // probe at once, and nothing is left held.
            probe: format!(
                "SELECT epoch, owner, next_seq,
                        owner IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared($2 # owner)
                 FROM {s}.sessions WHERE id = $1"
            ),
            // An open's move to a new epoch, only from the (epoch, owner, next seq) it read.
            claim: format!(
                "UPDATE {s}.sessions SET epoch = nextval('{s}.epochs'), owner = $5
                 WHERE id = $1 AND epoch = $2 AND owner IS NOT DISTINCT FROM $3 AND next_seq = $4
                 RETURNING epoch"
            ),
            take_over: format!(
                "UPDATE {s}.sessions SET epoch = nextval('{s}.epochs'), owner = $2
                 WHERE id = $1 RETURNING epoch"
            ),
            // A handle whose home connection was replaced re-owns its sessions that still
            // hold its epochs and its old owner id.
            reacquire: format!(
                "UPDATE {s}.sessions s SET owner = $3
                 FROM unnest($1::text[], $2::bigint[]) AS r(id, epoch)
                 WHERE s.id = r.id AND s.epoch = r.epoch AND s.owner = $4"
            ),
            // A close: asynchronous commit, as losing it in a crash of the server loses
            // nothing (the home connection, and with it the owner, dies too).
            release: format!(
                "UPDATE {s}.sessions SET owner = NULL
                 WHERE id = $1 AND epoch = $2
                   AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
            ),
            // A new owner id and its lock (held by the home connection for its life).
            home: format!(
                "SELECT n, pg_try_advisory_lock($1 # n) FROM (SELECT nextval('{s}.epochs') AS n) k"
            ),
            notify: format!(
                "SELECT set_config('synchronous_commit', 'off', true),
                        pg_notify('{schema}', x) FROM unnest($1::text[]) AS x"
            ),
            // From seq $2 on: 0 when opening from seq 0, a checkpoint's seq otherwise.
            extent: format!(
                "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), -1)
                 FROM {s}.events WHERE session = $1 AND seq >= $2"
            ),
            replayed: format!(
                "SELECT {events_cols} FROM {s}.events
                 WHERE session = $1 AND seq >= $2 AND type IN ({}) ORDER BY seq",
                replayed_list()
            ),
            // The checkpoint and the stored checksum of the event before it (its binding).
            checkpoint: format!(
                "SELECT c.seq, c.body, e.crc FROM {s}.checkpoints c
                 LEFT JOIN {s}.events e ON e.session = c.session AND e.seq = c.seq - 1
                 WHERE c.session = $1"
            ),
            checkpoint_crc: format!("SELECT crc FROM {s}.events WHERE session = $1 AND seq = $2"),
            // Fenced as an append is: only the owner of epoch $4 replaces it.
            save_checkpoint: format!(
                "INSERT INTO {s}.checkpoints (session, seq, body)
                 SELECT $1, $2, $3 FROM {s}.sessions WHERE id = $1 AND epoch = $4
                 ON CONFLICT (session) DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body"
            ),
            delete_checkpoint: format!("DELETE FROM {s}.checkpoints WHERE session = $1"),
            // From seq $2 on (as `extent`), so that no plan reads rows before it.
            last: format!(
                "SELECT {events_cols} FROM {s}.events WHERE session = $1 AND seq >= $2
                 ORDER BY seq DESC LIMIT 1"
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
            // `Store::read`: the session row (seq NULL; header and next seq) and the rows
            // from $2, in one statement, so one snapshot.
            read_since: format!(
                "SELECT NULL::bigint, NULL::text, header, NULL::integer, next_seq
                 FROM {s}.sessions WHERE id = $1
                 UNION ALL
                 (SELECT {events_cols}, NULL::bigint FROM {s}.events
                  WHERE session = $1 AND seq >= $2::bigint ORDER BY seq)"
            ),
            // `Store::tail`: the session row and the last $2 rows before seq $3 (or before
            // the next seq), read backward through the primary key. The lower bound keeps
            // every plan to those rows: a planner with stale statistics otherwise reads and
            // sorts every row of the session (a bitmap scan; seen at 1,000 rows). Types
            // are filtered by the caller, for the same reason. Rows at or after the next
            // seq (a damaged log) are still read, and refused.
            tail: format!(
                "SELECT NULL::bigint, NULL::text, header, NULL::integer, next_seq
                 FROM {s}.sessions WHERE id = $1
                 UNION ALL
                 (SELECT {events_cols}, NULL::bigint FROM {s}.events
                  WHERE session = $1 AND seq < $3::bigint
                    AND seq >= LEAST($3::bigint,
                                     (SELECT next_seq FROM {s}.sessions WHERE id = $1))
                               - $2::bigint
                  ORDER BY seq DESC LIMIT $2::bigint)"
            ),
            list: format!("SELECT id, header FROM {s}.sessions ORDER BY id COLLATE \"C\""),
            delete: format!(
                "DELETE FROM {s}.sessions WHERE id = $1 AND epoch = $2
                 AND owner IS NOT DISTINCT FROM $3"
            ),
            // After `delete`, in its transaction: a statement of its own, so that it
            // sees every append committed before the row was deleted (an append after
            // it finds no row to fence on and writes nothing).
            delete_events: format!("DELETE FROM {s}.events WHERE session = $1"),
        }
    }
}

#[cfg(test)]
impl Sql {
    /// Every statement the store runs, by name.
    pub fn statements(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("version", &self.version),
            ("create", &self.create),
            ("session", &self.session),
            ("insert_session", &self.insert_session),
            ("insert_events", &self.insert_events),
            ("append", &self.append),
            ("append_row", &self.append_row),
            ("append_group", &self.append_group),
            ("owner", &self.owner),
            ("probe", &self.probe),
            ("claim", &self.claim),
            ("take_over", &self.take_over),
            ("reacquire", &self.reacquire),
            ("release", &self.release),
            ("notify", &self.notify),
            ("home", &self.home),
            ("extent", &self.extent),
            ("replayed", &self.replayed),
            ("last", &self.last),
            ("first_gap", &self.first_gap),
            ("events_from", &self.events_from),
            ("read_since", &self.read_since),
            ("tail", &self.tail),
            ("list", &self.list),
            ("delete", &self.delete),
            ("delete_events", &self.delete_events),
            ("checkpoint", &self.checkpoint),
            ("checkpoint_crc", &self.checkpoint_crc),
            ("save_checkpoint", &self.save_checkpoint),
            ("delete_checkpoint", &self.delete_checkpoint),
            ("append_posted", &self.append_posted),
            ("post", &self.post),
            ("pending", &self.pending),
            ("settle", &self.settle),
            ("exists", &self.exists),
        ]
    }
}

/// Makes sure the tables exist in the store's schema at [`SCHEMA_VERSION`]: a quick read
/// when they do; otherwise one transaction that takes [`CREATE_LOCK`] first, so that
/// workers starting at once all succeed. A newer version is refused.
pub(super) fn ensure(client: &mut Client, sql: &Sql, connector: &Connector) -> Result<()> {
    let found = match client.query_opt(sql.version.as_str(), &[]) {
        Ok(row) => Some(row.map(|r| r.get::<_, i32>(0))),
        // No schema or no table yet (42P01 undefined table, 3F000 undefined schema).
        Err(e)
            if matches!(
                e.code().map(postgres::error::SqlState::code),
                Some("42P01" | "3F000")
            ) =>
        {
            None
        }
        Err(e) => return Err(connector.fail(what(sql), &e, Stmt::Read)),
    };
    let version = match found {
        Some(Some(v)) if !UPGRADED.contains(&v) => v,
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
    // A worker that waited for the lock finds the tables made: it changes nothing (the
    // set-up's ALTER would lock `sessions` against the first worker's appends).
    let made: bool = tx
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("\"{}\".schema_version", sql.schema)],
        )
        .map_err(fail)?
        .get(0);
    if made
        && let Some(v) = tx
            .query_opt(sql.version.as_str(), &[])
            .map_err(fail)?
            .map(|row| row.get::<_, i32>(0))
        && !UPGRADED.contains(&v)
    {
        tx.commit().map_err(fail)?;
        return Ok(v);
    }
    tx.batch_execute(&sql.create).map_err(fail)?;
    let stored = tx.query_opt(sql.version.as_str(), &[]).map_err(fail)?;
    let version = match stored.map(|row| row.get::<_, i32>(0)) {
        Some(v) if !UPGRADED.contains(&v) => v,
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
            // Version 1 to 7: the mailbox, the owner column, the events' checksum
            // column, the checkpoints and the replayed index were added and the
            // events' foreign key and the older index dropped just above.
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
        let newer = check_version(9, "s").unwrap_err();
        assert_eq!(newer.kind(), ErrorKind::FormatUnsupported);
        assert_eq!(
            newer.to_string(),
            "PostgreSQL schema \"s\" holds inboxlog tables of version 9 (written by a newer \
             inboxlog); this inboxlog reads version 8"
        );
        let older = check_version(0, "s").unwrap_err();
        assert!(
            older.to_string().contains("version 0 (older format"),
            "{older}"
        );
    }

    /// Sessions can be spread over servers by id only while every statement that reads
    /// or writes a session's rows names the sessions it touches (docs/SCALING.md). A new
    /// statement must either key every table it touches by session id, or be added to
    /// the short list of statements that touch no session's rows, with the reason.
    #[test]
    fn every_statement_is_keyed_by_session() {
        let sql = Sql::new("s");
        let unkeyed = [
            ("version", "the schema's version row"),
            ("create", "the schema's set-up"),
            ("home", "a number from a sequence and a lock: no table row"),
            (
                "notify",
                "wake-ups whose payloads are session ids: no table row",
            ),
            (
                "list",
                "the one scan, for operators: every session by design",
            ),
        ];
        let statements = sql.statements();
        assert_eq!(statements.len(), 35, "a statement was added: list it above");
        // Conditions naming the sessions: one by id, or a list of ids joined on.
        let keys = [
            "id = $1",
            "session = $1",
            "s.id = r.id",
            "VALUES ($1",
            "SELECT $1,",
        ];
        for (name, text) in statements {
            if unkeyed.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let tables = ["sessions", "events", "posts", "checkpoints"];
            let touched: Vec<&str> = tables
                .iter()
                .copied()
                .filter(|t| text.contains(&format!("\"s\".{t}")))
                .collect();
            assert!(
                !touched.is_empty(),
                "{name} touches no table: list it as unkeyed"
            );
            assert!(
                keys.iter().any(|k| text.contains(k)),
                "{name} touches {touched:?} without naming the session: {text}"
            );
        }
    }

    /// SPEC capacity: nothing the store adds to a commit serializes writers. A NOTIFY
    /// inside a transaction makes its commit wait on one database-wide lock, so no
    /// statement that writes a session's rows may notify (the notifier sends its own).
    #[test]
    fn no_append_notifies_inside_its_commit() {
        let sql = Sql::new("s");
        for (name, text) in sql.statements() {
            // A post is no append (its row is the poster's, not the session's log),
            // and posts are rare: its wake-up commits with it (`fleet.rs`).
            if name != "notify" && name != "post" {
                assert!(
                    !text.contains("pg_notify"),
                    "{name} notifies inside its commit"
                );
            }
        }
    }

    #[test]
    fn the_index_and_the_query_name_the_same_types() {
        let sql = Sql::new("s");
        let list = replayed_list();
        assert!(sql.create.contains(&list) && sql.replayed.contains(&list));
        assert_eq!(
            list,
            "'turn/start', 'turn/end', 'step/start', 'step/end', 'agent/inbox/spliced', \
             'session/end-seed', 'user/message', 'assistant/message', 'tool/call', \
             'tool/result', 'approval/asked', 'approval/decided', 'turn/parked', \
             'turn/resumed', 'compaction/start', 'compaction/end'"
        );
    }
}

//! The PostgreSQL store (ARCHITECTURE.md#postgresql): one database shared by a fleet of workers, any of
//! which can open any session, exactly one writing it at a time.
//!
//! Same contract as the JSONL store, different bytes: a session is a row of
//! `sessions` (its header) and its events are rows of `events`, each the compact JSON
//! line the JSONL store would write (`schema.rs`). Ownership is an advisory lock per
//! ownership epoch plus an epoch fence on every append (`owner.rs`, which explains why
//! that meets ARCHITECTURE.md#postgresql). Each write is one statement, so all rows of a
//! call commit together or not at all; in `batched` and `none` modes one statement writes
//! the staged appends of many calls (client-side group commit, `writer.rs`). Opening reads the reserved events alone,
//! through a partial index, after checking the log's extent by count, min and max
//! (`read.rs`); `verify`, `inspect` and `events(since)` read and check every row.
//!
//! The client is the synchronous `postgres` crate (it fits the synchronous core: each
//! connection drives tokio-postgres on a small runtime of its own), with TLS by rustls
//! (`conn.rs`; `sslmode` with libpq's meanings, `tls.rs`); URLs are parsed here
//! (`url/`) so no message ever shows a password.
//!
//! A handle uses at most `max_connections` connections however many sessions it has
//! open (docs/SCALING.md): one home connection holding the handle's owner lock and
//! LISTENing for its followers and its mailboxes (`home.rs`), and a bounded pool for
//! everything else (`pool.rs`), whose group commit writes many sessions' appends in one statement
//! (`commit.rs`). Followers are woken after commits, never inside them (`notify.rs`);
//! one flusher thread serves every `batched` writer of the handle (`batch.rs`).
//!
//! Posts wait in a `posts` table and move into the log in the same transaction as the
//! splices that take them in (`fleet.rs`, which gives the exactly-once argument).

mod batch;
mod checkpoint;
mod commit;
mod conn;
mod fleet;
mod home;
mod notify;
mod owner;
mod pool;
mod read;
mod reads;
mod schema;
mod tls;
mod url;
mod writer;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use postgres::{Client, IsolationLevel, Transaction};

use self::batch::Flusher;
use self::conn::{Connector, Stmt};
use self::home::{Home, Signals};
use self::notify::Notifier;
use self::pool::{Conn, Pool};
use self::read::{At, SessionRow, read_all, read_for_open, reading, seed_gap, session_row};
use self::schema::Sql;
use self::writer::{PgWriter, Rows, Shared};
use super::{
    Checkpoint, Durability, Feed, LogWriter, Mailbox, OpenOptions, Opened, Post, Replay, Store,
    StoreOptions, Verified,
};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::header::Header;
use crate::id::validate_session_id;
use crate::json;

pub use self::schema::{DEFAULT_SCHEMA, SCHEMA_VERSION, validate_schema};
pub use self::url::{ChannelBinding, Host, PgUrl, SslMode, TargetSessionAttrs, redact_url};

/// The text of the statement `Store::tail` runs on schema `schema` (`$1` the session,
/// `$2` the rows, `$3` the seq they end before), for tests that count what it reads.
#[cfg(feature = "testing")]
pub fn tail_statement(schema: &str) -> String {
    schema::Sql::new(schema).tail
}

/// How a [`PgStore`] stores: the schema holding its tables, when appends are durable,
/// and the largest event line it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgOptions {
    /// The schema of the tables (a plain identifier `[a-z_][a-z0-9_]*`, at most 63
    /// bytes); default `inboxlog`.
    pub schema: String,
    /// `Sync`: each call commits before it returns (`synchronous_commit` as the server
    /// sets it). `Batched` and `None`: asynchronous commit; `flush()` is the barrier.
    pub durability: Durability,
    /// The largest event line (compact JSON) in bytes; default 64 MiB.
    pub record_limit: u64,
    /// The most connections the store holds at once (ownership, appends, reads and
    /// wake-ups together), however many sessions are open; default
    /// [`PgStore::DEFAULT_MAX_CONNECTIONS`], at least 2.
    pub max_connections: u32,
}

impl PgOptions {
    /// The PostgreSQL part of the options [`crate::store::open`] takes.
    pub fn from_store(options: &StoreOptions) -> PgOptions {
        PgOptions {
            schema: options
                .schema
                .clone()
                .unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()),
            durability: options.durability,
            record_limit: options
                .record_limit
                .unwrap_or(PgStore::DEFAULT_RECORD_LIMIT),
            max_connections: options
                .max_connections
                .unwrap_or(PgStore::DEFAULT_MAX_CONNECTIONS),
        }
    }
}

impl Default for PgOptions {
    fn default() -> PgOptions {
        PgOptions {
            schema: DEFAULT_SCHEMA.to_owned(),
            durability: Durability::Sync,
            record_limit: PgStore::DEFAULT_RECORD_LIMIT,
            max_connections: PgStore::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// What the store and its writers share. The threads' owners come first: they stop
/// (and join their threads) before the pool goes.
pub(super) struct Inner {
    flusher: Flusher,
    notifier: Notifier,
    home: Home,
    pool: Arc<Pool>,
    connector: Arc<Connector>,
    sql: Arc<Sql>,
    durability: Durability,
    limit: usize,
    /// The salt of this schema's owner lock keys (`owner.rs`).
    salt: i64,
    /// Wake-ups of this handle's followers.
    signals: Arc<Signals>,
    /// Wake-ups of this handle's mailboxes (`fleet.rs`).
    posts: Arc<Signals>,
    /// The batch window of `batched`/`none` writers opened from now on, in µs.
    window_us: AtomicU64,
    /// The live `batched`/`none` writers of this store by session, whose staged rows
    /// a read of the store writes first (read-your-writes within the process).
    writers: Mutex<HashMap<String, Weak<Shared>>>,
}

impl Inner {
    fn writers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Shared>>> {
        // A plain map; a panic elsewhere cannot leave it half-changed.
        self.writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `writer` as the live writer of `id` in this store.
    fn register(&self, id: &str, writer: Weak<Shared>) {
        self.writers().insert(id.to_owned(), writer);
    }

    /// Forgets `writer` as the writer of `id` (unless a later one replaced it).
    fn unregister(&self, id: &str, writer: &Weak<Shared>) {
        let mut writers = self.writers();
        if writers.get(id).is_some_and(|w| w.ptr_eq(writer)) {
            writers.remove(id);
        }
    }

    /// Writes the staged rows of this store's live writer of `id`, if any, so that a
    /// read of the store sees every append acknowledged in this process.
    fn settle(&self, id: &str) {
        let writer = self.writers().get(id).and_then(Weak::upgrade);
        if let Some(writer) = writer {
            writer.settle();
        }
    }

    /// How long a `batched`/`none` writer stages rows before it writes them.
    fn batch_window(&self) -> Duration {
        Duration::from_micros(self.window_us.load(Ordering::Relaxed))
    }

    /// Runs `f` on a connection of the pool (waiting its turn when all are busy); one
    /// that failed to reach the server is not given back.
    fn with_client<R>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Client, &Inner) -> Result<R>,
    ) -> Result<R> {
        self.with_conn(id, |conn, inner| f(&mut conn.client, inner))
    }

    /// [`Inner::with_client`], with the connection's prepared statements.
    fn with_conn<R>(&self, id: &str, f: impl FnOnce(&mut Conn, &Inner) -> Result<R>) -> Result<R> {
        let mut conn = self.pool.get().map_err(|e| e.with_session(id))?;
        let result = f(&mut conn, self);
        match &result {
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                drop(conn);
                self.pool.discard();
            }
            _ => self.pool.put(conn),
        }
        result
    }

    /// A read-only, repeatable-read transaction: one consistent view of a session.
    fn snapshot<'c>(&self, client: &'c mut Client, id: &str) -> Result<Transaction<'c>> {
        client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| self.connector.fail(reading(id), &e, Stmt::Read))
    }

    fn at<'a>(&'a self, id: &'a str) -> At<'a> {
        At {
            schema: &self.sql.schema,
            id,
        }
    }

    fn not_found(&self, id: &str) -> Error {
        Error::new(
            ErrorKind::NotFound,
            format!(
                "no session {} in PostgreSQL schema {}",
                json::quote(id),
                json::quote(&self.sql.schema)
            ),
        )
        .with_session(id)
    }
}

/// Session logs in a PostgreSQL database (ARCHITECTURE.md#postgresql). Cheap to share between threads;
/// at most [`PgOptions::max_connections`] connections however many sessions are open.
pub struct PgStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("url", self.inner.connector.url())
            .field("schema", &self.inner.sql.schema)
            .field("durability", &self.inner.durability)
            .field("record_limit", &self.inner.limit)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// The default record limit: 64 MiB.
    pub const DEFAULT_RECORD_LIMIT: u64 = 64 << 20;

    /// The default bound on a store's connections: 8.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 8;

    /// Connects to the database at `url` (libpq URI syntax, `sslmode` included: see
    /// [`SslMode`]) and makes sure the tables exist in `options.schema` at
    /// [`SCHEMA_VERSION`], creating them on first use. Errors: `invalid_input` for a bad
    /// URL or schema name, `unavailable` when the server cannot be reached or refuses
    /// the login, `format_unsupported` for tables of another version. No message shows
    /// the password.
    pub fn connect(url: &str, options: PgOptions) -> Result<PgStore> {
        let PgOptions {
            schema: name,
            durability,
            record_limit,
            max_connections,
        } = options;
        let url = PgUrl::parse(url)?;
        validate_schema(&name)?;
        if max_connections < 2 {
            return Err(crate::error::invalid(format!(
                "max_connections must be at least 2 (one holds the store's ownership, the \
                 others read and write), got {max_connections}"
            )));
        }
        let connector = Arc::new(Connector::new(url, durability)?);
        let sql = Arc::new(Sql::new(&name));
        let mut client = connector.connect()?;
        schema::ensure(&mut client, &sql, &connector)?;
        let data = max_connections as usize - 1;
        let pool = Arc::new(Pool::new(Arc::clone(&connector), Arc::clone(&sql), data));
        pool.adopt(client);
        let signals = Arc::new(Signals::default());
        let posts = Arc::new(Signals::default());
        let salt = owner::salt(&name);
        let inner = Inner {
            flusher: Flusher::default(),
            notifier: Notifier::new(Arc::clone(&pool), Arc::clone(&sql), Arc::clone(&signals)),
            home: Home::new(
                Arc::clone(&connector),
                Arc::clone(&sql),
                salt,
                Arc::clone(&signals),
                Arc::clone(&posts),
            ),
            signals,
            posts,
            pool,
            connector,
            sql,
            salt,
            durability,
            limit: usize::try_from(record_limit).unwrap_or(usize::MAX).max(1),
            window_us: AtomicU64::new(PgStore::DEFAULT_BATCH_WINDOW.as_micros() as u64),
            writers: Mutex::new(HashMap::new()),
        };
        Ok(PgStore {
            inner: Arc::new(inner),
        })
    }

    /// The most connections this store holds at once.
    pub fn max_connections(&self) -> u32 {
        self.inner.pool.max() as u32 + 1
    }

    /// How long a `batched`/`none` writer stages appends before writing them as one
    /// statement, unless enough rows come first or `flush()` is called.
    pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(5);

    /// The store, whose `batched`/`none` writers opened from now on wait `window` for
    /// company before they write staged appends (default
    /// [`PgStore::DEFAULT_BATCH_WINDOW`]).
    #[must_use]
    pub fn with_batch_window(self, window: Duration) -> PgStore {
        let us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        self.inner.window_us.store(us, Ordering::Relaxed);
        self
    }

    /// The URL connected to (its `Display` shows no password).
    pub fn url(&self) -> &PgUrl {
        self.inner.connector.url()
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.inner.sql.schema
    }

    /// When appends are durable.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }
}

/// Reads and checks `id` for opening in one snapshot: the session row, its checkpoint
/// when `replay` resumes and there is one, then the replayed events after it (see
/// [`read_for_open`]), each passed to `replay`. Returns the row and the checkpoint's seq.
fn read_owned(
    inner: &Inner,
    client: &mut Client,
    id: &str,
    replay: &mut dyn Replay,
) -> Result<(SessionRow, Option<u64>)> {
    let at = inner.at(id);
    let mut tx = inner.snapshot(client, id)?;
    let row = session_row(&mut tx, &inner.sql, &at, &inner.connector)?
        .ok_or_else(|| inner.not_found(id))?;
    let checkpoint = checkpoint::read(&mut tx, &inner.sql, &at, &inner.connector)?;
    let taken = checkpoint.as_ref().map(Checkpoint::seq);
    let mut since = 0;
    if let Some(cp) = checkpoint
        && replay.resumes()
    {
        since = cp.seq();
        replay.checkpoint(cp)?;
    }
    read_for_open(
        &mut tx,
        &inner.sql,
        &at,
        (since, row.next_seq),
        &inner.connector,
        &mut |event| {
            replay
                .visit(&row.header, &event)
                .map_err(|e| at.wrap(event.seq(), e))
        },
    )?;
    tx.commit()
        .map_err(|e| inner.connector.fail(reading(id), &e, Stmt::Read))?;
    Ok((row, taken))
}

impl Store for PgStore {
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>> {
        let id = header.id.as_str();
        validate_session_id(id)?;
        let inner = &*self.inner;
        for (index, event) in seed.iter().enumerate() {
            if event.seq() != index as u64 {
                return Err(seed_gap(index, event.seq()));
            }
        }
        let rows = Rows::of(seed, inner.limit, id)?;
        let text = header.to_json();
        if text.len() > inner.limit {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "the header of session {} is {} bytes, larger than the record limit of {} bytes",
                    json::quote(id),
                    text.len(),
                    inner.limit
                ),
            ));
        }
        let me = inner.home.owner().map_err(|e| e.with_session(id))?;
        let created = inner.with_client(id, |client, inner| {
            let doing = format!("cannot create session {}", json::quote(id));
            let fail = |e: postgres::Error| inner.connector.fail(&doing, &e, Stmt::Write);
            let mut tx = client.transaction().map_err(fail)?;
            if inner.durability != Durability::Sync {
                // A new log is durable when create returns, whatever the mode.
                tx.batch_execute("SET LOCAL synchronous_commit = on")
                    .map_err(fail)?;
            }
            let epoch = tx
                .query_opt(
                    inner.sql.insert_session.as_str(),
                    &[&id, &text, &(seed.len() as i64), &me],
                )
                .map_err(fail)?;
            let Some(epoch) = epoch.map(|row| row.get::<_, i64>(0)) else {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "session {} already exists in PostgreSQL schema {}",
                        json::quote(id),
                        json::quote(&inner.sql.schema)
                    ),
                ));
            };
            // A checkpoint an earlier session of the id left (deleted by a worker of
            // schema version 5, which knew no checkpoints) is not this log's.
            tx.execute(inner.sql.delete_checkpoint.as_str(), &[&id])
                .map_err(fail)?;
            if !seed.is_empty() {
                let crcs: Vec<i32> = rows.lines.iter().map(|l| schema::crc(l)).collect();
                tx.execute(
                    inner.sql.insert_events.as_str(),
                    &[&id, &rows.seqs, &rows.types, &rows.lines, &crcs],
                )
                .map_err(fail)?;
            }
            tx.commit().map_err(fail)?;
            Ok(epoch)
        });
        match created {
            Ok(epoch) => Ok(Box::new(PgWriter::new(
                Arc::clone(&self.inner),
                id,
                epoch,
                seed.len() as u64,
            ))),
            Err(e) => Err(e.with_session(id)),
        }
    }

    fn open(&self, id: &str, options: &OpenOptions, replay: &mut dyn Replay) -> Result<Opened> {
        self.open_owned(id, options.takeover, replay)
    }

    fn peek(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        self.peek_rows(id, replay)
    }

    fn verify(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        validate_session_id(id)?;
        let header = self.read_whole(id, replay, true)?;
        Ok(Verified {
            header,
            torn_bytes: 0,
        })
    }

    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        let mut events = Vec::new();
        let mut replay = super::events(|_, e: &Event| {
            events.push(e.clone());
            Ok(())
        });
        let header = self.read_whole(id, &mut replay, false)?;
        Ok((header, events))
    }

    fn read(&self, id: &str, since: u64) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        self.read_end(id, reads::End::Since(since))
    }

    fn tail(&self, id: &str, limit: usize, types: Option<&[&str]>) -> Result<(Header, Vec<Event>)> {
        validate_session_id(id)?;
        self.read_end(id, reads::End::Last(limit, types))
    }

    fn list(&self) -> Result<Vec<Header>> {
        let inner = &*self.inner;
        let rows = inner.pool.with(|client| {
            client.query(inner.sql.list.as_str(), &[]).map_err(|e| {
                inner.connector.fail(
                    format_args!(
                        "cannot list the sessions of PostgreSQL schema {}",
                        json::quote(&inner.sql.schema)
                    ),
                    &e,
                    Stmt::Read,
                )
            })
        })?;
        rows.iter()
            .map(|row| {
                let id: &str = row.get(0);
                Header::from_json(row.get(1)).map_err(|e| {
                    inner
                        .at(id)
                        .corrupt(None, format_args!("its header: {}", e.message()))
                })
            })
            .collect()
    }

    /// One row of `posts`, committed before it returns (see `fleet.rs`).
    fn deliver(&self, id: &str, post: &Post) -> Result<String> {
        validate_session_id(id)?;
        fleet::post(&self.inner, id, post)
    }

    fn mailbox(&self, id: &str) -> Result<Box<dyn Mailbox>> {
        validate_session_id(id)?;
        Ok(Box::new(fleet::PgMailbox::new(Arc::clone(&self.inner), id)))
    }

    /// Reads through the pool, woken by the handle's home connection (`home.rs`).
    fn follow(&self, id: &str) -> Result<Box<dyn Feed>> {
        validate_session_id(id)?;
        let feed =
            fleet::PgFeed::new(Arc::clone(&self.inner), id).map_err(|e| e.with_session(id))?;
        Ok(Box::new(feed))
    }

    fn delete(&self, id: &str) -> Result<()> {
        validate_session_id(id)?;
        let inner = &*self.inner;
        let (sql, connector) = (&inner.sql, &inner.connector);
        if inner.home.is_open(id) {
            return Err(Error::new(
                ErrorKind::Locked,
                format!(
                    "session {} is locked by a writer and cannot be deleted",
                    json::quote(id)
                ),
            )
            .with_session(id));
        }
        inner.with_client(id, |client, _| {
            let seen = owner::probe(client, sql, inner.salt, id, connector)?
                .ok_or_else(|| inner.not_found(id))?;
            let held = || {
                Error::new(
                    ErrorKind::Locked,
                    format!(
                        "session {} is locked by a writer and cannot be deleted",
                        json::quote(id)
                    ),
                )
                .with_session(id)
            };
            // A live handle's closed session has its owner cleared; one still set is held
            // (or its close did not reach the server: closing that handle frees it).
            if seen.alive && seen.owner != Some(inner.home.owner()?) {
                return Err(held());
            }
            let doing = format!("cannot delete session {}", json::quote(id));
            let fail = |e: postgres::Error| connector.fail(&doing, &e, Stmt::Write);
            let mut tx = client.transaction().map_err(fail)?;
            tx.batch_execute("SET LOCAL synchronous_commit = on")
                .map_err(fail)?;
            let n = tx
                .execute(sql.delete.as_str(), &[&id, &seen.epoch, &seen.owner])
                .map_err(fail)?;
            if n == 1 {
                // No foreign key cascades (schema.rs): the events go in the same
                // transaction, so a session is deleted whole or not at all.
                tx.execute(sql.delete_events.as_str(), &[&id])
                    .map_err(fail)?;
                tx.execute(sql.delete_checkpoint.as_str(), &[&id])
                    .map_err(fail)?;
            }
            tx.commit().map_err(fail)?;
            match n {
                1 => Ok(()),
                // Taken over or deleted since its epoch was read.
                _ => match owner::current(client, sql, id, connector)? {
                    None => Err(inner.not_found(id)),
                    Some(_) => Err(held()),
                },
            }
        })
    }
}

impl PgStore {
    /// [`Store::peek`]: what `open` reads (the checkpoint when `replay` resumes, then the
    /// replayed events after it, in one snapshot), without taking the session.
    fn peek_rows(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        validate_session_id(id)?;
        let inner = &*self.inner;
        inner.settle(id);
        inner
            .with_client(id, |client, inner| read_owned(inner, client, id, replay))
            .map(|(row, _)| Verified {
                header: row.header,
                torn_bytes: 0,
            })
            .map_err(|e| e.with_session(id))
    }

    /// Reads every row of `id` in one snapshot, each checked and passed to `replay`
    /// (errors are corruption at that seq), after its checkpoint, checked against the
    /// rows and handed over first when `verifying`; returns the header.
    fn read_whole(&self, id: &str, replay: &mut dyn Replay, verifying: bool) -> Result<Header> {
        let inner = &*self.inner;
        inner.settle(id);
        inner.with_client(id, |client, inner| {
            let at = inner.at(id);
            let mut tx = inner.snapshot(client, id)?;
            let row = session_row(&mut tx, &inner.sql, &at, &inner.connector)?
                .ok_or_else(|| inner.not_found(id))?;
            let checkpoint = checkpoint::read(&mut tx, &inner.sql, &at, &inner.connector)?;
            if let Some(cp) = checkpoint
                && verifying
            {
                replay.checkpoint(cp)?;
            }
            read_all(
                &mut tx,
                &inner.sql,
                &at,
                0,
                Some(row.next_seq),
                &inner.connector,
                &mut |event| {
                    replay
                        .visit(&row.header, &event)
                        .map_err(|e| at.wrap(event.seq(), e))
                },
            )?;
            tx.commit()
                .map_err(|e| inner.connector.fail(reading(id), &e, Stmt::Read))?;
            Ok(row.header)
        })
    }
}

//! Helpers of the tests that run against a real PostgreSQL server (ARCHITECTURE.md#postgresql).
//!
//! The server is `INBOXLOG_TEST_PG` (default `postgresql://postgres@127.0.0.1:5432/test`).
//! Each test works in a schema of its own, with a random name, dropped when its
//! [`Schema`] guard goes: tests run in parallel. When the server cannot be reached the
//! test is skipped with a message, except under `CI=true`, where it fails.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use inboxlog::store::{Durability, PgOptions, PgStore};

/// The test server's URL.
pub fn url() -> String {
    std::env::var("INBOXLOG_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgresql://postgres@127.0.0.1:5432/test".to_owned())
}

/// The test server's URL with an `application_name` of its own, so a test can find a
/// store handle's connections (and terminate them) by name.
pub fn url_named(name: &str) -> String {
    let url = url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={name}")
}

/// Terminates every connection named `name` (see [`url_named`]); how many there were.
pub fn terminate(name: &str) -> usize {
    let mut c = client().expect("the server answered before");
    c.query_one(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE application_name = $1 AND pid <> pg_backend_pid()",
        &[&name],
    )
    .unwrap()
    .get::<_, i64>(0) as usize
}

/// Whether a missing server fails the test (CI) rather than skipping it.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A plain connection for the tests' own SQL (editing rows, killing connections).
pub fn client() -> Option<postgres::Client> {
    match postgres::Client::connect(&url(), postgres::NoTls) {
        Ok(client) => Some(client),
        Err(e) if required() => panic!(
            "CI=true and the PostgreSQL server at INBOXLOG_TEST_PG ({}) cannot be reached: {e}",
            inboxlog::store::postgres::redact_url(&url())
        ),
        Err(e) => {
            eprintln!(
                "SKIPPED: no PostgreSQL server at {} ({e}); set INBOXLOG_TEST_PG or start one",
                inboxlog::store::postgres::redact_url(&url())
            );
            None
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A schema of this test's own, dropped (with everything in it) when the guard goes.
pub struct Schema {
    pub name: String,
}

impl Schema {
    /// A fresh schema name (not created: the store creates it on first use), or `None`
    /// when the server cannot be reached (see the module doc).
    pub fn new() -> Option<Schema> {
        drop(client()?);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Some(Schema { name })
    }

    /// A store on this schema.
    pub fn store(&self, durability: Durability) -> PgStore {
        PgStore::connect(&url(), self.options(durability)).unwrap()
    }

    /// A store on this schema whose connections the server knows by an application
    /// name of this schema's own, for [`Schema::terminate`].
    pub fn named_store(&self, durability: Durability) -> PgStore {
        let base = url();
        let sep = if base.contains('?') { '&' } else { '?' };
        let app = self.application_name();
        PgStore::connect(
            &format!("{base}{sep}application_name={app}"),
            self.options(durability),
        )
        .unwrap()
    }

    /// Terminates the server connections of this schema's [`Schema::named_store`]s
    /// and returns how many there were.
    pub fn terminate(&self) -> i64 {
        let mut c = client().expect("reachable a moment ago");
        c.query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&self.application_name()],
        )
        .unwrap()
        .get(0)
    }

    fn application_name(&self) -> String {
        format!("owner_{}", self.name)
    }

    /// The options naming this schema.
    pub fn options(&self, durability: Durability) -> PgOptions {
        PgOptions {
            schema: self.name.clone(),
            durability,
            ..PgOptions::default()
        }
    }

    /// Runs `sql` (with `{s}` standing for the quoted schema) as one batch.
    pub fn exec(&self, sql: &str) {
        let mut c = client().expect("reachable a moment ago");
        c.batch_execute(&sql.replace("{s}", &format!("\"{}\"", self.name)))
            .unwrap();
    }

    /// The lines of session `id`, in seq order, as `psql` would show them.
    pub fn lines(&self, id: &str) -> Vec<String> {
        let mut c = client().expect("reachable a moment ago");
        c.query(
            &format!(
                "SELECT line FROM \"{}\".events WHERE session = $1 ORDER BY seq",
                self.name
            ),
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    }

    /// Everything stored about session `id` (session row and events, as text): equal
    /// before and after means nothing changed.
    pub fn snapshot(&self, id: &str) -> String {
        let mut c = client().expect("reachable a moment ago");
        let s = &self.name;
        let head: Vec<String> = c
            .query(
                &format!("SELECT header || ' ' || next_seq FROM \"{s}\".sessions WHERE id = $1"),
                &[&id],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let rows: Vec<String> = c
            .query(
                &format!(
                    "SELECT seq || ' ' || type || ' ' || line FROM \"{s}\".events WHERE session = $1 ORDER BY seq"
                ),
                &[&id],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        format!("{head:?}\n{}", rows.join("\n"))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

/// A schema and a store on it, or `None` (skipped) without a server.
pub fn store(durability: Durability) -> Option<(Schema, PgStore)> {
    let schema = Schema::new()?;
    let store = schema.store(durability);
    Some((schema, store))
}

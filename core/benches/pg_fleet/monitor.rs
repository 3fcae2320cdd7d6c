//! Counting the bench's backends: every client of the bench connects with an
//! `application_name` starting with [`PREFIX`], and a watcher reads `pg_stat_activity`
//! every [`POLL`] to keep the peak per name. The same count guards the shared server:
//! setting up a run stops, with an error naming the budget, once the bench holds more
//! than its budget of backends or leaves fewer free slots than it must.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Every `application_name` of the bench starts with this.
pub const PREFIX: &str = "inboxlog_bench_";

/// The watcher's own name (not counted).
const WATCHER: &str = "inboxlog_bench_watcher";

/// How often the watcher reads `pg_stat_activity`.
const POLL: Duration = Duration::from_millis(25);

/// `url` with `application_name` set to `name` (which must start with [`PREFIX`]).
pub fn url_named(url: &str, name: &str) -> String {
    debug_assert!(name.starts_with(PREFIX));
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={name}")
}

/// The peak backends per `application_name`, and the guard of the server's slots.
pub struct Backends {
    client: Mutex<postgres::Client>,
    peaks: Mutex<HashMap<String, i64>>,
    /// The most backends the bench may hold at once, all names together.
    budget: i64,
    /// The free connection slots the bench leaves to the server's other users.
    leave_free: i64,
    stop: AtomicBool,
}

impl Backends {
    /// Connects the watcher to `url` and starts polling. `budget` and `leave_free` as
    /// in [`Backends::check`].
    pub fn start(
        url: &str,
        budget: i64,
        leave_free: i64,
    ) -> Result<(Arc<Backends>, JoinHandle<()>), String> {
        let client = postgres::Client::connect(&url_named(url, WATCHER), postgres::NoTls)
            .map_err(|e| format!("cannot connect the backend watcher: {e}"))?;
        let backends = Arc::new(Backends {
            client: Mutex::new(client),
            peaks: Mutex::new(HashMap::new()),
            budget,
            leave_free,
            stop: AtomicBool::new(false),
        });
        let watcher = Arc::clone(&backends);
        let handle = thread::spawn(move || {
            while !watcher.stop.load(Ordering::Relaxed) {
                // A failed read is only a missed sample; the next one may work.
                let _ = watcher.sample();
                thread::sleep(POLL);
            }
        });
        Ok((backends, handle))
    }

    /// Stops the watcher (join its handle afterwards).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn client(&self) -> MutexGuard<'_, postgres::Client> {
        self.client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the bench's backends per name now, records the peaks, and returns the
    /// bench's total and the server's free slots.
    fn sample(&self) -> Result<(i64, i64), String> {
        let rows = self
            .client()
            .query(
                "SELECT coalesce(application_name, ''), count(*),
                        current_setting('max_connections')::int
                          - current_setting('superuser_reserved_connections')::int
                          - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
                 FROM pg_stat_activity
                 WHERE starts_with(application_name, $1) AND application_name <> $2
                 GROUP BY 1",
                &[&PREFIX, &WATCHER],
            )
            .map_err(|e| format!("cannot count the bench's backends: {e}"))?;
        let mut total = 0;
        let mut free = None;
        let mut peaks = self
            .peaks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for row in rows {
            let (name, n, slots): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
            total += n;
            free = Some(slots);
            let peak = peaks.entry(name).or_insert(0);
            *peak = (*peak).max(n);
        }
        let free = match free {
            Some(free) => free,
            None => self
                .client()
                .query_one(
                    "SELECT current_setting('max_connections')::int
                              - current_setting('superuser_reserved_connections')::int
                              - count(*)
                     FROM pg_stat_activity WHERE backend_type = 'client backend'",
                    &[],
                )
                .map_err(|e| format!("cannot count the server's free slots: {e}"))?
                .get(0),
        };
        Ok((total, free))
    }

    /// Fails, saying what was being done, when the bench holds more than its budget of
    /// backends or the server has fewer than the slots the bench leaves free (other
    /// users share it). Also records a sample.
    pub fn check(&self, doing: &str) -> Result<(), String> {
        let (total, free) = self.sample()?;
        if total > self.budget {
            return Err(format!(
                "stopped {doing}: the bench holds {total} backends, over its budget of {} \
                 (INBOXLOG_BENCH_MAX_BACKENDS)",
                self.budget
            ));
        }
        if free < self.leave_free {
            return Err(format!(
                "stopped {doing}: the server has {free} free connection slots left, fewer \
                 than the {} the bench leaves to other users (INBOXLOG_BENCH_LEAVE_FREE)",
                self.leave_free
            ));
        }
        Ok(())
    }

    /// Fails unless the server has `need` free slots beyond the ones left to others.
    pub fn room_for(&self, need: i64, doing: &str) -> Result<(), String> {
        let (_, free) = self.sample()?;
        if free - need < self.leave_free {
            return Err(format!(
                "skipped {doing}: it needs {need} connections and the server has {free} free \
                 slots, {} of which the bench leaves to other users (INBOXLOG_BENCH_LEAVE_FREE)",
                self.leave_free
            ));
        }
        Ok(())
    }

    /// The most backends seen at once with `application_name` `name`.
    pub fn peak(&self, name: &str) -> i64 {
        let _ = self.sample();
        let peaks = self
            .peaks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peaks.get(name).copied().unwrap_or(0)
    }
}

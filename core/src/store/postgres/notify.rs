//! Wake-ups for followers, off the durable commit (ARCHITECTURE.md#following): after a
//! group of appends committed, its sessions are handed to this handle's notifier, which
//! sends `pg_notify` for each in a statement of its own (asynchronous commit, never part
//! of a writer's transaction) on a pooled connection. The first commit after a quiet
//! spell is sent at once; after that at most one statement goes per [`WINDOW`], carrying
//! every session committed meanwhile, so a busy handle spends one statement per window,
//! not one per append (a single writer commits hundreds of times per window, and a
//! statement per commit cost it a third of its acks). Best-effort: a lost
//! wake-up only delays a follower until its next re-read (`fleet.rs`), never skips an
//! event. Followers of the same handle are woken at once, without the server.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::home::Signals;
use super::pool::Pool;
use super::schema::Sql;

/// The least time between two notification statements of one handle: what it adds at
/// most to a follower's wake-up (SPEC §11.2 wants them prompt; the benchmark's p99 goal
/// is 100 ms).
pub(super) const WINDOW: Duration = Duration::from_millis(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A set and a flag; a panic cannot leave them half-changed.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct Pending {
    ids: BTreeSet<String>,
    stop: bool,
}

struct Shared {
    pool: Arc<Pool>,
    sql: Arc<Sql>,
    pending: Mutex<Pending>,
    wake: Condvar,
}

/// The notifier of one handle; its thread starts with the first commit.
pub(super) struct Notifier {
    shared: Arc<Shared>,
    signals: Arc<Signals>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Notifier {
    pub fn new(pool: Arc<Pool>, sql: Arc<Sql>, signals: Arc<Signals>) -> Notifier {
        Notifier {
            shared: Arc::new(Shared {
                pool,
                sql,
                pending: Mutex::new(Pending::default()),
                wake: Condvar::new(),
            }),
            signals,
            thread: Mutex::new(None),
        }
    }

    /// Tells followers everywhere that `ids` have new events.
    pub fn committed<'a>(&self, ids: impl IntoIterator<Item = &'a str> + Clone) {
        self.signals.ring(ids.clone());
        {
            let mut thread = lock(&self.thread);
            if thread.is_none() {
                let shared = Arc::clone(&self.shared);
                // Without the thread, followers elsewhere still read again within
                // their re-read interval.
                *thread = std::thread::Builder::new()
                    .name("inboxlog-pg-notify".to_owned())
                    .spawn(move || shared.run())
                    .ok();
            }
        }
        let mut pending = lock(&self.shared.pending);
        let idle = pending.ids.is_empty();
        pending.ids.extend(ids.into_iter().map(str::to_owned));
        if idle {
            // Otherwise the thread is sending or waiting out its window, and takes these
            // with the others: no wake-up per commit.
            self.shared.wake.notify_one();
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        lock(&self.shared.pending).stop = true;
        self.shared.wake.notify_all();
        if let Some(handle) = lock(&self.thread).take() {
            // It only sends wake-ups; a panic there has nothing left to report.
            let _ = handle.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        let mut last: Option<Instant> = None;
        loop {
            let (ids, stop) = self.next(last);
            if !ids.is_empty() {
                last = Some(Instant::now());
                self.send(&ids);
            }
            if stop {
                return;
            }
        }
    }

    /// Waits for sessions to announce and for the window since the `last` statement to
    /// pass; returns them, and whether the handle is closing (what is pending then goes
    /// at once, so followers elsewhere do not wait for a re-read).
    fn next(&self, last: Option<Instant>) -> (Vec<String>, bool) {
        let mut pending = lock(&self.pending);
        loop {
            if pending.stop {
                return (std::mem::take(&mut pending.ids).into_iter().collect(), true);
            }
            if pending.ids.is_empty() {
                pending = self
                    .wake
                    .wait(pending)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            let now = Instant::now();
            match last.map(|t| t + WINDOW) {
                Some(due) if now < due => {
                    pending = self
                        .wake
                        .wait_timeout(pending, due - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                _ => {
                    return (
                        std::mem::take(&mut pending.ids).into_iter().collect(),
                        false,
                    );
                }
            }
        }
    }

    /// One statement of wake-ups, prepared once per connection (a statement sent as text
    /// costs a second round trip and a plan every time). Best-effort: a failure costs
    /// the followers a re-read interval at most.
    fn send(&self, ids: &[String]) {
        let Ok(mut conn) = self.pool.get() else {
            return;
        };
        if let Ok(statement) = conn.prepared(&self.sql.notify) {
            let _ = conn.client.execute(&statement, &[&ids]);
        }
        // A connection that lost the server is discarded there, not given back.
        self.pool.put(conn);
    }
}

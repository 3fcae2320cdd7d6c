//! Wake-ups for followers, off the durable commit (ARCHITECTURE.md#following): after a
//! group of appends committed, its sessions are handed to this handle's notifier, which
//! sends `pg_notify` for each in a statement of its own (asynchronous commit, never part
//! of a writer's transaction) on a pooled connection. Sessions handed over while a
//! statement is in flight go together in the next one, so a busy handle sends one
//! notification statement per round of commits, not one per append. Best-effort: a lost
//! wake-up only delays a follower until its next re-read (`fleet.rs`), never skips an
//! event. Followers of the same handle are woken at once, without the server.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::home::Signals;
use super::pool::Pool;
use super::schema::Sql;

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
        pending.ids.extend(ids.into_iter().map(str::to_owned));
        self.shared.wake.notify_one();
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
        loop {
            let ids: Vec<String> = {
                let mut pending = lock(&self.pending);
                while pending.ids.is_empty() && !pending.stop {
                    pending = self
                        .wake
                        .wait(pending)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if pending.stop {
                    return;
                }
                std::mem::take(&mut pending.ids).into_iter().collect()
            };
            // Best-effort: a failure costs the followers a re-read interval at most.
            let _ = self.pool.with(|client| {
                client
                    .execute(self.sql.notify.as_str(), &[&ids])
                    .map(drop)
                    .map_err(|e| {
                        crate::error::Error::new(crate::error::ErrorKind::Io, e.to_string())
                    })
            });
        }
    }
}

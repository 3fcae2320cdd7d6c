//! The flusher of a handle's `batched` and `none` writers: one thread for the whole
//! handle, however many sessions are open, that writes each writer's staged rows once
//! the oldest has waited the batch window (`writer.rs`), every writer due at the same
//! moment in one group (one statement, one commit).

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use super::Inner;
use super::writer::Shared as Writer;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A list and a flag; a panic cannot leave them half-changed.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct Due {
    /// Writers with staged rows, by when the oldest row is due.
    writers: Vec<(Instant, Weak<Writer>)>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    due: Mutex<Due>,
    wake: Condvar,
}

/// The flusher of one handle; its thread starts with the first staged row.
#[derive(Default)]
pub(super) struct Flusher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Flusher {
    /// Asks for `writer`'s staged rows to be written at `at`.
    pub fn due(&self, at: Instant, writer: Weak<Writer>) {
        {
            let mut thread = lock(&self.thread);
            if thread.is_none() {
                let shared = Arc::clone(&self.shared);
                // Without the thread, staged rows are still written by the writer's
                // next full batch, flush or close.
                *thread = std::thread::Builder::new()
                    .name("inboxlog-pg-batch".to_owned())
                    .spawn(move || shared.run())
                    .ok();
            }
        }
        lock(&self.shared.due).writers.push((at, writer));
        self.shared.wake.notify_one();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        lock(&self.shared.due).stop = true;
        self.shared.wake.notify_all();
        let handle = lock(&self.thread).take();
        if let Some(handle) = handle
            && handle.thread().id() != std::thread::current().id()
        {
            // It only waits and writes; a panic there has nothing left to report.
            let _ = handle.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        loop {
            let ready: Vec<Arc<Writer>> = {
                let mut due = lock(&self.due);
                loop {
                    if due.stop {
                        return;
                    }
                    let now = Instant::now();
                    let first = due.writers.iter().map(|(at, _)| *at).min();
                    match first {
                        None => {
                            due = self
                                .wake
                                .wait(due)
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                        }
                        Some(at) if at > now => {
                            due = self
                                .wake
                                .wait_timeout(due, at - now)
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .0;
                        }
                        Some(_) => break,
                    }
                }
                let now = Instant::now();
                let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut due.writers)
                    .into_iter()
                    .partition(|(at, _)| *at <= now);
                due.writers = later;
                // A writer may be listed more than once (due again before its turn came):
                // each is settled once, its lock taken once.
                let mut seen = HashSet::with_capacity(ready.len());
                ready
                    .into_iter()
                    .filter_map(|(_, w)| w.upgrade())
                    .filter(|w| seen.insert(Arc::as_ptr(w)))
                    .collect()
            };
            if let Some(first) = ready.first() {
                let inner: Arc<Inner> = first.inner();
                Writer::settle_all(&inner, &ready);
                // Rows staged again since are due again later.
                for writer in &ready {
                    if let Some(at) = writer.due() {
                        lock(&self.due).writers.push((at, Arc::downgrade(writer)));
                    }
                }
            }
        }
    }
}

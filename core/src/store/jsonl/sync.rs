//! Making written bytes durable (ARCHITECTURE.md#durability): the sync state of one log, shared by its
//! writer and the group-commit flusher of the `batched` mode.
//!
//! Invariants: `durable <= written`; at most one fdatasync per log is in flight
//! (`syncing`); after an fdatasync fails nothing syncs that handle again (`failure` is
//! set for good and the log is poisoned until reopened).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::file::LogFile;
use crate::error::{Error, ErrorKind, Result};

/// The sync state of one open log.
pub(crate) struct SyncCell {
    /// `session "<id>"`, for messages.
    session: String,
    /// The file's path as shown in messages.
    path: String,
    state: Mutex<State>,
    /// Set with `State::failure`, so the writer's check before each append needs no
    /// lock while all is well.
    failed: AtomicBool,
    /// Signalled whenever an fdatasync finishes.
    synced: Condvar,
    /// `State::durable`, readable without the lock: what a version 2 record's `synced`
    /// says (core/FORMAT.md#checksums-version-2).
    durable: AtomicU64,
}

struct State {
    /// The file, until its writer closes.
    file: Option<Arc<dyn LogFile>>,
    /// End of the bytes written so far.
    written: u64,
    /// End of the bytes known fdatasynced.
    durable: u64,
    /// An fdatasync is in flight.
    syncing: bool,
    /// The cell is waiting in the flusher's queue.
    queued: bool,
    /// Why the log is poisoned.
    failure: Option<String>,
}

impl SyncCell {
    /// The state of a log whose `len` bytes are all written; the first `known` of
    /// them are known to be durable (`len` after an fdatasync; a file opened as it was
    /// found may hold bytes a killed writer left in the page cache).
    pub(crate) fn new(
        file: Arc<dyn LogFile>,
        (len, known): (u64, u64),
        session: String,
        path: String,
    ) -> Arc<SyncCell> {
        let state = State {
            file: Some(file),
            written: len,
            durable: len,
            syncing: false,
            queued: false,
            failure: None,
        };
        Arc::new(SyncCell {
            session,
            path,
            state: Mutex::new(state),
            failed: AtomicBool::new(false),
            synced: Condvar::new(),
            durable: AtomicU64::new(known.min(len)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is updated in single assignments; a panic cannot leave it torn.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `poisoned` error, when an fdatasync failed.
    pub(crate) fn poisoned(&self) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.lock()
            .failure
            .as_ref()
            .map(|f| Error::new(ErrorKind::Poisoned, f.clone()))
    }

    /// The end of the bytes known fdatasynced: every byte before it was durable before
    /// anything written from now on.
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Records that the file now ends at `end`. Returns true when the cell must be
    /// handed to the flusher (it is not queued yet).
    pub(crate) fn wrote(&self, end: u64) -> bool {
        let mut st = self.lock();
        st.written = end;
        !std::mem::replace(&mut st.queued, true)
    }

    /// The barrier: returns once every byte written so far is fdatasynced, or the
    /// `poisoned` error. A failed fdatasync truncates the file back to its durable
    /// length (best effort) and poisons the log.
    pub(crate) fn sync(&self) -> Result<()> {
        let mut st = self.lock();
        loop {
            if let Some(f) = &st.failure {
                return Err(Error::new(ErrorKind::Poisoned, f.clone()));
            }
            if st.durable >= st.written {
                return Ok(());
            }
            if st.syncing {
                st = self.synced.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some(file) = st.file.clone() else {
                return Ok(());
            };
            let (target, durable) = (st.written, st.durable);
            st.syncing = true;
            drop(st);
            let result = file.sync_data();
            let failure = result.err().map(|e| {
                // Bytes whose fdatasync failed may be gone from the page cache later;
                // cut them now so a reopen sees what is durable, not what may vanish.
                let rollback = match file.set_len(durable) {
                    Ok(()) => String::new(),
                    Err(e) => format!("; rollback to {durable} bytes: {e}"),
                };
                format!(
                    "{} is poisoned after a failed fsync; reopen it: fdatasync {}: {e}{rollback}",
                    self.session, self.path
                )
            });
            // The writer's close waits for `syncing` to clear: drop our handle first so
            // the file (and its lock) closes in the writer's thread.
            drop(file);
            st = self.lock();
            st.syncing = false;
            match failure {
                None => {
                    st.durable = st.durable.max(target);
                    self.durable.store(st.durable, Ordering::Release);
                }
                Some(f) => {
                    st.failure = Some(f);
                    self.failed.store(true, Ordering::Release);
                }
            }
            self.synced.notify_all();
        }
    }

    /// Syncs a cell the flusher dequeued (a write after this point queues it again).
    fn flush_queued(&self) {
        self.lock().queued = false;
        // A failure is recorded in the cell; the writer reports it on its next call.
        let _ = self.sync();
    }

    /// Detaches the file: waits for an fdatasync in flight, after which no other thread
    /// holds the file.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.file = None;
        while st.syncing {
            st = self.synced.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Where writers queue dirty logs for the flusher: shared by the store and its writers.
/// The last handle to go closes the channel and joins the thread, so no flusher thread
/// outlives the store and its writers (a host that exits right after freeing them
/// leaves no thread behind).
pub(crate) type Queue = Arc<FlushQueue>;

/// The sending end of the flusher's channel and the flusher thread itself.
pub(crate) struct FlushQueue {
    tx: Option<Sender<Arc<SyncCell>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl FlushQueue {
    /// Hands a dirty log to the flusher; false when the flusher is gone.
    pub(crate) fn send(&self, cell: Arc<SyncCell>) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.send(cell).is_ok())
    }
}

impl Drop for FlushQueue {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop once it has synced what it holds.
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The group-commit flusher of a store: one thread, started on first use, ending when
/// the store and all its writers are gone.
pub(crate) struct Flusher {
    window: Duration,
    queue: Mutex<Option<Queue>>,
}

impl Flusher {
    /// A flusher that syncs a dirty log at most `window` after its first unsynced write
    /// (plus the time of the fdatasyncs ahead of it).
    pub(crate) fn new(window: Duration) -> Flusher {
        Flusher {
            window,
            queue: Mutex::new(None),
        }
    }

    /// The group-commit window.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// A queue handle for a writer, starting the thread if needed.
    pub(crate) fn queue(&self) -> Result<Queue> {
        let mut slot = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(q) = &*slot {
            return Ok(q.clone());
        }
        let (tx, rx) = mpsc::channel();
        let window = self.window;
        let thread = thread::Builder::new()
            .name("inboxlog-flush".into())
            .spawn(move || run(&rx, window))
            .map_err(|e| Error::io("cannot start the batched-durability flusher thread", e))?;
        let queue = Arc::new(FlushQueue {
            tx: Some(tx),
            thread: Some(thread),
        });
        *slot = Some(queue.clone());
        Ok(queue)
    }
}

/// Collects dirty logs for one window after the first arrives, then syncs them all.
fn run(rx: &Receiver<Arc<SyncCell>>, window: Duration) {
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv() {
        batch.push(first);
        let deadline = Instant::now() + window;
        loop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(cell) => batch.push(cell),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        for cell in batch.drain(..) {
            cell.flush_queued();
        }
    }
}

//! Fault injection for tests: a [`FaultPlan`] given to
//! [`JsonlStore::with_faults`](super::JsonlStore::with_faults) makes the store's
//! writes, fdatasyncs, truncations, length checks and unlinks fail, or crashes the
//! process around them, and can run a test's code just before a log file is locked.
//!
//! Built only with the `testing` feature (the core's test targets enable it) and
//! hidden from the docs: it exists for the crash and failure tests, not for hosts. It
//! implements the store's file trait (`file`), which knows nothing of it.

use std::fmt;
use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::file::LogFile;

/// A file operation a fault can hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Point {
    /// Writing records: a create's header and seed, an append, nothing else.
    Write,
    /// An fdatasync after a write, a flush or a torn-tail truncation.
    Sync,
    /// A truncation: the rollback of a failed append, or dropping a torn tail on open.
    Truncate,
    /// Measuring the file's length, which every append does before it writes.
    Length,
    /// Removing a log file: a delete.
    Unlink,
    /// Removing a post from a session's spool once the log holds it (ARCHITECTURE.md#posting).
    Settle,
    /// A step of writing a checkpoint (core/FORMAT.md#checkpoints), each one hit: its
    /// temporary file's write, that file's fdatasync, the rename over the old
    /// checkpoint, the directory's fsync.
    Checkpoint,
}

impl Point {
    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Point::Write => "write",
            Point::Sync => "sync",
            Point::Truncate => "truncate",
            Point::Length => "length",
            Point::Unlink => "unlink",
            Point::Settle => "settle",
            Point::Checkpoint => "checkpoint",
        })
    }
}

/// An OS error a fault reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// No space left on device.
    Enospc,
    /// Input/output error.
    Eio,
}

impl Errno {
    fn to_io(self) -> io::Error {
        #[cfg(unix)]
        let err = io::Error::from_raw_os_error(match self {
            Errno::Enospc => 28,
            Errno::Eio => 5,
        });
        #[cfg(not(unix))]
        let err = match self {
            Errno::Enospc => io::Error::new(io::ErrorKind::StorageFull, "no space left on device"),
            Errno::Eio => io::Error::other("input/output error"),
        };
        err
    }
}

/// What happens when a fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The operation fails with the error and does nothing.
    Fail(Errno),
    /// A write lands only its first `n` bytes, then fails with the error (a short
    /// write on a full disk). Other points treat it as [`Action::Fail`].
    FailAfter(usize, Errno),
    /// The process aborts before the operation.
    CrashBefore,
    /// The process aborts right after the operation succeeded.
    CrashAfter,
    /// Power loss after a write: the write lands, then the file keeps only the bytes
    /// fdatasynced so far plus the next `n` (a torn tail), and the process aborts; a
    /// checkpoint's temporary file keeps its first `n`. Other points treat it as
    /// [`Action::CrashAfter`].
    PowerCut(usize),
}

#[derive(Debug)]
struct Rule {
    point: Point,
    /// 1-based hit of `point` the rule fires on.
    nth: u64,
    /// Fire on every hit from `nth` on, not only on `nth`.
    repeat: bool,
    action: Action,
}

/// Code a test runs with a log file's path just before the store locks it.
type Hook = Arc<dyn Fn(&Path) + Send + Sync>;

#[derive(Default)]
struct Inner {
    rules: Vec<Rule>,
    /// Hits so far per [`Point`], across every file of the store.
    hits: [u64; 7],
    before_lock: Option<Hook>,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("rules", &self.rules)
            .field("hits", &self.hits)
            .field("before_lock", &self.before_lock.is_some())
            .finish()
    }
}

/// A set of faults shared by every file a store opens. Clones share the plan.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan(Arc<Mutex<Inner>>);

impl FaultPlan {
    /// A plan with no faults (it only counts hits).
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Fires `action` on the `nth` (1-based) hit of `point`.
    #[must_use]
    pub fn on(self, point: Point, nth: u64, action: Action) -> FaultPlan {
        self.lock().rules.push(Rule {
            point,
            nth,
            repeat: false,
            action,
        });
        self
    }

    /// Fires `action` on every hit of `point` from the `nth` (1-based) on.
    #[must_use]
    pub fn from(self, point: Point, nth: u64, action: Action) -> FaultPlan {
        self.lock().rules.push(Rule {
            point,
            nth,
            repeat: true,
            action,
        });
        self
    }

    /// Runs `hook` with the file's path after a log file was opened (or created) and
    /// before the store takes its lock, in create, open and delete: the test stands in
    /// for another process acting in that window.
    #[must_use]
    pub fn before_lock(self, hook: impl Fn(&Path) + Send + Sync + 'static) -> FaultPlan {
        self.lock().before_lock = Some(Arc::new(hook));
        self
    }

    /// Removes every rule and the `before_lock` hook (hit counts stay).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.rules.clear();
        inner.before_lock = None;
    }

    /// Runs the `before_lock` hook, if any (outside the plan's own lock).
    pub(crate) fn run_before_lock(&self, path: &Path) {
        let hook = self.lock().before_lock.clone();
        if let Some(hook) = hook {
            hook(path);
        }
    }

    /// Removes the file at `path`, unless a rule on [`Point::Unlink`] fires.
    pub(crate) fn remove_file(&self, path: &Path) -> io::Result<()> {
        match self.hit(Point::Unlink) {
            None => fs::remove_file(path),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter | Action::PowerCut(_)) => {
                let _ = fs::remove_file(path);
                crash()
            }
        }
    }

    /// Removes the settled post file at `path`, unless a rule on [`Point::Settle`] fires.
    pub(crate) fn remove_settled(&self, path: &Path) -> io::Result<()> {
        match self.hit(Point::Settle) {
            None => fs::remove_file(path),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter | Action::PowerCut(_)) => {
                let _ = fs::remove_file(path);
                crash()
            }
        }
    }

    /// How many times `point` was reached so far.
    pub fn hits(&self, point: Point) -> u64 {
        self.lock().hits[point.index()]
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a hit of `point` and returns the action to take, if a rule fires.
    fn hit(&self, point: Point) -> Option<Action> {
        let mut inner = self.lock();
        inner.hits[point.index()] += 1;
        let n = inner.hits[point.index()];
        inner
            .rules
            .iter()
            .find(|r| r.point == point && (r.nth == n || (r.repeat && n >= r.nth)))
            .map(|r| r.action)
    }
}

/// A log file that consults a [`FaultPlan`] before each operation.
pub(crate) struct FaultyFile {
    file: File,
    plan: FaultPlan,
    /// File length at the start of the last successful fdatasync: what survives a
    /// power cut.
    synced: AtomicU64,
}

impl FaultyFile {
    pub(crate) fn new(file: File, plan: FaultPlan) -> FaultyFile {
        let synced = file.metadata().map(|m| m.len()).unwrap_or(0);
        FaultyFile {
            file,
            plan,
            synced: AtomicU64::new(synced),
        }
    }
}

fn crash() -> ! {
    std::process::abort()
}

impl LogFile for FaultyFile {
    fn checkpoint_step(
        &self,
        torn: Option<&Path>,
        step: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        match self.plan.hit(Point::Checkpoint) {
            None => step(),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter) => {
                let _ = step();
                crash()
            }
            Some(Action::PowerCut(n)) => {
                let _ = step();
                // Nothing of the step's file was synced: it keeps what the disk got.
                if let Some(file) =
                    torn.and_then(|t| fs::OpenOptions::new().write(true).open(t).ok())
                {
                    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
                    let _ = file.set_len(len.min(n as u64));
                    let _ = file.sync_all();
                }
                crash()
            }
        }
    }

    fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        match self.plan.hit(Point::Write) {
            None => self.file.write_all(buf),
            Some(Action::Fail(errno)) => Err(errno.to_io()),
            Some(Action::FailAfter(n, errno)) => {
                LogFile::write_all(&self.file, &buf[..n.min(buf.len())])?;
                Err(errno.to_io())
            }
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter) => {
                let _ = LogFile::write_all(&self.file, buf);
                crash()
            }
            Some(Action::PowerCut(n)) => {
                let _ = LogFile::write_all(&self.file, buf);
                let len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
                let keep = (self.synced.load(Ordering::SeqCst) + n as u64).min(len);
                let _ = self.file.set_len(keep);
                let _ = self.file.sync_all();
                crash()
            }
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        let run = |file: &File| {
            file.sync_data()?;
            self.synced.fetch_max(len, Ordering::SeqCst);
            Ok(())
        };
        match self.plan.hit(Point::Sync) {
            None => run(&self.file),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter | Action::PowerCut(_)) => {
                let _ = run(&self.file);
                crash()
            }
        }
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let run = |file: &File| {
            file.set_len(len)?;
            self.synced.fetch_min(len, Ordering::SeqCst);
            Ok(())
        };
        match self.plan.hit(Point::Truncate) {
            None => run(&self.file),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore) => crash(),
            Some(Action::CrashAfter | Action::PowerCut(_)) => {
                let _ = run(&self.file);
                crash()
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        match self.plan.hit(Point::Length) {
            None => LogFile::len(&self.file),
            Some(Action::Fail(errno) | Action::FailAfter(_, errno)) => Err(errno.to_io()),
            Some(Action::CrashBefore | Action::CrashAfter | Action::PowerCut(_)) => crash(),
        }
    }
}

//! Calls written behind their caller (`Session._append_behind`,
//! `Session._step_boundary_behind`): the arguments are converted on the calling thread,
//! then a writer thread makes the call (an append, after which it may take the
//! session's posts in, or a step boundary) while the caller goes on; the [`PyWritten`]
//! it gets back tells when the call has ended, answers it or raises its error, and
//! wakes an event loop that waits for it through a socket the loop watches (`wake_fd`).
//!
//! For an event loop that must neither wait for a disk nor wait for the GIL to start a
//! write: the writer threads run no Python, so the call starts as soon as one is free,
//! even while the loop's thread keeps the GIL (a Python worker thread would wait for
//! the loop to let go of it before it could begin). Calls behind one session are made
//! in the order they were asked for.

use std::collections::VecDeque;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;

use inboxlog::json::Json;
use inboxlog::{Envelope, Session, StepBoundary, StepOutcome, TurnClaim};

use crate::errors::raise;
use crate::session::boundary_dict;

/// One call written behind its caller: `done` once it ended, and `wait()` for its
/// outcome.
#[pyclass(frozen, name = "Written", module = "inboxlog._native")]
pub(crate) struct PyWritten {
    outcome: Arc<Outcome>,
}

#[pymethods]
impl PyWritten {
    /// Whether the call has ended (durable, or failed): `wait()` then returns at once.
    #[getter]
    fn done(&self) -> bool {
        self.outcome.ended.load(Ordering::Acquire)
    }

    /// Whether the event was appended (also when taking the posts in after it failed):
    /// final once `done`.
    #[getter]
    fn appended(&self) -> bool {
        self.outcome.appended.load(Ordering::Acquire)
    }

    /// A socket to watch for reading until `done`, or `None` when it already is: once
    /// the call ends, a byte is written to it (read what is there, then look at `done`
    /// again: a byte may be left from an earlier call). One per session, so a loop waits
    /// for a call without a thread of its own; one loop at a time may watch it (one
    /// reader could take the byte another waits for), as one run holds a session.
    fn wake_fd(&self) -> PyResult<Option<RawFd>> {
        let mut state = lock(&self.outcome.state);
        if self.outcome.ended.load(Ordering::Acquire) {
            return Ok(None);
        }
        let wake = self.outcome.wake.get()?;
        state.wake = Some(wake.clone());
        Ok(Some(wake.reader.as_raw_fd()))
    }

    /// Waits until the call has ended (the GIL released meanwhile); returns what it
    /// answers (`None` for an append) or raises its error, the first time it is asked;
    /// after that, returns `None`.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let outcome = if self.done() {
            self.outcome.take()
        } else {
            py.detach(|| {
                self.outcome.wait();
                self.outcome.take()
            })
        };
        match outcome {
            None | Some(Ok(Done::Appended | Done::Boundary(None))) => Ok(py.None().into_bound(py)),
            Some(Ok(Done::Boundary(Some(b)))) => boundary_dict(py, &b).map(Bound::into_any),
            Some(Err(Failure::Log(e))) => Err(raise(e)),
            Some(Err(Failure::Panicked)) => Err(PyRuntimeError::new_err(
                "inboxlog: a call written behind its caller panicked",
            )),
        }
    }

    fn __repr__(&self) -> String {
        let state = if self.done() { "done" } else { "pending" };
        format!("<inboxlog.Written {state}>")
    }
}

/// What a call behind answered.
pub(crate) enum Done {
    /// The append (and the posts taken in after it) is durable.
    Appended,
    /// What `Session::step_boundary` answered.
    Boundary(Option<StepBoundary>),
}

/// Why a call behind failed.
enum Failure {
    /// The session refused it or the store failed.
    Log(inboxlog::Error),
    /// A bug: the append panicked (the writer thread survives it).
    Panicked,
}

/// An append's outcome, set once by the writer thread.
struct Outcome {
    /// Set (with `Release`) once `state` holds the outcome.
    ended: AtomicBool,
    /// Set once the event is appended.
    appended: AtomicBool,
    state: Mutex<State>,
    /// Signalled when `ended` is set.
    signal: Condvar,
    /// The session's wake socket, made when first asked for.
    wake: Arc<LazyWake>,
}

/// What the outcome's lock guards.
#[derive(Default)]
struct State {
    /// What the call answered, until `wait` reports it.
    outcome: Option<Result<Done, Failure>>,
    /// The socket to write a byte to when the append ends, once `wake_fd` was asked.
    wake: Option<Arc<Wake>>,
}

impl Outcome {
    fn new(wake: Arc<LazyWake>) -> Outcome {
        Outcome {
            ended: AtomicBool::new(false),
            appended: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            signal: Condvar::new(),
            wake,
        }
    }

    fn settle(&self, outcome: Result<Done, Failure>) {
        // All under the lock, so that a waiter between its check and its sleep (or its
        // `wake_fd`) cannot miss the end.
        let mut state = lock(&self.state);
        state.outcome = Some(outcome);
        self.ended.store(true, Ordering::Release);
        self.signal.notify_all();
        if let Some(wake) = state.wake.take() {
            drop(state);
            // Full means bytes wait there already: the loop wakes anyway.
            let _ = (&wake.writer).write(&[1]);
        }
    }

    fn wait(&self) {
        let mut state = lock(&self.state);
        while !self.ended.load(Ordering::Acquire) {
            state = self
                .signal
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn take(&self) -> Option<Result<Done, Failure>> {
        lock(&self.state).outcome.take()
    }
}

/// A connected socket pair: the loop watches `reader`, a writer thread writes to `writer`.
struct Wake {
    reader: UnixStream,
    writer: UnixStream,
}

/// A session's [`Wake`], made on first use (most appends behind are never waited for
/// through it).
#[derive(Default)]
struct LazyWake(OnceLock<Arc<Wake>>);

impl LazyWake {
    fn get(&self) -> PyResult<Arc<Wake>> {
        if let Some(wake) = self.0.get() {
            return Ok(wake.clone());
        }
        let made = || -> io::Result<Wake> {
            let (reader, writer) = UnixStream::pair()?;
            reader.set_nonblocking(true)?;
            writer.set_nonblocking(true)?;
            Ok(Wake { reader, writer })
        };
        let wake = made().map_err(|e| {
            PyOSError::new_err(format!("inboxlog: cannot make a wake-up socket pair: {e}"))
        })?;
        Ok(self.0.get_or_init(|| Arc::new(wake)).clone())
    }
}

/// The last append behind one session, which the next one waits for: kept per session.
#[derive(Default)]
pub(crate) struct Behind {
    last: Mutex<Option<Arc<Outcome>>>,
    wake: Arc<LazyWake>,
}

impl Behind {
    /// Hands `data` to a writer thread as a `ty` event of `session`, after every call
    /// behind it asked for before; then, with `receive`, takes the session's posts in.
    pub(crate) fn append(
        &self,
        session: Arc<Session>,
        ty: String,
        data: Json,
        receive: bool,
    ) -> PyWritten {
        self.run(move |outcome| {
            session.append_json(&ty, data, Envelope::default())?;
            outcome.appended.store(true, Ordering::Release);
            if receive {
                session.receive()?;
            }
            Ok(Done::Appended)
        })
    }

    /// `session.step_boundary(end, claim)` on a writer thread, after every call behind
    /// it asked for before.
    pub(crate) fn step_boundary(
        &self,
        session: Arc<Session>,
        end: Option<StepOutcome>,
        claim: TurnClaim,
    ) -> PyWritten {
        self.run(move |_| Ok(Done::Boundary(session.step_boundary(end, claim)?)))
    }

    /// Runs `call` on a writer thread once the calls behind asked for before ended.
    fn run(
        &self,
        call: impl FnOnce(&Outcome) -> inboxlog::Result<Done> + Send + 'static,
    ) -> PyWritten {
        let outcome = Arc::new(Outcome::new(self.wake.clone()));
        let before = lock(&self.last).replace(outcome.clone());
        let settled = outcome.clone();
        submit(Box::new(move || {
            if let Some(before) = before {
                before.wait();
            }
            let done = catch_unwind(AssertUnwindSafe(|| call(&settled)));
            settled.settle(match done {
                Ok(Ok(done)) => Ok(done),
                Ok(Err(e)) => Err(Failure::Log(e)),
                Err(_) => Err(Failure::Panicked),
            });
        }));
        PyWritten { outcome }
    }
}

/// Work for a writer thread.
type Job = Box<dyn FnOnce() + Send>;

/// The writer threads: started as needed, up to [`LIMIT`], so that an append never
/// waits behind another session's fsync while fewer run; idle ones sleep on `work`.
struct Writers {
    crew: Mutex<Crew>,
    work: Condvar,
}

/// What the writer threads share.
struct Crew {
    jobs: VecDeque<Job>,
    /// Threads asleep on `work`.
    idle: usize,
    /// Threads started (in this process: a forked child starts with none).
    threads: usize,
    /// The process the threads run in.
    pid: u32,
}

/// At most this many writer threads (as many as a default Python executor's).
const LIMIT: usize = 32;

static WRITERS: Writers = Writers {
    crew: Mutex::new(Crew {
        jobs: VecDeque::new(),
        idle: 0,
        threads: 0,
        pid: 0,
    }),
    work: Condvar::new(),
};

fn submit(job: Job) {
    let mut crew = lock(&WRITERS.crew);
    let pid = std::process::id();
    if crew.pid != pid {
        // First use, or a forked child, in which none of the parent's threads runs.
        *crew = Crew {
            jobs: VecDeque::new(),
            idle: 0,
            threads: 0,
            pid,
        };
    }
    crew.jobs.push_back(job);
    if crew.idle >= crew.jobs.len() || crew.threads >= LIMIT {
        WRITERS.work.notify_one();
        return;
    }
    crew.threads += 1;
    drop(crew);
    let started = std::thread::Builder::new()
        .name("inboxlog-write".into())
        .spawn(work);
    if started.is_err() {
        // No thread to be had: the caller writes it itself rather than not at all.
        let mut crew = lock(&WRITERS.crew);
        crew.threads -= 1;
        let job = crew.jobs.pop_back();
        drop(crew);
        if let Some(job) = job {
            job();
        }
    }
}

fn work() {
    let mut crew = lock(&WRITERS.crew);
    loop {
        if let Some(job) = crew.jobs.pop_front() {
            drop(crew);
            job();
            crew = lock(&WRITERS.crew);
            continue;
        }
        crew.idle += 1;
        crew = WRITERS
            .work
            .wait(crew)
            .unwrap_or_else(PoisonError::into_inner);
        crew.idle -= 1;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

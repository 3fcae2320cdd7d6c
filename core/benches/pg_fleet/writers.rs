//! The three kinds of writers the throughput table compares, each run by `n` threads
//! for the same duration: bare clients (one connection per thread, a one-row `INSERT`
//! in autocommit: the statement and its commit), the store in `sync` mode (one
//! `PgStore`, one open session per thread, one event per call) and in `batched` mode
//! (the same, [`PER_FLUSH`] appends then the `flush()` barrier).

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{Durability, PgOptions, PgStore};
use inboxlog::{Envelope, Session, SessionMeta};

use super::monitor::{Backends, url_named};
use super::{BARE_SCHEMA, FLEET_SCHEMA, TYPE};
use crate::DATA;

/// Appends per `flush()` of a `batched` writer.
pub const PER_FLUSH: u64 = 1000;

/// Acknowledged operations over a run's wall-clock time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    /// Operations acknowledged (acks, or durable events for `batched`).
    pub ops: u64,
    /// From the start signal until the last writer finished its last operation.
    pub elapsed: Duration,
}

impl Run {
    /// The sum of two runs (rounds of the same side).
    pub fn add(self, other: Run) -> Run {
        Run {
            ops: self.ops + other.ops,
            elapsed: self.elapsed + other.elapsed,
        }
    }

    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs every worker on a thread of its own, all released at once, until `duration`
/// has passed (a worker finishes the operation it is in, then returns). Returns what
/// each worker returned and the time from the release until the last one returned;
/// the first worker error fails the run.
pub fn race<T, W>(workers: Vec<W>, duration: Duration) -> Result<(Vec<T>, Duration), String>
where
    T: Send,
    W: FnOnce(&AtomicBool) -> Result<T, String> + Send,
{
    let barrier = Barrier::new(workers.len() + 1);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|work| {
                let (barrier, stop) = (&barrier, &stop);
                scope.spawn(move || {
                    barrier.wait();
                    work(stop)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let mut out = Vec::with_capacity(handles.len());
        let mut failed = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(t)) => out.push(t),
                Ok(Err(e)) => {
                    failed.get_or_insert(e);
                }
                Err(_) => {
                    failed.get_or_insert_with(|| "a writer thread panicked".to_owned());
                }
            }
        }
        let elapsed = started.elapsed();
        match failed {
            Some(e) => Err(e),
            None => Ok((out, elapsed)),
        }
    })
}

/// The line of event `seq` as the store writes it (compact JSON, same payload), so
/// bare rows are the store's rows in size.
pub fn line(seq: i64) -> String {
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(r#"{{"type":"{TYPE}","seq":{seq},"time":{time},"data":{DATA}}}"#)
}

/// `n` bare clients, each with its own connection named `app`, inserting one row per
/// statement into `BARE_SCHEMA.events` (shaped like the store's `events`) for
/// `duration`. `key` makes the rows' session column unique to this run.
pub fn bare(
    url: &str,
    app: &str,
    n: usize,
    key: &str,
    duration: Duration,
    backends: &Backends,
) -> Result<Run, String> {
    backends.room_for(n as i64, &format!("{n} bare clients"))?;
    let insert = format!(
        "INSERT INTO {BARE_SCHEMA}.events (session, seq, type, line) VALUES ($1, $2, $3, $4)"
    );
    let mut workers = Vec::with_capacity(n);
    for i in 0..n {
        let mut client = postgres::Client::connect(&url_named(url, app), postgres::NoTls)
            .map_err(|e| format!("cannot connect bare client {i} of {n}: {e}"))?;
        let statement = client
            .prepare(&insert)
            .map_err(|e| format!("cannot prepare the bare INSERT: {e}"))?;
        backends.check(&format!("connecting bare client {} of {n}", i + 1))?;
        let session = format!("{key}-{i}");
        workers.push(move |stop: &AtomicBool| -> Result<u64, String> {
            let mut seq = 0i64;
            while !stop.load(Ordering::Relaxed) {
                client
                    .execute(&statement, &[&session, &seq, &TYPE, &line(seq)])
                    .map_err(|e| format!("bare INSERT of {session} seq {seq}: {e}"))?;
                seq += 1;
            }
            Ok(seq as u64)
        });
    }
    let (counts, elapsed) = race(workers, duration)?;
    Ok(Run {
        ops: counts.iter().sum(),
        elapsed,
    })
}

/// A store on the bench's schema whose connections are named `app`.
pub fn store(url: &str, app: &str, durability: Durability) -> Result<PgStore, String> {
    PgStore::connect(
        &url_named(url, app),
        PgOptions {
            schema: FLEET_SCHEMA.to_owned(),
            durability,
            ..PgOptions::default()
        },
    )
    .map_err(|e| format!("cannot connect a store named {app}: {e}"))
}

/// Creates sessions `{key}-0` … `{key}-{n-1}` on `store`, checking the bench's budget
/// after each (a store may hold a connection per open session).
pub fn sessions(
    store: &PgStore,
    key: &str,
    n: usize,
    backends: &Backends,
) -> Result<Vec<Session>, String> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("{key}-{i}");
        let s = Session::create(store, &id, SessionMeta::default())
            .map_err(|e| format!("cannot create session {id}: {e}"))?;
        out.push(s);
        backends.check(&format!("opening session {} of {n}", i + 1))?;
    }
    Ok(out)
}

/// Closes `sessions`, the first error failing the lot (after every close was tried).
pub fn close(sessions: Vec<Session>) -> Result<(), String> {
    let mut failed = None;
    for s in sessions {
        if let Err(e) = s.close() {
            failed.get_or_insert_with(|| format!("cannot close session {}: {e}", s.id()));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// `n` threads on one store in `durability` mode, each appending to a session of its
/// own for `duration`: one event per call (`sync`), or [`PER_FLUSH`] appends then
/// `flush()` (`batched`: only flushed events count).
pub fn store_side(
    url: &str,
    app: &str,
    durability: Durability,
    n: usize,
    key: &str,
    duration: Duration,
    backends: &Backends,
) -> Result<Run, String> {
    let store = store(url, app, durability)?;
    let sessions = sessions(&store, key, n, backends)?;
    let workers: Vec<_> = sessions
        .iter()
        .map(|s| {
            move |stop: &AtomicBool| -> Result<u64, String> {
                let fail = |e: inboxlog::Error| format!("append to {}: {e}", s.id());
                let mut acked = 0;
                while !stop.load(Ordering::Relaxed) {
                    if durability == Durability::Sync {
                        s.append(TYPE, DATA, Envelope::default()).map_err(fail)?;
                        acked += 1;
                    } else {
                        for _ in 0..PER_FLUSH {
                            s.append(TYPE, DATA, Envelope::default()).map_err(fail)?;
                        }
                        s.flush().map_err(fail)?;
                        acked += PER_FLUSH;
                    }
                }
                Ok(acked)
            }
        })
        .collect();
    let raced = race(workers, duration);
    let closed = close(sessions);
    let (counts, elapsed) = raced?;
    closed?;
    Ok(Run {
        ops: counts.iter().sum(),
        elapsed,
    })
}

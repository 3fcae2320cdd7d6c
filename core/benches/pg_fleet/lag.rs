//! Commit-to-follower latency: `n` writers append in `sync` mode on one store handle
//! while a second handle follows their `n` sessions (one `Follower` per session, each
//! on a thread of its own). A writer notes the instant each append returned (the
//! commit's acknowledgement); a follower notes the instant it yielded the event; the
//! latency of an event is the second minus the first (zero when the follower was
//! first).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::Durability;
use inboxlog::{Envelope, Follower};

use super::TYPE;
use super::monitor::Backends;
use super::writers::{close, race, sessions, store};
use crate::DATA;

/// How long followers may take, once the writers stopped, to yield the last events.
const DRAIN: Duration = Duration::from_secs(10);

/// What one latency run measured.
pub struct Lag {
    /// Events acknowledged by the writers.
    pub acked: usize,
    /// Acknowledged events no follower yielded within [`DRAIN`] of the writers' end.
    pub missed: usize,
    /// Events a follower yielded before their writer's call returned.
    pub early: usize,
    /// Latencies, sorted.
    pub latencies: Vec<Duration>,
    /// Acks per second over the run.
    pub acks_per_s: f64,
}

impl Lag {
    /// The `p`-th percentile (0–100) of the latencies.
    pub fn percentile(&self, p: usize) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = (self.latencies.len() * p / 100).min(self.latencies.len() - 1);
        self.latencies[i]
    }
}

/// Runs `n` writers (store named `writers_app`) and `n` followers (a second store named
/// `followers_app`) for `duration`.
pub fn run(
    url: &str,
    writers_app: &str,
    followers_app: &str,
    n: usize,
    duration: Duration,
    backends: &Backends,
) -> Result<Lag, String> {
    let wstore = store(url, writers_app, Durability::Sync)?;
    let sessions = sessions(&wstore, &format!("lag-{n}"), n, backends)?;
    let result = followed(url, followers_app, &sessions, duration, backends);
    let closed = close(sessions);
    let lag = result?;
    closed?;
    Ok(lag)
}

fn followed(
    url: &str,
    followers_app: &str,
    sessions: &[inboxlog::Session],
    duration: Duration,
    backends: &Backends,
) -> Result<Lag, String> {
    let n = sessions.len();
    let fstore = store(url, followers_app, Durability::Sync)?;
    let mut followers = Vec::with_capacity(n);
    for (i, s) in sessions.iter().enumerate() {
        let since = s
            .last_seq()
            .map_err(|e| format!("session {}: {e}", s.id()))?
            .map_or(0, |seq| seq + 1);
        let mut f = Follower::open(&fstore, s.id(), since)
            .map_err(|e| format!("cannot follow session {}: {e}", s.id()))?;
        // A first read, so a follower that connects on first use does it now, where
        // the budget is checked, and not in the middle of the run.
        let early = f
            .next_batch(Duration::from_millis(1))
            .map_err(|e| format!("following session {}: {e}", s.id()))?;
        if !early.is_empty() {
            return Err(format!(
                "session {} has events no writer appended yet",
                s.id()
            ));
        }
        followers.push(f);
        backends.check(&format!("opening follower {} of {n}", i + 1))?;
    }
    // The seq after each session's last acknowledged event, once its writer stopped.
    let ends: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(u64::MAX)).collect();
    let give_up = AtomicBool::new(false);
    thread::scope(|scope| {
        let handles: Vec<_> = followers
            .into_iter()
            .enumerate()
            .map(|(i, mut f)| {
                let (ends, give_up) = (&ends, &give_up);
                scope.spawn(move || -> Result<Vec<(u64, Instant)>, String> {
                    let mut seen = Vec::new();
                    loop {
                        let end = ends[i].load(Ordering::Acquire);
                        if f.next_seq() >= end || give_up.load(Ordering::Relaxed) {
                            return Ok(seen);
                        }
                        let batch = f
                            .next_batch(Duration::from_millis(100))
                            .map_err(|e| format!("following {}: {e}", f.session()))?;
                        let at = Instant::now();
                        seen.extend(batch.iter().map(|e| (e.seq(), at)));
                    }
                })
            })
            .collect();
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let ends = &ends;
                move |stop: &AtomicBool| -> Result<Vec<(u64, Instant)>, String> {
                    let mut acks = Vec::new();
                    let mut next = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let e = s
                            .append(TYPE, DATA, Envelope::default())
                            .map_err(|e| format!("append to {}: {e}", s.id()))?;
                        acks.push((e.seq(), Instant::now()));
                        next = e.seq() + 1;
                    }
                    ends[i].store(next, Ordering::Release);
                    Ok(acks)
                }
            })
            .collect();
        let raced = race(workers, duration);
        if raced.is_err() {
            give_up.store(true, Ordering::Relaxed);
        }
        // Followers still behind after the drain window give up.
        let deadline = Instant::now() + DRAIN;
        while Instant::now() < deadline && handles.iter().any(|h| !h.is_finished()) {
            thread::sleep(Duration::from_millis(20));
        }
        give_up.store(true, Ordering::Relaxed);
        let mut yielded = Vec::with_capacity(n);
        let mut failed = None;
        for h in handles {
            match h.join() {
                Ok(Ok(seen)) => yielded.push(seen),
                Ok(Err(e)) => {
                    failed.get_or_insert(e);
                    yielded.push(Vec::new());
                }
                Err(_) => {
                    failed.get_or_insert_with(|| "a follower thread panicked".to_owned());
                    yielded.push(Vec::new());
                }
            }
        }
        let (acks, elapsed) = raced?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(measure(&acks, &yielded, elapsed))
    })
}

/// The latencies of every acknowledged event (`acks[i]`: session i's (seq, ack)),
/// matched with the instants followers yielded them (`yielded[i]`).
fn measure(
    acks: &[Vec<(u64, Instant)>],
    yielded: &[Vec<(u64, Instant)>],
    elapsed: Duration,
) -> Lag {
    let mut lag = Lag {
        acked: 0,
        missed: 0,
        early: 0,
        latencies: Vec::new(),
        acks_per_s: 0.0,
    };
    for (acks, seen) in acks.iter().zip(yielded) {
        let seen: HashMap<u64, Instant> = seen.iter().copied().collect();
        for (seq, acked) in acks {
            lag.acked += 1;
            match seen.get(seq) {
                None => lag.missed += 1,
                Some(at) if at < acked => {
                    lag.early += 1;
                    lag.latencies.push(Duration::ZERO);
                }
                Some(at) => lag.latencies.push(at.duration_since(*acked)),
            }
        }
    }
    lag.latencies.sort_unstable();
    lag.acks_per_s = lag.acked as f64 / elapsed.as_secs_f64().max(1e-9);
    lag
}

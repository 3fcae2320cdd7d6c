//! The store's data connections: a bounded pool whose callers wait their turn in one
//! first-come queue, and the group commit that lets many sessions' appends share a
//! connection and a commit (ARCHITECTURE.md#postgresql).
//!
//! A `PgStore` never holds more than its bound of connections: the home connection
//! (`home.rs`) and at most `max_connections - 1` here, however many sessions are open.
//! A caller that needs a connection takes an idle one, opens one while the pool is below
//! its bound, or joins the queue; a connection given back goes to the first in the queue.
//!
//! **Group commit.** An append joins the same queue as a request (`commit.rs`). The first
//! caller to get a connection becomes the group's leader: it takes every request queued
//! behind it (up to [`GROUP_ROWS`] rows and [`GROUP_BYTES`] bytes), writes them with one
//! statement, so one transaction and one commit, in which each session's rows are fenced
//! on their own (a fenced session's rows are left out, the others commit), hands each
//! requester its outcome and passes the connection on. While a commit is in flight the
//! next group gathers, so N writers on a handful of connections commit about as often as
//! N writers on N connections, each commit carrying several sessions.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::{Client, Statement};

use super::commit::{self, Outcome, Request};
use super::conn::Connector;
use super::schema::Sql;
use crate::error::Result;

/// A group holds at most this many rows, whatever is queued.
pub(super) const GROUP_ROWS: usize = 4096;

/// A group's lines stay under this many bytes (one request alone may exceed it).
pub(super) const GROUP_BYTES: usize = 8 << 20;

/// A connection idle longer than this is checked before it is used again (the server
/// may have restarted meanwhile).
const CHECK_AFTER: Duration = Duration::from_secs(1);

/// A data connection, with the statements prepared on it.
pub(super) struct Conn {
    pub client: Client,
    /// When it was last given back.
    since: Instant,
    /// Set when another connection of the pool failed: this one is checked before use
    /// (a restarted server or a terminated handle loses them all at once).
    suspect: bool,
    /// The statements prepared on it, by text: each of the store's few statements is
    /// parsed and planned once per connection, then sent in one round trip.
    prepared: HashMap<String, Statement>,
}

/// What a waiter in the queue is handed.
enum Slot {
    Waiting,
    /// A connection, or (`None`) the right to open one.
    Granted(Option<Box<Conn>>),
    /// The requests' outcomes, written by another caller's group.
    Done(Vec<Outcome>),
}

/// One caller in the queue.
struct Waiter {
    /// Appends (taken by the group that writes them); none for a caller that wants a
    /// connection of its own for a while.
    requests: Mutex<Vec<Request>>,
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl Waiter {
    fn new(requests: Vec<Request>) -> Arc<Waiter> {
        Arc::new(Waiter {
            requests: Mutex::new(requests),
            slot: Mutex::new(Slot::Waiting),
            ready: Condvar::new(),
        })
    }

    fn hand(&self, slot: Slot) {
        *lock(&self.slot) = slot;
        self.ready.notify_one();
    }

    fn wait(&self) -> Slot {
        let mut slot = lock(&self.slot);
        while matches!(*slot, Slot::Waiting) {
            slot = self
                .ready
                .wait(slot)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        std::mem::replace(&mut *slot, Slot::Waiting)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a few field updates; a panic cannot leave one half-done.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Queue {
    idle: Vec<Conn>,
    /// Connections open or being opened, idle ones included.
    open: usize,
    waiting: VecDeque<Arc<Waiter>>,
}

/// The bounded pool of one store.
pub(super) struct Pool {
    connector: Arc<Connector>,
    sql: Arc<Sql>,
    max: usize,
    queue: Mutex<Queue>,
}

/// What a caller got from the queue: a connection, or the right to open one.
enum Got {
    Conn(Box<Conn>),
    Open,
}

impl Pool {
    /// A pool of at most `max` connections (at least one).
    pub fn new(connector: Arc<Connector>, sql: Arc<Sql>, max: usize) -> Pool {
        Pool {
            connector,
            sql,
            max: max.max(1),
            queue: Mutex::new(Queue {
                idle: Vec::new(),
                open: 0,
                waiting: VecDeque::new(),
            }),
        }
    }

    /// The most connections this pool opens.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Adds a connection opened elsewhere (the one that set the tables up) as idle, if
    /// the bound allows.
    pub fn adopt(&self, client: Client) {
        let mut q = lock(&self.queue);
        if q.open < self.max {
            q.open += 1;
            drop(q);
            self.put(Conn::new(client));
        }
    }

    /// Takes an idle connection or the right to open one, without waiting.
    fn try_take(&self, q: &mut Queue) -> Option<Got> {
        if let Some(conn) = q.idle.pop() {
            return Some(Got::Conn(Box::new(conn)));
        }
        if q.open < self.max {
            q.open += 1;
            return Some(Got::Open);
        }
        None
    }

    /// A connection that answers: `got` as it is, checked if it idled long, or a new
    /// one. On failure the slot is passed on.
    fn ready(&self, got: Got) -> Result<Conn> {
        let mut got = got;
        loop {
            match got {
                Got::Conn(conn) if conn.client.is_closed() => {}
                Got::Conn(mut conn) => {
                    if (conn.since.elapsed() < CHECK_AFTER && !conn.suspect)
                        || conn.client.is_valid(Duration::from_secs(2)).is_ok()
                    {
                        return Ok(*conn);
                    }
                }
                Got::Open => {
                    return self.connector.connect().map(Conn::new).inspect_err(|_| {
                        self.discard();
                    });
                }
            }
            got = Got::Open;
        }
    }

    /// A connection for the caller's own use, given back with [`Pool::put`] (or
    /// [`Pool::discard`] when it failed). Waits its turn when all are busy.
    pub fn get(&self) -> Result<Conn> {
        let waiter = {
            let mut q = lock(&self.queue);
            match self.try_take(&mut q) {
                Some(got) => {
                    drop(q);
                    return self.ready(got);
                }
                None => {
                    let waiter = Waiter::new(Vec::new());
                    q.waiting.push_back(Arc::clone(&waiter));
                    waiter
                }
            }
        };
        match waiter.wait() {
            Slot::Granted(Some(conn)) => self.ready(Got::Conn(conn)),
            Slot::Granted(None) => self.ready(Got::Open),
            Slot::Waiting | Slot::Done(_) => unreachable!("a connection waiter gets a connection"),
        }
    }

    /// Gives a healthy connection back: to the first waiter, or to the idle list.
    pub fn put(&self, mut conn: Conn) {
        if conn.client.is_closed() {
            self.discard();
            return;
        }
        conn.since = Instant::now();
        conn.suspect = false;
        let mut q = lock(&self.queue);
        match q.waiting.pop_front() {
            Some(waiter) => {
                drop(q);
                waiter.hand(Slot::Granted(Some(Box::new(conn))));
            }
            None => q.idle.push(conn),
        }
    }

    /// Forgets a connection that failed (dropped by the caller): the first waiter, if
    /// any, may open a new one.
    pub fn discard(&self) {
        let mut q = lock(&self.queue);
        for conn in &mut q.idle {
            conn.suspect = true;
        }
        match q.waiting.pop_front() {
            Some(waiter) => {
                drop(q);
                waiter.hand(Slot::Granted(None));
            }
            None => q.open -= 1,
        }
    }

    /// Runs `f` on a connection of the pool; one that lost the server is not given back.
    pub fn with<R>(&self, f: impl FnOnce(&mut Client) -> Result<R>) -> Result<R> {
        let mut conn = self.get()?;
        let result = f(&mut conn.client);
        self.put(conn);
        result
    }

    /// Writes `requests` in a group with whatever else is queued (see the module docs)
    /// and returns their outcomes, in order, once the group has committed (or failed).
    pub fn commit(&self, requests: Vec<Request>) -> Vec<Outcome> {
        if requests.is_empty() {
            return Vec::new();
        }
        let request = requests;
        let (got, mine) = {
            let mut q = lock(&self.queue);
            match self.try_take(&mut q) {
                Some(got) => (got, request),
                None => {
                    let waiter = Waiter::new(request);
                    q.waiting.push_back(Arc::clone(&waiter));
                    drop(q);
                    match waiter.wait() {
                        Slot::Done(outcome) => return outcome,
                        Slot::Granted(conn) => {
                            let mine = std::mem::take(&mut *lock(&waiter.requests));
                            (conn.map_or(Got::Open, Got::Conn), mine)
                        }
                        Slot::Waiting => unreachable!("wait returns a filled slot"),
                    }
                }
            }
        };
        self.lead(got, mine)
    }

    /// Leads a group: `mine` and the appends queued now, on the connection `got`.
    fn lead(&self, got: Got, mine: Vec<Request>) -> Vec<Outcome> {
        let own = mine.len();
        let mut group = mine;
        // The other waiters taken, each with how many requests it brought.
        let mut others = Vec::new();
        {
            let mut q = lock(&self.queue);
            let mut rows: usize = group.iter().map(Request::rows).sum();
            let mut bytes: usize = group.iter().map(Request::bytes).sum();
            let mut kept = VecDeque::with_capacity(q.waiting.len());
            while let Some(waiter) = q.waiting.pop_front() {
                let fits = rows < GROUP_ROWS && bytes < GROUP_BYTES;
                let mut requests = lock(&waiter.requests);
                if fits && !requests.is_empty() {
                    let taken = std::mem::take(&mut *requests);
                    drop(requests);
                    rows += taken.iter().map(Request::rows).sum::<usize>();
                    bytes += taken.iter().map(Request::bytes).sum::<usize>();
                    others.push((waiter, taken.len()));
                    group.extend(taken);
                } else {
                    drop(requests);
                    kept.push_back(waiter);
                }
            }
            q.waiting = kept;
        }
        let outcomes = match self.ready(got) {
            Ok(mut conn) => {
                let outcomes = commit::run(&mut conn, &self.sql, &self.connector, &group);
                self.put(conn);
                outcomes
            }
            Err(e) => group.iter().map(|_| Outcome::unsent(&e)).collect(),
        };
        let mut outcomes = outcomes.into_iter();
        let mine: Vec<Outcome> = outcomes.by_ref().take(own).collect();
        for (waiter, count) in others {
            waiter.hand(Slot::Done(outcomes.by_ref().take(count).collect()));
        }
        mine
    }
}

impl Conn {
    fn new(client: Client) -> Conn {
        Conn {
            client,
            since: Instant::now(),
            suspect: false,
            prepared: HashMap::new(),
        }
    }

    /// The statement `text` as prepared on this connection: prepared on first use and
    /// kept (the texts are the store's own, so there are a few of them).
    pub fn prepared(&mut self, text: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(text) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(text)?;
        self.prepared.insert(text.to_owned(), statement.clone());
        Ok(statement)
    }
}

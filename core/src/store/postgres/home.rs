//! The home connection of a store handle: it holds the handle's owner lock (`owner.rs`)
//! for every session the handle writes, and LISTENs for the followers of the handle and
//! for posts to its mailboxes (`fleet.rs`), on a thread of the store's own.
//!
//! The connection is made by the first call that needs an owner (a create or an open):
//! a store that only reads, lists or posts has none. The thread waits on the connection
//! for notifications in short ticks, so it notices at once when the connection is lost
//! (a terminated backend, a restarted server): it then connects again, takes a new owner
//! id and re-owns the sessions nobody took in between (see `owner.rs`); until then, opens
//! and creates of the handle wait for it (at most [`OWNER_WAIT`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;

use super::conn::{Connector, Stmt};
use super::schema::Sql;
use crate::error::{Error, ErrorKind, Result};

/// How long the thread waits on the connection before it looks at what changed (a
/// follower came or went, the store is going).
const TICK: Duration = Duration::from_millis(20);

/// How long a call that needs the owner id waits for a lost home connection to be back.
pub(super) const OWNER_WAIT: Duration = Duration::from_secs(10);

/// The longest pause between two attempts to connect again.
const MOST_PAUSE: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain maps and fields; a panic cannot leave them half-changed.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wake-ups by session for one handle: its followers' (appends) or its mailboxes'
/// (posts).
#[derive(Default)]
pub(super) struct Signals {
    map: Mutex<Watched>,
    rung: Condvar,
}

#[derive(Default)]
struct Watched {
    /// Per watched session: its watchers and a count bumped by every wake-up.
    counts: HashMap<String, (usize, u64)>,
    /// Whether the home connection LISTENs for these wake-ups now, so that a count that
    /// did not move means no wake-up came (see [`Signals::heard`]).
    listening: bool,
}

impl Signals {
    /// Starts following `id`; the count to wait past.
    pub fn watch(&self, id: &str) -> u64 {
        let mut map = lock(&self.map);
        let entry = map.counts.entry(id.to_owned()).or_insert((0, 0));
        entry.0 += 1;
        entry.1
    }

    /// Stops one follower of `id`.
    pub fn unwatch(&self, id: &str) {
        let mut map = lock(&self.map);
        if let Some(entry) = map.counts.get_mut(id) {
            entry.0 -= 1;
            if entry.0 == 0 {
                map.counts.remove(id);
            }
        }
    }

    /// Whether any session is followed.
    fn followed(&self) -> bool {
        !lock(&self.map).counts.is_empty()
    }

    /// The current count of `id`.
    pub fn count(&self, id: &str) -> u64 {
        lock(&self.map).counts.get(id).map_or(0, |e| e.1)
    }

    /// The current count of `id` while the home connection LISTENs for it, `None` while
    /// it does not (not yet, or its connection is lost): then a wake-up may have gone
    /// unheard, and only a read can tell what is there.
    pub fn heard(&self, id: &str) -> Option<u64> {
        let map = lock(&self.map);
        if !map.listening {
            return None;
        }
        map.counts.get(id).map(|e| e.1)
    }

    /// Records whether the home connection LISTENs now. Every count moves when it
    /// starts: what came before the LISTEN took effect is read again.
    fn set_listening(&self, listening: bool) {
        let mut map = lock(&self.map);
        if listening {
            for entry in map.counts.values_mut() {
                entry.1 += 1;
            }
            self.rung.notify_all();
        }
        map.listening = listening;
    }

    /// Wakes the followers of `ids`.
    pub fn ring<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut map = lock(&self.map);
        let mut any = false;
        for id in ids {
            if let Some(entry) = map.counts.get_mut(id) {
                entry.1 += 1;
                any = true;
            }
        }
        if any {
            self.rung.notify_all();
        }
    }

    /// Wakes every follower (they read again: something may have been missed).
    pub fn ring_all(&self) {
        let mut map = lock(&self.map);
        for entry in map.counts.values_mut() {
            entry.1 += 1;
        }
        self.rung.notify_all();
    }

    /// Waits until the count of `id` passes `seen`, or `timeout`.
    pub fn wait(&self, id: &str, seen: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut map = lock(&self.map);
        while map.counts.get(id).is_some_and(|e| e.1 == seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            map = self
                .rung
                .wait_timeout(map, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// What the home connection LISTENs for now.
#[derive(Default)]
struct Listening {
    /// Commits, for the handle's followers.
    commits: bool,
    /// Posts, for the handle's mailboxes.
    posts: bool,
}

struct State {
    /// The owner id, while the home connection holds its lock.
    owner: Option<i64>,
    started: bool,
    /// Why the home connection is down, while it is.
    down: Option<String>,
    /// The sessions this handle writes, with their epochs (`None` while being opened).
    open: HashMap<String, Option<i64>>,
}

struct Shared {
    connector: Arc<Connector>,
    sql: Arc<Sql>,
    salt: i64,
    signals: Arc<Signals>,
    /// Wake-ups of the handle's mailboxes: posts to the sessions it writes.
    posts: Arc<Signals>,
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

/// The home connection of one handle and what it owns.
pub(super) struct Home {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Home {
    /// The home of a handle; connects on first need. It LISTENs for `signals` (commits)
    /// while the handle has followers and for `posts` while it has mailboxes.
    pub fn new(
        connector: Arc<Connector>,
        sql: Arc<Sql>,
        salt: i64,
        signals: Arc<Signals>,
        posts: Arc<Signals>,
    ) -> Home {
        Home {
            shared: Arc::new(Shared {
                connector,
                sql,
                salt,
                signals,
                posts,
                state: Mutex::new(State {
                    owner: None,
                    started: false,
                    down: None,
                    open: HashMap::new(),
                }),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
            thread: Mutex::new(None),
        }
    }

    /// The owner id of this handle, connecting the home connection first if needed.
    pub fn owner(&self) -> Result<i64> {
        let shared = &*self.shared;
        let mut st = lock(&shared.state);
        if !st.started {
            let mut client = shared.connector.connect()?;
            let owner = shared.lock_owner(&mut client)?;
            st.owner = Some(owner);
            st.started = true;
            let thread_shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("inboxlog-pg-home".to_owned())
                .spawn(move || thread_shared.run(client, owner));
            match spawned {
                Ok(handle) => *lock(&self.thread) = Some(handle),
                Err(e) => {
                    st.started = false;
                    st.owner = None;
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!("cannot start the PostgreSQL store's home thread: {e}"),
                    ));
                }
            }
            return Ok(owner);
        }
        let deadline = Instant::now() + OWNER_WAIT;
        loop {
            if let Some(owner) = st.owner {
                return Ok(owner);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "the store's home connection to {} is lost and not back after {} s: {}",
                        shared.connector.url().describe(),
                        OWNER_WAIT.as_secs(),
                        st.down.as_deref().unwrap_or("no reason known")
                    ),
                ));
            }
            st = shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Whether this handle has a writer of `id` open.
    pub fn is_open(&self, id: &str) -> bool {
        lock(&self.shared.state).open.contains_key(id)
    }

    /// Marks `id` as being opened by this handle; `false` when it is open or being
    /// opened already.
    pub fn reserve(&self, id: &str) -> bool {
        let mut st = lock(&self.shared.state);
        if st.open.contains_key(id) {
            return false;
        }
        st.open.insert(id.to_owned(), None);
        true
    }

    /// Forgets a reservation whose open failed.
    pub fn unreserve(&self, id: &str) {
        let mut st = lock(&self.shared.state);
        if st.open.get(id) == Some(&None) {
            st.open.remove(id);
        }
    }

    /// Records that this handle writes `id` at `epoch`.
    pub fn opened(&self, id: &str, epoch: i64) {
        lock(&self.shared.state)
            .open
            .insert(id.to_owned(), Some(epoch));
    }

    /// Records that the writer of `id` at `epoch` closed (unless a later one replaced it).
    pub fn closed(&self, id: &str, epoch: i64) {
        let mut st = lock(&self.shared.state);
        if st.open.get(id) == Some(&Some(epoch)) {
            st.open.remove(id);
        }
    }

    /// Starts the home connection for followers when no open did (a store that only
    /// follows still needs it to LISTEN).
    pub fn listen(&self) -> Result<()> {
        self.owner().map(drop)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        if let Some(handle) = lock(&self.thread).take() {
            // It only waits and reconnects; a panic there has nothing left to report.
            let _ = handle.join();
        }
    }
}

impl Shared {
    /// Takes a fresh owner id and its lock on `client`.
    fn lock_owner(&self, client: &mut Client) -> Result<i64> {
        let row = client
            .query_one(self.sql.home.as_str(), &[&self.salt])
            .map_err(|e| {
                self.connector
                    .fail("cannot take the store's owner lock", &e, Stmt::Read)
            })?;
        let (owner, locked): (i64, bool) = (row.get(0), row.get(1));
        if !locked {
            // Only another program's advisory lock on the same 64-bit key could do this.
            return Err(Error::new(
                ErrorKind::Locked,
                format!("the owner lock of new owner id {owner} is held elsewhere"),
            ));
        }
        Ok(owner)
    }

    /// The thread: waits for notifications, follows the followers' coming and going,
    /// and replaces the connection when it is lost.
    fn run(&self, mut client: Client, mut owner: i64) {
        let mut listening = Listening::default();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            match self.tick(&mut client, &mut listening) {
                Ok(()) if !client.is_closed() => continue,
                Ok(()) => self.lost("the connection closed".to_owned()),
                Err(e) => self.lost(e.message().to_owned()),
            }
            match self.reconnect(owner) {
                Some((new_client, new_owner)) => {
                    client = new_client;
                    owner = new_owner;
                    listening = Listening::default();
                }
                None => return,
            }
        }
    }

    /// One tick: LISTEN or UNLISTEN as the followers and mailboxes need, then wait for
    /// notifications.
    fn tick(&self, client: &mut Client, listening: &mut Listening) -> Result<()> {
        let fail = |e: postgres::Error| self.connector.fail("the home connection", &e, Stmt::Read);
        let want = self.signals.followed();
        if want != listening.commits {
            let verb = if want { "LISTEN" } else { "UNLISTEN" };
            client
                .batch_execute(&format!("{verb} {}", self.sql.channel))
                .map_err(fail)?;
            listening.commits = want;
            if want {
                // Anything committed before the LISTEN took effect is read now.
                self.signals.ring_all();
            }
        }
        let want = self.posts.followed();
        if want != listening.posts {
            let verb = if want { "LISTEN" } else { "UNLISTEN" };
            client
                .batch_execute(&format!("{verb} {}", self.sql.posts_channel))
                .map_err(fail)?;
            listening.posts = want;
            // From now on a mailbox trusts a count that did not move; every count moves
            // first, so what was posted before the LISTEN took effect is read.
            self.posts.set_listening(want);
        }
        let mut commits = Vec::new();
        let mut posts = Vec::new();
        let posts_name = self.sql.posts_channel_name();
        let mut notes = client.notifications();
        let mut next = notes.timeout_iter(TICK).next().map_err(fail)?;
        while let Some(note) = next {
            if note.channel() == posts_name {
                posts.push(note.payload().to_owned());
            } else {
                commits.push(note.payload().to_owned());
            }
            next = notes.iter().next().map_err(fail)?;
        }
        if !commits.is_empty() {
            self.signals.ring(commits.iter().map(String::as_str));
        }
        if !posts.is_empty() {
            self.posts.ring(posts.iter().map(String::as_str));
        }
        Ok(())
    }

    fn lost(&self, why: String) {
        // Posts made from now until the LISTEN is back send their wake-ups nowhere.
        self.posts.set_listening(false);
        let mut st = lock(&self.state);
        st.owner = None;
        st.down = Some(why);
    }

    /// Connects again until it works or the store goes: a new owner id, the sessions
    /// still at this handle's epochs re-owned, the followers told to read again.
    fn reconnect(&self, old: i64) -> Option<(Client, i64)> {
        let mut pause = Duration::from_millis(50);
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            match self.replace(old) {
                Ok(done) => {
                    self.signals.ring_all();
                    return Some(done);
                }
                Err(e) => {
                    lock(&self.state).down = Some(e.message().to_owned());
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MOST_PAUSE);
                }
            }
        }
    }

    fn replace(&self, old: i64) -> Result<(Client, i64)> {
        let mut client = self.connector.connect()?;
        let owner = self.lock_owner(&mut client)?;
        let (ids, epochs): (Vec<String>, Vec<i64>) = {
            let st = lock(&self.state);
            st.open
                .iter()
                .filter_map(|(id, e)| Some((id.clone(), (*e)?)))
                .unzip()
        };
        if !ids.is_empty() {
            client
                .execute(self.sql.reacquire.as_str(), &[&ids, &epochs, &owner, &old])
                .map_err(|e| {
                    self.connector
                        .fail("cannot re-own the store's sessions", &e, Stmt::Write)
                })?;
        }
        let mut st = lock(&self.state);
        st.owner = Some(owner);
        st.down = None;
        self.changed.notify_all();
        Ok((client, owner))
    }
}

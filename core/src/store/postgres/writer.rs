//! The owner's writer: one fenced statement per write (see `owner.rs`), the `flush`
//! barrier of the asynchronous-commit modes (ARCHITECTURE.md#postgresql), and the states a writer
//! cannot leave: fenced (another writer took the session) and poisoned (a failure whose
//! outcome only a reopen can tell).
//!
//! In `sync` mode each append is its own statement, committed before it returns. In
//! `batched` and `none` modes appends are grouped on the client: an append validates
//! and stages its rows and returns without a round trip; the staged rows of many calls
//! are written by one fenced statement (so one transaction: whole calls, all or
//! nothing) when [`BATCH_ROWS`] rows or [`BATCH_BYTES`] bytes are staged, when the
//! oldest has waited the store's batch window (5 ms by default) (a flusher thread per writer honours the window
//! while the host is idle), at `flush()` (which then runs the durable barrier), and
//! when the writer is dropped. A batch whose write fails is dropped whole (a fenced
//! writer writes nothing) and poisons the writer; its error is reported by the next
//! call or `flush()`. `read` shows the staged rows after the stored ones.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::Inner;
use super::conn::Stmt;
use super::owner;
use super::read::{At, read_all, reading};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::json;
use crate::store::{Durability, LogWriter};

/// A batch of this many rows is written at once, window or not.
pub(super) const BATCH_ROWS: usize = 1024;

/// A batch whose lines reach this many bytes is written at once, window or not.
pub(super) const BATCH_BYTES: usize = 4 << 20;

/// Why a writer refuses every call.
#[derive(Clone, Debug)]
enum Broken {
    /// Another writer owns the session now.
    Fenced(String),
    /// A call failed in a way only reopening can sort out.
    Poisoned(String),
}

/// The connection of an owner, with its prepared append.
struct Owned {
    client: Client,
    append: Statement,
}

/// Rows accepted by `batched`/`none` appends and not yet written.
#[derive(Default)]
struct Staged {
    events: Vec<Event>,
    lines: Vec<String>,
    bytes: usize,
    /// When the oldest staged row was accepted; `None` when nothing is staged.
    since: Option<Instant>,
}

/// Everything a writer's calls and its flusher thread share, under one lock.
struct State {
    /// `None` once released (fenced, poisoned or dropped).
    owned: Option<Owned>,
    /// The seq the next append must start at (after the staged rows).
    next_seq: u64,
    /// The seq the next written row has (the first staged row, if any).
    stored: u64,
    staged: Staged,
    broken: Option<Broken>,
    /// The failure of a batch the flusher thread wrote, for the next call to report.
    deferred: Option<Error>,
    /// Set when the writer goes: the flusher thread ends.
    stop: bool,
}

/// The state of one writer and what it needs to write.
pub(super) struct Shared {
    inner: Arc<Inner>,
    id: String,
    epoch: i64,
    /// How long the oldest staged row waits before its batch is written.
    window: Duration,
    state: Mutex<State>,
    /// Wakes the flusher thread: rows were staged, or the writer goes.
    wake: Condvar,
}

/// The exclusive writer of one session in the PostgreSQL store.
pub(super) struct PgWriter {
    shared: Arc<Shared>,
    /// The thread that writes a batch when its window passes (`batched`/`none` only).
    flusher: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only whole statements run under it; a panic between them leaves nothing half-done.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PgWriter {
    /// The writer of `id`, owning `epoch` (its lock held on `client`), whose stored
    /// events end before `next_seq`.
    pub fn new(
        inner: Arc<Inner>,
        mut client: Client,
        id: &str,
        epoch: i64,
        next_seq: u64,
    ) -> Result<PgWriter> {
        let append = client
            .prepare(&inner.sql.append)
            .map_err(|e| inner.connector.fail(reading(id), &e, Stmt::Read));
        let append = match append {
            Ok(statement) => statement,
            Err(e) => {
                inner.release(client);
                return Err(e);
            }
        };
        let batched = inner.durability != Durability::Sync;
        let window = inner.batch_window();
        let shared = Arc::new(Shared {
            window,
            inner,
            id: id.to_owned(),
            epoch,
            state: Mutex::new(State {
                owned: Some(Owned { client, append }),
                next_seq,
                stored: next_seq,
                staged: Staged::default(),
                broken: None,
                deferred: None,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        if batched {
            shared.inner.register(id, Arc::downgrade(&shared));
        }
        let mut writer = PgWriter {
            shared,
            flusher: None,
        };
        if batched {
            let shared = Arc::clone(&writer.shared);
            let spawned = std::thread::Builder::new()
                .name("inboxlog-pg-batch".to_owned())
                .spawn(move || shared.run_flusher());
            match spawned {
                Ok(handle) => writer.flusher = Some(handle),
                Err(e) => {
                    // Dropping the writer releases its connection and lock.
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!(
                            "cannot start the batch writer of session {}: {e}",
                            json::quote(id)
                        ),
                    )
                    .with_session(id));
                }
            }
        }
        Ok(writer)
    }
}

impl Shared {
    /// Writes what is staged so that other readers of the store see it (a fork, an
    /// inspect); a failure is kept for the writer's next call to report.
    pub(super) fn settle(&self) {
        let mut st = lock(&self.state);
        if st.broken.is_none()
            && let Err(e) = self.write_staged(&mut st)
        {
            st.deferred = Some(e);
        }
    }

    fn at(&self) -> At<'_> {
        At {
            schema: &self.inner.sql.schema,
            id: &self.id,
        }
    }

    /// The error a call gets: a failed batch's once, then the broken writer's.
    fn refuse(&self, st: &mut State) -> Result<()> {
        if let Some(e) = st.deferred.take() {
            return Err(e);
        }
        match &st.broken {
            None => Ok(()),
            Some(Broken::Fenced(why)) => Err(Error::new(ErrorKind::Fenced, why.clone())),
            Some(Broken::Poisoned(why)) => Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "session {} is poisoned by an earlier failure ({why}); reopen it to continue",
                    json::quote(&self.id)
                ),
            )),
        }
        .map_err(|e: Error| e.with_session(&self.id))
    }

    /// Lets the connection go: its lock released, back to the pool when healthy.
    fn release(&self, st: &mut State) {
        if let Some(owned) = st.owned.take() {
            drop(owned.append);
            self.inner.release(owned.client);
        }
    }

    /// Breaks the writer for good, dropping what is staged and letting its connection
    /// (and lock) go.
    fn break_with(&self, st: &mut State, broken: Broken) {
        st.broken = Some(broken);
        st.staged = Staged::default();
        st.next_seq = st.stored;
        self.release(st);
    }

    /// Why a fenced write inserted nothing: the epoch moved (`fenced`), or the tail
    /// moved under the same epoch (`corrupt`: a foreign writer).
    fn diagnose(&self, st: &mut State, first: u64) -> Error {
        let found = {
            let client = &mut st.owned.as_mut().expect("checked by the caller").client;
            owner::current(client, &self.inner.sql, &self.id, &self.inner.connector)
        };
        let (kind, why) = match found {
            Err(e) => {
                self.break_with(st, Broken::Poisoned(e.message().to_owned()));
                return e.with_session(&self.id);
            }
            Ok(None) => (
                ErrorKind::Fenced,
                format!(
                    "session {} was deleted behind its writer's back; nothing was written",
                    json::quote(&self.id)
                ),
            ),
            Ok(Some((epoch, _))) if epoch != self.epoch => (
                ErrorKind::Fenced,
                format!(
                    "session {} was taken over by another writer (this writer's ownership epoch \
                     {} was replaced by epoch {epoch}; epochs name owners, they are not a clock); \
                     this writer is fenced and wrote nothing of the append at seq {first}",
                    json::quote(&self.id),
                    self.epoch
                ),
            ),
            Ok(Some((_, stored))) => (
                ErrorKind::Corrupt,
                format!(
                    "append at seq {first} to session {} refused: the stored tail moved to seq \
                     {stored} behind its writer (a foreign writer); nothing was written and the \
                     session is poisoned",
                    json::quote(&self.id)
                ),
            ),
        };
        self.break_with(
            st,
            match kind {
                ErrorKind::Fenced => Broken::Fenced(why.clone()),
                _ => Broken::Poisoned(why.clone()),
            },
        );
        let e = Error::new(kind, why).with_session(&self.id);
        match kind {
            ErrorKind::Corrupt => e.with_seq(first),
            _ => e,
        }
    }

    /// Writes `rows` (seqs `stored..` onwards, whole calls) with the one fenced
    /// statement: the epoch and tail check and the rows in one transaction. A failure
    /// the server refused leaves the writer usable when `keep_on_refusal` (nothing of
    /// an acknowledged call was lost); anything else breaks it.
    ///
    /// `posts` (ids of posted messages these rows take in) are removed from the
    /// mailbox by the same statement: a post is pending or in the log, never both.
    fn write(
        &self,
        st: &mut State,
        rows: &Rows<'_>,
        posts: &[String],
        keep_on_refusal: bool,
    ) -> Result<()> {
        let Some(&first) = rows.seqs.first() else {
            return Ok(());
        };
        let (first, count) = (first as u64, rows.seqs.len() as u64);
        let end = first + count;
        let doing = format!(
            "cannot append seq {first}..{} to session {}",
            end - 1,
            json::quote(&self.id)
        );
        let result = {
            let owned = st.owned.as_mut().expect("not broken");
            if owned.client.is_closed() {
                Err(self.inner.connector.closed(&doing))
            } else {
                let (first_i, end_i) = (first as i64, end as i64);
                let params: [&(dyn ToSql + Sync); 8] = [
                    &self.id,
                    &self.epoch,
                    &first_i,
                    &end_i,
                    &rows.seqs,
                    &rows.types,
                    &rows.lines,
                    &posts,
                ];
                if posts.is_empty() {
                    owned.client.execute(&owned.append, &params[..7])
                } else {
                    let sql = self.inner.sql.append_posted.as_str();
                    owned.client.execute(sql, &params)
                }
                .map_err(|e| match e.code().map(|c| c.code()) {
                    Some("23505") => Error::new(
                        ErrorKind::Corrupt,
                        format!(
                            "{doing}: rows at those seqs are already stored (a foreign \
                                 writer); nothing was written and the session is poisoned"
                        ),
                    )
                    .with_seq(first),
                    _ => self.inner.connector.fail(&doing, &e, Stmt::Write),
                })
            }
        };
        match result {
            Ok(n) if n == count => {
                st.stored = end;
                Ok(())
            }
            Ok(0) => Err(self.diagnose(st, first)),
            Ok(n) => {
                let why = format!("{doing}: {n} rows were inserted instead of {count}");
                self.break_with(st, Broken::Poisoned(why.clone()));
                Err(Error::new(ErrorKind::Corrupt, why).with_session(&self.id))
            }
            Err(e) => {
                // A statement the server refused changed nothing; anything else (a lost
                // connection, a foreign row) needs a reopen.
                if !(keep_on_refusal && e.kind() == ErrorKind::Io) {
                    self.break_with(st, Broken::Poisoned(e.message().to_owned()));
                }
                Err(e.with_session(&self.id))
            }
        }
    }

    /// Writes the staged rows as one batch; on failure they are dropped whole and the
    /// writer is broken (their calls were acknowledged: only a reopen tells what is
    /// stored).
    fn write_staged(&self, st: &mut State) -> Result<()> {
        if st.staged.events.is_empty() {
            return Ok(());
        }
        let Staged { events, lines, .. } = std::mem::take(&mut st.staged);
        let rows = Rows {
            seqs: events.iter().map(|e| e.seq() as i64).collect(),
            types: events.iter().map(Event::ty).collect(),
            lines,
        };
        self.write(st, &rows, &[], false)
    }

    /// The flusher thread: writes a batch once its oldest row has waited the window;
    /// a failure waits for the next call to report it.
    fn run_flusher(&self) {
        let mut st = lock(&self.state);
        loop {
            if st.stop {
                return;
            }
            match st.staged.since {
                None => st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(since) => {
                    let now = Instant::now();
                    let due = since + self.window;
                    if now < due {
                        st = self
                            .wake
                            .wait_timeout(st, due - now)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    } else if let Err(e) = self.write_staged(&mut st) {
                        st.deferred = Some(e);
                    }
                }
            }
        }
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        let weak = Arc::downgrade(&self.shared);
        self.shared.inner.unregister(&self.shared.id, &weak);
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.flusher.take() {
            // It only waits and writes; a panic there has nothing left to report.
            let _ = handle.join();
        }
        let shared = &*self.shared;
        let mut st = lock(&shared.state);
        if st.broken.is_none() {
            // What was acknowledged is written (not made durable) as it goes; a failure
            // here has no caller left to tell, and the reopen shows what is stored.
            let _ = shared.write_staged(&mut st);
        }
        shared.release(&mut st);
    }
}

impl PgWriter {
    /// An append; `posts` are the ids of posted messages it takes in (see
    /// [`LogWriter::append_posted`]).
    fn append_with(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
        let shared = &*self.shared;
        let mut st = lock(&shared.state);
        shared.refuse(&mut st)?;
        let Some(first) = events.first().map(Event::seq) else {
            return Ok(());
        };
        if first != st.next_seq {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "append at seq {first} does not continue the stored tail (next seq {})",
                    st.next_seq
                ),
            )
            .with_session(&shared.id));
        }
        let rows = Rows::of(events, shared.inner.limit, &shared.id)?;
        let end = first + events.len() as u64;
        if shared.inner.durability == Durability::Sync || !posts.is_empty() {
            // A take-in of posts is written at once, after what is staged, so the
            // mailbox rows go in the same statement as the splices that hold them.
            shared.write_staged(&mut st)?;
            shared.write(&mut st, &rows, posts, true)?;
            st.next_seq = end;
            return Ok(());
        }
        let staged = &mut st.staged;
        staged.bytes += rows.lines.iter().map(String::len).sum::<usize>();
        staged.lines.extend(rows.lines);
        staged.events.extend_from_slice(events);
        let full = staged.events.len() >= BATCH_ROWS || staged.bytes >= BATCH_BYTES;
        if staged.since.is_none() {
            staged.since = Some(Instant::now());
            shared.wake.notify_all();
        }
        st.next_seq = end;
        if full {
            shared.write_staged(&mut st)?;
        }
        Ok(())
    }
}

impl LogWriter for PgWriter {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        self.append_with(events, &[])
    }

    /// The events and the removal of `posts` from the mailbox are one statement, so
    /// one transaction: a post is pending or in the log, never both, never neither.
    fn append_posted(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
        self.append_with(events, posts)
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        let shared = &*self.shared;
        // Held while reading, so no batch moves from staged to stored meanwhile.
        let st = lock(&shared.state);
        let mut events = Vec::new();
        shared
            .inner
            .with_client(&shared.id, |client, inner| {
                read_all(
                    client,
                    &inner.sql,
                    &shared.at(),
                    since,
                    None,
                    &inner.connector,
                    &mut |e| {
                        events.push(e);
                        Ok(())
                    },
                )
            })
            .map_err(|e| e.with_session(&shared.id))?;
        // Read-your-writes: the staged rows follow the stored ones.
        events.extend(
            st.staged
                .events
                .iter()
                .filter(|e| e.seq() >= since)
                .cloned(),
        );
        Ok(events)
    }

    fn flush(&mut self) -> Result<()> {
        let shared = &*self.shared;
        let mut st = lock(&shared.state);
        shared.refuse(&mut st)?;
        if shared.inner.durability == Durability::Sync {
            return Ok(());
        }
        shared.write_staged(&mut st)?;
        let doing = format!("cannot flush session {}", json::quote(&shared.id));
        let result = {
            let client = &mut st.owned.as_mut().expect("not broken").client;
            // A commit with an xid and synchronous_commit on waits until the WAL is
            // flushed up to its commit record, so up to every asynchronous commit before.
            client
                .batch_execute(
                    "BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT",
                )
                .map_err(|e| shared.inner.connector.fail(&doing, &e, Stmt::Write))
        };
        result.map_err(|e| {
            shared.break_with(&mut st, Broken::Poisoned(e.message().to_owned()));
            e.with_session(&shared.id)
        })
    }
}

/// The columns of the rows of one append.
pub(super) struct Rows<'a> {
    pub seqs: Vec<i64>,
    pub types: Vec<&'a str>,
    pub lines: Vec<String>,
}

impl<'a> Rows<'a> {
    /// The rows of `events`, each line checked against the record limit.
    pub fn of(events: &'a [Event], limit: usize, id: &str) -> Result<Rows<'a>> {
        let mut rows = Rows {
            seqs: Vec::with_capacity(events.len()),
            types: Vec::with_capacity(events.len()),
            lines: Vec::with_capacity(events.len()),
        };
        for event in events {
            let line = event.to_json();
            if line.len() > limit {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!(
                        "event seq {} of session {} is {} bytes, larger than the record limit of {limit} bytes",
                        event.seq(),
                        json::quote(id),
                        line.len()
                    ),
                )
                .with_session(id)
                .with_seq(event.seq()));
            }
            rows.seqs.push(event.seq() as i64);
            rows.types.push(event.ty());
            rows.lines.push(line);
        }
        Ok(rows)
    }
}

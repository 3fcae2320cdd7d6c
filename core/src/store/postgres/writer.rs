//! The owner's writer: one fenced request per write (see `owner.rs`), written by the
//! pool's group commit (`pool.rs`, `commit.rs`); the `flush` barrier of the
//! asynchronous-commit modes (ARCHITECTURE.md#postgresql); and the states a writer cannot
//! leave: fenced (another writer took the session) and poisoned (a failure whose outcome
//! only a reopen can tell).
//!
//! A writer holds no connection: its session's ownership is its handle's (`home.rs`), and
//! each write borrows the pool. In `sync` mode each append is one request, committed
//! before it returns. In `batched` and `none` modes appends are grouped on the client: an
//! append validates and stages its rows and returns without a round trip; the staged rows
//! of many calls are written as one request (whole calls, all or nothing) when
//! [`BATCH_ROWS`] rows or [`BATCH_BYTES`] bytes are staged, when the oldest has waited the
//! store's batch window (5 ms by default; the store's one flusher thread, `batch.rs`,
//! writes every writer's due rows in one group), at `flush()` (which then runs the
//! durable barrier), and when the writer is dropped. A batch whose write fails is dropped
//! whole (a fenced writer writes nothing) and poisons the writer; its error is reported
//! by the next call or `flush()`. `read` shows the staged rows after the stored ones.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use super::Inner;
use super::commit::{Outcome, Request};
use super::conn::Stmt;
use super::owner;
use super::read::{At, read_all};
use crate::checkpoint::{self, Binding, Checkpoint};
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

/// Rows accepted by `batched`/`none` appends and not yet written.
#[derive(Default)]
struct Staged {
    events: Vec<Event>,
    lines: Vec<String>,
    bytes: usize,
    /// When the oldest staged row was accepted; `None` when nothing is staged.
    since: Option<Instant>,
}

/// Everything a writer's calls and the store's flusher share, under one lock.
pub(super) struct State {
    /// The seq the next append must start at (after the staged rows).
    next_seq: u64,
    /// The seq the next written row has (the first staged row, if any).
    stored: u64,
    staged: Staged,
    broken: Option<Broken>,
    /// The failure of a batch the flusher wrote, for the next call to report.
    deferred: Option<Error>,
    /// The seq of the session's checkpoint, if it has one.
    checkpoint: Option<u64>,
}

/// The state of one writer and what it needs to write.
pub(super) struct Shared {
    inner: Arc<Inner>,
    id: String,
    epoch: i64,
    state: Mutex<State>,
}

/// The exclusive writer of one session in the PostgreSQL store.
pub(super) struct PgWriter {
    shared: Arc<Shared>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only whole requests run under it; a panic between them leaves nothing half-done.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PgWriter {
    /// The writer of `id`, owning `epoch` for this handle, whose stored events end
    /// before `next_seq`.
    pub fn new(inner: Arc<Inner>, id: &str, epoch: i64, next_seq: u64) -> PgWriter {
        inner.home.opened(id, epoch);
        let shared = Arc::new(Shared {
            inner,
            id: id.to_owned(),
            epoch,
            state: Mutex::new(State {
                next_seq,
                stored: next_seq,
                staged: Staged::default(),
                broken: None,
                deferred: None,
                checkpoint: None,
            }),
        });
        if shared.inner.durability != Durability::Sync {
            shared.inner.register(id, Arc::downgrade(&shared));
        }
        PgWriter { shared }
    }

    /// The writer of a session whose checkpoint is at `seq` (`None`: it has none).
    pub fn with_checkpoint(self, seq: Option<u64>) -> PgWriter {
        lock(&self.shared.state).checkpoint = seq;
        self
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

    /// Writes the due staged rows of `writers` as one group (the flusher's round).
    pub(super) fn settle_all(inner: &Inner, writers: &[Arc<Shared>]) {
        let mut states: Vec<MutexGuard<'_, State>> =
            writers.iter().map(|w| lock(&w.state)).collect();
        let mut requests = Vec::new();
        let mut whose = Vec::new();
        for (i, writer) in writers.iter().enumerate() {
            let st = &mut states[i];
            let due = st
                .staged
                .since
                .is_some_and(|since| since.elapsed() >= inner.batch_window());
            if st.broken.is_none()
                && due
                && let Some((request, span)) = writer.take_staged(st)
            {
                requests.push(request);
                whose.push((i, span));
            }
        }
        if requests.is_empty() {
            return;
        }
        let outcomes = inner.pool.commit(requests);
        for ((i, span), outcome) in whose.into_iter().zip(outcomes) {
            let st = &mut states[i];
            if let Err(e) = writers[i].apply(st, span, outcome, false) {
                st.deferred = Some(e);
            }
        }
    }

    /// The store this writer writes to.
    pub(super) fn inner(&self) -> Arc<Inner> {
        Arc::clone(&self.inner)
    }

    /// When the oldest staged row is due, if any is staged.
    pub(super) fn due(&self) -> Option<Instant> {
        lock(&self.state)
            .staged
            .since
            .map(|since| since + self.inner.batch_window())
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

    /// Lets the session go: this handle no longer writes it, and (unless another writer
    /// took it) its row says nobody does, so another worker may open it at once.
    fn release(&self, fenced: bool) {
        self.inner.home.closed(&self.id, self.epoch);
        if !fenced {
            let inner = &*self.inner;
            // Best-effort: if it fails, the session is free when this handle goes.
            let _ = inner
                .pool
                .with(|c| owner::release(c, &inner.sql, &self.id, self.epoch, &inner.connector));
        }
    }

    /// Breaks the writer for good, dropping what is staged and letting the session go.
    fn break_with(&self, st: &mut State, broken: Broken) {
        let fenced = matches!(broken, Broken::Fenced(_));
        st.broken = Some(broken);
        st.staged = Staged::default();
        st.next_seq = st.stored;
        self.release(fenced);
    }

    /// Why a fenced write inserted nothing: the epoch moved (`fenced`), or the tail
    /// moved under the same epoch (`corrupt`: a foreign writer).
    fn diagnose(&self, st: &mut State, first: u64) -> Error {
        let inner = &*self.inner;
        let found = inner
            .pool
            .with(|c| owner::current(c, &inner.sql, &self.id, &inner.connector));
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

    /// The request that writes `rows` (seqs `stored..` onwards, whole calls) and the
    /// seqs it spans; `None` for no rows.
    fn request(&self, rows: Rows<'_>, posts: &[String]) -> Option<(Request, (u64, u64))> {
        let first = *rows.seqs.first()? as u64;
        let end = first + rows.seqs.len() as u64;
        let request = Request {
            id: self.id.clone(),
            epoch: self.epoch,
            seqs: rows.seqs,
            types: rows.types.into_iter().map(str::to_owned).collect(),
            lines: rows.lines,
            posts: posts.to_vec(),
        };
        Some((request, (first, end)))
    }

    /// What a request's outcome does to the writer. A failure the server refused
    /// leaves the writer usable when `keep_on_refusal` (nothing of an acknowledged call
    /// was lost), as does one that never reached the server; anything else breaks it.
    fn apply(
        &self,
        st: &mut State,
        (first, end): (u64, u64),
        outcome: Outcome,
        keep_on_refusal: bool,
    ) -> Result<()> {
        match outcome {
            Outcome::Written => {
                st.stored = end;
                self.inner.notifier.committed([self.id.as_str()]);
                Ok(())
            }
            Outcome::Refused => Err(self.diagnose(st, first)),
            Outcome::Failed { error, sent } => {
                let kept = keep_on_refusal && (!sent || error.kind() == ErrorKind::Io);
                if !kept {
                    let kind = error.kind();
                    self.break_with(st, Broken::Poisoned(error.message().to_owned()));
                    if kind == ErrorKind::Corrupt {
                        return Err(error.with_session(&self.id).with_seq(first));
                    }
                }
                Err(error.with_session(&self.id))
            }
        }
    }

    /// Writes `rows` now, as one request; see [`Shared::apply`].
    fn write(&self, st: &mut State, rows: Rows<'_>, posts: &[String], keep: bool) -> Result<()> {
        let request = self.request(rows, posts);
        self.commit(st, request, keep)
    }

    /// Commits `request` (if any) in the pool's next group and applies its outcome.
    fn commit(
        &self,
        st: &mut State,
        request: Option<(Request, (u64, u64))>,
        keep: bool,
    ) -> Result<()> {
        let Some((request, span)) = request else {
            return Ok(());
        };
        let outcome = self
            .inner
            .pool
            .commit(vec![request])
            .pop()
            .expect("one outcome per request");
        self.apply(st, span, outcome, keep)
    }

    /// The staged rows as a request, taken out of the stage.
    fn take_staged(&self, st: &mut State) -> Option<(Request, (u64, u64))> {
        if st.staged.events.is_empty() {
            return None;
        }
        let Staged { events, lines, .. } = std::mem::take(&mut st.staged);
        let rows = Rows {
            seqs: events.iter().map(|e| e.seq() as i64).collect(),
            types: events.iter().map(Event::ty).collect(),
            lines,
        };
        self.request(rows, &[])
    }

    /// Writes the staged rows as one batch; on failure they are dropped whole and the
    /// writer is broken (their calls were acknowledged: only a reopen tells what is
    /// stored).
    fn write_staged(&self, st: &mut State) -> Result<()> {
        let request = self.take_staged(st);
        self.commit(st, request, false)
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let shared = &*self.shared;
        shared.inner.unregister(&shared.id, &weak);
        let mut st = lock(&shared.state);
        if st.broken.is_none() {
            // What was acknowledged is written (not made durable) as it goes; a failure
            // here has no caller left to tell, and the reopen shows what is stored.
            let _ = shared.write_staged(&mut st);
        }
        if st.broken.is_none() {
            shared.release(false);
        }
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
            shared.write(&mut st, rows, posts, true)?;
            st.next_seq = end;
            return Ok(());
        }
        let staged = &mut st.staged;
        staged.bytes += rows.lines.iter().map(String::len).sum::<usize>();
        staged.lines.extend(rows.lines);
        staged.events.extend_from_slice(events);
        let full = staged.events.len() >= BATCH_ROWS || staged.bytes >= BATCH_BYTES;
        if staged.since.is_none() {
            let since = Instant::now();
            staged.since = Some(since);
            shared.inner.flusher.due(
                since + shared.inner.batch_window(),
                Arc::downgrade(&self.shared),
            );
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
        let result = shared.inner.pool.with(|client| {
            // A commit with an xid and synchronous_commit on waits until the WAL is
            // flushed up to its commit record, so up to every asynchronous commit before.
            client
                .batch_execute(
                    "BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT",
                )
                .map_err(|e| shared.inner.connector.fail(&doing, &e, Stmt::Write))
        });
        result.map_err(|e| {
            shared.break_with(&mut st, Broken::Poisoned(e.message().to_owned()));
            e.with_session(&shared.id)
        })
    }

    fn checkpoint_due(&self, closing: bool) -> bool {
        let st = lock(&self.shared.state);
        let (next, since) = (st.next_seq, st.checkpoint.unwrap_or(0));
        if closing {
            next > 0 && st.checkpoint != Some(next)
        } else {
            next - since >= checkpoint::EVERY_EVENTS
        }
    }

    /// Writes every staged row first, then upserts the checkpoint, fenced by this
    /// writer's epoch; a session whose event before it has no stored checksum (written
    /// before schema version 5) gets none.
    fn checkpoint(&mut self, cp: &Checkpoint) -> Result<()> {
        self.flush()?;
        let shared = &*self.shared;
        let mut st = lock(&shared.state);
        shared.refuse(&mut st)?;
        let seq = cp.seq();
        if seq != st.next_seq || seq == 0 {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "a checkpoint at seq {seq} is not the state after the last event of session {} (next seq {})",
                    json::quote(&shared.id),
                    st.next_seq
                ),
            ));
        }
        let (sql, id) = (&shared.inner.sql, shared.id.as_str());
        let doing = format!("cannot write the checkpoint of session {}", json::quote(id));
        let fail = |e: postgres::Error| shared.inner.connector.fail(&doing, &e, Stmt::Write);
        let written = shared.inner.pool.with(|client| {
            let crc: Option<i32> = client
                .query_opt(sql.checkpoint_crc.as_str(), &[&id, &(seq as i64 - 1)])
                .map_err(fail)?
                .and_then(|row| row.get(0));
            let Some(crc) = crc else {
                return Ok(false);
            };
            let binding = Binding {
                chain: crc as u32,
                ..Binding::default()
            };
            let n = client
                .execute(
                    sql.save_checkpoint.as_str(),
                    &[&id, &(seq as i64), &cp.to_json(&binding), &shared.epoch],
                )
                .map_err(fail)?;
            Ok(n == 1)
        });
        if written.map_err(|e| e.with_session(id))? {
            st.checkpoint = Some(seq);
        }
        Ok(())
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

//! The owner's writer: one fenced statement per append (see `owner.rs`), the `flush`
//! barrier of the asynchronous-commit modes (SPEC §10.2), and the states a writer
//! cannot leave: fenced (another writer took the session) and poisoned (a failure whose
//! outcome only a reopen can tell).

use std::sync::{Arc, Mutex, MutexGuard};

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

/// The exclusive writer of one session in the PostgreSQL store.
pub(super) struct PgWriter {
    inner: Arc<Inner>,
    id: String,
    epoch: i64,
    next_seq: u64,
    /// `None` once released (fenced, poisoned or dropped).
    owned: Mutex<Option<Owned>>,
    broken: Option<Broken>,
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
        Ok(PgWriter {
            inner,
            id: id.to_owned(),
            epoch,
            next_seq,
            owned: Mutex::new(Some(Owned { client, append })),
            broken: None,
        })
    }

    fn at(&self) -> At<'_> {
        At {
            schema: &self.inner.sql.schema,
            id: &self.id,
        }
    }

    /// The error every call gets once the writer is broken.
    fn refuse(&self) -> Result<()> {
        match &self.broken {
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
    fn release(&mut self) {
        if let Some(owned) = lock(&self.owned).take() {
            drop(owned.append);
            self.inner.release(owned.client);
        }
    }

    /// Breaks the writer for good, letting its connection (and lock) go.
    fn break_with(&mut self, broken: Broken) {
        self.broken = Some(broken);
        self.release();
    }

    /// Why a fenced append inserted nothing: the epoch moved (`fenced`), or the tail
    /// moved under the same epoch (`corrupt`: a foreign writer).
    fn diagnose(&mut self, first: u64) -> Error {
        let found = {
            let mut owned = lock(&self.owned);
            let client = &mut owned.as_mut().expect("checked by the caller").client;
            owner::current(client, &self.inner.sql, &self.id, &self.inner.connector)
        };
        let (kind, why) = match found {
            Err(e) => {
                self.break_with(Broken::Poisoned(e.message().to_owned()));
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
                    "session {} was taken over by another writer (ownership epoch {} is now {epoch}); \
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
        self.break_with(match kind {
            ErrorKind::Fenced => Broken::Fenced(why.clone()),
            _ => Broken::Poisoned(why.clone()),
        });
        let e = Error::new(kind, why).with_session(&self.id);
        match kind {
            ErrorKind::Corrupt => e.with_seq(first),
            _ => e,
        }
    }
}

impl PgWriter {
    /// One fenced append of `events`, removing `posts` from the mailbox with it.
    fn write(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
        self.refuse()?;
        let Some(first) = events.first().map(Event::seq) else {
            return Ok(());
        };
        if first != self.next_seq {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "append at seq {first} does not continue the stored tail (next seq {})",
                    self.next_seq
                ),
            )
            .with_session(&self.id));
        }
        let rows = Rows::of(events, self.inner.limit, &self.id)?;
        let end = first + events.len() as u64;
        let doing = format!(
            "cannot append seq {first}..{} to session {}",
            end - 1,
            json::quote(&self.id)
        );
        let result = {
            let mut owned = lock(&self.owned);
            let owned = owned.as_mut().expect("not broken");
            if owned.client.is_closed() {
                Err(self.inner.connector.closed(&doing))
            } else {
                let (id, first_i, end_i) = (&self.id, first as i64, end as i64);
                let params: [&(dyn ToSql + Sync); 8] = [
                    id,
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
            Ok(n) if n == events.len() as u64 => {
                self.next_seq = end;
                Ok(())
            }
            Ok(0) => Err(self.diagnose(first)),
            Ok(n) => {
                let why = format!(
                    "{doing}: {n} rows were inserted instead of {}",
                    events.len()
                );
                self.break_with(Broken::Poisoned(why.clone()));
                Err(Error::new(ErrorKind::Corrupt, why).with_session(&self.id))
            }
            Err(e) => {
                // A statement the server refused changed nothing: the writer goes on.
                // Anything else (a lost connection, a foreign row) needs a reopen.
                if e.kind() != ErrorKind::Io {
                    self.break_with(Broken::Poisoned(e.message().to_owned()));
                }
                Err(e.with_session(&self.id))
            }
        }
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        self.release();
    }
}

impl LogWriter for PgWriter {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        self.write(events, &[])
    }

    /// The events and the removal of `posts` from the mailbox are one statement, so
    /// one transaction: a post is pending or in the log, never both, never neither.
    fn append_posted(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
        self.write(events, posts)
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        self.inner
            .with_client(&self.id, |client, inner| {
                read_all(
                    client,
                    &inner.sql,
                    &self.at(),
                    since,
                    None,
                    &inner.connector,
                    &mut |e| {
                        events.push(e);
                        Ok(())
                    },
                )
            })
            .map_err(|e| e.with_session(&self.id))?;
        Ok(events)
    }

    fn flush(&mut self) -> Result<()> {
        self.refuse()?;
        if self.inner.durability == Durability::Sync {
            return Ok(());
        }
        let doing = format!("cannot flush session {}", json::quote(&self.id));
        let result = {
            let mut owned = lock(&self.owned);
            let client = &mut owned.as_mut().expect("not broken").client;
            // A commit with an xid and synchronous_commit on waits until the WAL is
            // flushed up to its commit record, so up to every asynchronous commit before.
            client
                .batch_execute(
                    "BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT",
                )
                .map_err(|e| self.inner.connector.fail(&doing, &e, Stmt::Write))
        };
        result.map_err(|e| {
            self.break_with(Broken::Poisoned(e.message().to_owned()));
            e.with_session(&self.id)
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

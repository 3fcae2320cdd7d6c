//! The memory store: logs in process memory, for tests and ephemeral agents.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{
    Backoff, Feed, LogWriter, Mailbox, OpenOptions, Opened, Post, Posted, Replay, Store, Verified,
};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::header::Header;
use crate::id::validate_session_id;

#[derive(Debug)]
struct Log {
    header: Header,
    events: Vec<Event>,
    writer_open: bool,
    /// Removed from the store: an open that fetched it just before must not write to it.
    deleted: bool,
    /// Posts not yet taken in (ARCHITECTURE.md#posting), in post order: (post id, post).
    mailbox: VecDeque<(String, Post)>,
}

type Shared = Arc<Mutex<Log>>;

/// Logs kept in memory; cheap to clone (clones share the same logs).
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    logs: Arc<Mutex<BTreeMap<String, Shared>>>,
    /// Posts made so far, numbering post ids.
    posts: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread cannot leave a log half-appended (appends extend
    // a Vec in one step), so a poisoned mutex is still consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryStore {
    /// An empty memory store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn get(&self, id: &str) -> Result<Shared> {
        validate_session_id(id)?;
        lock(&self.logs)
            .get(id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }
}

fn not_found(id: &str) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("no session \"{id}\" in the memory store"),
    )
    .with_session(id)
}

/// Passes every event of `log` to `visit`, as [`Store::open`] and [`Store::verify`]
/// both do: a refusal is corruption at that event.
fn visit_all(
    id: &str,
    log: &Log,
    visit: &mut dyn FnMut(&Header, &Event) -> Result<()>,
) -> Result<()> {
    for (expected, event) in (0..).zip(&log.events) {
        // A log made by hand through `create` may skip seqs; visitors may jump (see
        // `Store::open`), so the store checks contiguity itself, as the JSONL reader does.
        let checked = if event.seq() == expected {
            Ok(())
        } else {
            Err(crate::error::invalid(format!(
                "seq {} does not continue the log (expected seq {expected})",
                event.seq()
            )))
        };
        checked
            .and_then(|()| visit(&log.header, event))
            .map_err(|e| {
                // A depth over the limits stays `too_large`, as in the other stores.
                let kind = match e.kind() {
                    ErrorKind::TooLarge => ErrorKind::TooLarge,
                    _ => ErrorKind::Corrupt,
                };
                e.context(format_args!("corrupt log \"{id}\" at seq {}", event.seq()))
                    .with_kind(kind)
                    .with_session(id)
                    .with_seq(event.seq())
            })?;
    }
    Ok(())
}

struct MemoryWriter {
    log: Shared,
}

impl Drop for MemoryWriter {
    fn drop(&mut self) {
        lock(&self.log).writer_open = false;
    }
}

impl LogWriter for MemoryWriter {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        let mut log = lock(&self.log);
        let next = log.events.len() as u64;
        if let Some(first) = events.first()
            && first.seq() != next
        {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "append at seq {} does not continue the stored tail (next seq {next})",
                    first.seq()
                ),
            ));
        }
        log.events.extend_from_slice(events);
        Ok(())
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        let log = lock(&self.log);
        let from = (since as usize).min(log.events.len());
        Ok(log.events[from..].to_vec())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Store for MemoryStore {
    fn create(&self, header: &Header, seed: &[Event]) -> Result<Box<dyn LogWriter>> {
        validate_session_id(&header.id)?;
        let mut logs = lock(&self.logs);
        if logs.contains_key(&header.id) {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("session \"{}\" already exists", header.id),
            )
            .with_session(&header.id));
        }
        let log = Arc::new(Mutex::new(Log {
            header: header.clone(),
            events: seed.to_vec(),
            writer_open: true,
            deleted: false,
            mailbox: VecDeque::new(),
        }));
        logs.insert(header.id.clone(), log.clone());
        Ok(Box::new(MemoryWriter { log }))
    }

    fn open(&self, id: &str, options: &OpenOptions, replay: &mut dyn Replay) -> Result<Opened> {
        options.refuse_takeover(id)?;
        let shared = self.get(id)?;
        let mut log = lock(&shared);
        if log.deleted {
            return Err(not_found(id));
        }
        if log.writer_open {
            return Err(Error::new(
                ErrorKind::Locked,
                format!("session \"{id}\" is locked by another writer"),
            )
            .with_session(id));
        }
        // No checkpoints here: every event, whether `replay` resumes or not.
        visit_all(id, &log, &mut |h, e| replay.visit(h, e))?;
        log.writer_open = true;
        let header = log.header.clone();
        drop(log);
        Ok(Opened {
            header,
            writer: Box::new(MemoryWriter { log: shared }),
            torn_bytes: 0,
        })
    }

    fn verify(&self, id: &str, replay: &mut dyn Replay) -> Result<Verified> {
        let shared = self.get(id)?;
        let log = lock(&shared);
        visit_all(id, &log, &mut |h, e| replay.visit(h, e))?;
        Ok(Verified {
            header: log.header.clone(),
            torn_bytes: 0,
        })
    }

    fn inspect(&self, id: &str) -> Result<(Header, Vec<Event>)> {
        let shared = self.get(id)?;
        let log = lock(&shared);
        Ok((log.header.clone(), log.events.clone()))
    }

    fn read(&self, id: &str, since: u64) -> Result<(Header, Vec<Event>)> {
        let shared = self.get(id)?;
        let log = lock(&shared);
        // Stored in seq order: the first at or after `since` is found by halving.
        let from = log.events.partition_point(|e| e.seq() < since);
        Ok((log.header.clone(), log.events[from..].to_vec()))
    }

    fn tail(&self, id: &str, limit: usize, types: Option<&[&str]>) -> Result<(Header, Vec<Event>)> {
        let shared = self.get(id)?;
        let log = lock(&shared);
        let events = match types {
            None => log.events[log.events.len().saturating_sub(limit)..].to_vec(),
            Some(types) => {
                let mut last: Vec<Event> = log
                    .events
                    .iter()
                    .rev()
                    .filter(|e| types.contains(&e.ty()))
                    .take(limit)
                    .cloned()
                    .collect();
                last.reverse();
                last
            }
        };
        Ok((log.header.clone(), events))
    }

    fn delete(&self, id: &str) -> Result<()> {
        validate_session_id(id)?;
        let mut logs = lock(&self.logs);
        let shared = logs.get(id).ok_or_else(|| not_found(id))?;
        let mut log = lock(shared);
        if log.writer_open {
            return Err(Error::new(
                ErrorKind::Locked,
                format!("session \"{id}\" is locked by a writer and cannot be deleted"),
            )
            .with_session(id));
        }
        // Readers holding the log keep what they read; an open racing this finds it gone.
        log.deleted = true;
        drop(log);
        logs.remove(id);
        Ok(())
    }

    fn list(&self) -> Result<Vec<Header>> {
        let logs = lock(&self.logs);
        Ok(logs.values().map(|l| lock(l).header.clone()).collect())
    }

    /// Posts go to the session's mailbox in memory; its writer moves them to the log
    /// under the session lock, so nothing is lost or doubled short of the process dying
    /// (which takes the whole store with it).
    fn deliver(&self, id: &str, post: &Post) -> Result<String> {
        let shared = self.get(id)?;
        let mut log = lock(&shared);
        if log.deleted {
            return Err(not_found(id));
        }
        let name = format!("mem-{:012}", self.posts.fetch_add(1, Ordering::Relaxed));
        log.mailbox.push_back((name.clone(), post.clone()));
        Ok(name)
    }

    fn mailbox(&self, id: &str) -> Result<Box<dyn Mailbox>> {
        Ok(Box::new(MemoryMailbox { log: self.get(id)? }))
    }

    fn follow(&self, id: &str) -> Result<Box<dyn Feed>> {
        let log = self.get(id)?;
        Ok(Box::new(MemoryFeed {
            log,
            id: id.to_owned(),
        }))
    }
}

/// A session's posts in memory.
struct MemoryMailbox {
    log: Shared,
}

impl Mailbox for MemoryMailbox {
    fn pending(&mut self) -> Result<Vec<Posted>> {
        Ok(lock(&self.log)
            .mailbox
            .iter()
            .map(|(name, post)| post.clone().posted(name.clone()))
            .collect())
    }

    fn settle(&mut self, posts: &[String]) -> Result<()> {
        lock(&self.log)
            .mailbox
            .retain(|(post, ..)| !posts.contains(post));
        Ok(())
    }

    fn may_hold(&mut self) -> Result<bool> {
        Ok(!lock(&self.log).mailbox.is_empty())
    }
}

/// A follower's view of a log in memory: it polls the events' count.
struct MemoryFeed {
    log: Shared,
    id: String,
}

impl Feed for MemoryFeed {
    fn poll(&mut self, from: u64, timeout: Duration) -> Result<Vec<Event>> {
        let mut backoff = Backoff::new(timeout);
        loop {
            {
                let log = lock(&self.log);
                if log.deleted {
                    return Err(not_found(&self.id));
                }
                let from = (from as usize).min(log.events.len());
                if from < log.events.len() {
                    return Ok(log.events[from..].to_vec());
                }
            }
            if !backoff.wait() {
                return Ok(Vec::new());
            }
        }
    }
}

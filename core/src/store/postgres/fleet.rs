//! Posting and following on PostgreSQL (ARCHITECTURE.md#posting).
//!
//! **Posting.** A post is one row of `posts` (`schema.rs`), inserted in one statement
//! that also checks the session exists and sends the post's wake-up (below); it is
//! acknowledged once that statement has committed (synchronously, whatever the store's
//! durability mode). Its id is
//! `pg-<n>`, `n` from a sequence: a poster's next post starts after its previous one
//! committed, so each poster's posts are in `n` order, which is the order
//! [`Mailbox::pending`] hands them out in.
//!
//! **Exactly once.** The owner takes posts in with [`LogWriter::append_posted`]
//! (`writer.rs`): the fenced INSERT of the splices and the DELETE of their rows from
//! `posts` are one statement, so one transaction. It commits whole (the post is in the
//! log and gone from the mailbox) or not at all (it is still pending and not in the
//! log); a crash of the owner, a lost connection or a takeover can leave nothing in
//! between. A fenced writer deletes nothing (the DELETE runs only when the fence
//! matched). The session's later `settle` finds the rows already gone and is a no-op;
//! and should a pending row ever name a post the log holds, the session skips it by
//! its id (`fleet/post.rs`).
//!
//! **Knowing that nothing was posted.** The owner asks its mailbox at every step
//! boundary whether posts may wait ([`Mailbox::may_hold`]), and a read there would be a
//! query per boundary. Instead the post's statement also sends
//! `pg_notify('<schema>.posts', <session id>)`, committed with the post; the handle's
//! home connection LISTENs on that channel while the handle has mailboxes (`home.rs`)
//! and counts the wake-ups per session, and a post through the handle itself counts at
//! once. A mailbox remembers
//! the count it saw before its last read that left it empty; while the count has not
//! moved since, nothing was posted and it answers without a query. Whenever a wake-up
//! could have gone unheard it reads: before its first read, until the LISTEN took
//! effect (every count moves then), and from a lost home connection until it LISTENs
//! again. A wake-up travels from the poster's commit to the owner's handle
//! asynchronously (well under a millisecond on one host): a post acknowledged in that
//! interval before a boundary is taken in at the next one, or at the next
//! `propose_step`, which always reads.
//!
//! **Following.** After a commit, the writer's handle sends `pg_notify('<schema>',
//! <session id>)` in a statement of its own (`notify.rs`), never inside the commit. A
//! follower's [`PgFeed`] reads the rows with `seq >= from` through its handle's pool
//! (each line parsed, a gap refused), and when there are none waits for a wake-up (the
//! handle's home connection LISTENs on the schema's channel while it has followers,
//! `home.rs`) for at most [`REREAD`], then reads again. A lost notification can only
//! delay an event, never skip one; a failed read is tried again and resumes at `from`.
//!
//! [`LogWriter::append_posted`]: crate::store::LogWriter::append_posted

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Inner;
use super::conn::Stmt;
use super::read::{At, read_all, reading};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::json;
use crate::message::Message;
use crate::splice::Target;
use crate::store::{Durability, Feed, Mailbox, Posted};

/// The longest a follower waits for a notification before it reads again.
pub(super) const REREAD: Duration = Duration::from_secs(1);

/// How long a follower waits before it connects again after a failure.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// Posts `message` to `target` of session `id`; returns the post id once committed.
pub(super) fn post(inner: &Inner, id: &str, target: Target, message: &Message) -> Result<String> {
    let text = message.json();
    // The splice that takes it in must fit the log's record limit too.
    if text.len() + 128 > inner.limit {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "the post to session {} is {} bytes, larger than the record limit of {} bytes",
                json::quote(id),
                text.len(),
                inner.limit
            ),
        )
        .with_session(id));
    }
    let doing = format!("cannot post to session {}", json::quote(id));
    let row = inner.with_client(id, |client, inner| {
        let fail = |e: postgres::Error| match e.code().map(postgres::error::SqlState::code) {
            // The session was deleted between the check and the insert.
            Some("23503") => inner.not_found(id),
            _ => inner.connector.fail(&doing, &e, Stmt::Write),
        };
        let mut tx = client.transaction().map_err(fail)?;
        if inner.durability != Durability::Sync {
            // A post is acknowledged durable, whatever the mode.
            tx.batch_execute("SET LOCAL synchronous_commit = on")
                .map_err(fail)?;
        }
        let row = tx
            .query_opt(inner.sql.post.as_str(), &[&id, &target.as_str(), &text])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(row)
    });
    match row? {
        Some(row) => {
            // This handle's own mailboxes know at once.
            inner.posts.ring([id]);
            Ok(row.get(0))
        }
        None => Err(inner.not_found(id)),
    }
}

/// The mailbox of one session: its rows of `posts`, and what its wake-ups tell.
pub(super) struct PgMailbox {
    inner: Arc<Inner>,
    id: String,
    /// The wake-up count seen before the last read, and the posts that read found.
    read: Option<(u64, Vec<String>)>,
    /// The wake-up count seen before a read that left the mailbox empty: while the
    /// count stays there, nothing was posted since.
    empty_at: Option<u64>,
}

impl PgMailbox {
    pub fn new(inner: Arc<Inner>, id: &str) -> PgMailbox {
        inner.posts.watch(id);
        PgMailbox {
            inner,
            id: id.to_owned(),
            read: None,
            empty_at: None,
        }
    }
}

impl Drop for PgMailbox {
    fn drop(&mut self) {
        self.inner.posts.unwatch(&self.id);
    }
}

impl Mailbox for PgMailbox {
    fn pending(&mut self) -> Result<Vec<Posted>> {
        let id = self.id.as_str();
        // Seen before the read: a post that commits during it moves the count.
        let seen = self.inner.posts.heard(id);
        self.empty_at = None;
        self.read = None;
        let rows = self.inner.with_client(id, |client, inner| {
            client
                .query(inner.sql.pending.as_str(), &[&id])
                .map_err(|e| inner.connector.fail(reading(id), &e, Stmt::Read))
        })?;
        if let Some(seen) = seen {
            if rows.is_empty() {
                self.empty_at = Some(seen);
            } else {
                self.read = Some((seen, rows.iter().map(|row| row.get(0)).collect()));
            }
        }
        Ok(rows
            .iter()
            .map(|row| {
                let (post, target, message): (String, &str, &str) =
                    (row.get(0), row.get(1), row.get(2));
                let parsed =
                    Target::parse(target).and_then(|t| Message::from_json(message).map(|m| (t, m)));
                match parsed {
                    Ok((target, message)) => Posted::Message {
                        post,
                        target,
                        message,
                    },
                    Err(error) => Posted::Invalid {
                        post,
                        message: message.to_owned(),
                        error,
                    },
                }
            })
            .collect())
    }

    fn settle(&mut self, posts: &[String]) -> Result<()> {
        if posts.is_empty() {
            return Ok(());
        }
        let id = self.id.as_str();
        self.inner.with_client(id, |client, inner| {
            client
                .execute(inner.sql.settle.as_str(), &[&id, &posts])
                .map(drop)
                .map_err(|e| {
                    let doing = format!("cannot settle the posts of session {}", json::quote(id));
                    inner.connector.fail(doing, &e, Stmt::Write)
                })
        })?;
        // Every post the last read found is gone: the mailbox is as empty as a read at
        // that count would have found it.
        if let Some((seen, found)) = self.read.take() {
            if found.iter().all(|post| posts.contains(post)) {
                self.empty_at = Some(seen);
            } else {
                self.read = Some((seen, found));
            }
        }
        Ok(())
    }

    fn may_hold(&mut self) -> Result<bool> {
        match self.empty_at {
            Some(seen) if self.inner.posts.heard(&self.id) == Some(seen) => Ok(false),
            _ => Ok(!self.pending()?.is_empty()),
        }
    }
}

/// A follower's view of one session: reads through the pool, woken by the handle's home
/// connection (which LISTENs while the handle has followers) and by its own commits.
pub(super) struct PgFeed {
    inner: Arc<Inner>,
    id: String,
}

impl PgFeed {
    /// The feed of `id`, which exists (checked here: `not_found` otherwise).
    pub fn new(inner: Arc<Inner>, id: &str) -> Result<PgFeed> {
        inner.home.listen()?;
        inner.signals.watch(id);
        let feed = PgFeed {
            inner,
            id: id.to_owned(),
        };
        if !feed.exists()? {
            return Err(feed.inner.not_found(id));
        }
        Ok(feed)
    }

    fn exists(&self) -> Result<bool> {
        let id = self.id.as_str();
        self.inner.with_client(id, |client, inner| {
            client
                .query_opt(inner.sql.exists.as_str(), &[&id])
                .map(|row| row.is_some())
                .map_err(|e| inner.connector.fail(reading(id), &e, Stmt::Read))
        })
    }

    /// The stored events with `seq >= from`; `not_found` once the session is gone.
    fn read(&self, from: u64) -> Result<Vec<Event>> {
        let id = self.id.as_str();
        let mut events = Vec::new();
        self.inner.with_client(id, |client, inner| {
            let at = At {
                schema: &inner.sql.schema,
                id,
            };
            read_all(
                client,
                &inner.sql,
                &at,
                from,
                None,
                &inner.connector,
                &mut |e| {
                    events.push(e);
                    Ok(())
                },
            )
        })?;
        if events.is_empty() && !self.exists()? {
            return Err(self.inner.not_found(id));
        }
        Ok(events)
    }
}

impl Drop for PgFeed {
    fn drop(&mut self) {
        self.inner.signals.unwatch(&self.id);
    }
}

impl Feed for PgFeed {
    fn poll(&mut self, from: u64, timeout: Duration) -> Result<Vec<Event>> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        loop {
            // Counted before the read: a wake-up that comes during it is not lost.
            let seen = self.inner.signals.count(&self.id);
            match self.read(from) {
                Ok(events) if !events.is_empty() => return Ok(events),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    // Read again until the deadline.
                    if Instant::now() >= deadline {
                        return Err(e.with_session(&self.id));
                    }
                    std::thread::sleep(RECONNECT_PAUSE);
                    continue;
                }
                Err(e) => return Err(e.with_session(&self.id)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            self.inner.signals.wait(&self.id, seen, left.min(REREAD));
        }
    }
}

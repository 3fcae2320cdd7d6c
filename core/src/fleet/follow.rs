//! Following a session from elsewhere (ARCHITECTURE.md#following): a [`Follower`] yields a log's
//! events from a seq on, as they are committed, over a store's [`Feed`].

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::store::{Feed, Store};

/// The events of one session from a seq on, as they are committed (ARCHITECTURE.md#following). It
/// reads the store without owning the session and without slowing its writer.
///
/// Every event is yielded once, in seq order, with no gap: [`Follower::next_seq`] is
/// where it stands, and a new follower opened at that seq (after a restart, or a
/// reconnect) continues with nothing skipped or repeated. An incomplete record (an
/// owner killed mid-write) is never yielded; the repair of the next owner is.
/// As an [`Iterator`], `next` blocks until an event arrives or an error occurs.
pub struct Follower {
    session: String,
    feed: Box<dyn Feed>,
    /// The seq of the next event [`Follower::next_timeout`] returns.
    next: u64,
    /// Events read but not yet returned, from `next` on.
    buffer: VecDeque<Event>,
}

impl fmt::Debug for Follower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Follower")
            .field("session", &self.session)
            .field("next_seq", &self.next)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// A follower of session `id` in `store` from seq `since` (0: from the start).
    /// `not_found` when the session does not exist.
    pub fn open(store: &dyn Store, id: &str, since: u64) -> Result<Follower> {
        Ok(Follower::new(id, store.follow(id)?, since))
    }

    /// A follower of session `session` from seq `since`, reading `feed`.
    pub fn new(session: &str, feed: Box<dyn Feed>, since: u64) -> Follower {
        Follower {
            session: session.to_owned(),
            feed,
            next: since,
            buffer: VecDeque::new(),
        }
    }

    /// The followed session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The seq of the next event to come: where a new follower resumes.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The next event, waiting up to `timeout` for it; `None` when none came in time.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>> {
        if self.buffer.is_empty() {
            self.fill(timeout)?;
        }
        Ok(self.buffer.pop_front().inspect(|e| self.next = e.seq() + 1))
    }

    /// Every event available now, waiting up to `timeout` for the first; empty when
    /// none came in time.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Vec<Event>> {
        if self.buffer.is_empty() {
            self.fill(timeout)?;
        }
        let batch: Vec<Event> = self.buffer.drain(..).collect();
        if let Some(last) = batch.last() {
            self.next = last.seq() + 1;
        }
        Ok(batch)
    }

    fn fill(&mut self, timeout: Duration) -> Result<()> {
        let expected = self.next + self.buffer.len() as u64;
        let mut want = expected;
        for event in self.feed.poll(expected, timeout)? {
            if event.seq() < want {
                continue;
            }
            if event.seq() != want {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "following session \"{}\": seq {} came where seq {want} was due",
                        self.session,
                        event.seq()
                    ),
                )
                .with_session(&self.session)
                .with_seq(event.seq()));
            }
            want += 1;
            self.buffer.push_back(event);
        }
        Ok(())
    }
}

impl Iterator for Follower {
    type Item = Result<Event>;

    /// Blocks until the next event is committed (or the feed fails).
    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            match self.next_timeout(Duration::from_secs(3600)) {
                Ok(Some(e)) => return Some(Ok(e)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out scripted batches, one per poll.
    struct Script(VecDeque<Vec<u64>>);

    impl Feed for Script {
        fn poll(&mut self, _from: u64, _timeout: Duration) -> Result<Vec<Event>> {
            Ok(self
                .0
                .pop_front()
                .unwrap_or_default()
                .into_iter()
                .map(|seq| {
                    Event::from_json(&format!(
                        r#"{{"type":"x","seq":{seq},"time":0,"data":{{}}}}"#
                    ))
                    .unwrap()
                })
                .collect())
        }
    }

    #[test]
    fn yields_each_seq_once_in_order_and_refuses_a_gap() {
        let script = Script(VecDeque::from([vec![0, 1, 2], vec![2, 3], vec![], vec![5]]));
        let mut f = Follower::new("s", Box::new(script), 1);
        let seqs: Vec<u64> = (0..3)
            .map(|_| f.next_timeout(Duration::ZERO).unwrap().unwrap().seq())
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(f.next_seq(), 4);
        assert!(f.next_timeout(Duration::ZERO).unwrap().is_none());
        let err = f.next_timeout(Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(
            err.to_string().contains("seq 5 came where seq 4 was due"),
            "{err}"
        );
        assert_eq!(f.next_seq(), 4);
    }
}

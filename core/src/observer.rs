//! Observers: synchronous subscribers to committed events and inbox notifications
//! (ARCHITECTURE.md#observers, ARCHITECTURE.md#notifications).
//!
//! Publication runs after a call's effects are applied and with no session lock held.
//! A thread-local marker records which sessions this thread is publishing for, so a
//! mutation of the same session from inside an observer is refused as `reentrant`
//! while other threads may still mutate it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::event::Event;
use crate::message::Message;

/// One live inbox notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboxNotice {
    /// `agent/inbox/inserted`: a message entered a list.
    Inserted(Message),
    /// `agent/inbox/discarded`: a message was removed by a public splice.
    Discarded(Message),
    /// `agent/inbox/claimed`: a message was claimed by the step boundary for `turn`.
    Claimed(Message, u64),
}

impl InboxNotice {
    /// The notification type, e.g. `agent/inbox/claimed`.
    pub fn ty(&self) -> &'static str {
        match self {
            InboxNotice::Inserted(_) => "agent/inbox/inserted",
            InboxNotice::Discarded(_) => "agent/inbox/discarded",
            InboxNotice::Claimed(..) => "agent/inbox/claimed",
        }
    }

    /// The message it is about.
    pub fn message(&self) -> &Message {
        match self {
            InboxNotice::Inserted(m) | InboxNotice::Discarded(m) | InboxNotice::Claimed(m, _) => m,
        }
    }
}

/// Observer failures taken from a session (`Session::take_observer_failures`): the
/// most recent ones, and how many older ones were dropped to keep the buffer bounded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObserverFailures {
    /// Failures recorded but no longer kept (at most [`ObserverFailures::KEPT`] are).
    pub dropped: u64,
    /// The kept failures, oldest first, one line each.
    pub messages: Vec<String>,
}

impl ObserverFailures {
    /// How many failures a session keeps until they are taken.
    pub const KEPT: usize = 64;

    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.dropped == 0 && self.messages.is_empty()
    }

    /// One line per failure, oldest first, preceded by a line counting the dropped
    /// ones when there were any.
    pub fn lines(&self) -> Vec<String> {
        let note = (self.dropped > 0).then(|| {
            format!(
                "{} earlier observer failures were dropped (the last {} are kept)",
                self.dropped,
                Self::KEPT
            )
        });
        note.into_iter()
            .chain(self.messages.iter().cloned())
            .collect()
    }
}

/// A session's failures not yet taken: the last [`ObserverFailures::KEPT`], and a count
/// of the older ones, so a host that never takes them holds bounded memory.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    dropped: u64,
    recent: VecDeque<String>,
}

impl FailureLog {
    /// Records failures in order, dropping the oldest beyond the bound.
    pub fn record(&mut self, failures: impl IntoIterator<Item = String>) {
        for failure in failures {
            if self.recent.len() == ObserverFailures::KEPT {
                self.recent.pop_front();
                self.dropped += 1;
            }
            self.recent.push_back(failure);
        }
    }

    /// Takes what was recorded, leaving the log empty.
    pub fn take(&mut self) -> ObserverFailures {
        let taken = std::mem::take(self);
        ObserverFailures {
            dropped: taken.dropped,
            messages: taken.recent.into(),
        }
    }
}

/// Something committed, waiting to be published.
#[derive(Clone, Debug)]
pub(crate) enum Notice {
    Event(Event),
    Inbox(InboxNotice),
}

/// An event observer. An `Err` (or a panic) is contained and recorded.
pub type EventObserver = dyn Fn(&Event) -> Result<(), String> + Send + Sync;
/// An inbox observer. An `Err` (or a panic) is contained and recorded.
pub type InboxObserver = dyn Fn(&InboxNotice) -> Result<(), String> + Send + Sync;

/// The observers of one session, in registration order.
#[derive(Clone, Default)]
pub(crate) struct Observers {
    pub events: Vec<Arc<EventObserver>>,
    pub inbox: Vec<Arc<InboxObserver>>,
}

impl Observers {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.inbox.is_empty()
    }

    /// Publishes `notices` in order; returns the failures, one line each.
    pub fn publish(&self, session_serial: u64, notices: &[Notice]) -> Vec<String> {
        let _guard = Publishing::enter(session_serial);
        let mut failures = Vec::new();
        for notice in notices {
            match notice {
                Notice::Event(e) => {
                    for obs in &self.events {
                        if let Err(why) = run(|| obs(e)) {
                            failures
                                .push(format!("event observer failed on seq {}: {why}", e.seq()));
                        }
                    }
                }
                Notice::Inbox(n) => {
                    for obs in &self.inbox {
                        if let Err(why) = run(|| obs(n)) {
                            failures.push(format!(
                                "inbox observer failed on {} of {:?}: {why}",
                                n.ty(),
                                n.message().id()
                            ));
                        }
                    }
                }
            }
        }
        failures
    }
}

fn run(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => Err(match panic.downcast_ref::<&str>() {
            Some(s) => format!("panicked: {s}"),
            None => match panic.downcast_ref::<String>() {
                Some(s) => format!("panicked: {s}"),
                None => "panicked".to_owned(),
            },
        }),
    }
}

thread_local! {
    static PUBLISHING: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as publishing for a session until dropped.
struct Publishing(u64);

impl Publishing {
    fn enter(serial: u64) -> Publishing {
        PUBLISHING.with(|p| p.borrow_mut().push(serial));
        Publishing(serial)
    }
}

impl Drop for Publishing {
    fn drop(&mut self) {
        PUBLISHING.with(|p| {
            let mut p = p.borrow_mut();
            if let Some(i) = p.iter().rposition(|&s| s == self.0) {
                p.remove(i);
            }
        });
    }
}

/// Whether this thread is inside an observer of the session `serial`.
pub(crate) fn publishing(serial: u64) -> bool {
    PUBLISHING.with(|p| p.borrow().contains(&serial))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::SessionMeta;
    use crate::session::Session;
    use crate::store::MemoryStore;
    use crate::{Envelope, Target};

    #[test]
    fn failures_stay_bounded_until_taken() {
        let store = MemoryStore::new();
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        s.on_event(|e| Err(format!("no {}", e.seq())));
        for _ in 0..1_000 {
            s.append("host/x", "{}", Envelope::default()).unwrap();
        }
        let taken = s.take_observer_failures();
        assert_eq!(taken.dropped, 1_000 - ObserverFailures::KEPT as u64);
        assert_eq!(taken.messages.len(), ObserverFailures::KEPT);
        assert_eq!(
            taken.messages.first().unwrap(),
            "event observer failed on seq 936: no 936"
        );
        assert_eq!(
            taken.messages.last().unwrap(),
            "event observer failed on seq 999: no 999"
        );
        let lines = taken.lines();
        assert_eq!(lines.len(), ObserverFailures::KEPT + 1);
        assert_eq!(
            lines[0],
            "936 earlier observer failures were dropped (the last 64 are kept)"
        );
        // Taking empties the buffer; the count starts again.
        assert!(s.take_observer_failures().is_empty());
        assert!(s.take_observer_failures().lines().is_empty());
        s.inbox()
            .append(
                Target::NextTurn,
                crate::Message::from_json(r#"{"id":"a"}"#).unwrap(),
            )
            .unwrap();
        let again = s.take_observer_failures();
        assert_eq!((again.dropped, again.messages.len()), (0, 1));
        assert_eq!(again.lines(), again.messages);
    }
}

//! Observers: synchronous subscribers to committed events and inbox notifications
//! (SPEC §1.5, §3.6).
//!
//! Publication runs after a call's effects are applied and with no session lock held.
//! A thread-local marker records which sessions this thread is publishing for, so a
//! mutation of the same session from inside an observer is refused as `reentrant`
//! while other threads may still mutate it.

use std::cell::RefCell;
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

    /// `{"type":…,"message":…[,"turn":N]}` as compact JSON.
    pub fn to_json(&self) -> String {
        let mut out = format!(
            "{{\"type\":\"{}\",\"message\":{}",
            self.ty(),
            self.message().json()
        );
        if let InboxNotice::Claimed(_, turn) = self {
            out.push_str(&format!(",\"turn\":{turn}"));
        }
        out.push('}');
        out
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

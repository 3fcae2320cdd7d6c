//! Taking posted messages in (ARCHITECTURE.md#posting): the session's side of
//! [`crate::fleet::post`], run under the session lock and published like any call.

use crate::error::{Error, ErrorKind, Result};
use crate::fleet::post::{Intake, PostIds};
use crate::observer;
use crate::store::Store;

use super::{Session, State, lock, now_ms};

impl Session {
    /// This session with the mailbox `store` keeps for it; `posts` are the posts its
    /// log already holds.
    pub(super) fn with_mailbox(
        self,
        store: &dyn Store,
        id: &str,
        posts: PostIds,
    ) -> Result<Session> {
        let mailbox = store.mailbox(id)?;
        lock(&self.state).intake = Some(Intake::new(mailbox, posts));
        Ok(self)
    }

    /// Takes in the messages posted to this session (ARCHITECTURE.md#posting), each as one durable
    /// transaction with the usual notifications: an `agent/inbox/spliced` insertion, or
    /// an `agent/inbox/rejected` event for a message that cannot be taken in. Returns
    /// how many posts it wrote. Runs on its own when the session opens and before each
    /// `propose_step`; 0 for a store that takes no posts.
    pub fn receive(&self) -> Result<usize> {
        self.take_posts_in(false)
    }

    /// [`Session::receive`] when the mailbox may hold posts
    /// ([`crate::store::Mailbox::may_hold`]), else nothing: what a boundary deciding
    /// whether another step is due runs (ARCHITECTURE.md#posting), at no read's cost
    /// when nothing was posted.
    pub(super) fn receive_if_posted(&self) -> Result<usize> {
        self.take_posts_in(true)
    }

    /// Takes posts in; when `if_posted`, only if the mailbox may hold any.
    fn take_posts_in(&self, if_posted: bool) -> Result<usize> {
        if observer::publishing(self.serial) {
            return Err(Error::new(
                ErrorKind::Reentrant,
                format!(
                    "session \"{}\" cannot take posts in from inside one of its observers",
                    self.id()
                ),
            ));
        }
        let (result, notify) = {
            let mut guard = self.state()?;
            let State {
                writer,
                ledger,
                outbox,
                intake,
            } = &mut *guard;
            let Some(intake) = intake.as_mut() else {
                return Ok(0);
            };
            if if_posted && !intake.waiting()? {
                return Ok(0);
            }
            let writer = writer.as_deref_mut().expect("open");
            let notify = !lock(&self.observers).is_empty();
            let result = intake.take_in(writer, ledger, notify.then_some(outbox), now_ms);
            // Only a take-in that wrote something ends a transaction.
            if matches!(result, Ok(n) if n > 0) {
                guard.checkpoint_if_due();
            }
            (result, notify)
        };
        if notify {
            self.publish();
        }
        result
    }

    /// Whether posts may wait in this session's mailbox, without taking them in: `false`
    /// when the store knows none does ([`crate::store::Mailbox::may_hold`]) and for a
    /// store that takes no posts.
    pub(super) fn posts_waiting(&self) -> Result<bool> {
        let mut st = self.state()?;
        match st.intake.as_mut() {
            None => Ok(false),
            Some(intake) => intake.waiting(),
        }
    }
}

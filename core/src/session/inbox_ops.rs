//! The inbox operations of a session (ARCHITECTURE.md#inbox-mutations): [`Session::inbox`] and the view it
//! returns, each operation one durable transaction.

use crate::error::Result;
use crate::inbox::Inbox;
use crate::message::Message;
use crate::splice::Target;
use crate::txn::Effect;

use super::Session;

impl Session {
    /// The inbox operations of this session (ARCHITECTURE.md#inbox-mutations).
    pub fn inbox(&self) -> InboxOps<'_> {
        InboxOps { session: self }
    }
}

/// The inbox operations of one session (ARCHITECTURE.md#inbox-mutations), each one durable transaction.
#[derive(Clone, Copy)]
pub struct InboxOps<'a> {
    session: &'a Session,
}

impl InboxOps<'_> {
    /// `splice(target, start, deleteCount, inserted)` with JavaScript coordinate
    /// arithmetic; returns the removed messages (`discarded` notifications).
    pub fn splice(
        &self,
        target: Target,
        start: f64,
        delete_count: f64,
        inserted: Vec<Message>,
    ) -> Result<Vec<Message>> {
        self.session.transact(|txn| {
            match txn
                .inbox()
                .plan(target, start, delete_count, inserted, true)?
            {
                None => Ok(Vec::new()),
                Some(record) => txn.splice(record, Effect::Discard),
            }
        })
    }

    /// Adds `m` at the end of `target`.
    pub fn append(&self, target: Target, m: Message) -> Result<()> {
        self.session.transact(|txn| {
            let end = txn.inbox().len(target) as f64;
            let record = txn
                .inbox()
                .plan(target, end, 0.0, vec![m], true)?
                .expect("an insertion");
            txn.splice(record, Effect::Discard).map(drop)
        })
    }

    /// Adds `m` at the front of `target`.
    pub fn prepend(&self, target: Target, m: Message) -> Result<()> {
        self.splice(target, 0.0, 0.0, vec![m]).map(drop)
    }

    /// Replaces the pending message `id` with `m` (which may have a new id); `false`
    /// when `id` is not pending.
    pub fn replace(&self, id: &str, m: Message) -> Result<bool> {
        self.by_id(id, vec![m])
    }

    /// Removes the pending message `id`; `false` when it is not pending.
    pub fn remove(&self, id: &str) -> Result<bool> {
        self.by_id(id, Vec::new())
    }

    fn by_id(self, id: &str, inserted: Vec<Message>) -> Result<bool> {
        self.session.transact(|txn| {
            let Some((target, pos)) = txn.inbox().find(id) else {
                return Ok(false);
            };
            let record = txn
                .inbox()
                .plan(target, pos as f64, 1.0, inserted, true)?
                .expect("removes one");
            txn.splice(record, Effect::Discard).map(|_| true)
        })
    }

    /// Cancels everything pending: `next-step` first, then `next-turn`.
    #[expect(
        clippy::redundant_closure_for_method_calls,
        reason = "`Txn::clear` is for one lifetime of `Txn`; `transact` wants one for any"
    )]
    pub fn clear(&self) -> Result<()> {
        self.session.transact(|txn| txn.clear())
    }

    /// A copy of `next-turn`.
    pub fn next_turn(&self) -> Result<Vec<Message>> {
        self.session.with_inbox(|i| i.list(Target::NextTurn))
    }

    /// A copy of `next-step`.
    pub fn next_step(&self) -> Result<Vec<Message>> {
        self.session.with_inbox(|i| i.list(Target::NextStep))
    }

    /// Whether either list holds a message.
    pub fn has_pending(&self) -> Result<bool> {
        self.session.with_inbox(Inbox::has_pending)
    }
}

//! The inbox: two ordered lists of pending messages and the id index over both
//! (ARCHITECTURE.md#inbox, ARCHITECTURE.md#inbox-validation).
//!
//! Every change arrives as a [`SpliceRecord`] that was first validated with
//! [`Inbox::check`], then made durable, then applied with [`Inbox::apply`]. Each list is a
//! [`Queue`] (an order-statistics tree), and one hash index maps every pending id to
//! its list and tree node, so a mutation touching k messages costs O(k log n).

use std::collections::HashMap;

use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::message::Message;
use crate::queue::{Handle, Queue};
use crate::splice::{SpliceRecord, Target, normalize};

/// The two pending lists, `next-turn` and `next-step`, with ids unique across both.
#[derive(Clone, Default)]
pub struct Inbox {
    next_turn: Queue<Message>,
    next_step: Queue<Message>,
    index: HashMap<Key, (Target, Handle)>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("next_turn", &self.list(Target::NextTurn))
            .field("next_step", &self.list(Target::NextStep))
            .finish()
    }
}

/// An index key: the message itself (a shared pointer, no copy of the id), hashed
/// and compared by id.
#[derive(Clone)]
struct Key(Message);

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.0.id() == other.0.id()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id().hash(state);
    }
}

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        self.0.id()
    }
}

/// `message "<id>" is already pending`.
fn duplicate(id: &str) -> Error {
    Error::new(
        ErrorKind::DuplicateMessage,
        format!("message {} is already pending", crate::json::quote(id)),
    )
}

impl Inbox {
    /// An empty inbox.
    pub fn new() -> Inbox {
        Inbox::default()
    }

    /// The inbox holding `next_turn` and `next_step` in order (a §5.2 baseline read
    /// back from a checkpoint); `duplicate_message` when an id is in both or twice.
    pub(crate) fn from_lists(next_turn: Vec<Message>, next_step: Vec<Message>) -> Result<Inbox> {
        let mut inbox = Inbox::new();
        let mut seen = std::collections::HashSet::new();
        for m in next_turn.iter().chain(&next_step) {
            if !seen.insert(m.id()) {
                return Err(duplicate(m.id()));
            }
        }
        drop(seen);
        for (target, list) in [(Target::NextTurn, next_turn), (Target::NextStep, next_step)] {
            let (queue, index) = match target {
                Target::NextTurn => (&mut inbox.next_turn, &mut inbox.index),
                Target::NextStep => (&mut inbox.next_step, &mut inbox.index),
            };
            queue.splice(0, 0, list, |m, h| {
                index.insert(Key(m.clone()), (target, h));
            });
        }
        Ok(inbox)
    }

    fn queue(&self, target: Target) -> &Queue<Message> {
        match target {
            Target::NextTurn => &self.next_turn,
            Target::NextStep => &self.next_step,
        }
    }

    /// How many messages wait in `target`.
    pub fn len(&self, target: Target) -> usize {
        self.queue(target).len()
    }

    /// Whether either list holds a message.
    pub fn has_pending(&self) -> bool {
        !self.next_turn.is_empty() || !self.next_step.is_empty()
    }

    /// The messages of `target`, in order.
    pub fn iter(&self, target: Target) -> impl Iterator<Item = &Message> + '_ {
        self.queue(target).iter()
    }

    /// A copy of the messages of `target`, in order.
    pub fn list(&self, target: Target) -> Vec<Message> {
        self.iter(target).cloned().collect()
    }

    /// The message at `pos` in `target`.
    pub fn get(&self, target: Target, pos: usize) -> Option<&Message> {
        self.queue(target).get(pos)
    }

    /// Where the message with `id` waits, in O(log n).
    pub fn find(&self, id: &str) -> Option<(Target, usize)> {
        self.index
            .get(id)
            .map(|&(t, h)| (t, self.queue(t).position(h)))
    }

    /// Tree nodes visited so far by both lists: a work counter for complexity tests,
    /// built only with the `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn work(&self) -> u64 {
        self.next_turn.work() + self.next_step.work()
    }

    /// Normalizes a splice (ARCHITECTURE.md#inbox-mutations steps 1–4) into a record, validated against the
    /// current lists; `None` when it changes nothing.
    pub(crate) fn plan(
        &self,
        target: Target,
        start: f64,
        delete_count: f64,
        inserted: Vec<Message>,
        discard_removed: bool,
    ) -> Result<Option<SpliceRecord>> {
        let (start, delete) = normalize(self.len(target), start, delete_count);
        if delete == 0 && inserted.is_empty() {
            return Ok(None);
        }
        let record = SpliceRecord {
            target,
            start: start as u64,
            removed_count: delete as u64,
            inserted,
            canceled: discard_removed && delete > 0,
            moved: false,
        };
        self.check(&record)?;
        Ok(Some(record))
    }

    /// Validates a record against the current lists (ARCHITECTURE.md#inbox-validation) without changing anything.
    ///
    /// Cost is O(k log n) for k inserted messages: an inserted id may only already be
    /// pending if it sits in the range this record removes.
    pub fn check(&self, record: &SpliceRecord) -> Result<()> {
        record.check_range(self.len(record.target))?;
        let removed = record.start..record.start + record.removed_count;
        let mut seen = std::collections::HashSet::new();
        for m in &record.inserted {
            if record.inserted.len() > 1 && !seen.insert(m.id()) {
                return Err(duplicate(m.id()));
            }
            if let Some(&(t, h)) = self.index.get(m.id()) {
                let leaves =
                    t == record.target && removed.contains(&(self.queue(t).position(h) as u64));
                if !leaves {
                    return Err(duplicate(m.id()));
                }
            }
        }
        Ok(())
    }

    /// Applies a record that passed [`Inbox::check`]; returns the removed messages.
    pub(crate) fn apply(&mut self, record: &SpliceRecord) -> Vec<Message> {
        let target = record.target;
        let (queue, index) = match target {
            Target::NextTurn => (&mut self.next_turn, &mut self.index),
            Target::NextStep => (&mut self.next_step, &mut self.index),
        };
        let start = record.start as usize;
        let end = start + record.removed_count as usize;
        // Removed ids leave the index before inserted ones enter it, so a replacement
        // that keeps its id stays indexed.
        for pos in start..end {
            index.remove(queue.get(pos).expect("validated range").id());
        }
        queue.splice(
            start,
            end - start,
            record.inserted.iter().cloned(),
            |m, h| {
                index.insert(Key(m.clone()), (target, h));
            },
        )
    }

    /// Validates and applies a record (replay and projections).
    pub fn apply_checked(&mut self, record: &SpliceRecord) -> Result<Vec<Message>> {
        self.check(record)?;
        Ok(self.apply(record))
    }

    /// Re-applies one stored event during replay-once (ARCHITECTURE.md#replay): a splice at or after
    /// `replay_from` (the header's seed length), checked first; an invalid one is
    /// `corrupt` at its seq. Other events leave the inbox alone.
    pub(crate) fn replay(&mut self, event: &Event, replay_from: u64) -> Result<()> {
        if let Some(record) = event.splice()
            && event.seq() >= replay_from
        {
            self.apply_checked(record).map_err(|e| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "invalid persisted inbox splice at session seq {}: {}",
                        event.seq(),
                        e.message()
                    ),
                )
                .with_seq(event.seq())
            })?;
        }
        Ok(())
    }
}

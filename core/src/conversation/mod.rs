//! The conversation (ARCHITECTURE.md#the-conversation): what the user, the model and
//! the tools said, as the reference harness's own events, and what is folded from it
//! as part of the replay state: the model-visible surface (`surface`) and the tool
//! calls still waiting for their result (`calls`). Shapes are checked when a host
//! appends (`shape`); the surface rules on every append and, leniently, on load.
//! Pure: no I/O.

mod approval;
mod calls;
mod compaction;
mod shape;
mod surface;

pub use approval::ApprovalOutcome;
pub(crate) use approval::{
    Approvals, Asked, Parked, asked_data, decided_data, not_allowed_result, parked_data,
};
pub(crate) use calls::{Calls, Pending, interrupted_result};
pub(crate) use compaction::{
    Running, Shadowed, check_summary, end_data, estimate, prune_data, pruned, split_calls,
    start_data, summary_data, summary_message, text_blocks,
};
pub(crate) use shape::check as check_shape;
pub(crate) use surface::{Surface, project};

use crate::error::{Result, invalid};
use crate::event::Event;
pub(crate) use crate::event::{
    APPROVAL_ASKED, APPROVAL_DECIDED, ASSISTANT_MESSAGE, COMPACTION_END, COMPACTION_PRUNE,
    COMPACTION_START, COMPACTION_SUMMARY, TOOL_CALL, TOOL_RESULT, TURN_PARKED, TURN_RESUMED,
    USER_MESSAGE,
};
use surface::Undo;

/// The model-visible surface as a reader gets it (ARCHITECTURE.md#the-surface): the
/// seqs of its nodes in model-visible order and the messages projected from them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SurfaceView {
    /// The surface's seqs, in the order the model sees them.
    pub nodes: Vec<u64>,
    /// The messages the model sees, as JSON text, in order.
    pub messages: Vec<String>,
}

impl SurfaceView {
    pub(crate) fn of(surface: &Surface) -> SurfaceView {
        SurfaceView {
            nodes: surface.seqs(),
            messages: surface.messages(),
        }
    }
}

/// The conversation's replay state: the surface, the pending tool calls, the
/// approvals and the compaction running.
#[derive(Clone, Default)]
pub(crate) struct Conversation {
    pub surface: Surface,
    pub calls: Calls,
    pub approvals: Approvals,
    pub compaction: Option<Running>,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("surface", &self.surface.seqs())
            .field("calls", &self.calls)
            .field("approvals", &self.approvals)
            .field("compaction", &self.compaction)
            .finish()
    }
}

/// What a transaction changed in a [`Conversation`], to take back when its write fails.
#[derive(Default)]
pub(crate) struct Journal {
    surface: Vec<Undo>,
    calls: Option<Calls>,
    approvals: Option<Approvals>,
    compaction: Option<Was>,
}

/// The compaction running before a transaction changed it.
struct Was(Option<Running>);

impl Journal {
    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.surface.is_empty()
            && self.calls.is_none()
            && self.approvals.is_none()
            && self.compaction.is_none()
    }
}

impl Conversation {
    /// Records `event`, being appended, under the surface rules (SPEC §15.2): refused
    /// as `invalid_input`, naming the rule and the seqs, with nothing changed. What it
    /// changes goes in `journal`.
    pub fn append(&mut self, event: &Event, journal: &mut Journal) -> Result<()> {
        let plan = self
            .surface
            .plan(event)
            .map_err(|why| invalid(format!("surface rule: {why}")).with_seq(event.seq()))?;
        if let Some(plan) = plan {
            journal.surface.push(self.surface.apply(event, plan));
        }
        self.note_calls(event, journal);
        if Approvals::touched_by(event) {
            if journal.approvals.is_none() {
                journal.approvals = Some(self.approvals.clone());
            }
            self.approvals.note(event);
        }
        if Running::touched_by(event) {
            if journal.compaction.is_none() {
                journal.compaction = Some(Was(self.compaction.clone()));
            }
            Running::note(&mut self.compaction, event);
        }
        Ok(())
    }

    /// Records a stored event (SPEC §15.2 on load): an event whose surface op breaks
    /// the rules stays off the surface, and the rule it breaks is returned.
    pub fn replay(&mut self, event: &Event) -> Option<String> {
        let broken = match self.surface.plan(event) {
            Ok(Some(plan)) => {
                self.surface.apply(event, plan);
                None
            }
            Ok(None) => None,
            Err(why) => Some(why),
        };
        self.calls.note(event);
        if Approvals::touched_by(event) {
            self.approvals.note(event);
        }
        Running::note(&mut self.compaction, event);
        broken
    }

    fn note_calls(&mut self, event: &Event, journal: &mut Journal) {
        if !Calls::touched_by(event) {
            return;
        }
        let before = self.calls.clone();
        self.calls.note(event);
        if journal.calls.is_none() && self.calls != before {
            journal.calls = Some(before);
        }
    }

    /// Takes back what `journal` recorded, newest first.
    pub fn rollback(&mut self, journal: Journal) {
        for undo in journal.surface.into_iter().rev() {
            self.surface.undo(undo);
        }
        if let Some(calls) = journal.calls {
            self.calls = calls;
        }
        if let Some(approvals) = journal.approvals {
            self.approvals = approvals;
        }
        if let Some(Was(compaction)) = journal.compaction {
            self.compaction = compaction;
        }
    }

    /// Whether two states are the same (a checkpoint against a replay).
    pub fn same(&self, other: &Conversation) -> bool {
        self.calls == other.calls
            && self.approvals == other.approvals
            && self.compaction == other.compaction
            && self.surface.len() == other.surface.len()
            && self
                .surface
                .events()
                .zip(other.surface.events())
                .all(|(a, b)| a == b)
    }
}

/// An event for the unit tests of this module's folds: `data` at `seq`, time 1.
#[cfg(test)]
pub(crate) fn ev(seq: u64, ty: &str, data: &str) -> Event {
    Event::from_json(&format!(
        r#"{{"type":"{ty}","seq":{seq},"time":1,"data":{data}}}"#
    ))
    .unwrap()
}

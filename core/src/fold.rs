//! The consumed-work fold (ARCHITECTURE.md#consumed-work-fold): which turn last accounted for pending work,
//! and whether work was dropped unrun after it.

use crate::event::{Event, FoldTag};

/// Result of [`fold_consumed_work`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumedWork<'a> {
    /// The `turn/end` of the last turn that accounted for work.
    pub end: Option<&'a Event>,
    /// Whether pending work was canceled unrun after that turn.
    pub dropped_unrun: bool,
}

/// Folds any log, or an owned suffix of one, in a single pass.
pub fn fold_consumed_work<'a>(events: impl IntoIterator<Item = &'a Event>) -> ConsumedWork<'a> {
    let mut out = ConsumedWork::default();
    // The open turn, if any: (stepped, claimed).
    let mut open: Option<(bool, bool)> = None;
    for event in events {
        match event.fold_tag() {
            FoldTag::TurnStart => open = Some((false, false)),
            FoldTag::StepStart => {
                if let Some((stepped, _)) = open.as_mut() {
                    *stepped = true;
                }
            }
            // A replacement keeps work pending; only a bare cancel drops it.
            FoldTag::Cancel { drops } => out.dropped_unrun |= drops,
            FoldTag::Claim => {
                if let Some((_, claimed)) = open.as_mut() {
                    *claimed = true;
                }
            }
            FoldTag::TurnEnd { completed } => {
                if let Some((stepped, claimed)) = open.take()
                    && (stepped || (claimed && !completed))
                {
                    out.end = Some(event);
                    out.dropped_unrun = false;
                }
            }
            FoldTag::Other => {}
        }
    }
    out
}

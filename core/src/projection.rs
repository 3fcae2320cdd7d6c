//! The queue projection (SPEC §5.2): a consumer's copy of the inbox, kept equal to the
//! live one by applying later `agent/inbox/spliced` events.

use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::inbox::Inbox;
use crate::message::Message;
use crate::splice::Target;

/// The inbox as of the event at `seq` (`None`: before any event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baseline {
    /// The last event this baseline includes.
    pub seq: Option<u64>,
    /// `next-turn` at that point.
    pub next_turn: Vec<Message>,
    /// `next-step` at that point.
    pub next_step: Vec<Message>,
}

impl Baseline {
    /// `{"seq":N|null,"next_turn":[…],"next_step":[…]}`.
    pub fn to_json(&self) -> String {
        let list = |ms: &[Message]| ms.iter().map(|m| m.json()).collect::<Vec<_>>().join(",");
        let seq = self
            .seq
            .map_or_else(|| "null".to_owned(), |s| s.to_string());
        format!(
            r#"{{"seq":{seq},"next_turn":[{}],"next_step":[{}]}}"#,
            list(&self.next_turn),
            list(&self.next_step)
        )
    }
}

/// A standalone inbox that follows a log's splice events.
#[derive(Clone, Debug, Default)]
pub struct QueueProjection {
    seq: Option<u64>,
    inbox: Inbox,
}

impl QueueProjection {
    /// Starts from a baseline (its messages must have unique ids).
    pub fn new(baseline: Baseline) -> Result<QueueProjection> {
        let mut inbox = Inbox::new();
        for (target, messages) in [
            (Target::NextTurn, baseline.next_turn),
            (Target::NextStep, baseline.next_step),
        ] {
            let record = crate::splice::SpliceRecord {
                target,
                start: 0,
                removed_count: 0,
                inserted: messages,
                canceled: false,
            };
            if !record.inserted.is_empty() {
                inbox
                    .apply_checked(&record)
                    .map_err(|e| e.context("baseline"))?;
            }
        }
        Ok(QueueProjection {
            seq: baseline.seq,
            inbox,
        })
    }

    /// Builds the baseline after the events of a log from `replay_from` on (use the
    /// header's `seedLength`), up to and including the event at `upto` (all when
    /// `None`).
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
        replay_from: u64,
        upto: Option<u64>,
    ) -> Result<QueueProjection> {
        let mut projection = QueueProjection::default();
        for event in events {
            if upto.is_some_and(|u| event.seq() > u) {
                break;
            }
            if event.seq() < replay_from {
                projection.seq = Some(event.seq());
                continue;
            }
            projection.apply(event)?;
        }
        Ok(projection)
    }

    /// Applies the next event: a splice changes the lists (validated as in §3.4);
    /// other events only advance the seq. Events must come in order.
    pub fn apply(&mut self, event: &Event) -> Result<()> {
        let expected = self.seq.map_or(0, |s| s + 1);
        if event.seq() < expected {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "event seq {} is already in the projection (at seq {expected})",
                    event.seq()
                ),
            ));
        }
        if let Some(record) = event.splice() {
            self.inbox
                .apply_checked(record)
                .map_err(|e| e.context(format_args!("projection at seq {}", event.seq())))?;
        }
        self.seq = Some(event.seq());
        Ok(())
    }

    /// The projection as a baseline.
    pub fn baseline(&self) -> Baseline {
        Baseline {
            seq: self.seq,
            next_turn: self.inbox.list(Target::NextTurn),
            next_step: self.inbox.list(Target::NextStep),
        }
    }

    /// The projected inbox.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// The last event applied.
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }
}

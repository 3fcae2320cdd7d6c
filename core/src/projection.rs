//! The queue projection (ARCHITECTURE.md#queue-projection): a consumer's copy of the inbox, kept equal to the
//! live one by applying later `agent/inbox/spliced` events.

use crate::error::{Error, ErrorKind, Result, invalid};
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
                moved: false,
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
    ///
    /// Nothing is clamped: an `upto` past the last event, or a `replay_from` past the
    /// end of the events, is `invalid_input` naming the log's length.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
        replay_from: u64,
        upto: Option<u64>,
    ) -> Result<QueueProjection> {
        let mut projection = QueueProjection::default();
        // Every event is counted, so that an error can name the log's length.
        let (mut count, mut last) = (0u64, None);
        for event in events {
            count += 1;
            last = Some(event.seq());
            if upto.is_some_and(|u| event.seq() > u) {
                continue;
            }
            if event.seq() < replay_from {
                projection.seq = Some(event.seq());
                continue;
            }
            projection.apply(event)?;
        }
        let shown = || last.map_or_else(|| "none".to_owned(), |s| s.to_string());
        if let Some(upto) = upto.filter(|&u| last.is_none_or(|l| u > l)) {
            return Err(invalid(format!(
                "upto {upto} is past the end of the log ({count} events, last seq {})",
                shown()
            )));
        }
        let end = last.map_or(0, |l| l + 1);
        if replay_from > end {
            return Err(invalid(format!(
                "replay_from {replay_from} is past the end of the events ({count} events, \
                 last seq {})",
                shown()
            )));
        }
        Ok(projection)
    }

    /// Applies the next event: a splice changes the lists (validated as in ARCHITECTURE.md#inbox-validation);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Envelope;

    fn log(n: u64) -> Vec<Event> {
        (0..n)
            .map(|seq| {
                let data = serde_json::value::RawValue::from_string("{}".to_owned()).unwrap();
                Event::new("host/x", seq, 0, data, Envelope::default()).unwrap()
            })
            .collect()
    }

    #[test]
    fn replay_refuses_upto_and_replay_from_past_the_end_never_clamps() {
        let events = log(3);
        assert_eq!(
            QueueProjection::replay(&events, 0, Some(2)).unwrap().seq(),
            Some(2)
        );
        assert_eq!(
            QueueProjection::replay(&events, 3, None).unwrap().seq(),
            Some(2)
        );
        let err = QueueProjection::replay(&events, 0, Some(3)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "upto 3 is past the end of the log (3 events, last seq 2)"
        );
        let err = QueueProjection::replay(&[], 0, Some(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "upto 0 is past the end of the log (0 events, last seq none)"
        );
        // replay_from is checked against the whole log, whatever upto is.
        for upto in [None, Some(1)] {
            let err = QueueProjection::replay(&events, 4, upto).unwrap_err();
            assert_eq!(
                err.to_string(),
                "replay_from 4 is past the end of the events (3 events, last seq 2)"
            );
        }
        // Events after upto are read (to count them) but not applied.
        assert_eq!(
            QueueProjection::replay(&events, 0, Some(0)).unwrap().seq(),
            Some(0)
        );
    }
}

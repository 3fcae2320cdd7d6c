//! The queue projection (SPEC §5.2): a consumer's copy of the inbox, kept equal to the
//! live one by applying later `agent/inbox/spliced` events.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::Event;
use crate::inbox::Inbox;
use crate::json::{self, MAX_SAFE_INTEGER};
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

/// A baseline as it crosses a boundary: every key required, no other key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineWire<'a> {
    // `deserialize_with` makes the key required: a plain `Option` field may be absent.
    #[serde(deserialize_with = "Option::deserialize")]
    seq: Option<u64>,
    #[serde(borrow)]
    next_turn: Vec<&'a RawValue>,
    #[serde(borrow)]
    next_step: Vec<&'a RawValue>,
}

impl Baseline {
    /// Parses `{"seq":N|null,"next_turn":[…],"next_step":[…]}` strictly, the one parser
    /// of every binding: each key is required and no other is allowed, `seq` is `null`
    /// or a safe integer, and each element of the lists is a valid message (ids unique
    /// across both lists are checked by [`QueueProjection::new`]).
    pub fn from_json(text: &str) -> Result<Baseline> {
        const SHAPE: &str = r#"{"seq":N|null,"next_turn":[…],"next_step":[…]}"#;
        let compacted = json::compact(text).map_err(|e| e.context("baseline"))?;
        // A derived struct also reads a JSON array: only an object is a baseline.
        if !compacted.starts_with('{') {
            return Err(invalid(format!("baseline must be {SHAPE}")));
        }
        let wire: BaselineWire<'_> = json::from_str(&compacted)
            .map_err(|e| invalid(format!("baseline must be {SHAPE}: {e}")))?;
        if let Some(seq) = wire.seq.filter(|&s| s > MAX_SAFE_INTEGER) {
            return Err(invalid(format!("baseline seq {seq} is larger than 2^53-1")));
        }
        let messages = |list: Vec<&RawValue>, key: &str| {
            list.into_iter()
                .enumerate()
                .map(|(i, raw)| {
                    Message::from_json(raw.get())
                        .map_err(|e| e.context(format_args!("baseline {key}[{i}]")))
                })
                .collect::<Result<Vec<Message>>>()
        };
        Ok(Baseline {
            seq: wire.seq,
            next_turn: messages(wire.next_turn, "next_turn")?,
            next_step: messages(wire.next_step, "next_step")?,
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_round_trips_through_its_json() {
        let text = r#"{"seq":3,"next_turn":[{"id":"a","n":1}],"next_step":[{"id":"b"}]}"#;
        let baseline = Baseline::from_json(text).unwrap();
        assert_eq!(baseline.seq, Some(3));
        assert_eq!(baseline.to_json(), text);
        let empty = r#"{"seq":null,"next_turn":[],"next_step":[]}"#;
        assert_eq!(Baseline::from_json(empty).unwrap().to_json(), empty);
        // Whitespace and key order do not matter.
        let spaced = r#"{ "next_step": [], "seq": null, "next_turn": [] }"#;
        assert_eq!(Baseline::from_json(spaced).unwrap().to_json(), empty);
    }

    #[test]
    fn a_baseline_is_refused_unless_every_key_is_there_and_valid() {
        for (bad, needle) in [
            (r#"{"next_turn":[],"next_step":[]}"#, "missing field `seq`"),
            (r#"{"seq":0,"next_step":[]}"#, "missing field `next_turn`"),
            (r#"{"seq":0,"next_turn":[]}"#, "missing field `next_step`"),
            (
                r#"{"seq":0,"next_turn":[],"next_step":[],"x":1}"#,
                "unknown field `x`",
            ),
            (
                r#"{"seq":9007199254740992,"next_turn":[],"next_step":[]}"#,
                "larger than 2^53-1",
            ),
            (
                r#"{"seq":-1,"next_turn":[],"next_step":[]}"#,
                "baseline must be",
            ),
            (
                r#"{"seq":1.0,"next_turn":[],"next_step":[]}"#,
                "baseline must be",
            ),
            (
                r#"{"seq":"1","next_turn":[],"next_step":[]}"#,
                "baseline must be",
            ),
            (
                r#"{"seq":0,"next_turn":{},"next_step":[]}"#,
                "baseline must be",
            ),
            (
                r#"{"seq":0,"next_turn":[],"next_step":[{"x":1}]}"#,
                "baseline next_step[0]: message",
            ),
            (r#"[0,[],[]]"#, "baseline must be"),
            (r#"{"seq":0,"#, "baseline must be"),
        ] {
            let err = Baseline::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let deep = format!(
            r#"{{"seq":0,"next_turn":[{{"id":"a","x":{}1{}}}],"next_step":[]}}"#,
            "[".repeat(600),
            "]".repeat(600)
        );
        assert_eq!(
            Baseline::from_json(&deep).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }
}

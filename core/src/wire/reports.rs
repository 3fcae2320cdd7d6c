//! What reading a log gives the bindings: the open and verify reports, baselines
//! (printed and parsed) and the consumed-work fold.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{FromJson, Object, ToJson, messages};
use crate::conversation::SurfaceView;
use crate::error::{Result, invalid};
use crate::event::Event;
use crate::fold::ConsumedWork;
use crate::json;
use crate::message::Message;
use crate::projection::Baseline;
use crate::session::{OpenReport, ParkedTurn, Peek, VerifyReport};
use crate::txn::Resumed;

impl ToJson for OpenReport {
    /// `{"tornBytes":N,"repairedTurn":N|null,"repairedCompaction":S|null}`.
    fn to_json(&self) -> String {
        Object::new()
            .num("tornBytes", self.torn_bytes)
            .opt("repairedTurn", self.repaired_turn)
            .raw(
                "repairedCompaction",
                &opt_str(self.repaired_compaction.as_deref()),
            )
            .end()
    }
}

impl ToJson for VerifyReport {
    /// `{"header":{…},"events":N,"tornBytes":N,"openTurn":N|null,"openStep":N|null,
    /// "parked":bool,"needsRepair":bool,"nextTurn":N,"nextStep":N,"pendingToolCalls":N,
    /// "compaction":S|null,"offSurface":[{"seq","why"}…],"olderShapes":[{"seq","why"}…]}`.
    fn to_json(&self) -> String {
        Object::new()
            .raw("header", &self.header.to_json())
            .num("events", self.events)
            .num("tornBytes", self.torn_bytes)
            .opt("openTurn", self.open_turn)
            .opt("openStep", self.open_step)
            .num("parked", self.parked)
            .num("needsRepair", self.needs_repair())
            .num("nextTurn", self.next_turn)
            .num("nextStep", self.next_step)
            .num("pendingToolCalls", self.pending_tool_calls)
            .raw("compaction", &opt_str(self.compaction.as_deref()))
            .raw("offSurface", &findings(&self.off_surface))
            .raw("olderShapes", &findings(&self.older_shapes))
            .end()
    }
}

/// A JSON string, or `null`.
fn opt_str(text: Option<&str>) -> String {
    text.map_or_else(|| "null".to_owned(), json::quote)
}

/// `[{"seq":N,"why":S}…]`.
fn findings(list: &[(u64, String)]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|(seq, why)| Object::new().num("seq", seq).str("why", why).end())
        .collect();
    format!("[{}]", items.join(","))
}

impl ToJson for SurfaceView {
    /// `{"nodes":[seq…],"messages":[message…]}` (ARCHITECTURE.md#the-surface).
    fn to_json(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(u64::to_string).collect();
        Object::new()
            .raw("nodes", &format!("[{}]", nodes.join(",")))
            .raw("messages", &format!("[{}]", self.messages.join(",")))
            .end()
    }
}

impl ToJson for Peek {
    /// `{"header":{…},"events":N,"tornBytes":N,"openTurn":N|null,"openStep":N|null,
    /// "baseline":{…},"approvals":[asked…],"parked":{…}|null}`.
    fn to_json(&self) -> String {
        Object::new()
            .raw("header", &self.header.to_json())
            .num("events", self.events)
            .num("tornBytes", self.torn_bytes)
            .opt("openTurn", self.open_turn)
            .opt("openStep", self.open_step)
            .raw("baseline", &self.baseline.to_json())
            .raw("approvals", &format!("[{}]", self.approvals.join(",")))
            .raw("parked", &parked(self.parked.as_ref()))
            .end()
    }
}

/// `{"turn":N,"approvals":[id…],"ready":bool}` or `null`.
pub fn parked(parked: Option<&ParkedTurn>) -> String {
    parked.map_or_else(
        || "null".to_owned(),
        |p| {
            let ids: Vec<String> = p.approvals.iter().map(|id| json::quote(id)).collect();
            Object::new()
                .num("turn", p.turn)
                .raw("approvals", &format!("[{}]", ids.join(",")))
                .num("ready", p.ready)
                .end()
        },
    )
}

impl ToJson for Resumed {
    /// `{"turn":N,"parked":{turn/parked data},"decisions":[{"id","outcome"}…]}`.
    fn to_json(&self) -> String {
        let decisions: Vec<String> = self
            .decisions
            .iter()
            .map(|(id, outcome)| crate::conversation::decided_data(id, *outcome))
            .collect();
        Object::new()
            .num("turn", self.turn)
            .raw("parked", &self.parked)
            .raw("decisions", &format!("[{}]", decisions.join(",")))
            .end()
    }
}

impl ToJson for Baseline {
    /// `{"seq":N|null,"next_turn":[…],"next_step":[…]}`.
    fn to_json(&self) -> String {
        Object::new()
            .opt("seq", self.seq)
            .raw("next_turn", &messages(&self.next_turn))
            .raw("next_step", &messages(&self.next_step))
            .end()
    }
}

impl ToJson for ConsumedWork<'_> {
    /// `{"end":<turn/end event>|null,"droppedUnrun":bool}`.
    fn to_json(&self) -> String {
        let end = self.end.map_or_else(|| "null".to_owned(), Event::to_json);
        Object::new()
            .raw("end", &end)
            .num("droppedUnrun", self.dropped_unrun)
            .end()
    }
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

impl FromJson for Baseline {
    /// Parses `{"seq":N|null,"next_turn":[…],"next_step":[…]}` strictly: each key is
    /// required and no other is allowed, `seq` is `null` or a safe integer, and each
    /// element of the lists is a valid message (ids unique across both lists are
    /// checked by [`crate::QueueProjection::new`]).
    fn from_json(text: &str) -> Result<Baseline> {
        const SHAPE: &str = r#"{"seq":N|null,"next_turn":[…],"next_step":[…]}"#;
        let compacted = json::compact(text).map_err(|e| e.context("baseline"))?;
        // A derived struct also reads a JSON array: only an object is a baseline.
        if !compacted.starts_with('{') {
            return Err(invalid(format!("baseline must be {SHAPE}")));
        }
        let wire: BaselineWire<'_> = json::from_str(&compacted)
            .map_err(|e| invalid(format!("baseline must be {SHAPE}: {e}")))?;
        if let Some(seq) = wire.seq.filter(|&s| s > json::MAX_SAFE_INTEGER) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

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
            (r"[0,[],[]]", "baseline must be"),
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

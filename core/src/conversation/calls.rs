//! Tool calls across a crash (SPEC §15.4): which calls of the open step still wait for
//! their result, and the `tool/result` that answers each one when the turn is found
//! interrupted.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{Body, Event};
use crate::json;

use super::{ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, shape};

/// One call the model made that has no result yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The call's id (its `tool-call` block's `id`).
    pub id: String,
    /// The turn and step of the `assistant/message` that made it.
    pub turn: u64,
    pub step: u64,
    /// The seq of its `tool/call` (the tool was dispatched, so it may have run).
    pub dispatched: Option<u64>,
}

/// The calls waiting for their result, in the order they were made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Calls {
    pending: Vec<Pending>,
    /// `tool/call` seqs by call id since the last reset, for calls whose
    /// `assistant/message` comes after their `tool/call`.
    dispatched: Vec<(String, u64)>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    message: &'a RawValue,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow)]
    content: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Block<'a> {
    #[serde(borrow, rename = "type")]
    pub ty: Cow<'a, str>,
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub tool_call_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallId<'a> {
    #[serde(borrow)]
    call_id: Cow<'a, str>,
}

/// The blocks of `data.message.content`, whatever else `data` holds.
pub(super) fn blocks(data: &str) -> Vec<Block<'_>> {
    let Some(message) = json::from_str::<Message<'_>>(data).ok() else {
        return Vec::new();
    };
    let Some(content) = json::from_str::<Content<'_>>(message.message.get()).ok() else {
        return Vec::new();
    };
    content
        .content
        .iter()
        .filter_map(|b| json::from_str::<Block<'_>>(b.get()).ok())
        .collect()
}

impl Calls {
    /// The calls still waiting, in the order they were made.
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// The state as a checkpoint keeps it.
    pub fn from_parts(pending: Vec<Pending>, dispatched: Vec<(String, u64)>) -> Calls {
        Calls {
            pending,
            dispatched,
        }
    }

    /// The `tool/call` seqs seen since the last reset, by call id.
    pub fn dispatched(&self) -> &[(String, u64)] {
        &self.dispatched
    }

    /// Whether [`Calls::note`] may change anything for `event` (by its type alone).
    pub fn touched_by(event: &Event) -> bool {
        matches!(
            event.body(),
            Body::TurnStart { .. } | Body::TurnEnd { .. } | Body::StepEnd { .. }
        ) || matches!(event.ty(), ASSISTANT_MESSAGE | TOOL_CALL | TOOL_RESULT)
    }

    /// Records `event`: a call is pending from its `tool-call` block in an
    /// `assistant/message` until a `tool/result` with its id; `turn/*` and `step/end`
    /// reset the set. Stored events of older shapes change nothing.
    pub fn note(&mut self, event: &Event) {
        match (event.body(), event.ty()) {
            (Body::TurnStart { .. } | Body::TurnEnd { .. } | Body::StepEnd { .. }, _) => {
                self.pending.clear();
                self.dispatched.clear();
            }
            (_, ASSISTANT_MESSAGE) => {
                let data = event.data();
                let (turn, step) = shape::place_of(data).unwrap_or((0, 0));
                for block in blocks(data) {
                    let (true, Some(id)) = (block.ty == "tool-call", block.id) else {
                        continue;
                    };
                    if self.pending.iter().any(|p| p.id == id) {
                        continue;
                    }
                    let dispatched = self
                        .dispatched
                        .iter()
                        .find(|(d, _)| *d == id)
                        .map(|&(_, seq)| seq);
                    self.pending.push(Pending {
                        id: id.into_owned(),
                        turn,
                        step,
                        dispatched,
                    });
                }
            }
            (_, TOOL_CALL) => {
                let Ok(call) = json::from_str::<CallId<'_>>(event.data()) else {
                    return;
                };
                if let Some(p) = self.pending.iter_mut().find(|p| p.id == call.call_id) {
                    p.dispatched.get_or_insert(event.seq());
                }
                if !self.dispatched.iter().any(|(d, _)| *d == call.call_id) {
                    self.dispatched
                        .push((call.call_id.into_owned(), event.seq()));
                }
            }
            (_, TOOL_RESULT) => {
                for block in blocks(event.data()) {
                    if let (true, Some(id)) = (block.ty == "tool-result", block.tool_call_id) {
                        self.pending.retain(|p| p.id != id);
                    }
                }
            }
            _ => {}
        }
    }
}

/// What the model is told of a call answered by repair whose tool may have run.
const OUTCOME_UNKNOWN: &str = "This tool call was interrupted before its result was recorded: the tool may have run, and its outcome is unknown. Retry it only if it is read-only or idempotent; otherwise verify its effects first.";

/// What the model is told of a call answered by repair whose tool never started.
const NOT_STARTED: &str =
    "This tool call was interrupted before the tool started. Retry it if it is still needed.";

/// The data and `sourceEventSeqs` of the `tool/result` that answers `call` at `seq`
/// (SPEC §15.4).
pub(crate) fn interrupted_result(call: &Pending, seq: u64) -> (String, Option<Vec<u64>>) {
    let (name, code, text) = match call.dispatched {
        Some(_) => (
            "ToolOutcomeUnknownError",
            "TOOL_OUTCOME_UNKNOWN",
            OUTCOME_UNKNOWN,
        ),
        None => ("ToolNotStartedError", "TOOL_NOT_STARTED", NOT_STARTED),
    };
    let message_id = format!("interrupted-tool-result-{}-{seq}", call.id);
    let data = error_result(call, &message_id, name, code, text);
    (data, call.dispatched.map(|seq| vec![seq]))
}

/// The data of a `tool/result` that answers `call` with an error the library names
/// (`name`, `code`) and `text` telling the model why, in the reference's shape.
pub(crate) fn error_result(
    call: &Pending,
    message_id: &str,
    name: &str,
    code: &str,
    text: &str,
) -> String {
    let id = json::quote(&call.id);
    format!(
        r#"{{"turn":{},"step":{},"message":{{"id":{},"role":"user","content":[{{"type":"tool-result","toolCallId":{id},"content":[{{"type":"text","text":{}}}],"isError":true}}],"source":{{"kind":"tool","callId":{id}}}}},"error":{{"name":"{name}","code":"{code}"}}}}"#,
        call.turn,
        call.step,
        json::quote(message_id),
        json::quote(text),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ev;

    fn assistant(seq: u64, ids: &[&str]) -> Event {
        let blocks: Vec<String> = ids
            .iter()
            .map(|id| {
                format!(r#"{{"type":"tool-call","id":"{id}","name":"t","arguments":"{{}}"}}"#)
            })
            .collect();
        ev(
            seq,
            ASSISTANT_MESSAGE,
            &format!(
                r#"{{"turn":1,"step":2,"message":{{"id":"a","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#,
                blocks.join(",")
            ),
        )
    }

    fn result(seq: u64, id: &str) -> Event {
        ev(
            seq,
            TOOL_RESULT,
            &format!(
                r#"{{"turn":1,"step":2,"message":{{"id":"r","role":"user","content":[{{"type":"tool-result","toolCallId":"{id}","content":[]}}],"source":{{"kind":"tool","callId":"{id}"}}}}}}"#
            ),
        )
    }

    #[test]
    fn calls_wait_from_their_block_to_their_result() {
        let mut calls = Calls::default();
        for e in [
            assistant(0, &["a", "b", "c"]),
            ev(
                1,
                TOOL_CALL,
                r#"{"turn":1,"step":2,"callId":"a","name":"t","arguments":"{}"}"#,
            ),
            result(2, "a"),
            ev(
                3,
                TOOL_CALL,
                r#"{"turn":1,"step":2,"callId":"b","name":"t","arguments":"{}"}"#,
            ),
        ] {
            calls.note(&e);
        }
        let pending: Vec<(&str, Option<u64>)> = calls
            .pending()
            .iter()
            .map(|p| (p.id.as_str(), p.dispatched))
            .collect();
        assert_eq!(pending, [("b", Some(3)), ("c", None)]);
        calls.note(&ev(4, "step/end", r#"{"turn":1,"step":2}"#));
        assert!(calls.pending().is_empty());
    }

    #[test]
    fn a_tool_call_before_its_block_still_counts() {
        let mut calls = Calls::default();
        calls.note(&ev(
            0,
            TOOL_CALL,
            r#"{"turn":1,"step":1,"callId":"x","name":"t","arguments":""}"#,
        ));
        calls.note(&assistant(1, &["x"]));
        assert_eq!(calls.pending()[0].dispatched, Some(0));
    }

    #[test]
    fn the_answers_follow_the_reference_shape() {
        let call = Pending {
            id: "c\"1".into(),
            turn: 3,
            step: 2,
            dispatched: Some(7),
        };
        let (data, sources) = interrupted_result(&call, 9);
        assert!(data.starts_with(r#"{"turn":3,"step":2,"message":{"id":"interrupted-tool-result-c\"1-9","role":"user","content":[{"type":"tool-result","toolCallId":"c\"1","content":[{"type":"text","text":"#), "{data}");
        assert!(data.ends_with(r#""isError":true}],"source":{"kind":"tool","callId":"c\"1"}},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}"#), "{data}");
        assert_eq!(sources, Some(vec![7]));
        shape::check(TOOL_RESULT, &data).unwrap();
        let (data, sources) = interrupted_result(
            &Pending {
                dispatched: None,
                ..call
            },
            9,
        );
        assert!(data.contains("TOOL_NOT_STARTED") && sources.is_none());
        shape::check(TOOL_RESULT, &data).unwrap();
    }
}

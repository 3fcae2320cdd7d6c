//! The model-visible surface (ARCHITECTURE.md#the-surface): the fold of the surface ops
//! of `user/message`, `assistant/message` and `tool/result` events into the ordered
//! list of events the model sees, and the rules every op must pass (SPEC §15.2).
//!
//! A change is planned against the surface before it is applied and applied exactly as
//! planned ([`Surface::plan`], [`Surface::apply`]): one computation decides and does.
//! Nodes sit in an order-statistics tree with an index by seq, so an append or a
//! replace costs O(log n + k) for the k nodes it shadows, whatever the surface holds.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::event::Event;
use crate::json;
use crate::queue::{Handle, Queue};

use super::{ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE};

/// What a surface op does, once checked against the surface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Push the event at the end.
    Append,
    /// Put the event in place of the nodes at positions `from..=to`.
    Replace { from: usize, to: usize },
}

/// How to take an applied plan back (a transaction whose write failed).
#[derive(Debug)]
pub(crate) enum Undo {
    Appended,
    Replaced { at: usize, shadowed: Vec<Event> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceOp {
    start: u64,
    end: u64,
    #[allow(dead_code)]
    op: String,
}

/// The model-visible surface: events in the order the model sees them.
#[derive(Clone, Default)]
pub(crate) struct Surface {
    nodes: Queue<Event>,
    index: HashMap<u64, Handle>,
}

impl Surface {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes, in model-visible order.
    pub fn events(&self) -> impl Iterator<Item = &Event> + '_ {
        self.nodes.iter()
    }

    /// The seqs of the nodes, in model-visible order.
    pub fn seqs(&self) -> Vec<u64> {
        self.nodes.iter().map(Event::seq).collect()
    }

    /// A surface of `events` in this order (a checkpoint read back): each appended.
    pub fn from_events(events: Vec<Event>) -> Surface {
        let mut surface = Surface::default();
        for event in events {
            surface.apply(&event, Plan::Append);
        }
        surface
    }

    /// Checks `event`'s surface op against the surface (SPEC §15.2): `Ok(None)` when it
    /// has none (it stays off the surface), the plan when it passes, the rule it breaks
    /// (with the seqs) when it does not.
    pub fn plan(&self, event: &Event) -> Result<Option<Plan>, String> {
        let ty = event.ty();
        if !matches!(ty, USER_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT) {
            return Ok(None);
        }
        let envelope = event.envelope();
        let Some(op) = &envelope.surface_op else {
            return Ok(None);
        };
        let seq = event.seq();
        if let Some(sources) = &envelope.source_event_seqs {
            let distinct: HashSet<u64> = sources.iter().copied().collect();
            if distinct.len() != sources.len() {
                return Err(format!(
                    "{ty} seq {seq}: sourceEventSeqs {sources:?} names a seq twice"
                ));
            }
            if sources.is_empty() && ty != ASSISTANT_MESSAGE {
                return Err(format!(
                    "{ty} seq {seq}: sourceEventSeqs is empty (only assistant/message may leave it empty)"
                ));
            }
        }
        if op.get() == "\"append\"" {
            return Ok(Some(Plan::Append));
        }
        let op: ReplaceOp = json::from_str(op.get()).map_err(|e| format!("{ty} seq {seq}: {e}"))?;
        let (start, end) = (op.start, op.end);
        let position = |at: u64| {
            self.index
                .get(&at)
                .map(|&h| self.nodes.position(h))
                .ok_or_else(|| {
                    format!(
                        "{ty} seq {seq} replaces {start}..{end}, but seq {at} is not on the surface"
                    )
                })
        };
        let (from, to) = (position(start)?, position(end)?);
        if from > to {
            return Err(format!(
                "{ty} seq {seq} replaces {start}..{end}, but seq {start} comes after seq {end} on the surface"
            ));
        }
        let shadowed: Vec<&Event> = (from..=to).filter_map(|p| self.nodes.get(p)).collect();
        // A set: a compaction's summary cites every node it shadows, thousands of them.
        let sources: HashSet<u64> = envelope
            .source_event_seqs
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .copied()
            .collect();
        let uncited: Vec<u64> = shadowed
            .iter()
            .map(|e| e.seq())
            .filter(|s| !sources.contains(s))
            .collect();
        if !uncited.is_empty() {
            return Err(format!(
                "{ty} seq {seq} replaces {start}..{end} but its sourceEventSeqs do not cite {uncited:?}"
            ));
        }
        if ty == TOOL_RESULT {
            let [old] = shadowed[..] else {
                return Err(format!(
                    "tool/result seq {seq} replaces {} nodes ({start}..{end}); a tool/result replaces exactly one tool/result",
                    shadowed.len()
                ));
            };
            if old.ty() != TOOL_RESULT {
                return Err(format!(
                    "tool/result seq {seq} replaces seq {} of type {}, not a tool/result",
                    old.seq(),
                    old.ty()
                ));
            }
            if !same_but_content(old.data(), event.data()) {
                return Err(format!(
                    "tool/result seq {seq} differs from the tool/result it replaces (seq {}) in more than the tool-result block's content",
                    old.seq()
                ));
            }
        }
        Ok(Some(Plan::Replace { from, to }))
    }

    /// Applies a plan [`Surface::plan`] made for `event` against this surface as it is.
    pub fn apply(&mut self, event: &Event, plan: Plan) -> Undo {
        let (at, delete, undo) = match plan {
            Plan::Append => (self.nodes.len(), 0, None),
            Plan::Replace { from, to } => (from, to - from + 1, Some(from)),
        };
        let index = &mut self.index;
        let mut added = Vec::with_capacity(1);
        let shadowed = self
            .nodes
            .splice(at, delete, [event.clone()], |e, h| added.push((e.seq(), h)));
        for e in &shadowed {
            index.remove(&e.seq());
        }
        index.extend(added);
        match undo {
            None => Undo::Appended,
            Some(at) => Undo::Replaced { at, shadowed },
        }
    }

    /// Takes back the last [`Surface::apply`], whose undo this is.
    pub fn undo(&mut self, undo: Undo) {
        let (at, shadowed) = match undo {
            Undo::Appended => (self.nodes.len() - 1, Vec::new()),
            Undo::Replaced { at, shadowed } => (at, shadowed),
        };
        let index = &mut self.index;
        let mut added = Vec::with_capacity(shadowed.len());
        let removed = self
            .nodes
            .splice(at, 1, shadowed, |e, h| added.push((e.seq(), h)));
        for e in &removed {
            index.remove(&e.seq());
        }
        index.extend(added);
    }

    /// The node of `seq`, if it is on the surface.
    pub fn node(&self, seq: u64) -> Option<&Event> {
        let &handle = self.index.get(&seq)?;
        self.nodes.get(self.nodes.position(handle))
    }

    /// The positions of the nodes of seqs `start` and `end`, `start` at or before `end`
    /// (a compaction's range); the reason they are not, naming the seqs.
    pub fn span(&self, start: u64, end: u64) -> Result<(usize, usize), String> {
        let position = |at: u64| {
            self.index
                .get(&at)
                .map(|&h| self.nodes.position(h))
                .ok_or_else(|| {
                    format!("the range {start}..{end} is not on the surface: seq {at} is not")
                })
        };
        let (from, to) = (position(start)?, position(end)?);
        if from > to {
            return Err(format!(
                "the range {start}..{end} is not in order: seq {start} comes after seq {end} on the surface"
            ));
        }
        Ok((from, to))
    }

    /// The nodes at positions `from..=to`, in order.
    pub fn slice(&self, from: usize, to: usize) -> impl Iterator<Item = &Event> + Clone + '_ {
        (from..=to).filter_map(|p| self.nodes.get(p))
    }

    /// The nodes outside positions `from..=to`, in order.
    pub fn outside(&self, from: usize, to: usize) -> impl Iterator<Item = &Event> + '_ {
        (0..from)
            .chain(to + 1..self.nodes.len())
            .filter_map(|p| self.nodes.get(p))
    }

    /// The messages the model sees (SPEC §15.2), as JSON text: a `user/message`'s data,
    /// an `assistant/message`'s or a `tool/result`'s `data.message` (an
    /// `assistant/message` with empty content is skipped, and so is a stored event of
    /// an older shape with no message to project).
    pub fn messages(&self) -> Vec<String> {
        self.nodes.iter().filter_map(project).collect()
    }
}

#[derive(Deserialize)]
struct WithMessage<'a> {
    #[serde(borrow)]
    message: &'a RawValue,
}

#[derive(Deserialize)]
struct WithContent<'a> {
    #[serde(borrow)]
    content: Vec<&'a RawValue>,
}

/// What the model sees of one surface node, if anything.
pub(crate) fn project(event: &Event) -> Option<String> {
    let data = event.data();
    match event.ty() {
        USER_MESSAGE => Some(data.to_owned()),
        ASSISTANT_MESSAGE => {
            let m = json::from_str::<WithMessage<'_>>(data).ok()?.message;
            let content = json::from_str::<WithContent<'_>>(m.get()).ok()?.content;
            (!content.is_empty()).then(|| m.get().to_owned())
        }
        TOOL_RESULT => {
            let m = json::from_str::<WithMessage<'_>>(data).ok()?.message;
            m.get().starts_with('{').then(|| m.get().to_owned())
        }
        _ => None,
    }
}

/// Whether two `tool/result` data are equal in everything but the content inside
/// their `tool-result` blocks (SPEC §15.2).
fn same_but_content(a: &str, b: &str) -> bool {
    let strip = |text: &str| -> Option<Value> {
        let mut v: Value = json::from_str(text).ok()?;
        if let Some(blocks) = v
            .get_mut("message")
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        {
            for block in blocks {
                if block.get("type").and_then(Value::as_str) == Some("tool-result")
                    && let Some(obj) = block.as_object_mut()
                {
                    obj.remove("content");
                }
            }
        }
        Some(v)
    };
    matches!((strip(a), strip(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, ty: &str, data: &str, op: Option<&str>, sources: Option<&[u64]>) -> Event {
        let mut text = format!(r#"{{"type":"{ty}","seq":{seq},"time":1,"data":{data}"#);
        if let Some(op) = op {
            text.push_str(&format!(r#","surfaceOp":{op}"#));
        }
        if let Some(s) = sources {
            text.push_str(&format!(r#","sourceEventSeqs":{s:?}"#));
        }
        text.push('}');
        Event::from_json(&text).unwrap()
    }

    fn user(seq: u64) -> Event {
        ev(seq, USER_MESSAGE, r#"{"id":"u"}"#, Some("\"append\""), None)
    }

    fn result(seq: u64, text: &str) -> Event {
        ev(
            seq,
            TOOL_RESULT,
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"r","role":"user","content":[{{"type":"tool-result","toolCallId":"c","content":[{{"type":"text","text":"{text}"}}]}}],"source":{{"kind":"tool","callId":"c"}}}}}}"#
            ),
            Some("\"append\""),
            None,
        )
    }

    fn fold(events: &[Event]) -> (Surface, Vec<String>) {
        let mut s = Surface::default();
        let mut refused = Vec::new();
        for e in events {
            match s.plan(e) {
                Ok(Some(plan)) => {
                    s.apply(e, plan);
                }
                Ok(None) => {}
                Err(why) => refused.push(why),
            }
        }
        (s, refused)
    }

    #[test]
    fn appends_and_replaces_by_position() {
        let events = [
            user(0),
            user(1),
            user(2),
            ev(
                3,
                USER_MESSAGE,
                r#"{"id":"s"}"#,
                Some(r#"{"op":"replace","start":0,"end":1}"#),
                Some(&[0, 1]),
            ),
            ev(4, "host/x", "{}", None, None),
            user(5),
        ];
        let (s, refused) = fold(&events);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(s.seqs(), [3, 2, 5]);
        // Replaced by position: 3 now stands before 2, so 3..2 is in order and 2..3 is not.
        let later = ev(
            6,
            USER_MESSAGE,
            "{}",
            Some(r#"{"op":"replace","start":2,"end":3}"#),
            Some(&[2, 3]),
        );
        assert!(s.plan(&later).unwrap_err().contains("comes after"));
        let ok = ev(
            6,
            USER_MESSAGE,
            "{}",
            Some(r#"{"op":"replace","start":3,"end":2}"#),
            Some(&[2, 3]),
        );
        assert_eq!(s.plan(&ok), Ok(Some(Plan::Replace { from: 0, to: 1 })));
    }

    #[test]
    fn every_rule_is_named_with_its_seqs() {
        let base = [user(0), user(1), result(2, "long")];
        let (s, _) = fold(&base);
        for (event, needle) in [
            (
                ev(
                    3,
                    USER_MESSAGE,
                    "{}",
                    Some(r#"{"op":"replace","start":7,"end":1}"#),
                    Some(&[1]),
                ),
                "seq 7 is not on the surface",
            ),
            (
                ev(
                    3,
                    USER_MESSAGE,
                    "{}",
                    Some(r#"{"op":"replace","start":0,"end":1}"#),
                    Some(&[0]),
                ),
                "do not cite [1]",
            ),
            (
                ev(3, USER_MESSAGE, "{}", Some("\"append\""), Some(&[])),
                "sourceEventSeqs is empty",
            ),
            (
                ev(3, USER_MESSAGE, "{}", Some("\"append\""), Some(&[1, 1])),
                "names a seq twice",
            ),
            (
                ev(
                    3,
                    TOOL_RESULT,
                    r#"{"turn":1}"#,
                    Some(r#"{"op":"replace","start":1,"end":2}"#),
                    Some(&[1, 2]),
                ),
                "replaces exactly one tool/result",
            ),
            (
                ev(
                    3,
                    TOOL_RESULT,
                    r#"{"turn":1}"#,
                    Some(r#"{"op":"replace","start":1,"end":1}"#),
                    Some(&[1]),
                ),
                "not a tool/result",
            ),
            (
                ev(
                    3,
                    TOOL_RESULT,
                    r#"{"turn":2}"#,
                    Some(r#"{"op":"replace","start":2,"end":2}"#),
                    Some(&[2]),
                ),
                "in more than the tool-result block's content",
            ),
        ] {
            let why = s.plan(&event).unwrap_err();
            assert!(why.contains(needle) && why.contains("seq 3"), "{why}");
        }
        // Only the content inside the tool-result block may change.
        let mut shorter = result(3, "short");
        shorter = ev(
            3,
            TOOL_RESULT,
            shorter.data(),
            Some(r#"{"op":"replace","start":2,"end":2}"#),
            Some(&[2]),
        );
        assert!(s.plan(&shorter).unwrap().is_some());
        // An empty sourceEventSeqs is fine on an assistant/message.
        let a = ev(3, ASSISTANT_MESSAGE, "{}", Some("\"append\""), Some(&[]));
        assert_eq!(s.plan(&a), Ok(Some(Plan::Append)));
    }

    #[test]
    fn undo_restores_the_surface_and_its_index() {
        let (mut s, _) = fold(&[user(0), user(1), user(2)]);
        let r = ev(
            3,
            USER_MESSAGE,
            "{}",
            Some(r#"{"op":"replace","start":1,"end":2}"#),
            Some(&[1, 2]),
        );
        let plan = s.plan(&r).unwrap().unwrap();
        let undo = s.apply(&r, plan);
        assert_eq!(s.seqs(), [0, 3]);
        s.undo(undo);
        assert_eq!(s.seqs(), [0, 1, 2]);
        let a = user(4);
        let undo = s.apply(&a, Plan::Append);
        s.undo(undo);
        assert_eq!(s.seqs(), [0, 1, 2]);
        // The index still finds every node where it is.
        let again = ev(
            5,
            USER_MESSAGE,
            "{}",
            Some(r#"{"op":"replace","start":2,"end":2}"#),
            Some(&[2]),
        );
        assert_eq!(s.plan(&again), Ok(Some(Plan::Replace { from: 2, to: 2 })));
    }

    #[test]
    fn messages_project_each_node() {
        let events = [
            user(0),
            ev(
                1,
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[]}}"#,
                Some("\"append\""),
                None,
            ),
            ev(
                2,
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"b","content":[{"type":"text","text":"x"}]}}"#,
                Some("\"append\""),
                None,
            ),
            ev(
                3,
                ASSISTANT_MESSAGE,
                r#"{"text":"older shape"}"#,
                Some("\"append\""),
                None,
            ),
            result(4, "ok"),
        ];
        let (s, _) = fold(&events);
        assert_eq!(s.len(), 5);
        let m = s.messages();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], r#"{"id":"u"}"#);
        assert!(m[1].contains(r#""id":"b""#) && m[2].contains(r#""id":"r""#));
    }
}

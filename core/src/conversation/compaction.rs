//! Compaction (ARCHITECTURE.md#compaction, SPEC §16): which compaction is running (from
//! its `compaction/start` to its `compaction/end`), the checks a range of the surface
//! must pass before one starts, the data of the `compaction/*` events and of the
//! summary's `user/message`, the reference's token estimate, and how a prune shortens
//! a tool result's text. Pure: no I/O, part of replay.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::event::{ASSISTANT_MESSAGE, COMPACTION_END, COMPACTION_START, Event, TOOL_RESULT};
use crate::json;

use super::calls::blocks;

/// A tool result's text longer than this many code points is pruned (SPEC §16).
pub const PRUNE_OVER: usize = 8_192;
/// How many code points a prune keeps from the start of the text.
pub const PRUNE_HEAD: usize = 4_096;
/// How many code points a prune keeps from the end of the text.
pub const PRUNE_TAIL: usize = 1_024;

/// The compaction running: from its `compaction/start` to its `compaction/end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Running {
    /// Its `compactionId` (empty when a stored start names none).
    pub id: String,
    /// The turn that owns it, `None` for a manual one.
    pub turn: Option<u64>,
    /// The seq of its `compaction/start`.
    pub seq: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartData {
    #[serde(default)]
    compaction_id: Option<String>,
    #[serde(default)]
    turn: Option<u64>,
}

impl Running {
    /// Whether [`Running::note`] may change anything for `event` (by its type alone).
    pub fn touched_by(event: &Event) -> bool {
        matches!(event.ty(), COMPACTION_START | COMPACTION_END)
    }

    /// Records `event` into `running`. Lenient, as a stored log is read as it is: any
    /// `compaction/start` starts one (data it cannot read gives an empty id and no
    /// turn), any `compaction/end` ends the one running.
    pub fn note(running: &mut Option<Running>, event: &Event) {
        match event.ty() {
            COMPACTION_START => {
                let d = json::from_str::<StartData>(event.data()).ok();
                *running = Some(Running {
                    id: d
                        .as_ref()
                        .and_then(|d| d.compaction_id.clone())
                        .unwrap_or_default(),
                    turn: d.and_then(|d| d.turn),
                    seq: event.seq(),
                });
            }
            COMPACTION_END => *running = None,
            _ => {}
        }
    }
}

/// `{"compactionId","turn":N|null}`: the data of `compaction/start`.
pub(crate) fn start_data(id: &str, turn: Option<u64>) -> String {
    let mut out = String::from("{\"compactionId\":");
    json::write_string(&mut out, id);
    out.push_str(",\"turn\":");
    out.push_str(&turn.map_or("null".to_owned(), |t| t.to_string()));
    out.push('}');
    out
}

/// `{"compactionId","turn":N|null,"error"?:S}`: the data of `compaction/end`.
pub(crate) fn end_data(running: &Running, error: Option<&str>) -> String {
    let mut out = start_data(&running.id, running.turn);
    if let Some(error) = error {
        out.pop();
        out.push_str(",\"error\":");
        json::write_string(&mut out, error);
        out.push('}');
    }
    out
}

/// What a compaction shadows: the range's ends and every seq in it, in surface order,
/// with the reference's token estimate of the messages they project to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shadowed {
    pub start: u64,
    pub end: u64,
    pub seqs: Vec<u64>,
    pub tokens: u64,
}

impl Shadowed {
    /// `"shadowedRange":{"start","end"},"shadowedSeqs":[…],"shadowedTokenCount":N`.
    fn write(&self, out: &mut String) {
        out.push_str(&format!(
            "\"shadowedRange\":{{\"start\":{},\"end\":{}}},\"shadowedSeqs\":[",
            self.start, self.end
        ));
        for (i, seq) in self.seqs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&seq.to_string());
        }
        out.push_str(&format!("],\"shadowedTokenCount\":{}", self.tokens));
    }
}

/// `compaction/summary` data: `{"compactionId","summary":[block…],"shadowedRange",
/// "shadowedSeqs","shadowedTokenCount","provider","model","usage"?}`; `summary` is a
/// checked JSON array of blocks, `usage` a checked JSON object.
pub(crate) fn summary_data(
    id: &str,
    summary: &str,
    shadowed: &Shadowed,
    provider: &str,
    model: &str,
    usage: Option<&RawValue>,
) -> String {
    let mut out = String::from("{\"compactionId\":");
    json::write_string(&mut out, id);
    out.push_str(",\"summary\":");
    out.push_str(summary);
    out.push(',');
    shadowed.write(&mut out);
    out.push_str(",\"provider\":");
    json::write_string(&mut out, provider);
    out.push_str(",\"model\":");
    json::write_string(&mut out, model);
    if let Some(usage) = usage {
        out.push_str(",\"usage\":");
        out.push_str(usage.get());
    }
    out.push('}');
    out
}

/// The summary's `user/message` data: `{"id":"summary-<id>","role":"user","content":
/// [block…],"source":{"kind":"plugin","plugin":"compact","compactionId"}}`.
pub(crate) fn summary_message(id: &str, summary: &str) -> String {
    let mut out = String::from("{\"id\":");
    json::write_string(&mut out, &format!("summary-{id}"));
    out.push_str(",\"role\":\"user\",\"content\":");
    out.push_str(summary);
    out.push_str(",\"source\":{\"kind\":\"plugin\",\"plugin\":\"compact\",\"compactionId\":");
    json::write_string(&mut out, id);
    out.push_str("}}");
    out
}

/// `compaction/prune` data: `{"shadowedRange","shadowedSeqs","shadowedTokenCount"}`.
pub(crate) fn prune_data(shadowed: &Shadowed) -> String {
    let mut out = String::from("{");
    shadowed.write(&mut out);
    out.push('}');
    out
}

/// Checks a summary given as blocks: a non-empty JSON array of objects, each with a
/// string `type`. The reason it is not, when it is not.
pub(crate) fn check_summary(blocks: &str) -> std::result::Result<(), String> {
    let v: Value = json::from_str(blocks).map_err(|e| format!("not JSON: {e}"))?;
    let Some(list) = v.as_array() else {
        return Err("it must be an array of blocks".to_owned());
    };
    if list.is_empty() {
        return Err("it holds no block".to_owned());
    }
    if let Some(at) = list
        .iter()
        .position(|b| b.get("type").and_then(Value::as_str).is_none())
    {
        return Err(format!(
            "block {at} is not an object with a string \"type\""
        ));
    }
    Ok(())
}

/// `[{"type":"text","text":…}]`: a summary given as text.
pub(crate) fn text_blocks(text: &str) -> String {
    let mut out = String::from("[{\"type\":\"text\",\"text\":");
    json::write_string(&mut out, text);
    out.push_str("}]");
    out
}

/// The reference's estimate of a message's tokens (SPEC §16): per text block
/// ⌈characters / 4⌉ + 4 (characters counted as the reference's strings count them, in
/// UTF-16 code units; text blocks inside `tool-result` blocks count, and so does a
/// string `content`), plus 4 for the message.
pub(crate) fn estimate(message: &str) -> u64 {
    fn text(len: usize) -> u64 {
        (len as u64).div_ceil(4) + 4
    }
    fn units(s: &str) -> usize {
        s.encode_utf16().count()
    }
    fn blocks(list: &[Value]) -> u64 {
        list.iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .map_or(0, |t| text(units(t))),
                Some("tool-result") => b
                    .get("content")
                    .and_then(Value::as_array)
                    .map_or(0, |l| blocks(l)),
                _ => 0,
            })
            .sum()
    }
    let Ok(v) = json::from_str::<Value>(message) else {
        return 4;
    };
    let content = match v.get("content") {
        Some(Value::String(s)) => text(units(s)),
        Some(Value::Array(list)) => blocks(list),
        _ => 0,
    };
    content + 4
}

/// The tool calls a range of surface nodes splits from their results (SPEC §16): the
/// ids of calls made in it whose result is not in it, and of results in it whose call
/// is on the surface outside it. `outside` yields every other node of the surface; it
/// is read only when a result in the range answers a call the range does not hold (so
/// the usual range, calls with their results, costs what the range holds, not what the
/// surface does).
pub(crate) fn split_calls<'a>(
    inside: &[&Event],
    outside: impl Iterator<Item = &'a Event>,
) -> Vec<String> {
    let calls = ids(inside.iter().copied(), ASSISTANT_MESSAGE, "tool-call");
    let results = ids(inside.iter().copied(), TOOL_RESULT, "tool-result");
    let answered: HashSet<&str> = results.iter().map(String::as_str).collect();
    let made: HashSet<&str> = calls.iter().map(String::as_str).collect();
    let mut split: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for call in calls.iter().filter(|c| !answered.contains(c.as_str())) {
        if seen.insert(call.as_str()) {
            split.push(call.clone());
        }
    }
    let orphans: Vec<&String> = results
        .iter()
        .filter(|r| !made.contains(r.as_str()))
        .collect();
    if !orphans.is_empty() {
        let called_outside = ids(outside, ASSISTANT_MESSAGE, "tool-call");
        let called_outside: HashSet<&str> = called_outside.iter().map(String::as_str).collect();
        for result in orphans {
            if called_outside.contains(result.as_str()) && seen.insert(result.as_str()) {
                split.push(result.clone());
            }
        }
    }
    split
}

/// The ids in the `block` blocks (`tool-call`: their `id`; `tool-result`: their
/// `toolCallId`) of the `ty` events among `events`, in order.
fn ids<'a>(events: impl Iterator<Item = &'a Event>, ty: &str, block: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for e in events.filter(|e| e.ty() == ty) {
        for b in blocks(e.data()) {
            if b.ty == block {
                let id = if block == "tool-call" {
                    b.id
                } else {
                    b.tool_call_id
                };
                if let Some(id) = id {
                    ids.push(id.into_owned());
                }
            }
        }
    }
    ids
}

/// A `tool/result`'s data with its text pruned (SPEC §16), or `None` when its text
/// (the text blocks inside its `tool-result` blocks, joined by `\n`) holds no more than
/// [`PRUNE_OVER`] code points. The text blocks give way to one text block holding the
/// first [`PRUNE_HEAD`] and last [`PRUNE_TAIL`] code points around a marker, where the
/// first of them stood; other blocks and every other key stay as they are.
pub(crate) fn pruned(data: &str) -> Option<String> {
    let mut v: Value = json::from_str(data).ok()?;
    let content = v.get_mut("message")?.get_mut("content")?.as_array_mut()?;
    let mut texts = Vec::new();
    for block in content.iter() {
        if block.get("type").and_then(Value::as_str) == Some("tool-result")
            && let Some(inner) = block.get("content").and_then(Value::as_array)
        {
            texts.extend(
                inner
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str)),
            );
        }
    }
    let text = texts.join("\n");
    let count = text.chars().count();
    if count <= PRUNE_OVER {
        return None;
    }
    let head: String = text.chars().take(PRUNE_HEAD).collect();
    let tail: String = text.chars().skip(count - PRUNE_TAIL).collect();
    let dropped = count - PRUNE_HEAD - PRUNE_TAIL;
    let kept = format!("{head}\n\n[… {dropped} characters pruned …]\n\n{tail}");
    let mut placed = false;
    for block in content.iter_mut() {
        if block.get("type").and_then(Value::as_str) != Some("tool-result") {
            continue;
        }
        let Some(inner) = block.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        let mut next = Vec::with_capacity(inner.len());
        for b in inner.drain(..) {
            if b.get("type").and_then(Value::as_str) == Some("text")
                && b.get("text").is_some_and(Value::is_string)
            {
                if !placed {
                    placed = true;
                    next.push(serde_json::json!({"type": "text", "text": kept}));
                }
            } else {
                next.push(b);
            }
        }
        *inner = next;
    }
    Some(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ev;

    fn result_data(text: &str) -> String {
        serde_json::json!({"turn": 1, "step": 1, "message": {"id": "r", "role": "user",
            "content": [{"type": "tool-result", "toolCallId": "c", "content": [
                {"type": "text", "text": text}, {"type": "image", "data": "x"}]}],
            "source": {"kind": "tool", "callId": "c"}}, "meta": {"k": 1}})
        .to_string()
    }

    #[test]
    fn a_running_compaction_goes_from_start_to_end() {
        let mut running = None;
        Running::note(
            &mut running,
            &ev(3, COMPACTION_START, &start_data("c", Some(2))),
        );
        assert_eq!(
            running,
            Some(Running {
                id: "c".into(),
                turn: Some(2),
                seq: 3
            })
        );
        let r = running.clone().unwrap();
        assert_eq!(
            end_data(&r, Some("interrupted")),
            r#"{"compactionId":"c","turn":2,"error":"interrupted"}"#
        );
        Running::note(&mut running, &ev(4, COMPACTION_END, &end_data(&r, None)));
        assert_eq!(running, None);
        Running::note(&mut running, &ev(5, COMPACTION_START, "{}"));
        assert_eq!(running.unwrap().id, "");
    }

    #[test]
    fn the_estimate_counts_text_blocks_as_the_reference_does() {
        // 9 units → ⌈9/4⌉ + 4 = 7, plus 4 for the message.
        assert_eq!(
            estimate(r#"{"content":[{"type":"text","text":"123456789"}]}"#),
            11
        );
        assert_eq!(estimate(r#"{"content":"abcd"}"#), 9);
        // A tool-result's nested text; other blocks count nothing.
        let nested = r#"{"content":[{"type":"tool-result","content":[{"type":"text","text":""}]},{"type":"image"}]}"#;
        assert_eq!(estimate(nested), 8);
        // UTF-16 code units: one astral character is two.
        assert_eq!(estimate(r#"{"content":"😀😀😀"}"#), 2 + 4 + 4);
    }

    #[test]
    fn a_prune_keeps_the_head_and_tail_by_code_points() {
        assert_eq!(pruned(&result_data(&"é".repeat(PRUNE_OVER))), None);
        let text = format!("{}{}", "é".repeat(5000), "z".repeat(5000));
        let out: Value = serde_json::from_str(&pruned(&result_data(&text)).unwrap()).unwrap();
        let inner = &out["message"]["content"][0]["content"];
        let kept = inner[0]["text"].as_str().unwrap();
        assert!(kept.starts_with(&"é".repeat(PRUNE_HEAD)));
        assert!(kept.ends_with(&"z".repeat(PRUNE_TAIL)));
        assert!(kept.contains("[… 4880 characters pruned …]"), "{kept}");
        assert_eq!(inner[1]["type"], "image");
        assert_eq!(out["meta"]["k"], 1);
    }

    #[test]
    fn a_range_may_not_split_a_call_from_its_result() {
        let call = |seq, id: &str| {
            ev(
                seq,
                ASSISTANT_MESSAGE,
                &format!(
                    r#"{{"message":{{"content":[{{"type":"tool-call","id":"{id}","name":"t","arguments":"{{}}"}}]}}}}"#
                ),
            )
        };
        let result = |seq, id: &str| {
            ev(
                seq,
                TOOL_RESULT,
                &format!(
                    r#"{{"message":{{"content":[{{"type":"tool-result","toolCallId":"{id}","content":[]}}]}}}}"#
                ),
            )
        };
        let all = [call(0, "a"), result(1, "a"), call(2, "b"), result(3, "b")];
        let r: Vec<&Event> = all.iter().collect();
        let beside = |range: &[&Event]| -> Vec<&Event> {
            r.iter()
                .copied()
                .filter(|e| !range.iter().any(|i| i.seq() == e.seq()))
                .collect()
        };
        let split = |range: &[&Event]| split_calls(range, beside(range).into_iter());
        assert!(split(&r[0..2]).is_empty());
        assert_eq!(split(&r[0..3]), ["b".to_owned()]);
        assert_eq!(split(&r[1..2]), ["a".to_owned()]);
        // A result whose call is nowhere on the surface splits nothing; one answered
        // inside splits nothing either, however often it is listed.
        assert!(split_calls(&r[1..2], std::iter::empty()).is_empty());
        assert!(split(&[r[0], r[1], r[1]]).is_empty());
        assert_eq!(split(&[r[2], r[2]]), ["b".to_owned()]);
    }
}

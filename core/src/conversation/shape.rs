//! The shapes of the conversation's events (ARCHITECTURE.md#the-conversation), checked
//! when a host appends one, never when a stored log is read back: `assistant/message`,
//! `tool/call` and `tool/result` data, and the content blocks they hold. Keys beyond
//! the ones checked are kept verbatim.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json::{self, MAX_SAFE_INTEGER};
use crate::message::excerpt;

use super::{ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT};

/// `{"turn","step",…}`: the host's numbers, not checked against the open turn.
#[derive(Deserialize)]
struct Place {
    turn: u64,
    step: u64,
}

#[derive(Deserialize)]
struct AssistantData<'a> {
    turn: u64,
    step: u64,
    #[serde(borrow)]
    message: &'a RawValue,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(default)]
    interrupted: Option<bool>,
}

/// `data.message` of an `assistant/message` or a `tool/result`.
#[derive(Deserialize)]
struct MessageData<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: Vec<&'a RawValue>,
    #[serde(borrow)]
    source: &'a RawValue,
}

impl MessageData<'_> {
    /// A non-empty `id` and the `role` the event type gives it.
    fn check(&self, role: &str) -> std::result::Result<(), String> {
        non_empty("message.id", &self.id)?;
        if self.role != role {
            return Err(format!(
                "message.role must be {}, got {}",
                json::quote(role),
                json::quote(&self.role)
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelSource<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    provider: Cow<'a, str>,
    #[serde(borrow)]
    model: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    input_tokens: f64,
    output_tokens: f64,
    #[serde(default)]
    cache_read_tokens: Option<f64>,
    #[serde(default)]
    cache_write_tokens: Option<f64>,
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallData<'a> {
    turn: u64,
    step: u64,
    #[serde(borrow)]
    call_id: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ResultData<'a> {
    turn: u64,
    step: u64,
    #[serde(borrow)]
    message: &'a RawValue,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolSource<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    call_id: Cow<'a, str>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct ErrorInfo<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    code: Cow<'a, str>,
}

#[derive(Deserialize)]
struct BlockType<'a> {
    #[serde(borrow, rename = "type")]
    ty: Cow<'a, str>,
}

#[derive(Deserialize)]
struct TextBlock<'a> {
    #[serde(borrow)]
    #[allow(dead_code)]
    text: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ToolCallBlock<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultBlock<'a> {
    #[serde(borrow)]
    tool_call_id: Cow<'a, str>,
    #[serde(borrow)]
    content: Vec<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
}

/// Checks the data of a conversation event a host appends (SPEC §15.1); other types
/// pass unchecked. `data` is valid, compact JSON.
pub(crate) fn check(ty: &str, data: &str) -> Result<()> {
    match ty {
        ASSISTANT_MESSAGE => assistant(data),
        TOOL_CALL => call(data),
        TOOL_RESULT => result(data),
        _ => Ok(()),
    }
    .map_err(|why| invalid(format!("{ty} data {}: {why}", excerpt(data))))
}

/// Parses `text` as `T`, naming `what` when it is not one.
fn parse<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> std::result::Result<T, String> {
    if !text.starts_with('{') {
        return Err(format!("{what} must be a JSON object"));
    }
    json::from_str(text).map_err(|e| format!("{what}: {e}"))
}

fn place(turn: u64, step: u64) -> std::result::Result<(), String> {
    if turn > MAX_SAFE_INTEGER || step > MAX_SAFE_INTEGER {
        return Err("turn and step must be safe integers".into());
    }
    Ok(())
}

fn non_empty(what: &str, s: &str) -> std::result::Result<(), String> {
    if s.is_empty() {
        return Err(format!("{what} must be a non-empty string"));
    }
    Ok(())
}

fn assistant(data: &str) -> std::result::Result<(), String> {
    let d: AssistantData<'_> = parse(data, "the data")?;
    place(d.turn, d.step)?;
    let m: MessageData<'_> = parse(d.message.get(), "message")?;
    m.check("assistant")?;
    blocks(&m.content, "message.content")?;
    let s: ModelSource<'_> = parse(m.source.get(), "message.source")?;
    if s.kind != "model" {
        return Err(format!(
            "message.source.kind must be \"model\", got {}",
            json::quote(&s.kind)
        ));
    }
    let _ = (&s.provider, &s.model);
    if let Some(usage) = d.usage {
        let u: Usage = parse(usage.get(), "usage")?;
        let counts = [
            Some(u.input_tokens),
            Some(u.output_tokens),
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.reasoning_tokens,
        ];
        if counts.into_iter().flatten().any(|n| n < 0.0) {
            return Err("usage token counts must not be negative".into());
        }
    }
    if d.interrupted == Some(false) {
        return Err("interrupted is true when present".into());
    }
    Ok(())
}

fn call(data: &str) -> std::result::Result<(), String> {
    let d: CallData<'_> = parse(data, "the data")?;
    place(d.turn, d.step)?;
    non_empty("callId", &d.call_id)?;
    non_empty("name", &d.name)?;
    let _ = &d.arguments;
    Ok(())
}

fn result(data: &str) -> std::result::Result<(), String> {
    let d: ResultData<'_> = parse(data, "the data")?;
    place(d.turn, d.step)?;
    let m: MessageData<'_> = parse(d.message.get(), "message")?;
    m.check("user")?;
    let s: ToolSource<'_> = parse(m.source.get(), "message.source")?;
    if s.kind != "tool" {
        return Err(format!(
            "message.source.kind must be \"tool\", got {}",
            json::quote(&s.kind)
        ));
    }
    non_empty("message.source.callId", &s.call_id)?;
    let results = m
        .content
        .iter()
        .filter(|b| block_type(b).is_ok_and(|t| t == "tool-result"))
        .count();
    if results != 1 {
        return Err(format!(
            "message.content must hold exactly one tool-result block, it holds {results}"
        ));
    }
    blocks(&m.content, "message.content")?;
    if let Some(error) = d.error {
        let _: ErrorInfo<'_> = parse(error.get(), "error")?;
    }
    Ok(())
}

fn block_type<'a>(block: &'a RawValue) -> std::result::Result<Cow<'a, str>, String> {
    let b: BlockType<'a> = parse(block.get(), "a content block")?;
    Ok(b.ty)
}

/// Checks content blocks (SPEC §15.1): each an object with a string `type`; the known
/// types with their keys; a block of another type is kept as it is.
fn blocks(content: &[&RawValue], what: &str) -> std::result::Result<(), String> {
    for (i, block) in content.iter().enumerate() {
        let at = format!("{what}[{i}]");
        let text = block.get();
        match &*block_type(block).map_err(|e| format!("{at}: {e}"))? {
            "text" | "reasoning" => {
                parse::<TextBlock<'_>>(text, &at)?;
            }
            "tool-call" => {
                let b: ToolCallBlock<'_> = parse(text, &at)?;
                non_empty(&format!("{at}.id"), &b.id)?;
                non_empty(&format!("{at}.name"), &b.name)?;
                let _ = &b.arguments;
            }
            "tool-result" => {
                let b: ToolResultBlock<'_> = parse(text, &at)?;
                non_empty(&format!("{at}.toolCallId"), &b.tool_call_id)?;
                let _ = b.is_error;
                blocks(&b.content, &format!("{at}.content"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The turn and step a conversation event names, when it names both.
pub(crate) fn place_of(data: &str) -> Option<(u64, u64)> {
    json::from_str::<Place>(data).ok().map(|p| (p.turn, p.step))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"{"kind":"model","provider":"p","model":"m"}"#;

    fn assistant_data(content: &str) -> String {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"a1","role":"assistant","content":{content},"source":{SOURCE}}}}}"#
        )
    }

    #[test]
    fn the_reference_shapes_pass_with_extra_keys() {
        check(
            ASSISTANT_MESSAGE,
            &assistant_data(
                r#"[{"type":"text","text":"hi"},{"type":"reasoning","text":"r"},{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"},{"type":"image","data":"x"}]"#,
            ),
        )
        .unwrap();
        check(
            ASSISTANT_MESSAGE,
            r#"{"turn":1,"step":2,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m","replayState":{"x":1}}},"usage":{"inputTokens":3,"outputTokens":4,"reasoningTokens":1},"interrupted":true,"host":7}"#,
        )
        .unwrap();
        check(
            TOOL_CALL,
            r#"{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{\"a\":1}","x":1}"#,
        )
        .unwrap();
        check(
            TOOL_RESULT,
            r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}},"error":{"name":"E","code":"C"},"meta":{"ms":3}}"#,
        )
        .unwrap();
        check("host/thing", "[1]").unwrap();
    }

    #[test]
    fn every_broken_shape_is_named() {
        for (ty, data, needle) in [
            (ASSISTANT_MESSAGE, r#"{"text":"hi"}"#.to_owned(), "missing field `turn`"),
            (ASSISTANT_MESSAGE, "[]".to_owned(), "must be a JSON object"),
            (
                ASSISTANT_MESSAGE,
                assistant_data(r#"[{"type":"text"}]"#),
                "message.content[0]",
            ),
            (
                ASSISTANT_MESSAGE,
                assistant_data(r#"[{"type":"tool-call","id":"","name":"x","arguments":"{}"}]"#),
                "message.content[0].id must be a non-empty string",
            ),
            (
                ASSISTANT_MESSAGE,
                assistant_data(r#"[{"type":"tool-call","id":"c","name":"x","arguments":{}}]"#),
                "message.content[0]",
            ),
            (
                ASSISTANT_MESSAGE,
                assistant_data(r#"[{"text":"no type"}]"#),
                "missing field `type`",
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"user","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}"#.to_owned(),
                "message.role must be \"assistant\"",
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"tool","provider":"p","model":"m"}}}"#.to_owned(),
                "message.source.kind must be \"model\"",
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model"}}}"#.to_owned(),
                "missing field `provider`",
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":1}}"#.to_owned(),
                "usage",
            ),
            (
                ASSISTANT_MESSAGE,
                r#"{"turn":-1,"step":1,"message":{}}"#.to_owned(),
                "turn",
            ),
            (
                TOOL_CALL,
                r#"{"turn":1,"step":1,"callId":"c","name":"x","arguments":{}}"#.to_owned(),
                "arguments",
            ),
            (
                TOOL_CALL,
                r#"{"turn":1,"step":1,"callId":"","name":"x","arguments":""}"#.to_owned(),
                "callId must be a non-empty string",
            ),
            (
                TOOL_RESULT,
                r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"tool","callId":"c"}}}"#.to_owned(),
                "exactly one tool-result block, it holds 0",
            ),
            (
                TOOL_RESULT,
                r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"model","callId":"c"}}}"#.to_owned(),
                "message.source.kind must be \"tool\"",
            ),
            (
                TOOL_RESULT,
                r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}},"error":{"name":"E"}}"#.to_owned(),
                "error",
            ),
            (
                TOOL_RESULT,
                r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text"}]}],"source":{"kind":"tool","callId":"c"}}}"#.to_owned(),
                "message.content[0].content[0]",
            ),
        ] {
            let err = check(ty, &data).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
            let text = err.to_string();
            assert!(text.contains(ty) && text.contains(needle), "{data}: {text}");
        }
    }
}

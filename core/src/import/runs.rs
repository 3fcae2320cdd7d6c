//! Packed runs of token deltas, expanded back into one `assistant/chunk` event per
//! member (ARCHITECTURE.md#import).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::event::{Envelope, Event};
use crate::json::{self, MAX_SAFE_INTEGER};

/// The event type every member of a run expands to.
pub(crate) const ASSISTANT_CHUNK: &str = "assistant/chunk";

/// The kinds of packed run, by their record `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunKind {
    /// `text-chunks` → `text-delta` chunks.
    Text,
    /// `reasoning-chunks` → `reasoning-delta` chunks.
    Reasoning,
    /// `tool-call-chunks` → `tool-call-delta` chunks.
    ToolCall,
}

impl RunKind {
    /// The run kind a record `type` names, if it names one.
    pub(crate) fn of(ty: &str) -> Option<RunKind> {
        match ty {
            "text-chunks" => Some(RunKind::Text),
            "reasoning-chunks" => Some(RunKind::Reasoning),
            "tool-call-chunks" => Some(RunKind::ToolCall),
            _ => None,
        }
    }

    fn record_type(self) -> &'static str {
        match self {
            RunKind::Text => "text-chunks",
            RunKind::Reasoning => "reasoning-chunks",
            RunKind::ToolCall => "tool-call-chunks",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    _ty: Cow<'a, str>,
    seq0: u64,
    time0: u64,
    data: Data,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    turn: u64,
    step: u64,
    index: u64,
    dt: Vec<i64>,
    texts: Option<Vec<String>>,
    id: Option<String>,
    name: Option<String>,
    args: Option<Vec<String>>,
}

fn safe(name: &str, n: u64) -> Result<u64> {
    if n > MAX_SAFE_INTEGER {
        return Err(invalid(format!("{name} {n} is larger than 2^53-1")));
    }
    Ok(n)
}

/// Expands one packed run (compact JSON text of the record) into its events: member
/// `k` is seq `seq0 + k` at `time0` plus the first `k` gaps of `dt`, so `dt` holds one
/// gap fewer than there are members.
pub(crate) fn expand(kind: RunKind, text: &str) -> Result<Vec<Event>> {
    let what = kind.record_type();
    let wire: Wire<'_> =
        json::from_str(text).map_err(|e| invalid(format!("invalid {what} record: {e}")))?;
    let d = wire.data;
    let seq0 = safe("seq0", wire.seq0)?;
    let time0 = safe("time0", wire.time0)?;
    let (turn, step, index) = (
        safe("turn", d.turn)?,
        safe("step", d.step)?,
        safe("index", d.index)?,
    );
    let (members, field) = match kind {
        RunKind::Text | RunKind::Reasoning => {
            if d.id.is_some() || d.name.is_some() || d.args.is_some() {
                return Err(invalid(format!(
                    "{what} data may not have \"id\", \"name\" or \"args\" (those are tool-call-chunks keys)"
                )));
            }
            (d.texts, "texts")
        }
        RunKind::ToolCall => {
            if d.texts.is_some() {
                return Err(invalid(format!(
                    "{what} data may not have \"texts\" (its members are in \"args\")"
                )));
            }
            if d.id.is_none() {
                return Err(invalid(format!("{what} data has no \"id\"")));
            }
            (d.args, "args")
        }
    };
    let members = members.ok_or_else(|| invalid(format!("{what} data has no \"{field}\"")))?;
    if members.is_empty() {
        return Err(invalid(format!("{what} data \"{field}\" is empty")));
    }
    if d.dt.len() + 1 != members.len() {
        return Err(invalid(format!(
            "{what} data has {} gaps in \"dt\" for {} members in \"{field}\" (expected {})",
            d.dt.len(),
            members.len(),
            members.len() - 1
        )));
    }
    // Everything before the member text, and after it, is the same for every member.
    let mut prefix = format!(r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"#);
    match kind {
        RunKind::Text => write!(prefix, r#""text-delta","index":{index},"text":"#),
        RunKind::Reasoning => write!(prefix, r#""reasoning-delta","index":{index},"text":"#),
        RunKind::ToolCall => {
            let id = json::quote(d.id.as_deref().unwrap_or_default());
            write!(prefix, r#""tool-call-delta","index":{index},"id":{id},"#)
                .and_then(|()| match &d.name {
                    Some(name) => write!(prefix, r#""name":{},"#, json::quote(name)),
                    None => Ok(()),
                })
                .and_then(|()| prefix.write_str(r#""argumentsDelta":"#))
        }
    }
    .expect("writing to a String cannot fail");
    let mut time = i128::from(time0);
    let mut events = Vec::with_capacity(members.len());
    for (k, member) in members.iter().enumerate() {
        if k > 0 {
            let gap = d.dt[k - 1];
            if gap.unsigned_abs() > MAX_SAFE_INTEGER {
                return Err(invalid(format!(
                    "{what} gap dt[{}] = {gap} is beyond 2^53-1",
                    k - 1
                )));
            }
            time += i128::from(gap);
        }
        let at = u64::try_from(time).map_err(|_| {
            invalid(format!(
                "{what} member {k} (seq {}) would have the negative time {time}",
                seq0 + k as u64
            ))
        })?;
        let data = format!("{prefix}{}}}}}", json::quote(member));
        let data = RawValue::from_string(data).expect("built from quoted strings");
        let event = Event::new(
            ASSISTANT_CHUNK,
            seq0 + k as u64,
            at,
            data,
            Envelope::default(),
        )
        .map_err(|e| e.context(format_args!("{what} member {k}")))?;
        events.push(event);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(events: &[Event]) -> Vec<String> {
        events.iter().map(Event::to_json).collect()
    }

    #[test]
    fn each_kind_expands_in_key_order() {
        let text = expand(
            RunKind::Text,
            r#"{"type":"text-chunks","seq0":4,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[3,-1],"texts":["He","l\"l","o\n"]}}"#,
        )
        .unwrap();
        assert_eq!(
            lines(&text),
            [
                r#"{"type":"assistant/chunk","seq":4,"time":100,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"He"}}}"#,
                r#"{"type":"assistant/chunk","seq":5,"time":103,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"l\"l"}}}"#,
                r#"{"type":"assistant/chunk","seq":6,"time":102,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"o\n"}}}"#,
            ]
        );
        let reasoning = expand(
            RunKind::Reasoning,
            r#"{"data":{"texts":["hm"],"dt":[],"index":1,"step":1,"turn":1},"time0":0,"seq0":0,"type":"reasoning-chunks"}"#,
        )
        .unwrap();
        assert_eq!(
            lines(&reasoning),
            [
                r#"{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"hm"}}}"#
            ]
        );
        let named = expand(
            RunKind::ToolCall,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":5,"data":{"turn":2,"step":1,"index":0,"dt":[0],"id":"c1","name":"bash","args":["{\"cmd\"",":1}"]}}"#,
        )
        .unwrap();
        assert_eq!(
            lines(&named)[1],
            r#"{"type":"assistant/chunk","seq":10,"time":5,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c1","name":"bash","argumentsDelta":":1}"}}}"#
        );
        let nameless = expand(
            RunKind::ToolCall,
            r#"{"type":"tool-call-chunks","seq0":0,"time0":5,"data":{"turn":2,"step":1,"index":3,"dt":[],"id":"c1","args":[""]}}"#,
        )
        .unwrap();
        assert_eq!(
            lines(&nameless),
            [
                r#"{"type":"assistant/chunk","seq":0,"time":5,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":3,"id":"c1","argumentsDelta":""}}}"#
            ]
        );
    }

    #[test]
    fn malformed_runs_are_refused() {
        let run = |kind, data: &str| {
            expand(
                kind,
                &format!(r#"{{"type":"x","seq0":0,"time0":10,"data":{data}}}"#),
            )
            .unwrap_err()
            .to_string()
        };
        let base = r#""turn":1,"step":1,"index":0"#;
        for (kind, data, needle) in [
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[1],"texts":["a"]}}"#),
                "1 gaps in \"dt\" for 1 members in \"texts\" (expected 0)",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[],"texts":[]}}"#),
                "\"texts\" is empty",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[]}}"#),
                "has no \"texts\"",
            ),
            (
                RunKind::Reasoning,
                format!(r#"{{{base},"dt":[],"texts":["a"],"id":"c"}}"#),
                "tool-call-chunks keys",
            ),
            (
                RunKind::ToolCall,
                format!(r#"{{{base},"dt":[],"args":["a"]}}"#),
                "has no \"id\"",
            ),
            (
                RunKind::ToolCall,
                format!(r#"{{{base},"dt":[],"id":"c","texts":["a"]}}"#),
                "may not have \"texts\"",
            ),
            (
                RunKind::ToolCall,
                format!(r#"{{{base},"dt":[0],"id":"c","args":["a"]}}"#),
                "expected 0",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[-11],"texts":["a","b"]}}"#),
                "member 1 (seq 1) would have the negative time -1",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[9007199254740992],"texts":["a","b"]}}"#),
                "beyond 2^53-1",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[],"texts":["a"],"extra":1}}"#),
                "unknown field",
            ),
            (
                RunKind::Text,
                r#"{"turn":1,"step":1,"dt":[],"texts":["a"]}"#.to_owned(),
                "missing field `index`",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[],"texts":[1]}}"#),
                "invalid text-chunks record",
            ),
            (
                RunKind::Text,
                r#"{"turn":9007199254740992,"step":1,"index":0,"dt":[],"texts":["a"]}"#.to_owned(),
                "turn 9007199254740992",
            ),
        ] {
            let err = run(kind, &data);
            assert!(err.contains(needle), "{data}: {err}");
        }
        let err = expand(
            RunKind::Text,
            r#"{"type":"text-chunks","seq0":0,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("text-chunks member 1: time"),
            "{err}"
        );
    }
}

//! Packed runs of token deltas, expanded back into one `assistant/chunk` event per
//! member (ARCHITECTURE.md#import).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::{Envelope, Event};
use crate::json::{self, MAX_SAFE_INTEGER, plain};
use crate::message::excerpt;

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
    #[serde(borrow)]
    data: Data<'a>,
}

/// The run's data. The lists and strings stay JSON text borrowed from the record: a
/// run is walked member by member, never held decoded (a record of tiny members would
/// otherwise take many times its own size), and each member's string is kept as
/// written, escapes included (ARCHITECTURE.md#import).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Data<'a> {
    turn: u64,
    step: u64,
    index: u64,
    #[serde(borrow)]
    dt: &'a RawValue,
    #[serde(borrow)]
    texts: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
}

fn safe(name: &str, n: u64) -> Result<u64> {
    if n > MAX_SAFE_INTEGER {
        return Err(invalid(format!("{name} {n} is larger than 2^53-1")));
    }
    Ok(n)
}

/// The items of a JSON array in valid, compact text (no whitespace), each as its text.
/// A string item is exact; any other item runs to the next comma, which is enough for
/// callers that refuse an item by its first byte.
fn items(array: &str) -> impl Iterator<Item = &str> {
    let b = array.as_bytes();
    // The closing bracket.
    let end = b.len().saturating_sub(1);
    let mut i = 1;
    std::iter::from_fn(move || {
        if i >= end {
            return None;
        }
        let start = i;
        let stop = match b[i] {
            b'"' => plain::string_end(b, i).unwrap_or(end),
            _ => memchr::memchr(b',', &b[i..end]).map_or(end, |off| i + off),
        };
        i = stop + 1;
        Some(&array[start..stop.min(end)])
    })
}

/// The members of a run's `texts` or `args`: an array of strings, counted.
fn strings<'a>(what: &str, field: &str, raw: &'a RawValue) -> Result<(&'a str, usize)> {
    let text = raw.get();
    if !text.starts_with('[') {
        return Err(invalid(format!(
            "invalid {what} record: \"{field}\" must be an array of strings"
        )));
    }
    let mut count = 0;
    for (k, item) in items(text).enumerate() {
        if !item.starts_with('"') {
            return Err(invalid(format!(
                "invalid {what} record: \"{field}\" member {k} is not a string"
            )));
        }
        count += 1;
    }
    Ok((text, count))
}

/// A run's `id` or `name`: a string, kept as written.
fn string<'a>(what: &str, field: &str, raw: Option<&'a RawValue>) -> Result<Option<&'a str>> {
    match raw.map(RawValue::get) {
        Some(text) if !text.starts_with('"') => Err(invalid(format!(
            "invalid {what} record: \"{field}\" must be a string"
        ))),
        other => Ok(other),
    }
}

/// The gaps of `dt`, each an integer within 2^53-1, counted.
fn gaps<'a>(what: &str, raw: &'a RawValue) -> Result<(&'a str, usize)> {
    let text = raw.get();
    if !text.starts_with('[') {
        return Err(invalid(format!(
            "invalid {what} record: \"dt\" must be an array of integers"
        )));
    }
    let mut count = 0;
    for (k, item) in items(text).enumerate() {
        let gap = item.parse::<i64>().map_err(|_| {
            invalid(format!(
                "invalid {what} record: gap dt[{k}] = {} is not an integer",
                excerpt(item)
            ))
        })?;
        if gap.unsigned_abs() > MAX_SAFE_INTEGER {
            return Err(invalid(format!(
                "{what} gap dt[{k}] = {gap} is beyond 2^53-1"
            )));
        }
        count += 1;
    }
    Ok((text, count))
}

/// Bytes of the stored line of an event of type [`ASSISTANT_CHUNK`] with `data`.
fn line_len(seq: u64, time: u64, data: &str) -> u64 {
    // {"type":"assistant/chunk","seq":…,"time":…,"data":…}
    const FIXED: usize = r#"{"type":"assistant/chunk","seq":,"time":,"data":}"#.len();
    let mut digits = itoa::Buffer::new();
    let seq = digits.format(seq).len();
    let time = digits.format(time).len();
    (FIXED + seq + time + data.len()) as u64
}

/// Expands one packed run (compact JSON text of the record) into its events, handing
/// each to `sink` as soon as it is built: member `k` is seq `seq0 + k` at `time0` plus
/// the first `k` gaps of `dt`, so `dt` holds one gap fewer than there are members.
///
/// The whole run is checked before the first member is built; the stored lines of all
/// its members together may not exceed `limit` bytes (`too_large`), which bounds what
/// one record can grow into (a long `id` is copied into every member).
pub(crate) fn expand(
    kind: RunKind,
    text: &str,
    limit: u64,
    sink: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<()> {
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
    let (members, count) = strings(what, field, members)?;
    let id = string(what, "id", d.id)?;
    let name = string(what, "name", d.name)?;
    let (dt, gap_count) = gaps(what, d.dt)?;
    if count == 0 {
        return Err(invalid(format!("{what} data \"{field}\" is empty")));
    }
    if gap_count + 1 != count {
        return Err(invalid(format!(
            "{what} data has {gap_count} gaps in \"dt\" for {count} members in \"{field}\" (expected {})",
            count - 1
        )));
    }
    // Everything before the member text, and after it, is the same for every member.
    let mut prefix = format!(r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"#);
    match kind {
        RunKind::Text => write!(prefix, r#""text-delta","index":{index},"text":"#),
        RunKind::Reasoning => write!(prefix, r#""reasoning-delta","index":{index},"text":"#),
        RunKind::ToolCall => {
            let id = id.unwrap_or_default();
            write!(prefix, r#""tool-call-delta","index":{index},"id":{id},"#)
                .and_then(|()| match name {
                    Some(name) => write!(prefix, r#""name":{name},"#),
                    None => Ok(()),
                })
                .and_then(|()| prefix.write_str(r#""argumentsDelta":"#))
        }
    }
    .expect("writing to a String cannot fail");
    // Times and sizes first: a run is refused whole, before any member is built.
    let times = || {
        let mut time = i128::from(time0);
        std::iter::once(0)
            .chain(items(dt).map(|gap| gap.parse::<i64>().unwrap_or_default()))
            .enumerate()
            .map(move |(k, gap)| {
                time += i128::from(gap);
                let seq = seq0 + k as u64;
                u64::try_from(time).map_err(|_| {
                    invalid(format!(
                        "{what} member {k} (seq {seq}) would have the negative time {time}"
                    ))
                })
            })
    };
    let mut total = 0u64;
    for (k, (time, member)) in times().zip(items(members)).enumerate() {
        let time = time?;
        let seq = seq0 + k as u64;
        safe("seq", seq)
            .and_then(|_| safe("time", time))
            .map_err(|e| e.context(format_args!("{what} member {k}")))?;
        total += line_len(seq, time, &prefix) + member.len() as u64 + 2;
        if total > limit {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "{what} run of {count} members expands to more than the limit of {limit} bytes \
                     (reached at member {k}, seq {seq})"
                ),
            ));
        }
    }
    for (k, (time, member)) in times().zip(items(members)).enumerate() {
        let mut data = String::with_capacity(prefix.len() + member.len() + 2);
        data.push_str(&prefix);
        data.push_str(member);
        data.push_str("}}");
        let event = Event::build(
            ASSISTANT_CHUNK,
            seq0 + k as u64,
            time?,
            data,
            Envelope::default(),
        )
        .map_err(|e| e.context(format_args!("{what} member {k}")))?;
        sink(event)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of a run, with no limit on its size.
    fn expand_all(kind: RunKind, text: &str) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        expand(kind, text, u64::MAX, &mut |e| {
            events.push(e);
            Ok(())
        })?;
        Ok(events)
    }

    fn lines(events: &[Event]) -> Vec<String> {
        events.iter().map(Event::to_json).collect()
    }

    #[test]
    fn each_kind_expands_in_key_order() {
        let text = expand_all(
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
        let reasoning = expand_all(
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
        let named = expand_all(
            RunKind::ToolCall,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":5,"data":{"turn":2,"step":1,"index":0,"dt":[0],"id":"c1","name":"bash","args":["{\"cmd\"",":1}"]}}"#,
        )
        .unwrap();
        assert_eq!(
            lines(&named)[1],
            r#"{"type":"assistant/chunk","seq":10,"time":5,"data":{"turn":2,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c1","name":"bash","argumentsDelta":":1}"}}}"#
        );
        let nameless = expand_all(
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
            expand_all(
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
                "invalid text-chunks record: \"texts\" member 0 is not a string",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[],"texts":"a"}}"#),
                "\"texts\" must be an array of strings",
            ),
            (
                RunKind::ToolCall,
                format!(r#"{{{base},"dt":[],"id":1,"args":["a"]}}"#),
                "\"id\" must be a string",
            ),
            (
                RunKind::ToolCall,
                format!(r#"{{{base},"dt":[],"id":"c","name":["n"],"args":["a"]}}"#),
                "\"name\" must be a string",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":{{}},"texts":["a"]}}"#),
                "\"dt\" must be an array of integers",
            ),
            (
                RunKind::Text,
                format!(r#"{{{base},"dt":[1.5],"texts":["a","b"]}}"#),
                "gap dt[0] = 1.5 is not an integer",
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
        let err = expand_all(
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

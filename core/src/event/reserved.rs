//! The reserved event types (ARCHITECTURE.md#reserved-events): their names, the ones
//! opening a session replays, and what the library reads from and checks in their data
//! ([`Body`]); host types stay opaque.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json::{self, MAX_SAFE_INTEGER};
use crate::message::excerpt;
use crate::splice::SpliceRecord;

/// `turn/start`
pub const TURN_START: &str = "turn/start";
/// `turn/end`
pub const TURN_END: &str = "turn/end";
/// `step/start`
pub const STEP_START: &str = "step/start";
/// `step/end`
pub const STEP_END: &str = "step/end";
/// `user/message`
pub const USER_MESSAGE: &str = "user/message";
/// `agent/inbox/spliced`
pub const INBOX_SPLICED: &str = "agent/inbox/spliced";
/// `session/end-seed`
pub const END_SEED: &str = "session/end-seed";
/// `agent/inbox/rejected`: a posted message that could not be taken in (ARCHITECTURE.md#posting).
pub const INBOX_REJECTED: &str = "agent/inbox/rejected";

/// `assistant/message`: one model response (ARCHITECTURE.md#the-conversation).
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
/// `tool/call`: a tool call dispatched, log-only (ARCHITECTURE.md#the-conversation).
pub const TOOL_CALL: &str = "tool/call";
/// `tool/result`: a tool call's result (ARCHITECTURE.md#the-conversation).
pub const TOOL_RESULT: &str = "tool/result";

/// `approval/asked`: a tool call waits for a person's decision (ARCHITECTURE.md#approvals).
pub const APPROVAL_ASKED: &str = "approval/asked";
/// `approval/decided`: the decision on an `approval/asked` (ARCHITECTURE.md#approvals).
pub const APPROVAL_DECIDED: &str = "approval/decided";
/// `turn/parked`: the open turn waits for decisions with no process alive for it
/// (ARCHITECTURE.md#approvals).
pub const TURN_PARKED: &str = "turn/parked";
/// `turn/resumed`: a parked turn's run handed on (ARCHITECTURE.md#approvals).
pub const TURN_RESUMED: &str = "turn/resumed";
/// `compaction/start`: a compaction began (SPEC §16).
pub const COMPACTION_START: &str = "compaction/start";
/// `compaction/summary`: a compaction's summary (SPEC §16).
pub const COMPACTION_SUMMARY: &str = "compaction/summary";
/// `compaction/end`: a compaction ended (SPEC §16).
pub const COMPACTION_END: &str = "compaction/end";
/// `compaction/prune`: a tool result shortened (SPEC §16).
pub const COMPACTION_PRUNE: &str = "compaction/prune";

/// The types opening a session reads (those that change the log state, the inbox or
/// the conversation's surface and pending tool calls): a store that can read events by
/// type hands the session these and the last event, and nothing else is needed to
/// replay.
pub const REPLAYED: [&str; 16] = [
    TURN_START,
    TURN_END,
    STEP_START,
    STEP_END,
    INBOX_SPLICED,
    END_SEED,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    TURN_PARKED,
    TURN_RESUMED,
    COMPACTION_START,
    COMPACTION_END,
];

/// What the library knows about an event's data, parsed once when the event is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Host,
    TurnStart {
        turn: u64,
    },
    TurnEnd {
        turn: u64,
        completed: bool,
    },
    StepStart {
        turn: u64,
        step: u64,
    },
    StepEnd {
        turn: u64,
        step: u64,
    },
    UserMessage,
    Spliced(SpliceRecord),
    EndSeed,
    /// `agent/inbox/rejected`: changes neither the inbox nor the turns.
    Rejected,
}

#[derive(Deserialize)]
struct TurnData {
    turn: u64,
}

#[derive(Deserialize)]
struct StepData {
    turn: u64,
    step: u64,
}

#[derive(Deserialize)]
struct TurnEndData<'a> {
    turn: u64,
    #[serde(borrow)]
    reason: &'a RawValue,
}

#[derive(Deserialize)]
struct ReasonKind<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Empty {}

/// `agent/inbox/rejected {"message":m,"reason":{…}}`: `m` is any JSON (what was
/// posted); or `{"edit":e,"reason":{…}}` for a posted edit (SPEC §11.3), `{"move":…}`
/// for a posted move and `{"decision":…}` for a decision (SPEC §17).
#[derive(Deserialize)]
struct RejectedData<'a> {
    #[serde(borrow, default)]
    message: Given<'a>,
    #[serde(borrow, default)]
    edit: Given<'a>,
    #[serde(borrow, default, rename = "move")]
    moved: Given<'a>,
    #[serde(borrow, default)]
    decision: Given<'a>,
    #[serde(borrow)]
    reason: &'a RawValue,
}

/// A key's value if the key is there, `null` included.
#[derive(Default)]
struct Given<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Given<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Given(Some(raw)))
    }
}

/// The `edit` of a rejected edit: its `op` and `id` are checked.
#[derive(Deserialize)]
#[allow(dead_code)]
struct RejectedEdit<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(borrow)]
    id: Cow<'a, str>,
}

/// A rejected move or decision: its `id` is checked.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Identified<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct RejectedReason<'a> {
    code: u64,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    message: Cow<'a, str>,
}

/// `ty`, shared rather than copied when it is a type the library knows.
pub(super) fn known_type(ty: &str) -> Cow<'static, str> {
    const KNOWN: [&str; 19] = [
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        INBOX_SPLICED,
        END_SEED,
        INBOX_REJECTED,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        APPROVAL_ASKED,
        APPROVAL_DECIDED,
        TURN_PARKED,
        TURN_RESUMED,
        COMPACTION_START,
        COMPACTION_SUMMARY,
        COMPACTION_END,
        COMPACTION_PRUNE,
    ];
    match KNOWN.iter().find(|&&k| k == ty) {
        Some(&k) => Cow::Borrowed(k),
        None => Cow::Owned(ty.to_owned()),
    }
}

/// `n`, refused when it passes the largest safe JSON integer (2^53-1).
pub(super) fn safe(name: &str, n: u64) -> Result<u64> {
    if n > MAX_SAFE_INTEGER {
        return Err(invalid(format!("{name} {n} is larger than 2^53-1")));
    }
    Ok(n)
}

/// Whether `ty` is written only by the library (ARCHITECTURE.md#reserved-events): the
/// turns, the inbox, approvals and compaction; `user/message` is not, a host may append
/// it with any JSON object as data.
pub fn is_reserved(ty: &str) -> bool {
    matches!(
        ty,
        TURN_START
            | TURN_END
            | STEP_START
            | STEP_END
            | INBOX_SPLICED
            | END_SEED
            | INBOX_REJECTED
            | APPROVAL_ASKED
            | APPROVAL_DECIDED
            | TURN_PARKED
            | TURN_RESUMED
            | COMPACTION_START
            | COMPACTION_SUMMARY
            | COMPACTION_END
            | COMPACTION_PRUNE
    )
}

impl Body {
    /// Parses and checks the data of a reserved type; host types stay opaque.
    /// `text` is checked, compact JSON (the data of an event being built).
    pub(super) fn parse(ty: &str, text: &str) -> Result<Body> {
        let shape = |e: serde_json::Error| invalid(format!("{ty} data {}: {e}", excerpt(text)));
        // Reserved data is always an object (serde would also take a struct from an
        // array: `[1]` is no `{"turn":1}`).
        if (is_reserved(ty) || ty == USER_MESSAGE) && !text.starts_with('{') {
            return Err(invalid(format!(
                "{ty} data must be a JSON object, got {}",
                excerpt(text)
            )));
        }
        Ok(match ty {
            TURN_START => Body::TurnStart {
                turn: safe(
                    "turn",
                    json::from_str::<TurnData>(text).map_err(shape)?.turn,
                )?,
            },
            STEP_START | STEP_END => {
                let d = json::from_str::<StepData>(text).map_err(shape)?;
                let (turn, step) = (safe("turn", d.turn)?, safe("step", d.step)?);
                if ty == STEP_START {
                    Body::StepStart { turn, step }
                } else {
                    Body::StepEnd { turn, step }
                }
            }
            TURN_END => {
                let d = json::from_str::<TurnEndData<'_>>(text).map_err(shape)?;
                let kind = json::from_str::<ReasonKind<'_>>(d.reason.get()).map_err(|e| {
                    invalid(format!(
                        "turn/end reason must be an object with a string \"kind\": {e}"
                    ))
                })?;
                if !d.reason.get().starts_with('{') {
                    return Err(invalid("turn/end reason must be an object"));
                }
                Body::TurnEnd {
                    turn: safe("turn", d.turn)?,
                    completed: kind.kind == "completed",
                }
            }
            // Any object: an inbox message entered by `decide` has an `id`, but host
            // runtime context appended as `user/message` need not (ARCHITECTURE.md#reserved-events).
            USER_MESSAGE => Body::UserMessage,
            INBOX_SPLICED => Body::Spliced(SpliceRecord::from_checked(text)?),
            END_SEED => {
                json::from_str::<Empty>(text).map_err(shape)?;
                Body::EndSeed
            }
            INBOX_REJECTED => {
                let d = json::from_str::<RejectedData<'_>>(text).map_err(shape)?;
                let what = [d.message.0, d.edit.0, d.moved.0, d.decision.0];
                let given = what.iter().filter(|w| w.is_some()).count();
                match (d.message.0, d.edit.0) {
                    _ if given != 1 => {
                        return Err(invalid(
                            "agent/inbox/rejected data must hold exactly one of \"message\", \"edit\", \"move\" and \"decision\"",
                        ));
                    }
                    (None, None) => {
                        let (key, value) = match (d.moved.0, d.decision.0) {
                            (Some(m), _) => ("move", m),
                            (_, Some(d)) => ("decision", d),
                            _ => unreachable!("one is given"),
                        };
                        if json::from_str::<Identified<'_>>(value.get()).is_err() {
                            return Err(invalid(format!(
                                "agent/inbox/rejected {key} must be an object with a string \"id\""
                            )));
                        }
                    }
                    (Some(_), None) => {}
                    (None, Some(edit)) => {
                        let e = json::from_str::<RejectedEdit<'_>>(edit.get());
                        if !e.is_ok_and(|e| matches!(&*e.op, "remove" | "replace")) {
                            return Err(invalid(
                                "agent/inbox/rejected edit must hold an \"op\" (\"remove\" or \"replace\") and a string \"id\"",
                            ));
                        }
                    }
                    (Some(_), Some(_)) => unreachable!("exactly one is given"),
                }
                if !d.reason.get().starts_with('{') {
                    return Err(invalid("agent/inbox/rejected reason must be an object"));
                }
                json::from_str::<RejectedReason<'_>>(d.reason.get()).map_err(|e| {
                    invalid(format!(
                        "agent/inbox/rejected reason must hold a numeric \"code\", a string \"kind\" and a string \"message\": {e}"
                    ))
                })?;
                Body::Rejected
            }
            _ => Body::Host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::event::{Envelope, Event};

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn reserved_data_keeps_host_extras_verbatim() {
        for text in [
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
            r#"{"type":"step/start","seq":0,"time":1,"data":{"note":"x","turn":1,"step":1}}"#,
            r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed","why":1},"usage":{"in":3}}}"#,
            r#"{"type":"session/end-seed","seq":0,"time":1,"data":{"from":"parent"}}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-turn","start":0,"inserted":[],"by":"web"}}"#,
            r#"{"type":"user/message","seq":0,"time":1,"data":{"text":"runtime context, no id"}}"#,
        ] {
            let e = Event::from_json(text).unwrap();
            assert_eq!(e.to_json(), text);
        }
        // The table's keys are still checked when extras are present.
        let err = Event::from_json(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":-1,"trigger":{}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("turn/start data"), "{err}");
        let err = Event::from_json(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"turn":2}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("duplicate field"), "{err}");
    }

    #[test]
    fn reserved_bodies_are_parsed() {
        let e = Event::new(
            TURN_END,
            4,
            0,
            raw(r#"{"turn":2,"reason":{"kind":"completed"}}"#),
            Envelope::default(),
        )
        .unwrap();
        assert_eq!(
            e.body(),
            &Body::TurnEnd {
                turn: 2,
                completed: true
            }
        );
        let e = Event::new(
            "host/thing",
            0,
            0,
            raw(r#"{"turn":"x","step":-1}"#),
            Envelope::default(),
        )
        .unwrap();
        assert_eq!(e.body(), &Body::Host);
        assert!(is_reserved(TURN_START) && !is_reserved(USER_MESSAGE) && !is_reserved("x"));
    }

    #[test]
    fn rejected_events_are_reserved_and_checked() {
        assert!(is_reserved(INBOX_REJECTED));
        let ok = r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":{"id":"m"},"reason":{"code":8,"kind":"duplicate_message","message":"x"},"post":"p1"},"ignorable":true}"#;
        let e = Event::from_json(ok).unwrap();
        assert_eq!(e.body(), &Body::Rejected);
        assert_eq!(e.to_json(), ok);
        for ok in [
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":null,"reason":{"code":22,"kind":"too_large","message":"x"},"post":"p1"},"ignorable":true}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"edit":{"op":"replace","id":"a","message":{"id":"b"}},"reason":{"code":5,"kind":"not_found","message":"x"},"post":"p1"},"ignorable":true}"#,
        ] {
            assert_eq!(Event::from_json(ok).unwrap().body(), &Body::Rejected);
        }
        for bad in [
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":{}}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":{},"reason":"no"}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":{},"reason":{"kind":"io"}}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":[]}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"reason":{"code":5,"kind":"not_found","message":"x"}}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"message":{},"edit":{"op":"remove","id":"a"},"reason":{"code":5,"kind":"not_found","message":"x"}}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"edit":{"op":"move","id":"a"},"reason":{"code":5,"kind":"not_found","message":"x"}}}"#,
            r#"{"type":"agent/inbox/rejected","seq":0,"time":1,"data":{"edit":{"op":"remove"},"reason":{"code":5,"kind":"not_found","message":"x"}}}"#,
        ] {
            let err = Event::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(
                err.to_string().contains("agent/inbox/rejected"),
                "{bad}: {err}"
            );
        }
    }
}

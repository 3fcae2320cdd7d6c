//! Events: the ARCHITECTURE.md#events envelope, the reserved vocabulary (ARCHITECTURE.md#reserved-events) and their validation.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json::{self, MAX_SAFE_INTEGER};
use crate::message::excerpt;
use crate::splice::SpliceRecord;

mod canonical;

pub(crate) use canonical::{Shape, shape};

/// The spelling of each key of an event's JSON (ARCHITECTURE.md#events) as a literal,
/// so that `concat!` can build the writer's and the one-pass reader's byte patterns
/// from it: [`key`] holds the same spellings as constants for everyone else.
macro_rules! event_key {
    (type) => {
        "type"
    };
    (seq) => {
        "seq"
    };
    (time) => {
        "time"
    };
    (data) => {
        "data"
    };
    (ignorable) => {
        "ignorable"
    };
    (surface_op) => {
        "surfaceOp"
    };
    (source_event_seqs) => {
        "sourceEventSeqs"
    };
}
use event_key;

/// The keys of an event's JSON, in their written order (ARCHITECTURE.md#events): the
/// one spelling the log, the C ABI and the Python dicts share.
pub mod key {
    /// `type`: the event's type.
    pub const TYPE: &str = event_key!(type);
    /// `seq`: its 0-based position in the log.
    pub const SEQ: &str = event_key!(seq);
    /// `time`: milliseconds since the Unix epoch.
    pub const TIME: &str = event_key!(time);
    /// `data`: the host's JSON value.
    pub const DATA: &str = event_key!(data);
    /// `ignorable`: present (as `true`) only when set.
    pub const IGNORABLE: &str = event_key!(ignorable);
    /// `surfaceOp`: present only when set.
    pub const SURFACE_OP: &str = event_key!(surface_op);
    /// `sourceEventSeqs`: present only when set.
    pub const SOURCE_EVENT_SEQS: &str = event_key!(source_event_seqs);
    /// Every key, in written order.
    pub const ALL: [&str; 7] = [
        TYPE,
        SEQ,
        TIME,
        DATA,
        IGNORABLE,
        SURFACE_OP,
        SOURCE_EVENT_SEQS,
    ];
}

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

/// The reserved types opening a session reads (those that change the log state or
/// the inbox): a store that can read events by type hands the session these and the
/// last event, and nothing else is needed to replay.
pub const REPLAYED: [&str; 6] = [
    TURN_START,
    TURN_END,
    STEP_START,
    STEP_END,
    INBOX_SPLICED,
    END_SEED,
];

/// The event types that may carry `surfaceOp` and `sourceEventSeqs`.
const SURFACE_TYPES: [&str; 3] = [USER_MESSAGE, "assistant/message", "tool/result"];

/// Optional envelope keys a host may set on an appended event.
#[derive(Clone, Debug, Default)]
pub struct Envelope {
    /// A reader that does not know the type may skip the event.
    pub ignorable: bool,
    /// `"append"` or `{"op":"replace","start":N,"end":M}`, carried verbatim.
    pub surface_op: Option<Box<RawValue>>,
    /// Earlier events this one derives from.
    pub source_event_seqs: Option<Vec<u64>>,
}

impl PartialEq for Envelope {
    fn eq(&self, other: &Envelope) -> bool {
        let ops = match (&self.surface_op, &other.surface_op) {
            (Some(a), Some(b)) => json::same(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        ops && self.ignorable == other.ignorable
            && self.source_event_seqs == other.source_event_seqs
    }
}

impl Eq for Envelope {}

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

/// One committed log event. Cloning is cheap: clones share one immutable copy of the
/// payload.
///
/// The seq, the time and the few facts the consumed-work fold needs sit inline, so a
/// fold over a `Vec<Event>` streams through contiguous memory instead of chasing one
/// pointer per event.
#[derive(Clone)]
pub struct Event {
    seq: u64,
    time: u64,
    fold: FoldTag,
    inner: Arc<Inner>,
}

/// What ARCHITECTURE.md#consumed-work-fold needs to know about an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FoldTag {
    /// Ignored by the fold.
    Other,
    TurnStart,
    StepStart,
    TurnEnd {
        completed: bool,
    },
    /// A splice that removes without canceling: a claim.
    Claim,
    /// A canceling splice; `drops` when it inserts nothing (a bare cancel).
    Cancel {
        drops: bool,
    },
}

impl FoldTag {
    fn of(body: &Body) -> FoldTag {
        match body {
            Body::TurnStart { .. } => FoldTag::TurnStart,
            Body::StepStart { .. } => FoldTag::StepStart,
            Body::TurnEnd { completed, .. } => FoldTag::TurnEnd {
                completed: *completed,
            },
            Body::Spliced(r) if r.removed_count > 0 && r.canceled => FoldTag::Cancel {
                drops: r.inserted.is_empty(),
            },
            Body::Spliced(r) if r.removed_count > 0 => FoldTag::Claim,
            _ => FoldTag::Other,
        }
    }
}

struct Inner {
    body: Body,
    /// Reserved types borrow their static name; host types own theirs.
    ty: Cow<'static, str>,
    /// Compact JSON text, validated when the event was built.
    data: String,
    envelope: Envelope,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        let (a, b) = (&*self.inner, &*other.inner);
        self.seq == other.seq
            && self.time == other.time
            && a.ty == b.ty
            && a.data == b.data
            && a.envelope == b.envelope
    }
}

impl Eq for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    seq: u64,
    time: u64,
    data: Box<RawValue>,
    ignorable: Option<bool>,
    #[serde(rename = "surfaceOp")]
    surface_op: Option<Box<RawValue>>,
    #[serde(rename = "sourceEventSeqs")]
    source_event_seqs: Option<Vec<u64>>,
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
/// posted); or `{"edit":e,"reason":{…}}` for a posted edit (SPEC §11.3).
#[derive(Deserialize)]
struct RejectedData<'a> {
    #[serde(borrow, default)]
    message: Given<'a>,
    #[serde(borrow, default)]
    edit: Given<'a>,
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
fn known_type(ty: &str) -> Cow<'static, str> {
    const KNOWN: [&str; 9] = [
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        INBOX_SPLICED,
        END_SEED,
        INBOX_REJECTED,
        "assistant/message",
    ];
    match KNOWN.iter().find(|&&k| k == ty) {
        Some(&k) => Cow::Borrowed(k),
        None => Cow::Owned(ty.to_owned()),
    }
}

fn safe(name: &str, n: u64) -> Result<u64> {
    if n > MAX_SAFE_INTEGER {
        return Err(invalid(format!("{name} {n} is larger than 2^53-1")));
    }
    Ok(n)
}

/// Whether `ty` is written only by the library (ARCHITECTURE.md#reserved-events); `user/message` is not, a host
/// may append it with any JSON object as data.
pub fn is_reserved(ty: &str) -> bool {
    matches!(
        ty,
        TURN_START | TURN_END | STEP_START | STEP_END | INBOX_SPLICED | END_SEED | INBOX_REJECTED
    )
}

impl Body {
    /// Parses and checks the data of a reserved type; host types stay opaque.
    /// `text` is checked, compact JSON (the data of an event being built).
    fn parse(ty: &str, text: &str) -> Result<Body> {
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
                match (d.message.0, d.edit.0) {
                    (Some(_), None) => {}
                    (None, Some(edit)) => {
                        let e = json::from_str::<RejectedEdit<'_>>(edit.get());
                        if !e.is_ok_and(|e| matches!(&*e.op, "remove" | "replace")) {
                            return Err(invalid(
                                "agent/inbox/rejected edit must hold an \"op\" (\"remove\" or \"replace\") and a string \"id\"",
                            ));
                        }
                    }
                    _ => {
                        return Err(invalid(
                            "agent/inbox/rejected data must hold either \"message\" or \"edit\"",
                        ));
                    }
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

impl Event {
    /// Builds and validates an event from its parts (everything but the log invariants,
    /// which the log checks against its state). Data nested deeper than
    /// [`json::MAX_DEPTH`] is refused as `too_large` (ARCHITECTURE.md#limits), whatever
    /// path it came by.
    pub fn new(
        ty: &str,
        seq: u64,
        time: u64,
        data: Box<RawValue>,
        envelope: Envelope,
    ) -> Result<Event> {
        check_data_depth(ty, seq, data.get())?;
        let data: Box<str> = data.into();
        Event::build(ty, seq, time, data.into_string(), envelope)
    }

    /// [`Event::new`] with `data` already checked: valid, compact JSON.
    pub(crate) fn build(
        ty: &str,
        seq: u64,
        time: u64,
        data: String,
        envelope: Envelope,
    ) -> Result<Event> {
        if ty.is_empty() {
            return Err(invalid("event type must be a non-empty string"));
        }
        safe("seq", seq)?;
        safe("time", time)?;
        let surface = SURFACE_TYPES.contains(&ty);
        if let Some(op) = &envelope.surface_op {
            if !surface {
                return Err(invalid(format!(
                    "surfaceOp is only allowed on user/message, assistant/message and tool/result, not {ty}"
                )));
            }
            check_surface_op(op)?;
        }
        if let Some(seqs) = &envelope.source_event_seqs {
            if !surface {
                return Err(invalid(format!(
                    "sourceEventSeqs is only allowed on user/message, assistant/message and tool/result, not {ty}"
                )));
            }
            if let Some(bad) = seqs.iter().find(|&&s| s >= seq) {
                return Err(invalid(format!(
                    "sourceEventSeqs entry {bad} is not smaller than the event's seq {seq}"
                )));
            }
        }
        let body = Body::parse(ty, &data)?;
        let inner = Inner {
            ty: known_type(ty),
            data,
            envelope,
            body,
        };
        Ok(Event::assemble(seq, time, inner))
    }

    /// An event the library writes itself, with data it built (no re-parse).
    pub(crate) fn reserved(
        ty: &'static str,
        seq: u64,
        time: u64,
        data: String,
        body: Body,
        envelope: Envelope,
    ) -> Event {
        debug_assert!(
            RawValue::from_string(data.clone()).is_ok(),
            "library-built data is valid JSON"
        );
        let inner = Inner {
            ty: Cow::Borrowed(ty),
            data,
            envelope,
            body,
        };
        Event::assemble(seq, time, inner)
    }

    fn assemble(seq: u64, time: u64, inner: Inner) -> Event {
        Event {
            seq,
            time,
            fold: FoldTag::of(&inner.body),
            inner: Arc::new(inner),
        }
    }

    pub(crate) fn fold_tag(&self) -> FoldTag {
        self.fold
    }

    /// Parses one event from its JSON text and validates it (ARCHITECTURE.md#events, ARCHITECTURE.md#reserved-events).
    pub fn from_json(text: &str) -> Result<Event> {
        if let Some(event) = canonical::event(text) {
            return Ok(event);
        }
        let compacted = json::compact_within(text, json::MAX_RECORD_DEPTH)?;
        let wire: Wire<'_> =
            json::from_str(&compacted).map_err(|e| invalid(format!("invalid event: {e}")))?;
        if wire.ignorable == Some(false) {
            return Err(invalid("ignorable must be true when present"));
        }
        let envelope = Envelope {
            ignorable: wire.ignorable == Some(true),
            surface_op: wire.surface_op,
            source_event_seqs: wire.source_event_seqs,
        };
        Event::new(&wire.ty, wire.seq, wire.time, wire.data, envelope)
    }

    /// The event on `line`, whose [`Shape`] was found ahead (by a reader thread).
    pub(crate) fn from_shape(line: &str, shape: &Shape) -> Result<Event> {
        match canonical::build(line, shape) {
            Some(event) => Ok(event),
            None => Event::from_json(line),
        }
    }

    /// The event type, e.g. `turn/start`.
    pub fn ty(&self) -> &str {
        &self.inner.ty
    }

    /// Position in the log.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Unix epoch milliseconds, assigned at append.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The payload as compact JSON text.
    pub fn data(&self) -> &str {
        &self.inner.data
    }

    /// The optional envelope keys.
    pub fn envelope(&self) -> &Envelope {
        &self.inner.envelope
    }

    /// The splice record, for an `agent/inbox/spliced` event.
    pub fn splice(&self) -> Option<&SpliceRecord> {
        match &self.inner.body {
            Body::Spliced(rec) => Some(rec),
            _ => None,
        }
    }

    pub(crate) fn body(&self) -> &Body {
        &self.inner.body
    }

    /// Appends the compact JSON of the event (keys in ARCHITECTURE.md#events order, no newline) to `out`.
    pub fn write_json(&self, out: &mut String) {
        let e = &*self.inner;
        let mut digits = itoa::Buffer::new();
        out.reserve(64 + e.ty.len() + e.data.len());
        out.push_str(concat!("{\"", event_key!(type), "\":"));
        json::write_string(out, &e.ty);
        out.push_str(concat!(",\"", event_key!(seq), "\":"));
        out.push_str(digits.format(self.seq));
        out.push_str(concat!(",\"", event_key!(time), "\":"));
        out.push_str(digits.format(self.time));
        out.push_str(concat!(",\"", event_key!(data), "\":"));
        out.push_str(&e.data);
        if e.envelope.ignorable {
            out.push_str(concat!(",\"", event_key!(ignorable), "\":true"));
        }
        if let Some(op) = &e.envelope.surface_op {
            out.push_str(concat!(",\"", event_key!(surface_op), "\":"));
            out.push_str(op.get());
        }
        if let Some(seqs) = &e.envelope.source_event_seqs {
            out.push_str(concat!(",\"", event_key!(source_event_seqs), "\":["));
            for (i, s) in seqs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{s}");
            }
            out.push(']');
        }
        out.push('}');
    }

    /// The event as compact JSON, keys in ARCHITECTURE.md#events order.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(48 + self.inner.data.len());
        self.write_json(&mut out);
        out
    }
}

/// Refuses event data nested deeper than ARCHITECTURE.md#limits allows: host data (and
/// every reserved type's data) at most [`json::MAX_DEPTH`] levels, as an append checks it;
/// the records that wrap whole messages (`agent/inbox/spliced`, `agent/inbox/rejected`)
/// two levels more, so that each message in them may be [`json::MAX_DEPTH`] deep.
fn check_data_depth(ty: &str, seq: u64, data: &str) -> Result<()> {
    let limit = match ty {
        INBOX_SPLICED | INBOX_REJECTED => json::MAX_DEPTH + 2,
        _ => json::MAX_DEPTH,
    };
    json::check_depth(data, limit)
        .map_err(|e| e.context(format_args!("data of {ty} event seq {seq}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceOp<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    start: u64,
    end: u64,
}

fn check_surface_op(op: &RawValue) -> Result<()> {
    let text = op.get();
    if text == "\"append\"" {
        return Ok(());
    }
    match json::from_str::<ReplaceOp<'_>>(text) {
        Ok(r) if r.op == "replace" && r.start <= MAX_SAFE_INTEGER && r.end <= MAX_SAFE_INTEGER => {
            Ok(())
        }
        _ => Err(invalid(format!(
            "surfaceOp must be \"append\" or {{\"op\":\"replace\",\"start\":N,\"end\":M}}, got {}",
            excerpt(text)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    /// The writer, the one-pass reader (`canonical`) and the general parser (`Wire`,
    /// whose serde renames are literals) all spell the keys as [`key`] does.
    #[test]
    fn every_reader_and_writer_spells_the_keys_as_key_does() {
        let text = r#"{"type":"user/message","seq":3,"time":17,"data":{},"ignorable":true,"surfaceOp":"append","sourceEventSeqs":[0]}"#;
        let e = Event::from_json(text).unwrap();
        assert_eq!(e.to_json(), text);
        let key_spelled: String = key::ALL
            .iter()
            .zip([
                "\"user/message\"",
                "3",
                "17",
                "{}",
                "true",
                "\"append\"",
                "[0]",
            ])
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(format!("{{{key_spelled}}}"), text);
        assert!(shape(text).is_some(), "the one-pass reader takes it");
        // In another order only the general parser reads it, with the same keys.
        let reversed: Vec<String> = key::ALL
            .iter()
            .rev()
            .zip([
                "[0]",
                "\"append\"",
                "true",
                "{}",
                "17",
                "3",
                "\"user/message\"",
            ])
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        let reversed = format!("{{{}}}", reversed.join(","));
        assert!(shape(&reversed).is_none());
        assert_eq!(Event::from_json(&reversed).unwrap().to_json(), text);
    }

    #[test]
    fn round_trips_in_key_order() {
        let text = r#"{"type":"user/message","seq":3,"time":17,"data":{"id":"m","z":1,"a":2},"ignorable":true,"surfaceOp":{"op":"replace","start":0,"end":2},"sourceEventSeqs":[0,2]}"#;
        let e = Event::from_json(text).unwrap();
        assert_eq!(e.to_json(), text);
        let spaced = "{ \"type\" : \"x/y\", \"seq\":0, \"time\":1, \"data\": [ 1, 2 ] }";
        assert_eq!(
            Event::from_json(spaced).unwrap().to_json(),
            r#"{"type":"x/y","seq":0,"time":1,"data":[1,2]}"#
        );
    }

    #[test]
    fn refuses_bad_envelopes() {
        for (bad, needle) in [
            (r#"{"type":"","seq":0,"time":0,"data":{}}"#, "non-empty"),
            (
                r#"{"type":"x","seq":-0,"time":0,"data":{}}"#,
                "invalid event",
            ),
            (
                r#"{"type":"x","seq":1.0,"time":0,"data":{}}"#,
                "invalid event",
            ),
            (
                r#"{"type":"x","seq":9007199254740992,"time":0,"data":{}}"#,
                "2^53-1",
            ),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"extra":1}"#,
                "unknown field",
            ),
            (r#"{"type":"x","seq":0,"time":0}"#, "missing field"),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"ignorable":false}"#,
                "ignorable",
            ),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#,
                "only allowed",
            ),
            (
                r#"{"type":"tool/result","seq":0,"time":0,"data":{},"surfaceOp":"prepend"}"#,
                "surfaceOp must be",
            ),
            (
                r#"{"type":"tool/result","seq":2,"time":0,"data":{},"sourceEventSeqs":[1,2]}"#,
                "not smaller",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":"1"}}"#,
                "turn/start data",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":0,"data":{"turn":1,"reason":"done"}}"#,
                "reason",
            ),
            (
                r#"{"type":"step/end","seq":0,"time":0,"data":{"turn":1}}"#,
                "step/end data",
            ),
            (
                r#"{"type":"user/message","seq":0,"time":0,"data":"hi"}"#,
                "must be a JSON object",
            ),
            (
                r#"{"type":"session/end-seed","seq":0,"time":0,"data":[]}"#,
                "end-seed data must be a JSON object",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":0,"data":[1]}"#,
                "turn/start data must be a JSON object",
            ),
        ] {
            let err = Event::from_json(bad).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::InvalidInput),
                "{bad}: {err:?}"
            );
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let err = Event::from_json(
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"x"}}"#,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSplice);
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

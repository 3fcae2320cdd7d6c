//! Every JSON shape that crosses a boundary to a binding, parsed and printed once:
//! the C ABI hands these strings to its hosts, the Python module turns the same
//! strings into dicts, so both faces print identical JSON by construction.
//!
//! Printed here: the open and verify reports, proposals, decided results, baselines,
//! inspect results, fold results, inbox notifications, observer failures, the C
//! notification queue's items, lists of events, messages and headers, and the error
//! object of SPEC §8 ([`ErrorFields`]). Parsed here: baselines, decisions, envelopes,
//! lists of events and messages, cancel causes named by kind. The log's own record
//! formats (an event, a header, a splice record, a turn-end reason) stay with their
//! types, because the stores write them too; this module embeds them verbatim.
//!
//! Printing writes keys in a fixed order with the values' compact text embedded as
//! is (messages, event data, big integers and key order survive byte for byte);
//! parsing reads serde DTOs whose `&RawValue` fields keep that text lossless. This
//! module sits at the top of the core: it imports the types it prints, and no core
//! module imports it.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result, invalid};
use crate::event::{Envelope, Event};
use crate::fold::ConsumedWork;
use crate::header::Header;
use crate::json;
use crate::message::Message;
use crate::observer::{InboxNotice, ObserverFailures};
use crate::projection::Baseline;
use crate::protocol::{Decided, Decision, Proposal};
use crate::reason::CancelCause;
use crate::session::{OpenReport, VerifyReport};

/// A value the bindings hand out as JSON text: one compact spelling for every face.
pub trait ToJson {
    /// The compact JSON text of the value.
    fn to_json(&self) -> String;
}

/// A value the bindings take in as JSON text, parsed strictly.
pub trait FromJson: Sized {
    /// Parses and validates the value from JSON text.
    fn from_json(text: &str) -> Result<Self>;
}

/// A JSON object written key by key, in the order of the calls.
struct Object(String);

impl Object {
    fn new() -> Object {
        Object(String::from("{"))
    }

    fn key(&mut self, key: &str) -> &mut String {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        // Keys are this module's literals: plain ASCII, nothing to escape.
        let _ = write!(self.0, "\"{key}\":");
        &mut self.0
    }

    /// `"key":<json>` with `json` embedded verbatim.
    fn raw(mut self, key: &str, json: &str) -> Object {
        self.key(key).push_str(json);
        self
    }

    /// `"key":"text"`, quoted and escaped.
    fn str(mut self, key: &str, text: &str) -> Object {
        let quoted = json::quote(text);
        self.key(key).push_str(&quoted);
        self
    }

    /// `"key":N` (or `true`/`false`).
    fn num(mut self, key: &str, n: impl std::fmt::Display) -> Object {
        let _ = write!(self.key(key), "{n}");
        self
    }

    /// `"key":N|null`.
    fn opt(self, key: &str, n: Option<u64>) -> Object {
        match n {
            Some(n) => self.num(key, n),
            None => self.raw(key, "null"),
        }
    }

    fn end(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// `[a,b,…]` from JSON texts embedded verbatim.
pub fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
    out
}

/// `[e1,e2,…]`: events in their log spelling (SPEC §1.1 key order).
pub fn events(events: &[Event]) -> String {
    let mut out = String::with_capacity(64 * events.len() + 2);
    out.push('[');
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        event.write_json(&mut out);
    }
    out.push(']');
    out
}

/// `[m1,m2,…]`: messages as given.
pub fn messages(messages: &[Message]) -> String {
    list(messages.iter().map(Message::json))
}

/// `[h1,h2,…]`: session headers (a store's list).
pub fn headers(headers: &[Header]) -> String {
    let texts: Vec<String> = headers.iter().map(Header::to_json).collect();
    list(texts.iter().map(String::as_str))
}

/// `{"header":{…},"events":[…]}`: a stored session read as it is.
pub fn inspect(header: &Header, events: &[Event]) -> String {
    Object::new()
        .raw("header", &header.to_json())
        .raw("events", &self::events(events))
        .end()
}

/// `{"event":{…}}`: one item of the C notification queue.
pub fn event_notification(event: &Event) -> String {
    Object::new().raw("event", &event.to_json()).end()
}

/// `{"inbox":{…}}`: one item of the C notification queue.
pub fn inbox_notification(notice: &InboxNotice) -> String {
    Object::new().raw("inbox", &notice.to_json()).end()
}

/// The elements of a JSON array, raw; `what` names the array in errors.
fn raw_array<'a>(text: &'a str, what: &str, of: &str) -> Result<Vec<&'a RawValue>> {
    let compacted =
        json::compact_within(text, json::MAX_RECORD_DEPTH + 1).map_err(|e| e.context(what))?;
    if !compacted.starts_with('[') {
        return Err(invalid(format!("{what} must be a JSON array of {of}")));
    }
    // Borrowed text parses in place; text with whitespace was checked above and is
    // parsed as given (the elements keep no whitespace once validated).
    json::from_str(text).map_err(|e| invalid(format!("{what} must be a JSON array of {of}: {e}")))
}

/// Parses a JSON array of events (`what` names it in errors: `what element i: …`).
pub fn events_from(text: &str, what: &str) -> Result<Vec<Event>> {
    raw_array(text, what, "events")?
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            Event::from_json(raw.get()).map_err(|e| e.context(format_args!("{what} element {i}")))
        })
        .collect()
}

/// Parses a JSON array of messages (`what` names it in errors: `what element i: …`).
pub fn messages_from(text: &str, what: &str) -> Result<Vec<Message>> {
    raw_array(text, what, "messages")?
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            Message::from_json(raw.get()).map_err(|e| e.context(format_args!("{what} element {i}")))
        })
        .collect()
}

/// A cancel cause named by its kind alone (`"user"`, `"parent"`, `"disposed"`), as
/// `{"kind":…}`; `"hook"` needs a reason and is refused as that object would be.
pub fn cancel_cause_named(kind: &str) -> Result<CancelCause> {
    CancelCause::from_json(&Object::new().str("kind", kind).end())
}

impl ToJson for OpenReport {
    /// `{"tornBytes":N,"repairedTurn":N|null}`.
    fn to_json(&self) -> String {
        Object::new()
            .num("tornBytes", self.torn_bytes)
            .opt("repairedTurn", self.repaired_turn)
            .end()
    }
}

impl ToJson for VerifyReport {
    /// `{"header":{…},"events":N,"tornBytes":N,"openTurn":N|null,"openStep":N|null,
    /// "needsRepair":bool,"nextTurn":N,"nextStep":N}`.
    fn to_json(&self) -> String {
        Object::new()
            .raw("header", &self.header.to_json())
            .num("events", self.events)
            .num("tornBytes", self.torn_bytes)
            .opt("openTurn", self.open_turn)
            .opt("openStep", self.open_step)
            .num("needsRepair", self.needs_repair())
            .num("nextTurn", self.next_turn)
            .num("nextStep", self.next_step)
            .end()
    }
}

impl ToJson for Proposal {
    /// `{"turn":N,"step":K,"messages":[…]}`.
    fn to_json(&self) -> String {
        Object::new()
            .num("turn", self.turn)
            .num("step", self.step)
            .raw("messages", &messages(&self.messages))
            .end()
    }
}

impl ToJson for Decided {
    /// `{"kind":"step","turn":N,"step":K}` or `{"kind":"turn-end","turn":N,"reason":R}`.
    fn to_json(&self) -> String {
        match self {
            Decided::Step { turn, step } => Object::new()
                .raw("kind", "\"step\"")
                .num("turn", turn)
                .num("step", step)
                .end(),
            Decided::TurnEnded { turn, reason } => Object::new()
                .raw("kind", "\"turn-end\"")
                .num("turn", turn)
                .raw("reason", &reason.to_json())
                .end(),
        }
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

impl ToJson for InboxNotice {
    /// `{"type":…,"message":{…}[,"turn":N]}`.
    fn to_json(&self) -> String {
        let out = Object::new()
            .str("type", self.ty())
            .raw("message", self.message().json());
        match self {
            InboxNotice::Claimed(_, turn) => out.num("turn", turn).end(),
            _ => out.end(),
        }
    }
}

impl ToJson for ObserverFailures {
    /// [`ObserverFailures::lines`] as a JSON array of strings.
    fn to_json(&self) -> String {
        let lines: Vec<String> = self.lines().iter().map(|l| json::quote(l)).collect();
        list(lines.iter().map(String::as_str))
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionWire {
    kind: String,
    messages: Option<Vec<Message>>,
}

impl FromJson for Decision {
    /// Parses `{"kind":"reject"}` or `{"kind":"enter","messages":[…]}`.
    fn from_json(text: &str) -> Result<Decision> {
        let wire: DecisionWire = json::parse(text, "decision")?;
        match (wire.kind.as_str(), wire.messages) {
            ("reject", None) => Ok(Decision::Reject),
            ("enter", Some(messages)) => Ok(Decision::Enter(messages)),
            ("reject", Some(_)) => Err(invalid("decision: a reject carries no \"messages\"")),
            ("enter", None) => Err(invalid(
                "decision: an enter needs \"messages\" (the complete final batch)",
            )),
            (other, _) => Err(invalid(format!(
                "decision kind must be \"reject\" or \"enter\", got {}",
                json::quote(other)
            ))),
        }
    }
}

/// The optional envelope keys of an appended event.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeWire<'a> {
    #[serde(default)]
    ignorable: bool,
    #[serde(rename = "surfaceOp", borrow)]
    surface_op: Option<&'a RawValue>,
    #[serde(rename = "sourceEventSeqs")]
    source_event_seqs: Option<Vec<u64>>,
}

impl FromJson for Envelope {
    /// Parses `{"ignorable":bool,"surfaceOp":…,"sourceEventSeqs":[…]}`, every key
    /// optional, no other allowed (the event's type checks the values on append).
    fn from_json(text: &str) -> Result<Envelope> {
        let compacted = json::compact(text).map_err(|e| e.context("envelope"))?;
        let wire: EnvelopeWire<'_> = json::from_str(&compacted).map_err(|e| {
            invalid(format!(
                "envelope must be an object with optional ignorable, surfaceOp, \
                 sourceEventSeqs: {e}"
            ))
        })?;
        Ok(Envelope {
            ignorable: wire.ignorable,
            surface_op: wire.surface_op.map(RawValue::to_owned),
            source_event_seqs: wire.source_event_seqs,
        })
    }
}

/// An error as every face reports it (SPEC §8): `code`, `kind`, `message`, then the
/// location keys `session`, `path`, `line`, `offset`, `seq` where known. The C ABI
/// prints it as its error JSON; the Python exception carries the same fields as
/// attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorFields<'a> {
    /// The stable number of the kind (or of a binding's own status).
    pub code: u32,
    /// The kind's stable name, e.g. `invalid_input`.
    pub kind: &'a str,
    /// The message, naming what and where.
    pub message: &'a str,
    /// The session the error concerns.
    pub session: Option<&'a str>,
    /// The file, written lossily when it is not UTF-8 (as the message names it).
    pub path: Option<Cow<'a, str>>,
    /// The 1-based line of a stored log.
    pub line: Option<u64>,
    /// The byte offset of that line.
    pub offset: Option<u64>,
    /// The seq of the event concerned.
    pub seq: Option<u64>,
}

impl<'a> ErrorFields<'a> {
    /// An error a binding raises itself (a NULL argument, bad UTF-8): no location.
    pub fn new(code: u32, kind: &'a str, message: &'a str) -> ErrorFields<'a> {
        ErrorFields {
            code,
            kind,
            message,
            session: None,
            path: None,
            line: None,
            offset: None,
            seq: None,
        }
    }

    /// The fields of a core error.
    pub fn of(e: &'a Error) -> ErrorFields<'a> {
        let kind = e.kind();
        ErrorFields {
            session: e.session(),
            path: e.path().map(|p| p.to_string_lossy()),
            line: e.line(),
            offset: e.offset(),
            seq: e.seq(),
            ..ErrorFields::new(kind.code(), kind.name(), e.message())
        }
    }
}

impl ToJson for ErrorFields<'_> {
    /// `{"code":N,"kind":"…","message":"…"}` plus the known location keys.
    fn to_json(&self) -> String {
        let mut out = Object::new()
            .num("code", self.code)
            .str("kind", self.kind)
            .str("message", self.message);
        if let Some(session) = self.session {
            out = out.str("session", session);
        }
        if let Some(path) = &self.path {
            out = out.str("path", path);
        }
        for (key, value) in [
            ("line", self.line),
            ("offset", self.offset),
            ("seq", self.seq),
        ] {
            if let Some(n) = value {
                out = out.num(key, n);
            }
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::reason::{TurnEndReason, TurnError};
    use crate::splice::Target;

    fn msg(text: &str) -> Message {
        Message::from_json(text).unwrap()
    }

    #[test]
    fn reports_print_in_their_one_spelling() {
        assert_eq!(
            OpenReport::default().to_json(),
            r#"{"tornBytes":0,"repairedTurn":null}"#
        );
        let report = OpenReport {
            torn_bytes: 17,
            repaired_turn: Some(3),
        };
        assert_eq!(report.to_json(), r#"{"tornBytes":17,"repairedTurn":3}"#);
    }

    #[test]
    fn protocol_results_print_in_their_one_spelling() {
        let p = Proposal {
            turn: 1,
            step: 2,
            messages: vec![
                msg(r#"{"id":"a","n":12345678901234567890}"#),
                msg(r#"{"id":"b"}"#),
            ],
        };
        assert_eq!(
            p.to_json(),
            r#"{"turn":1,"step":2,"messages":[{"id":"a","n":12345678901234567890},{"id":"b"}]}"#
        );
        assert_eq!(
            Decided::Step { turn: 1, step: 0 }.to_json(),
            r#"{"kind":"step","turn":1,"step":0}"#
        );
        let error = TurnError::from_json(r#"{"message":"m","code":"c"}"#).unwrap();
        assert_eq!(
            Decided::TurnEnded {
                turn: 4,
                reason: TurnEndReason::Error(error)
            }
            .to_json(),
            r#"{"kind":"turn-end","turn":4,"reason":{"kind":"error","error":{"message":"m","code":"c"}}}"#
        );
    }

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
    fn notices_and_failures_print_in_their_one_spelling() {
        let m = msg(r#"{"id":"x\"y"}"#);
        assert_eq!(
            InboxNotice::Claimed(m.clone(), 2).to_json(),
            r#"{"type":"agent/inbox/claimed","message":{"id":"x\"y"},"turn":2}"#
        );
        assert_eq!(
            inbox_notification(&InboxNotice::Inserted(m)),
            r#"{"inbox":{"type":"agent/inbox/inserted","message":{"id":"x\"y"}}}"#
        );
        let failures = ObserverFailures {
            dropped: 0,
            messages: vec!["a \"b\"\n".to_owned()],
        };
        assert_eq!(failures.to_json(), r#"["a \"b\"\n"]"#);
        assert_eq!(ObserverFailures::default().to_json(), "[]");
    }

    #[test]
    fn errors_print_their_fields_with_escaping() {
        let e = ErrorFields::new(100, "null_argument", "argument \"id\" is NULL");
        assert_eq!(
            e.to_json(),
            r#"{"code":100,"kind":"null_argument","message":"argument \"id\" is NULL"}"#
        );
        let core = Error::new(ErrorKind::Locked, "held");
        assert_eq!(
            ErrorFields::of(&core).to_json(),
            r#"{"code":3,"kind":"locked","message":"held"}"#
        );
        let located = Error::new(ErrorKind::Corrupt, "bad")
            .with_session("s")
            .with_path(std::path::Path::new("/r/\"s\".jsonl"))
            .with_line(2, 57)
            .with_seq(0);
        assert_eq!(
            ErrorFields::of(&located).to_json(),
            r#"{"code":2,"kind":"corrupt","message":"bad","session":"s","path":"/r/\"s\".jsonl","line":2,"offset":57,"seq":0}"#
        );
    }

    #[test]
    fn decisions_and_envelopes_parse_strictly() {
        assert_eq!(
            Decision::from_json(r#"{"kind":"reject"}"#).unwrap(),
            Decision::Reject
        );
        assert_eq!(
            Decision::from_json(r#"{ "kind" : "enter", "messages": [{"id":"a"}] }"#).unwrap(),
            Decision::Enter(vec![msg(r#"{"id":"a"}"#)])
        );
        let err = Decision::from_json(r#"{"kind":"maybe"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"decision kind must be "reject" or "enter", got "maybe""#
        );
        let env = Envelope::from_json(
            r#"{"ignorable":true,"surfaceOp": "append","sourceEventSeqs":[1]}"#,
        )
        .unwrap();
        assert!(env.ignorable);
        assert_eq!(env.surface_op.unwrap().get(), r#""append""#);
        assert_eq!(env.source_event_seqs, Some(vec![1]));
        let err = Envelope::from_json(r#"{"other":1}"#).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string().starts_with("envelope must be an object"),
            "{err}"
        );
        let deep = format!("{{\"surfaceOp\":{}{}}}", "[".repeat(600), "]".repeat(600));
        assert_eq!(
            Envelope::from_json(&deep).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }

    #[test]
    fn lists_parse_naming_the_element() {
        let ms = messages_from(r#"[{"id":"a"}, {"id":"b"}]"#, "inserted").unwrap();
        assert_eq!(messages(&ms), r#"[{"id":"a"},{"id":"b"}]"#);
        let err = messages_from(r#"[{"id":"a"},{"x":1}]"#, "argument `inserted_json`").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("argument `inserted_json` element 1: message has no \"id\""),
            "{err}"
        );
        let err = messages_from(r#"{"id":"a"}"#, "inserted").unwrap_err();
        assert_eq!(err.to_string(), "inserted must be a JSON array of messages");
        let err = events_from("[1]", "events").unwrap_err();
        assert!(err.to_string().starts_with("events element 0: "), "{err}");
        assert!(events_from("[]", "events").unwrap().is_empty());
    }

    #[test]
    fn cancel_causes_are_named_by_kind() {
        assert_eq!(cancel_cause_named("parent").unwrap(), CancelCause::Parent);
        assert_eq!(
            cancel_cause_named("hook").unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            cancel_cause_named("x\"y").unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        // Target spellings are the splice's, not redefined here.
        assert_eq!(Target::NextTurn.as_str(), "next-turn");
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

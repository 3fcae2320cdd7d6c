//! Every JSON shape that crosses a boundary to a binding, parsed and printed once:
//! the C ABI hands these strings to its hosts, the Python module turns the same
//! strings into dicts, so both faces print identical JSON by construction.
//!
//! Printed here: the open and verify reports, proposals, decided results, baselines,
//! inspect results, fold results, inbox notifications, observer failures, the C
//! notification queue's items, lists of events, messages and headers, and the error
//! object of ARCHITECTURE.md#errors ([`ErrorFields`]). Parsed here: baselines, decisions, envelopes,
//! lists of events and messages, cancel causes named by kind. The log's own record
//! formats (an event, a header, a splice record, a turn-end reason) stay with their
//! types, because the stores write them too; this module embeds them verbatim.
//!
//! Printing writes keys in a fixed order with the values' compact text embedded as
//! is (messages, event data, big integers and key order survive byte for byte);
//! parsing reads serde DTOs whose `&RawValue` fields keep that text lossless. This
//! module sits at the top of the core: it imports the types it prints, and no core
//! module imports it.
//!
//! Here: the two traits, the object writer, lists, inspect results, notifications and
//! envelopes; `protocol` holds proposals, decisions and decided results; `reports`
//! what reading a log gives (open and verify reports, baselines, fold results). The
//! error fields are printed by their own module below (`error_fields`), since the
//! fleet writes them into `agent/inbox/rejected` events too.

mod approvals;
mod compaction;
mod protocol;
mod reports;

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::event::{Envelope, Event};
use crate::header::Header;
use crate::json;
use crate::message::Message;
use crate::observer::{InboxNotice, ObserverFailures};

pub use crate::error_fields::ErrorFields;
pub use crate::event::key as event_key;
pub use approvals::ApprovalRequest;
pub use compaction::CompactionCommit;
pub use protocol::cancel_cause_named;
pub use reports::parked as parked_json;

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

/// `[e1,e2,…]`: events in their log spelling (ARCHITECTURE.md#events key order).
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

impl ToJson for ErrorFields<'_> {
    /// `{"code":N,"kind":"…","message":"…"}` plus the known location keys.
    fn to_json(&self) -> String {
        let mut out = String::with_capacity(48 + self.message.len());
        self.write_json(&mut out);
        out
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

/// The options of [`crate::store::open`] as the C ABI takes them: every key optional,
/// `{"durability":"sync","recordLimit":N,"schema":"inboxlog","maxConnections":8}`; others are refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StoreOptionsWire {
    durability: Option<String>,
    record_limit: Option<u64>,
    schema: Option<String>,
    max_connections: Option<u32>,
}

impl FromJson for crate::store::StoreOptions {
    fn from_json(text: &str) -> Result<Self> {
        // serde would also build the struct from an array.
        if !text.trim_start().starts_with('{') {
            return Err(invalid(
                "store options must be an object with optional durability, recordLimit, \
                 schema and maxConnections",
            ));
        }
        let given: StoreOptionsWire = json::parse(text, "store options")?;
        let mut options = crate::store::StoreOptions::default();
        if let Some(durability) = given.durability {
            options.durability = crate::store::Durability::parse(&durability)?;
        }
        options.record_limit = given.record_limit;
        options.schema = given.schema;
        options.max_connections = given.max_connections;
        Ok(options)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn msg(text: &str) -> Message {
        Message::from_json(text).unwrap()
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
    fn envelopes_parse_strictly() {
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
}

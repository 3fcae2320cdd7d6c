//! An event's JSON text: parsed (the one-pass reader first, the general parser for any
//! other spelling) and printed in the ARCHITECTURE.md#events key order.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::{self, Shape};
use super::{Envelope, Event, event_key};
use crate::error::{Result, invalid};
use crate::json;

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

impl Event {
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

    /// The event of a version 2 line's `body` (its object without the closing `}`:
    /// core/FORMAT.md#checksums-version-2), with the body's [`Shape`] when it was found ahead.
    pub(crate) fn from_open(body: &str, ahead: Option<&Shape>) -> Result<Event> {
        let found = match ahead {
            Some(shape) => canonical::build(body, shape),
            None => canonical::shape_open(body).and_then(|shape| canonical::build(body, &shape)),
        };
        if let Some(event) = found {
            return Ok(event);
        }
        let mut text = String::with_capacity(body.len() + 1);
        text.push_str(body);
        text.push('}');
        Event::from_json(&text)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{key, shape};

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
}

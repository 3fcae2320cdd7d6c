//! Messages: JSON objects identified by a non-empty string `id` (SPEC §2).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json;

/// One pending unit of work: a JSON object with a non-empty string `id`.
///
/// Every other key is carried verbatim, in its original order; the message is kept as
/// its compact JSON text.
///
/// Cloning is cheap: clones share one immutable copy.
#[derive(Clone)]
pub struct Message(Arc<Inner>);

struct Inner {
    id: Box<str>,
    raw: Box<RawValue>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.json() == other.json()
    }
}

impl Eq for Message {}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
}

impl Message {
    /// Parses and validates a message from JSON text.
    pub fn from_json(text: &str) -> Result<Message> {
        Message::from_raw(json::raw_value(text, "message")?)
    }

    /// Validates a message already held as raw JSON (e.g. read back from a log).
    pub fn from_raw(raw: Box<RawValue>) -> Result<Message> {
        if !raw.get().starts_with('{') {
            return Err(invalid(format!(
                "message must be a JSON object, got {}",
                excerpt(raw.get())
            )));
        }
        let id = match json::from_str::<IdOnly<'_>>(raw.get()) {
            Ok(head) => head.id,
            Err(e) if e.to_string().starts_with("missing field") => {
                return Err(invalid(format!(
                    "message has no \"id\": {}",
                    excerpt(raw.get())
                )));
            }
            Err(e) => {
                return Err(invalid(format!(
                    "message \"id\" must be a non-empty string: {e}"
                )));
            }
        };
        if id.is_empty() {
            return Err(invalid(
                "message \"id\" must be a non-empty string, got \"\"",
            ));
        }
        let id = id.into_owned().into_boxed_str();
        Ok(Message(Arc::new(Inner { id, raw })))
    }

    /// The message's identity.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// The message as compact JSON text.
    pub fn json(&self) -> &str {
        self.0.raw.get()
    }

    /// The message as a raw JSON value.
    pub fn raw(&self) -> &RawValue {
        &self.0.raw
    }
}

/// The first characters of some JSON, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 60;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json())
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Message::from_raw(raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn keeps_the_object_verbatim() {
        let m =
            Message::from_json(r#"{"role":"user", "id":"m1","n":123456789012345678901}"#).unwrap();
        assert_eq!(m.id(), "m1");
        assert_eq!(
            m.json(),
            r#"{"role":"user","id":"m1","n":123456789012345678901}"#
        );
        assert_eq!(serde_json::to_string(&m).unwrap(), m.json());
    }

    #[test]
    fn refuses_what_is_not_a_message() {
        for (bad, needle) in [
            ("[\"m1\"]", "must be a JSON object"),
            ("{\"role\":\"user\"}", "has no \"id\""),
            ("{\"id\":\"\"}", "non-empty string"),
            ("{\"id\":7}", "non-empty string"),
            ("{\"id\":\"a\",\"id\":\"b\"}", "non-empty string"),
            ("{\"id\":", "invalid JSON"),
        ] {
            let err = Message::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }
}

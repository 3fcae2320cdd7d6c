//! Messages: JSON objects identified by a non-empty string `id` (ARCHITECTURE.md#messages).

use std::fmt;
use std::sync::Arc;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json;
use crate::json::walk::{self, Cursor};

/// One pending unit of work: a JSON object with a non-empty string `id`.
///
/// Every other key is carried verbatim, in its original order; the message is kept as
/// its compact JSON text.
///
/// Cloning is cheap: clones share one immutable copy.
#[derive(Clone)]
pub struct Message(Arc<Inner>);

struct Inner {
    id: Id,
    /// Compact JSON text of the whole object.
    json: Box<str>,
}

/// Where a message's id is: spelled without escapes inside its JSON (no copy), or
/// decoded.
enum Id {
    /// The id is `json[start..end]`.
    Within(u32, u32),
    /// The id has escapes in the JSON; this is its decoded text.
    Decoded(Box<str>),
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.json() == other.json()
    }
}

impl Eq for Message {}

/// The `id` of a message object, found in one validating pass over the object.
struct Head(Option<String>);

/// Whether a key is `"id"`, without allocating for other keys.
struct IsId(bool);

impl<'de> Deserialize<'de> for IsId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> std::result::Result<IsId, E> {
                Ok(IsId(key == "id"))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Head;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Head, A::Error> {
                let mut id = None;
                while let Some(IsId(is_id)) = map.next_key()? {
                    if !is_id {
                        map.next_value::<IgnoredAny>()?;
                    } else if id.is_some() {
                        return Err(de::Error::custom("duplicate key \"id\""));
                    } else {
                        id = Some(map.next_value::<String>()?);
                    }
                }
                Ok(Head(id))
            }
        }
        d.deserialize_map(V)
    }
}

impl Message {
    /// Parses and validates a message from JSON text.
    pub fn from_json(text: &str) -> Result<Message> {
        let compacted = json::compact(text).map_err(|e| e.context("message"))?;
        Message::from_compact(compacted.into_owned())
    }

    /// Validates a message already held as raw JSON (e.g. read back from a log).
    pub fn from_raw(raw: Box<RawValue>) -> Result<Message> {
        let text: Box<str> = raw.into();
        Message::from_compact(text.into_string())
    }

    /// The message object at the cursor (in checked, compact text: part of an event's
    /// data), stepped over, when its `id` can be read in place: a key `"id"` once,
    /// holding a non-empty string without escapes, and no key spelled with an escape.
    /// `None` leaves the text to [`Message::from_raw`], which decides.
    pub(crate) fn read_plain(c: &mut Cursor<'_>) -> Option<Message> {
        let start = c.at();
        let mut id = None;
        walk::object(c, |key, c| {
            let from = c.at() - start;
            let value = c.value()?;
            if key == "id" {
                let inner = value.strip_prefix('"')?.strip_suffix('"')?;
                // The id's range within the message, without its quotes.
                let range = (
                    u32::try_from(from + 1).ok()?,
                    u32::try_from(from + value.len() - 1).ok()?,
                );
                if inner.is_empty() || inner.contains('\\') || id.replace(range).is_some() {
                    return None;
                }
            } else if key.contains('\\') {
                return None;
            }
            Some(())
        })?;
        let (from, to) = id?;
        Some(Message(Arc::new(Inner {
            id: Id::Within(from, to),
            json: c.since(start)?.into(),
        })))
    }

    /// One pass over compact text: syntax, object shape and the `id`.
    fn from_compact(text: String) -> Result<Message> {
        if !text.starts_with('{') {
            return Err(invalid(format!(
                "message must be a JSON object, got {}",
                excerpt(&text)
            )));
        }
        let id = match json::from_str::<Head>(&text) {
            Ok(Head(Some(id))) if !id.is_empty() => id,
            Ok(Head(Some(_))) => {
                return Err(invalid(
                    "message \"id\" must be a non-empty string, got \"\"",
                ));
            }
            Ok(Head(None)) => {
                return Err(invalid(format!(
                    "message has no \"id\": {}",
                    excerpt(&text)
                )));
            }
            Err(e) if e.is_syntax() || e.is_eof() => {
                return Err(invalid(format!("message: invalid JSON: {e}")));
            }
            Err(e) => {
                return Err(invalid(format!(
                    "message \"id\" must be a non-empty string: {e}"
                )));
            }
        };
        Ok(Message(Arc::new(Inner {
            id: Id::Decoded(id.into_boxed_str()),
            json: text.into_boxed_str(),
        })))
    }

    /// The message's identity.
    pub fn id(&self) -> &str {
        match &self.0.id {
            Id::Within(from, to) => &self.0.json[*from as usize..*to as usize],
            Id::Decoded(id) => id,
        }
    }

    /// The message as compact JSON text.
    pub fn json(&self) -> &str {
        &self.0.json
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

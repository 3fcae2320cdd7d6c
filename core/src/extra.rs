//! Host extras on reserved events (ARCHITECTURE.md#reserved-events): keys a host attaches to the data of the
//! turn and step events the protocol writes (`turn/start {"turn":1,"trigger":{…}}`).
//!
//! The library's keys come first, then the extras verbatim and in the host's order.
//! Only the library's own keys are checked on load, so extras written by any tool
//! (the reference harness writes `trigger`) survive byte for byte.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json;

/// Keys the library writes into reserved data; an extra may not name them.
pub const LIBRARY_KEYS: [&str; 3] = ["turn", "step", "reason"];

/// Host keys for the data of one reserved event: a JSON object's members, kept as
/// compact text in their given order. The default holds none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extra {
    /// `"k":v,"k2":v2` (the object without its braces); empty for none.
    members: String,
}

/// The members of a JSON object as (key, raw value) pairs, in order.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

impl Extra {
    /// No extras.
    pub fn none() -> Extra {
        Extra::default()
    }

    /// Parses a JSON object of host keys. Refused as `invalid_input`: anything but an
    /// object, a key the library writes (`turn`, `step`, `reason`), a key given twice,
    /// and JSON that event data may not hold (ARCHITECTURE.md#limits: depth, non-finite numbers).
    pub fn from_json(text: &str) -> Result<Extra> {
        let raw = json::raw_value(text, "extra")?;
        let Members(members) = json::from_str::<Members<'_>>(raw.get())
            .map_err(|e| invalid(format!("extra must be a JSON object of host keys: {e}")))?;
        let mut seen = HashSet::with_capacity(members.len());
        let mut text = String::with_capacity(raw.get().len());
        for (key, value) in &members {
            if LIBRARY_KEYS.contains(&key.as_ref()) {
                return Err(invalid(format!(
                    "extra key {} is written by inboxlog; choose another name",
                    json::quote(key)
                )));
            }
            if !seen.insert(key.as_ref()) {
                return Err(invalid(format!(
                    "extra key {} is given twice",
                    json::quote(key)
                )));
            }
            if !text.is_empty() {
                text.push(',');
            }
            text.push_str(&json::quote(key));
            text.push(':');
            text.push_str(value.get());
        }
        Ok(Extra { members: text })
    }

    /// Whether there are no extras.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The extras as a JSON object (`{}` for none).
    pub fn to_json(&self) -> String {
        format!("{{{}}}", self.members)
    }

    /// Closes the library's data object `open` (its text without the closing brace)
    /// with the extras after the library's keys.
    pub(crate) fn close(&self, mut open: String) -> String {
        if !self.members.is_empty() {
            open.push(',');
            open.push_str(&self.members);
        }
        open.push('}');
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn keeps_members_in_order_and_compact() {
        let e =
            Extra::from_json(r#"{ "z": 1, "trigger": {"kind":"message"}, "a": [1, 2] }"#).unwrap();
        assert_eq!(
            e.to_json(),
            r#"{"z":1,"trigger":{"kind":"message"},"a":[1,2]}"#
        );
        assert_eq!(
            e.close(r#"{"turn":3"#.to_owned()),
            r#"{"turn":3,"z":1,"trigger":{"kind":"message"},"a":[1,2]}"#
        );
        let none = Extra::from_json("{}").unwrap();
        assert!(none.is_empty() && none == Extra::none());
        assert_eq!(none.close(r#"{"turn":3"#.to_owned()), r#"{"turn":3}"#);
    }

    #[test]
    fn refuses_library_keys_duplicates_and_non_objects() {
        for (bad, needle) in [
            (r#"{"turn":2}"#, "\"turn\" is written by inboxlog"),
            (r#"{"x":1,"step":2}"#, "\"step\" is written by inboxlog"),
            (r#"{"reason":{}}"#, "\"reason\" is written by inboxlog"),
            (r#"{"x":1,"x":2}"#, "\"x\" is given twice"),
            ("[1]", "must be a JSON object"),
            ("\"trigger\"", "must be a JSON object"),
            ("{\"x\":1e400}", "not finite"),
            ("{\"x\":", "invalid JSON"),
        ] {
            let err = Extra::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let deep = format!(r#"{{"x":{}{}}}"#, "[".repeat(600), "]".repeat(600));
        assert_eq!(
            Extra::from_json(&deep).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }
}

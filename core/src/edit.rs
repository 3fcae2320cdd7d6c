//! Edits of pending input (ARCHITECTURE.md#posting, SPEC §11.3): the remote form of the
//! inbox's `remove(id)` and `replace(id, m)`, as posted and as recorded when rejected.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::json;
use crate::message::Message;
use crate::splice::Target;

/// An edit of a session's pending input, posted from anywhere and applied by the
/// session's owner where it takes posts in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Removes the pending message `id`, as the local `remove(id)`.
    Remove {
        /// The id of the message to remove.
        id: String,
    },
    /// Replaces the pending message `id` with `message` (which may have a new id), as
    /// the local `replace(id, m)`.
    Replace {
        /// The id of the message to replace.
        id: String,
        /// The message that takes its place.
        message: Message,
    },
}

/// The JSON an edit is posted as.
#[derive(Deserialize)]
struct Wire<'a> {
    op: String,
    id: String,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
}

impl Edit {
    /// A removal of `id`; `invalid_input` when `id` is empty (no message has that id).
    pub fn remove(id: &str) -> Result<Edit> {
        Ok(Edit::Remove {
            id: checked(id)?.to_owned(),
        })
    }

    /// A replacement of `id` by `message`; `invalid_input` when `id` is empty.
    pub fn replace(id: &str, message: Message) -> Result<Edit> {
        Ok(Edit::Replace {
            id: checked(id)?.to_owned(),
            message,
        })
    }

    /// `"remove"` or `"replace"`.
    pub fn op(&self) -> &'static str {
        match self {
            Edit::Remove { .. } => "remove",
            Edit::Replace { .. } => "replace",
        }
    }

    /// The id of the message it edits.
    pub fn id(&self) -> &str {
        match self {
            Edit::Remove { id } | Edit::Replace { id, .. } => id,
        }
    }

    /// The messages it inserts where the edited one was: none, or the replacement.
    pub fn inserted(&self) -> Vec<Message> {
        match self {
            Edit::Remove { .. } => Vec::new(),
            Edit::Replace { message, .. } => vec![message.clone()],
        }
    }

    /// `{"op":"remove","id":X}` or `{"op":"replace","id":X,"message":m}`: the form it is
    /// posted in and recorded in `agent/inbox/rejected` as `edit`.
    pub fn to_json(&self) -> String {
        self.json_with(|m| m.json().to_owned())
    }

    /// [`Edit::to_json`] with only the replacement's id kept: what a rejection records
    /// of an edit too large for the log.
    pub fn stub_json(&self) -> String {
        self.json_with(|m| format!(r#"{{"id":{}}}"#, json::quote(m.id())))
    }

    fn json_with(&self, message: impl Fn(&Message) -> String) -> String {
        let mut out = format!(r#"{{"op":"{}","id":"#, self.op());
        json::write_string(&mut out, self.id());
        if let Edit::Replace { message: m, .. } = self {
            out.push_str(",\"message\":");
            out.push_str(&message(m));
        }
        out.push('}');
        out
    }

    /// Parses what [`Edit::to_json`] writes; `invalid_input` for anything else.
    pub fn from_json(text: &str) -> Result<Edit> {
        let wire: Wire<'_> =
            json::from_str(text).map_err(|e| invalid(format!("not an edit: {e}")))?;
        match (wire.op.as_str(), wire.message) {
            ("remove", None) => Edit::remove(&wire.id),
            ("replace", Some(m)) => Edit::replace(&wire.id, Message::from_json(m.get())?),
            (op @ ("remove" | "replace"), _) => Err(invalid(format!(
                "an edit with op {} {} a message",
                json::quote(op),
                if op == "remove" { "takes no" } else { "needs" }
            ))),
            (op, _) => Err(invalid(format!(
                "an edit's op must be \"remove\" or \"replace\", got {}",
                json::quote(op)
            ))),
        }
    }
}

/// A move of a pending message (ARCHITECTURE.md#moving-pending-input, SPEC §17.5): to
/// `index` in `target`, or to its end, from wherever it waits; posted from anywhere and
/// applied by the session's owner as one removal (`"outcome":"moved"`) and one insertion
/// in one commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The id of the message to move.
    pub id: String,
    /// The list it goes to.
    pub target: Target,
    /// Where in that list (counted without the moved message); `None`: at its end.
    pub index: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveWire {
    id: String,
    target: String,
    #[serde(default)]
    index: Option<u64>,
}

impl Move {
    /// A move of `id` to `target` (at `index`, or its end); `invalid_input` when `id`
    /// is empty or `index` is past the safe integers.
    pub fn new(id: &str, target: Target, index: Option<u64>) -> Result<Move> {
        if let Some(index) = index
            && index > json::MAX_SAFE_INTEGER
        {
            return Err(invalid(format!(
                "a move's index {index} is larger than 2^53-1"
            )));
        }
        Ok(Move {
            id: checked(id)?.to_owned(),
            target,
            index,
        })
    }

    /// `{"id","target","index"?}`: the form it is posted in and recorded in
    /// `agent/inbox/rejected` as `move`.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"id\":");
        json::write_string(&mut out, &self.id);
        out.push_str(",\"target\":\"");
        out.push_str(self.target.as_str());
        out.push('"');
        if let Some(index) = self.index {
            out.push_str(&format!(",\"index\":{index}"));
        }
        out.push('}');
        out
    }

    /// Parses what [`Move::to_json`] writes; `invalid_input` for anything else.
    pub fn from_json(text: &str) -> Result<Move> {
        let w: MoveWire = json::from_str(text).map_err(|e| invalid(format!("not a move: {e}")))?;
        Move::new(&w.id, Target::parse(&w.target)?, w.index)
    }
}

fn checked(id: &str) -> Result<&str> {
    if id.is_empty() {
        return Err(invalid("the id of the message to edit must not be empty"));
    }
    Ok(id)
}

/// The reason an edit finds nothing to change: `not_found`.
pub(crate) fn not_pending(id: &str) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("message {} is not pending", json::quote(id)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Message {
        Message::from_json(text).unwrap()
    }

    #[test]
    fn edits_round_trip_through_their_json() {
        let remove = Edit::remove("a\"b").unwrap();
        assert_eq!(remove.to_json(), r#"{"op":"remove","id":"a\"b"}"#);
        let replace = Edit::replace("a", m(r#"{"id":"b","text":"x"}"#)).unwrap();
        assert_eq!(
            replace.to_json(),
            r#"{"op":"replace","id":"a","message":{"id":"b","text":"x"}}"#
        );
        assert_eq!(
            replace.stub_json(),
            r#"{"op":"replace","id":"a","message":{"id":"b"}}"#
        );
        assert_eq!(remove.stub_json(), remove.to_json());
        for e in [remove, replace] {
            assert_eq!(Edit::from_json(&e.to_json()).unwrap(), e);
        }
    }

    #[test]
    fn malformed_edits_are_invalid_input() {
        for (text, says) in [
            (r#"{"op":"remove","id":""}"#, "must not be empty"),
            (
                r#"{"op":"remove","id":"a","message":{"id":"b"}}"#,
                "takes no",
            ),
            (r#"{"op":"replace","id":"a"}"#, "needs"),
            (r#"{"op":"move","id":"a"}"#, "got \"move\""),
            (r#"{"op":"replace","id":"a","message":{"x":1}}"#, "id"),
            ("[1]", "not an edit"),
        ] {
            let err = Edit::from_json(text).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{text}");
            assert!(err.message().contains(says), "{text}: {err}");
        }
        assert_eq!(
            Edit::remove("").unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(not_pending("x").to_string(), "message \"x\" is not pending");
    }
}

//! The step-boundary protocol's shapes (ARCHITECTURE.md#protocol): proposals and decided results
//! printed, decisions and cancel causes parsed.

use serde::Deserialize;

use super::{FromJson, Object, ToJson, messages};
use crate::error::{Result, invalid};
use crate::json;
use crate::message::Message;
use crate::protocol::{Decided, Decision, Proposal};
use crate::reason::CancelCause;

/// A cancel cause named by its kind alone (`"user"`, `"parent"`, `"disposed"`), as
/// `{"kind":…}`; `"hook"` needs a reason and is refused as that object would be.
pub fn cancel_cause_named(kind: &str) -> Result<CancelCause> {
    CancelCause::from_json(&Object::new().str("kind", kind).end())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::reason::{TurnEndReason, TurnError};

    fn msg(text: &str) -> Message {
        Message::from_json(text).unwrap()
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
    fn decisions_parse_strictly() {
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
    }
}

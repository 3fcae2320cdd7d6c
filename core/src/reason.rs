//! Why a turn ended, and why it was canceled (ARCHITECTURE.md#reserved-events).

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json;

/// Why a cancellation happened.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CancelCause {
    /// The user asked for it.
    User,
    /// The parent session was canceled.
    Parent,
    /// A hook asked for it.
    Hook {
        /// What the hook said.
        reason: String,
    },
    /// The session was disposed of.
    Disposed,
}

impl CancelCause {
    /// Parses `{"kind":"user"}` and its siblings.
    pub fn from_json(text: &str) -> Result<CancelCause> {
        json::parse(text, "cancel cause")
    }

    /// Compact JSON of the cause.
    pub fn to_json(&self) -> String {
        match self {
            CancelCause::User => r#"{"kind":"user"}"#.to_owned(),
            CancelCause::Parent => r#"{"kind":"parent"}"#.to_owned(),
            CancelCause::Hook { reason } => {
                format!(r#"{{"kind":"hook","reason":{}}}"#, json::quote(reason))
            }
            CancelCause::Disposed => r#"{"kind":"disposed"}"#.to_owned(),
        }
    }
}

/// The error carried by a turn that failed: an object with string `message` and `code`,
/// other keys kept verbatim.
#[derive(Clone, Debug)]
pub struct TurnError {
    raw: Box<RawValue>,
}

impl PartialEq for TurnError {
    fn eq(&self, other: &TurnError) -> bool {
        json::same(&self.raw, &other.raw)
    }
}

impl Eq for TurnError {}

#[derive(Deserialize)]
#[allow(dead_code)] // fields are read only to check their types
struct TurnErrorShape {
    message: String,
    code: String,
}

impl TurnError {
    /// Parses `{"message":S,"code":S,...}`.
    pub fn from_json(text: &str) -> Result<TurnError> {
        let raw = json::raw_value(text, "error")?;
        if !raw.get().starts_with('{') {
            return Err(invalid(
                "error must be an object with string \"message\" and \"code\"",
            ));
        }
        json::from_str::<TurnErrorShape>(raw.get()).map_err(|e| {
            invalid(format!(
                "error must have string \"message\" and \"code\": {e}"
            ))
        })?;
        Ok(TurnError { raw })
    }

    /// The error object as compact JSON.
    pub fn json(&self) -> &str {
        self.raw.get()
    }
}

/// Why a turn ended (`turn/end` data `reason`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEndReason {
    /// The model finished.
    Completed,
    /// The model stopped at its token limit.
    MaxTokens,
    /// The pre-step decision rejected the input.
    Blocked,
    /// The turn was canceled.
    Aborted(CancelCause),
    /// The turn failed.
    Error(TurnError),
    /// The writer stopped mid-turn (repaired on open).
    Interrupted,
}

impl TurnEndReason {
    /// Compact JSON of the reason, e.g. `{"kind":"completed"}`.
    pub fn to_json(&self) -> String {
        match self {
            TurnEndReason::Completed => r#"{"kind":"completed"}"#.to_owned(),
            TurnEndReason::MaxTokens => r#"{"kind":"max-tokens"}"#.to_owned(),
            TurnEndReason::Blocked => r#"{"kind":"blocked"}"#.to_owned(),
            TurnEndReason::Aborted(cause) => {
                format!(r#"{{"kind":"aborted","reason":{}}}"#, cause.to_json())
            }
            TurnEndReason::Error(e) => format!(r#"{{"kind":"error","error":{}}}"#, e.json()),
            TurnEndReason::Interrupted => r#"{"kind":"interrupted"}"#.to_owned(),
        }
    }
}

/// How a step ended (`end_step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// The step owes another model call (e.g. tool results).
    Continue,
    /// The model finished.
    Completed,
    /// The model stopped at its token limit.
    MaxTokens,
}

impl StepOutcome {
    /// Parses `"continue"`, `"completed"` or `"max-tokens"`.
    pub fn parse(name: &str) -> Result<StepOutcome> {
        match name {
            "continue" => Ok(StepOutcome::Continue),
            "completed" => Ok(StepOutcome::Completed),
            "max-tokens" => Ok(StepOutcome::MaxTokens),
            other => Err(invalid(format!(
                "step outcome must be \"continue\", \"completed\" or \"max-tokens\", got {}",
                json::quote(other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn causes_round_trip() {
        for text in [
            r#"{"kind":"user"}"#,
            r#"{"kind":"parent"}"#,
            r#"{"kind":"hook","reason":"r"}"#,
            r#"{"kind":"disposed"}"#,
        ] {
            assert_eq!(CancelCause::from_json(text).unwrap().to_json(), text);
        }
        for bad in [r#"{"kind":"boss"}"#, r#"{"kind":"hook"}"#, "7"] {
            assert_eq!(
                CancelCause::from_json(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn turn_errors_need_message_and_code() {
        let e = TurnError::from_json(r#"{"message":"boom","code":"E1","retry":true}"#).unwrap();
        let reason = TurnEndReason::Error(e).to_json();
        assert_eq!(
            reason,
            r#"{"kind":"error","error":{"message":"boom","code":"E1","retry":true}}"#
        );
        for bad in [
            r#"{"message":"boom"}"#,
            r#"{"message":1,"code":"x"}"#,
            r#"["boom"]"#,
        ] {
            assert_eq!(
                TurnError::from_json(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad}"
            );
        }
        assert_eq!(
            StepOutcome::parse("max-tokens").unwrap(),
            StepOutcome::MaxTokens
        );
        assert!(
            StepOutcome::parse("done")
                .unwrap_err()
                .to_string()
                .contains("\"done\"")
        );
    }
}

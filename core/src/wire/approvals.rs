//! An approval request as it crosses a boundary (ARCHITECTURE.md#approvals):
//! `{"id","toolName","callId"?,"arguments"?,"reason"?}`.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::FromJson;
use crate::error::{Result, invalid};
use crate::json;

/// What `ask_approval` takes, read from JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The approval's id, unique in the session.
    pub id: String,
    /// The tool the call is of.
    pub tool_name: String,
    /// The tool call it is about, when it names one.
    pub call_id: Option<String>,
    /// The call's arguments, as JSON text.
    pub arguments: Option<String>,
    /// Why a person is asked.
    pub reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire<'a> {
    id: String,
    tool_name: String,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(default)]
    reason: Option<String>,
}

impl FromJson for ApprovalRequest {
    fn from_json(text: &str) -> Result<ApprovalRequest> {
        let w: Wire<'_> = json::from_str(text).map_err(|e| {
            invalid(format!(
                "an approval request is {{\"id\",\"toolName\",\"callId\"?,\"arguments\"?,\"reason\"?}}: {e}"
            ))
        })?;
        Ok(ApprovalRequest {
            id: w.id,
            tool_name: w.tool_name,
            call_id: w.call_id,
            arguments: w.arguments.map(|a| a.get().to_owned()),
            reason: w.reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_and_other_keys_refused() {
        let r = ApprovalRequest::from_json(
            r#"{"id":"a","toolName":"rm","arguments":{"p":1},"reason":"x"}"#,
        )
        .unwrap();
        assert_eq!(r.arguments.as_deref(), Some(r#"{"p":1}"#));
        assert_eq!(r.call_id, None);
        let err = ApprovalRequest::from_json(r#"{"id":"a","tool":"rm"}"#).unwrap_err();
        assert!(err.message().contains("toolName"), "{err}");
    }
}

//! The header beside each log: identity and lineage, not an event (ARCHITECTURE.md#header).

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::id::validate_session_id;
use crate::json;

/// The on-disk format version this library writes (and the newest it reads).
pub const FORMAT_VERSION: u64 = 2;

/// The oldest on-disk format version this library reads: version 1 JSONL logs, without
/// checksums, still open, verify and upgrade (core/FORMAT.md#versions).
pub const OLDEST_FORMAT_VERSION: u64 = 1;

/// The value of the header's `format` key.
pub const FORMAT_NAME: &str = "inboxlog";

/// Optional header fields a caller chooses when creating or forking a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionMeta {
    /// Working directory of the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `"subagent"` for a delegated child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// How many delegations deep this session is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u64>,
    /// The agent preset the session runs with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
}

impl SessionMeta {
    /// Parses meta from a JSON object, e.g. `{"cwd":"/w","origin":"subagent"}`.
    pub fn from_json(text: &str) -> Result<SessionMeta> {
        let meta: SessionMeta = json::parse(text, "session meta")?;
        meta.validate()?;
        Ok(meta)
    }

    fn validate(&self) -> Result<()> {
        if let Some(origin) = &self.origin
            && origin != "subagent"
        {
            return Err(invalid(format!(
                "origin must be \"subagent\", got {}",
                json::quote(origin)
            )));
        }
        if let Some(depth) = self.delegation_depth
            && depth > json::MAX_SAFE_INTEGER
        {
            return Err(invalid("delegationDepth is larger than 2^53-1"));
        }
        Ok(())
    }
}

/// Metadata stored beside a log (line 1 of a JSONL log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    /// Always `"inboxlog"`.
    pub format: String,
    /// The on-disk format version.
    pub version: u64,
    /// The session id.
    pub id: String,
    /// Creation time, Unix epoch milliseconds.
    pub created_at: u64,
    /// Working directory of the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session this one was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// How many leading events are a seed (the inbox replays after them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    /// `"subagent"` for a delegated child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// How many delegations deep this session is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u64>,
    /// The agent preset the session runs with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
}

#[derive(Deserialize)]
struct Versioned {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

impl Header {
    /// A header for a new session.
    pub fn new(id: &str, created_at: u64, meta: SessionMeta) -> Result<Header> {
        validate_session_id(id)?;
        meta.validate()?;
        Ok(Header {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            id: id.to_owned(),
            created_at,
            cwd: meta.cwd,
            parent_session: None,
            seed_length: None,
            origin: meta.origin,
            delegation_depth: meta.delegation_depth,
            agent_preset: meta.agent_preset,
        })
    }

    /// Parses a stored header: the format marker and the version are checked before
    /// anything else, so a log from another tool or version is named as such.
    pub fn from_json(text: &str) -> Result<Header> {
        Header::stored_version(text)?;
        let compacted = json::compact(text)?;
        let header: Header =
            json::from_str(&compacted).map_err(|e| invalid(format!("invalid header: {e}")))?;
        validate_session_id(&header.id)?;
        if let Some(parent) = &header.parent_session {
            validate_session_id(parent).map_err(|e| e.context("parentSession"))?;
        }
        header.meta().validate()?;
        Ok(header)
    }

    /// The format version a stored header line names, checked before anything else: a
    /// log from another tool, or from a version this library does not read, is named as
    /// such (`format_unsupported`), whatever else the line holds.
    pub fn stored_version(text: &str) -> Result<u64> {
        let compacted = json::compact(text)?;
        let head: Versioned = json::from_str(&compacted).map_err(|e| {
            Error::new(
                ErrorKind::FormatUnsupported,
                format!("not an inboxlog log: header is not a JSON object: {e}"),
            )
        })?;
        if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
            return Err(Error::new(
                ErrorKind::FormatUnsupported,
                "not an inboxlog log: header has no \"format\":\"inboxlog\"",
            ));
        }
        let reads =
            format!("this library reads versions {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}");
        match head.version.as_ref().and_then(serde_json::Value::as_u64) {
            Some(v @ OLDEST_FORMAT_VERSION..=FORMAT_VERSION) => Ok(v),
            Some(v) if v > FORMAT_VERSION => Err(Error::new(
                ErrorKind::FormatUnsupported,
                format!("log format version {v} was written by a newer inboxlog ({reads})"),
            )),
            Some(v) => Err(Error::new(
                ErrorKind::FormatUnsupported,
                format!("log format version {v} is an older format, no upgrade path ({reads})"),
            )),
            None => Err(Error::new(
                ErrorKind::FormatUnsupported,
                "header \"version\" is missing or not a non-negative integer",
            )),
        }
    }

    /// The header as compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("headers always serialize")
    }

    /// The optional fields a child inherits or overrides.
    pub fn meta(&self) -> SessionMeta {
        SessionMeta {
            cwd: self.cwd.clone(),
            origin: self.origin.clone(),
            delegation_depth: self.delegation_depth,
            agent_preset: self.agent_preset.clone(),
        }
    }

    /// Index of the first event the inbox replays (`seedLength`, 0 when absent).
    pub fn replay_from(&self) -> u64 {
        self.seed_length.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_in_order() {
        let mut h = Header::new(
            "s1",
            5,
            SessionMeta {
                cwd: Some("/w".into()),
                ..Default::default()
            },
        )
        .unwrap();
        h.seed_length = Some(3);
        let text = h.to_json();
        assert_eq!(
            text,
            r#"{"format":"inboxlog","version":2,"id":"s1","createdAt":5,"cwd":"/w","seedLength":3}"#
        );
        assert_eq!(Header::from_json(&text).unwrap(), h);
    }

    #[test]
    fn version_and_format_are_checked_first() {
        let newer = r#"{"format":"inboxlog","version":3,"id":"../bad"}"#;
        let err = Header::from_json(newer).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FormatUnsupported);
        assert!(
            err.to_string().contains(
                "version 3 was written by a newer inboxlog (this library reads versions 1 to 2)"
            ),
            "{err}"
        );
        let older = Header::from_json(r#"{"format":"inboxlog","version":0}"#).unwrap_err();
        assert!(
            older.to_string().contains("older format, no upgrade path"),
            "{older}"
        );
        for v in [1, 2] {
            let h = format!(r#"{{"format":"inboxlog","version":{v},"id":"a","createdAt":0}}"#);
            assert_eq!(Header::from_json(&h).unwrap().version, v);
        }
        let other = Header::from_json(r#"{"type":"session","id":"x"}"#).unwrap_err();
        assert!(other.to_string().contains("not an inboxlog log"), "{other}");
        let bad_id =
            Header::from_json(r#"{"format":"inboxlog","version":1,"id":"a/b","createdAt":0}"#)
                .unwrap_err();
        assert_eq!(bad_id.kind(), ErrorKind::InvalidInput);
        let origin = SessionMeta::from_json(r#"{"origin":"boss"}"#).unwrap_err();
        assert!(origin.to_string().contains("origin must be"), "{origin}");
    }
}

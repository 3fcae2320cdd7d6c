//! Line 1 of a reference log: its session header, and the ids derived from it.

use std::borrow::Cow;

use serde::Deserialize;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::header::{Header, SessionMeta};
use crate::id::{MAX_ID_LEN, validate_session_id};
use crate::json::{self, MAX_SAFE_INTEGER};

/// The only version of the reference format this importer reads.
pub(crate) const REFERENCE_VERSION: u64 = 0;

/// Hex digits of the hash appended to a derived id.
const HASH_DIGITS: usize = 8;

/// What must be right before anything else in the header is read.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// The reference header. Keys it does not list are not carried (the inboxlog header
/// has no place for them).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    id: String,
    created_at: u64,
    cwd: Option<String>,
    parent_session: Option<String>,
    seed_length: Option<u64>,
    origin: Option<String>,
    delegation_depth: Option<u64>,
    agent_preset: Option<String>,
}

/// Reads a reference session header into an inboxlog header for session `id` (the
/// caller's id when given, else one derived from the reference id).
pub(crate) fn parse(text: &str, id: Option<&str>) -> Result<Header> {
    let compacted = json::compact(text)?;
    let head: Head<'_> = json::from_str(&compacted)
        .map_err(|e| invalid(format!("header is not a JSON object: {e}")))?;
    if head.format.is_some() {
        return Err(Error::new(
            ErrorKind::FormatUnsupported,
            "this is an inboxlog log (its header has \"format\"), not a reference harness log",
        ));
    }
    if head.ty.as_deref() != Some("session") {
        return Err(Error::new(
            ErrorKind::FormatUnsupported,
            "not a reference harness log: the header has no \"type\":\"session\"",
        ));
    }
    match head.version.as_ref().and_then(serde_json::Value::as_u64) {
        Some(REFERENCE_VERSION) => {}
        Some(v) => {
            return Err(Error::new(
                ErrorKind::FormatUnsupported,
                format!(
                    "reference log version {v} is not supported (this importer reads version {REFERENCE_VERSION})"
                ),
            ));
        }
        None => {
            return Err(Error::new(
                ErrorKind::FormatUnsupported,
                "header \"version\" is missing or not a non-negative integer",
            ));
        }
    }
    let wire: Wire =
        json::from_str(&compacted).map_err(|e| invalid(format!("invalid session header: {e}")))?;
    if wire.created_at > MAX_SAFE_INTEGER {
        return Err(invalid(format!(
            "createdAt {} is larger than 2^53-1",
            wire.created_at
        )));
    }
    let id = match id {
        Some(id) => {
            validate_session_id(id)?;
            id.to_owned()
        }
        None => reference_session_id(&wire.id),
    };
    let meta = SessionMeta {
        cwd: wire.cwd,
        origin: wire.origin,
        delegation_depth: wire.delegation_depth,
        agent_preset: wire.agent_preset,
    };
    let mut header = Header::new(&id, wire.created_at, meta)?;
    header.parent_session = wire.parent_session.as_deref().map(reference_session_id);
    header.seed_length = match wire.seed_length {
        Some(n) if n > MAX_SAFE_INTEGER => {
            return Err(invalid(format!("seedLength {n} is larger than 2^53-1")));
        }
        n => n,
    };
    Ok(header)
}

/// The inboxlog session id for a reference session id.
///
/// A valid id (ARCHITECTURE.md#header) is kept. Any other is derived deterministically, so a
/// parent and its forks keep pointing at each other when imported one by one:
/// every character outside `[A-Za-z0-9._-]` becomes `_`, leading dots are dropped
/// (`session` when nothing is left), the result is cut to 119 characters and `-`
/// plus 8 lowercase hex digits of the FNV-1a 32-bit hash of the original id's UTF-8
/// bytes is appended (the hash keeps ids that differed only in replaced characters
/// apart).
pub fn reference_session_id(raw: &str) -> String {
    if validate_session_id(raw).is_ok() {
        return raw.to_owned();
    }
    let replaced: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = replaced.trim_start_matches('.');
    let base = if trimmed.is_empty() {
        "session"
    } else {
        trimmed
    };
    // Only ASCII is left, so a byte cut is a character cut.
    let base = &base[..base.len().min(MAX_ID_LEN - HASH_DIGITS - 1)];
    let id = format!("{base}-{:08x}", fnv1a32(raw.as_bytes()));
    debug_assert!(validate_session_id(&id).is_ok(), "derived id {id:?}");
    id
}

/// FNV-1a, 32 bits: tiny, stable across versions and platforms (the derived ids are
/// stored, so the hash may never change).
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_are_kept_and_others_derived_deterministically() {
        assert_eq!(reference_session_id("session-1.a_B"), "session-1.a_B");
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        let derived = reference_session_id("team/α b");
        assert_eq!(
            derived,
            format!("team___b-{:08x}", fnv1a32("team/α b".as_bytes()))
        );
        assert_eq!(reference_session_id("team/α b"), derived);
        assert_ne!(
            reference_session_id("team/x"),
            reference_session_id("team:x")
        );
        assert!(reference_session_id("..hidden").starts_with("hidden-"));
        assert!(reference_session_id("").starts_with("session-"));
        assert!(reference_session_id("...").starts_with("session-"));
        let long = reference_session_id(&"x".repeat(300));
        assert_eq!(long.len(), MAX_ID_LEN);
        assert!(long.starts_with(&"x".repeat(119)));
        for raw in ["a/b", "", "..", "é", &"y".repeat(129), "a b\0c"] {
            validate_session_id(&reference_session_id(raw)).unwrap();
        }
    }

    #[test]
    fn header_keys_are_carried_and_checked() {
        let h = parse(
            r#"{"type":"session","version":0,"id":"p/1","createdAt":7,"cwd":"/w","parentSession":"p/0","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"fast","title":"dropped"}"#,
            None,
        )
        .unwrap();
        assert_eq!(h.id, reference_session_id("p/1"));
        assert_eq!(h.parent_session, Some(reference_session_id("p/0")));
        assert_eq!(
            (h.created_at, h.cwd.as_deref(), h.seed_length),
            (7, Some("/w"), Some(3))
        );
        assert_eq!(
            (
                h.origin.as_deref(),
                h.delegation_depth,
                h.agent_preset.as_deref()
            ),
            (Some("subagent"), Some(2), Some("fast"))
        );
        let mine = parse(
            r#"{"type":"session","version":0,"id":"x","createdAt":1}"#,
            Some("mine"),
        );
        assert_eq!(mine.unwrap().id, "mine");
        for (bad, kind, needle) in [
            ("[1]", ErrorKind::InvalidInput, "not a JSON object"),
            (
                r#"{"format":"inboxlog","version":1,"id":"x","createdAt":1}"#,
                ErrorKind::FormatUnsupported,
                "is an inboxlog log",
            ),
            (
                r#"{"type":"turn/start","seq":0}"#,
                ErrorKind::FormatUnsupported,
                "no \"type\":\"session\"",
            ),
            (
                r#"{"type":"session","version":1,"id":"x","createdAt":1}"#,
                ErrorKind::FormatUnsupported,
                "version 1 is not supported (this importer reads version 0)",
            ),
            (
                r#"{"type":"session","id":"x","createdAt":1}"#,
                ErrorKind::FormatUnsupported,
                "\"version\" is missing",
            ),
            (
                r#"{"type":"session","version":0,"createdAt":1}"#,
                ErrorKind::InvalidInput,
                "missing field `id`",
            ),
            (
                r#"{"type":"session","version":0,"id":"x","createdAt":-1}"#,
                ErrorKind::InvalidInput,
                "invalid session header",
            ),
            (
                r#"{"type":"session","version":0,"id":"x","createdAt":9007199254740992}"#,
                ErrorKind::InvalidInput,
                "createdAt 9007199254740992",
            ),
            (
                r#"{"type":"session","version":0,"id":"x","createdAt":1,"seedLength":9007199254740992}"#,
                ErrorKind::InvalidInput,
                "seedLength 9007199254740992",
            ),
            (
                r#"{"type":"session","version":0,"id":"x","createdAt":1,"origin":"boss"}"#,
                ErrorKind::InvalidInput,
                "origin must be",
            ),
        ] {
            let err = parse(bad, None).unwrap_err();
            assert_eq!(err.kind(), kind, "{bad}: {err}");
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let err = parse(
            r#"{"type":"session","version":0,"id":"x","createdAt":1}"#,
            Some("../x"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("starts with '.'"), "{err}");
    }
}

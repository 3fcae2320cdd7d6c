//! Compaction as it crosses a boundary (ARCHITECTURE.md#compaction): a commit read from
//! `{"summary":S|[block…],"provider","model","usage"?}`, a started compaction and a
//! committed one printed.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{FromJson, Object, ToJson};
use crate::error::{Result, invalid};
use crate::json;
use crate::session::{Compaction, Session, Summary};
use crate::txn::Compacted;

/// What committing a compaction takes, read from JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionCommit {
    /// The summary: a string is text, an array blocks.
    pub summary: Summary,
    /// Who summarized.
    pub provider: String,
    /// The model that summarized.
    pub model: String,
    /// The summarizer's usage, JSON text of an object.
    pub usage: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    #[serde(borrow)]
    summary: &'a RawValue,
    provider: String,
    model: String,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
}

impl FromJson for CompactionCommit {
    fn from_json(text: &str) -> Result<CompactionCommit> {
        let w: Wire<'_> = json::from_str(text).map_err(|e| {
            invalid(format!(
                "a compaction commit is {{\"summary\",\"provider\",\"model\",\"usage\"?}}: {e}"
            ))
        })?;
        let raw = w.summary.get();
        let summary = if raw.starts_with('"') {
            Summary::Text(json::from_str::<String>(raw).map_err(|e| invalid(e.to_string()))?)
        } else {
            Summary::Blocks(raw.to_owned())
        };
        Ok(CompactionCommit {
            summary,
            provider: w.provider,
            model: w.model,
            usage: w.usage.map(|u| u.get().to_owned()),
        })
    }
}

impl<S: std::ops::Deref<Target = Session>> ToJson for Compaction<S> {
    /// `{"compactionId","turn":N|null,"range":{"start","end"},"shadowedSeqs":[…],
    /// "shadowedTokenCount":N,"messages":[message…]}`.
    fn to_json(&self) -> String {
        let (start, end) = self.range();
        let seqs: Vec<String> = self.shadowed_seqs().iter().map(u64::to_string).collect();
        Object::new()
            .str("compactionId", self.id())
            .opt("turn", self.turn())
            .raw("range", &format!(r#"{{"start":{start},"end":{end}}}"#))
            .raw("shadowedSeqs", &format!("[{}]", seqs.join(",")))
            .num("shadowedTokenCount", self.shadowed_token_count())
            .raw(
                "messages",
                &format!("[{}]", self.shadowed_messages().join(",")),
            )
            .end()
    }
}

impl ToJson for Compacted {
    /// `{"compactionId","summary":event,"message":event}`.
    fn to_json(&self) -> String {
        Object::new()
            .str("compactionId", &self.compaction_id)
            .raw("summary", &self.summary.to_json())
            .raw("message", &self.message.to_json())
            .end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_read_and_other_keys_refused() {
        let c = CompactionCommit::from_json(r#"{"summary":"short","provider":"p","model":"m"}"#)
            .unwrap();
        assert_eq!(c.summary, Summary::Text("short".into()));
        let c = CompactionCommit::from_json(
            r#"{"summary":[{"type":"text","text":"x"}],"provider":"p","model":"m","usage":{"inputTokens":1}}"#,
        )
        .unwrap();
        assert_eq!(
            c.summary,
            Summary::Blocks(r#"[{"type":"text","text":"x"}]"#.into())
        );
        assert_eq!(c.usage.as_deref(), Some(r#"{"inputTokens":1}"#));
        let err = CompactionCommit::from_json(r#"{"summary":"s","provider":"p"}"#).unwrap_err();
        assert!(err.message().contains("model"), "{err}");
    }
}

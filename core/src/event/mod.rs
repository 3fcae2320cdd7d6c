//! Events: the ARCHITECTURE.md#events envelope, the reserved vocabulary (ARCHITECTURE.md#reserved-events) and their validation.
//!
//! This file holds the envelope: the [`Event`] type, its optional keys ([`Envelope`]),
//! the spelling of its keys ([`key`]), how an event is built and checked, and its
//! accessors. `reserved.rs` holds the reserved types and the checks of their data,
//! `text.rs` reading and writing an event's JSON text, `canonical.rs` the one-pass
//! reader of the library's own spelling.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::json::{self, MAX_SAFE_INTEGER};
use crate::message::excerpt;
use crate::splice::SpliceRecord;

mod canonical;
mod reserved;
mod text;

pub(crate) use canonical::{Shape, shape, shape_open};
pub(crate) use reserved::Body;
pub use reserved::{
    APPROVAL_ASKED, APPROVAL_DECIDED, ASSISTANT_MESSAGE, COMPACTION_END, COMPACTION_PRUNE,
    COMPACTION_START, COMPACTION_SUMMARY, END_SEED, INBOX_REJECTED, INBOX_SPLICED, REPLAYED,
    STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_PARKED, TURN_RESUMED, TURN_START,
    USER_MESSAGE, is_reserved,
};

use reserved::{known_type, safe};

/// The spelling of each key of an event's JSON (ARCHITECTURE.md#events) as a literal,
/// so that `concat!` can build the writer's and the one-pass reader's byte patterns
/// from it: [`key`] holds the same spellings as constants for everyone else.
macro_rules! event_key {
    (type) => {
        "type"
    };
    (seq) => {
        "seq"
    };
    (time) => {
        "time"
    };
    (data) => {
        "data"
    };
    (ignorable) => {
        "ignorable"
    };
    (surface_op) => {
        "surfaceOp"
    };
    (source_event_seqs) => {
        "sourceEventSeqs"
    };
}
use event_key;

/// The keys of an event's JSON, in their written order (ARCHITECTURE.md#events): the
/// one spelling the log, the C ABI and the Python dicts share.
pub mod key {
    /// `type`: the event's type.
    pub const TYPE: &str = event_key!(type);
    /// `seq`: its 0-based position in the log.
    pub const SEQ: &str = event_key!(seq);
    /// `time`: milliseconds since the Unix epoch.
    pub const TIME: &str = event_key!(time);
    /// `data`: the host's JSON value.
    pub const DATA: &str = event_key!(data);
    /// `ignorable`: present (as `true`) only when set.
    pub const IGNORABLE: &str = event_key!(ignorable);
    /// `surfaceOp`: present only when set.
    pub const SURFACE_OP: &str = event_key!(surface_op);
    /// `sourceEventSeqs`: present only when set.
    pub const SOURCE_EVENT_SEQS: &str = event_key!(source_event_seqs);
    /// Every key, in written order.
    pub const ALL: [&str; 7] = [
        TYPE,
        SEQ,
        TIME,
        DATA,
        IGNORABLE,
        SURFACE_OP,
        SOURCE_EVENT_SEQS,
    ];
}

/// The event types that may carry `surfaceOp` and `sourceEventSeqs`.
const SURFACE_TYPES: [&str; 3] = [USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT];

/// Optional envelope keys a host may set on an appended event.
#[derive(Clone, Debug, Default)]
pub struct Envelope {
    /// A reader that does not know the type may skip the event.
    pub ignorable: bool,
    /// `"append"` or `{"op":"replace","start":N,"end":M}`, carried verbatim.
    pub surface_op: Option<Box<RawValue>>,
    /// Earlier events this one derives from.
    pub source_event_seqs: Option<Vec<u64>>,
}

impl PartialEq for Envelope {
    fn eq(&self, other: &Envelope) -> bool {
        let ops = match (&self.surface_op, &other.surface_op) {
            (Some(a), Some(b)) => json::same(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        ops && self.ignorable == other.ignorable
            && self.source_event_seqs == other.source_event_seqs
    }
}

impl Eq for Envelope {}

/// One committed log event. Cloning is cheap: clones share one immutable copy of the
/// payload.
///
/// The seq, the time and the few facts the consumed-work fold needs sit inline, so a
/// fold over a `Vec<Event>` streams through contiguous memory instead of chasing one
/// pointer per event.
#[derive(Clone)]
pub struct Event {
    seq: u64,
    time: u64,
    fold: FoldTag,
    inner: Arc<Inner>,
}

/// What ARCHITECTURE.md#consumed-work-fold needs to know about an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FoldTag {
    /// Ignored by the fold.
    Other,
    TurnStart,
    StepStart,
    TurnEnd {
        completed: bool,
    },
    /// A splice that removes without canceling: a claim.
    Claim,
    /// A canceling splice; `drops` when it inserts nothing (a bare cancel).
    Cancel {
        drops: bool,
    },
}

impl FoldTag {
    fn of(body: &Body) -> FoldTag {
        match body {
            Body::TurnStart { .. } => FoldTag::TurnStart,
            Body::StepStart { .. } => FoldTag::StepStart,
            Body::TurnEnd { completed, .. } => FoldTag::TurnEnd {
                completed: *completed,
            },
            // The removal half of a move is neither a claim nor a cancellation.
            Body::Spliced(r) if r.moved => FoldTag::Other,
            Body::Spliced(r) if r.removed_count > 0 && r.canceled => FoldTag::Cancel {
                drops: r.inserted.is_empty(),
            },
            Body::Spliced(r) if r.removed_count > 0 => FoldTag::Claim,
            _ => FoldTag::Other,
        }
    }
}

struct Inner {
    body: Body,
    /// Reserved types borrow their static name; host types own theirs.
    ty: Cow<'static, str>,
    /// Compact JSON text, validated when the event was built.
    data: String,
    envelope: Envelope,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        let (a, b) = (&*self.inner, &*other.inner);
        self.seq == other.seq
            && self.time == other.time
            && a.ty == b.ty
            && a.data == b.data
            && a.envelope == b.envelope
    }
}

impl Eq for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl Event {
    /// Builds and validates an event from its parts (everything but the log invariants,
    /// which the log checks against its state). Data nested deeper than
    /// [`json::MAX_DEPTH`] is refused as `too_large` (ARCHITECTURE.md#limits), whatever
    /// path it came by.
    pub fn new(
        ty: &str,
        seq: u64,
        time: u64,
        data: Box<RawValue>,
        envelope: Envelope,
    ) -> Result<Event> {
        check_data_depth(ty, seq, data.get())?;
        let data: Box<str> = data.into();
        Event::build(ty, seq, time, data.into_string(), envelope)
    }

    /// [`Event::new`] with `data` already checked: valid, compact JSON.
    pub(crate) fn build(
        ty: &str,
        seq: u64,
        time: u64,
        data: String,
        envelope: Envelope,
    ) -> Result<Event> {
        if ty.is_empty() {
            return Err(invalid("event type must be a non-empty string"));
        }
        safe("seq", seq)?;
        safe("time", time)?;
        let surface = SURFACE_TYPES.contains(&ty);
        if let Some(op) = &envelope.surface_op {
            if !surface {
                return Err(invalid(format!(
                    "surfaceOp is only allowed on user/message, assistant/message and tool/result, not {ty}"
                )));
            }
            check_surface_op(op)?;
        }
        if let Some(seqs) = &envelope.source_event_seqs {
            if !surface {
                return Err(invalid(format!(
                    "sourceEventSeqs is only allowed on user/message, assistant/message and tool/result, not {ty}"
                )));
            }
            if let Some(bad) = seqs.iter().find(|&&s| s >= seq) {
                return Err(invalid(format!(
                    "sourceEventSeqs entry {bad} is not smaller than the event's seq {seq}"
                )));
            }
        }
        let body = Body::parse(ty, &data)?;
        let inner = Inner {
            ty: known_type(ty),
            data,
            envelope,
            body,
        };
        Ok(Event::assemble(seq, time, inner))
    }

    /// An event the library writes itself, with data it built (no re-parse).
    pub(crate) fn reserved(
        ty: &'static str,
        seq: u64,
        time: u64,
        data: String,
        body: Body,
        envelope: Envelope,
    ) -> Event {
        debug_assert!(
            RawValue::from_string(data.clone()).is_ok(),
            "library-built data is valid JSON"
        );
        let inner = Inner {
            ty: Cow::Borrowed(ty),
            data,
            envelope,
            body,
        };
        Event::assemble(seq, time, inner)
    }

    fn assemble(seq: u64, time: u64, inner: Inner) -> Event {
        Event {
            seq,
            time,
            fold: FoldTag::of(&inner.body),
            inner: Arc::new(inner),
        }
    }

    pub(crate) fn fold_tag(&self) -> FoldTag {
        self.fold
    }

    /// The event type, e.g. `turn/start`.
    pub fn ty(&self) -> &str {
        &self.inner.ty
    }

    /// Position in the log.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Unix epoch milliseconds, assigned at append.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The payload as compact JSON text.
    pub fn data(&self) -> &str {
        &self.inner.data
    }

    /// The optional envelope keys.
    pub fn envelope(&self) -> &Envelope {
        &self.inner.envelope
    }

    /// The splice record, for an `agent/inbox/spliced` event.
    pub fn splice(&self) -> Option<&SpliceRecord> {
        match &self.inner.body {
            Body::Spliced(rec) => Some(rec),
            _ => None,
        }
    }

    pub(crate) fn body(&self) -> &Body {
        &self.inner.body
    }
}

/// Refuses event data nested deeper than ARCHITECTURE.md#limits allows: host data (and
/// every reserved type's data) at most [`json::MAX_DEPTH`] levels, as an append checks it;
/// the records that wrap whole messages (`agent/inbox/spliced`, `agent/inbox/rejected`)
/// two levels more, so that each message in them may be [`json::MAX_DEPTH`] deep.
fn check_data_depth(ty: &str, seq: u64, data: &str) -> Result<()> {
    let limit = match ty {
        INBOX_SPLICED | INBOX_REJECTED => json::MAX_DEPTH + 2,
        _ => json::MAX_DEPTH,
    };
    json::check_depth(data, limit)
        .map_err(|e| e.context(format_args!("data of {ty} event seq {seq}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceOp<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    start: u64,
    end: u64,
}

fn check_surface_op(op: &RawValue) -> Result<()> {
    let text = op.get();
    if text == "\"append\"" {
        return Ok(());
    }
    match json::from_str::<ReplaceOp<'_>>(text) {
        Ok(r) if r.op == "replace" && r.start <= MAX_SAFE_INTEGER && r.end <= MAX_SAFE_INTEGER => {
            Ok(())
        }
        _ => Err(invalid(format!(
            "surfaceOp must be \"append\" or {{\"op\":\"replace\",\"start\":N,\"end\":M}}, got {}",
            excerpt(text)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn refuses_bad_envelopes() {
        for (bad, needle) in [
            (r#"{"type":"","seq":0,"time":0,"data":{}}"#, "non-empty"),
            (
                r#"{"type":"x","seq":-0,"time":0,"data":{}}"#,
                "invalid event",
            ),
            (
                r#"{"type":"x","seq":1.0,"time":0,"data":{}}"#,
                "invalid event",
            ),
            (
                r#"{"type":"x","seq":9007199254740992,"time":0,"data":{}}"#,
                "2^53-1",
            ),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"extra":1}"#,
                "unknown field",
            ),
            (r#"{"type":"x","seq":0,"time":0}"#, "missing field"),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"ignorable":false}"#,
                "ignorable",
            ),
            (
                r#"{"type":"x","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#,
                "only allowed",
            ),
            (
                r#"{"type":"tool/result","seq":0,"time":0,"data":{},"surfaceOp":"prepend"}"#,
                "surfaceOp must be",
            ),
            (
                r#"{"type":"tool/result","seq":2,"time":0,"data":{},"sourceEventSeqs":[1,2]}"#,
                "not smaller",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":"1"}}"#,
                "turn/start data",
            ),
            (
                r#"{"type":"turn/end","seq":0,"time":0,"data":{"turn":1,"reason":"done"}}"#,
                "reason",
            ),
            (
                r#"{"type":"step/end","seq":0,"time":0,"data":{"turn":1}}"#,
                "step/end data",
            ),
            (
                r#"{"type":"user/message","seq":0,"time":0,"data":"hi"}"#,
                "must be a JSON object",
            ),
            (
                r#"{"type":"session/end-seed","seq":0,"time":0,"data":[]}"#,
                "end-seed data must be a JSON object",
            ),
            (
                r#"{"type":"turn/start","seq":0,"time":0,"data":[1]}"#,
                "turn/start data must be a JSON object",
            ),
        ] {
            let err = Event::from_json(bad).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::InvalidInput),
                "{bad}: {err:?}"
            );
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let err = Event::from_json(
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"x"}}"#,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSplice);
    }
}

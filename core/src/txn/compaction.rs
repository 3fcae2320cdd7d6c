//! Compaction's calls as one transaction stages them (ARCHITECTURE.md#compaction, SPEC
//! §16): starting one over a range of the surface, committing its summary as one
//! surface replace, ending it with an error, pruning a long tool result, and the guard
//! that keeps turns from starting or ending while one runs.

use serde_json::value::RawValue;

use crate::conversation::{
    COMPACTION_END, COMPACTION_PRUNE, COMPACTION_START, COMPACTION_SUMMARY, Running, Shadowed,
    TOOL_RESULT, USER_MESSAGE, end_data, estimate, project, prune_data, pruned, split_calls,
    start_data, summary_data, summary_message,
};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::event::{Body, Envelope, Event};

use super::Txn;

/// What `compaction/end` says of a compaction ended by the repair on open.
pub(crate) const INTERRUPTED: &str = "interrupted";

/// A compaction started by [`Txn::begin_compaction`]: what its handle holds.
#[derive(Clone, Debug)]
pub(crate) struct Begun {
    /// Its `compactionId`.
    pub id: String,
    /// The turn that owns it, `None` for a manual one.
    pub turn: Option<u64>,
    /// The seq of its `compaction/start`.
    pub seq: u64,
    /// The range, its seqs in surface order and their token estimate.
    pub shadowed: Shadowed,
    /// The messages the range projects to (what the host summarizes), as JSON text.
    pub messages: Vec<String>,
}

/// What a committed compaction wrote.
#[derive(Clone, Debug)]
pub struct Compacted {
    /// Its `compactionId`.
    pub compaction_id: String,
    /// The `compaction/summary` event.
    pub summary: Event,
    /// The summary's `user/message`, which replaced the range on the surface.
    pub message: Event,
}

/// `busy`: a compaction runs, so `what` is not allowed.
fn busy(running: &Running, what: &str) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!(
            "{what} is not allowed while compaction {} runs (started at seq {}); nothing was written",
            crate::json::quote(&running.id),
            running.seq
        ),
    )
}

impl Txn<'_> {
    /// Refuses `what` (`busy`) while a compaction runs.
    pub(crate) fn refuse_busy(&self, what: &str) -> Result<()> {
        match &self.conversation.compaction {
            Some(running) => Err(busy(running, what)),
            None => Ok(()),
        }
    }

    /// Refuses a `turn/start` or `turn/end` staged while a compaction runs (SPEC §16).
    pub(crate) fn guard_turns(&self, event: &Event) -> Result<()> {
        if matches!(event.body(), Body::TurnStart { .. } | Body::TurnEnd { .. }) {
            self.refuse_busy(event.ty())?;
        }
        Ok(())
    }

    /// `begin_compaction(start, end)`: writes `compaction/start {"compactionId","turn"}`,
    /// owned by the open turn between its steps or, with no turn open, by none. Refused,
    /// with nothing written: `busy` while one runs; `protocol` while parked, with a step
    /// open or a proposal pending; `invalid_input` when `start`..`end` is not a range of
    /// the surface in order, or splits a tool call from its result.
    pub fn begin_compaction(&mut self, start: u64, end: u64) -> Result<Begun> {
        self.refuse_parked("begin_compaction")?;
        self.refuse_busy("begin_compaction")?;
        let turn = self.phase.compaction_owner("begin_compaction")?;
        let surface = &self.conversation.surface;
        let (from, to) = surface.span(start, end).map_err(invalid)?;
        let inside: Vec<&Event> = surface.slice(from, to).collect();
        let split = split_calls(&inside, surface.outside(from, to));
        if !split.is_empty() {
            return Err(invalid(format!(
                "the range {start}..{end} would split tool calls {split:?} from their results (a range holds every call it covers with its result)"
            )));
        }
        let seqs: Vec<u64> = surface.slice(from, to).map(Event::seq).collect();
        let messages: Vec<String> = surface.slice(from, to).filter_map(project).collect();
        let tokens = messages.iter().map(|m| estimate(m)).sum();
        let seq = self.log.next_seq;
        let id = format!("compaction-{seq}");
        self.library_event(COMPACTION_START, start_data(&id, turn))?;
        Ok(Begun {
            id,
            turn,
            seq,
            shadowed: Shadowed {
                start,
                end,
                seqs,
                tokens,
            },
            messages,
        })
    }

    /// The compaction `begun` started, while it is the one running; `protocol` when it
    /// ended already (cancelled, failed, or the session was opened again since).
    fn running(&self, begun: &Begun) -> Result<Running> {
        match &self.conversation.compaction {
            Some(r) if r.id == begun.id && r.seq == begun.seq => Ok(r.clone()),
            _ => Err(Error::new(
                ErrorKind::Protocol,
                format!(
                    "compaction {} is not running: it ended already",
                    crate::json::quote(&begun.id)
                ),
            )),
        }
    }

    /// Commits `begun` with `summary` (a checked JSON array of blocks): writes
    /// `compaction/summary`, the summary's `user/message` replacing the range on the
    /// surface, and `compaction/end`. When the surface changed inside the range since
    /// the start, writes `compaction/end {"error":"conflict"}` instead and returns the
    /// `conflict` error as the value, for the caller to raise once it is written.
    pub fn commit_compaction(
        &mut self,
        begun: &Begun,
        summary: &str,
        provider: &str,
        model: &str,
        usage: Option<&RawValue>,
    ) -> Result<std::result::Result<Compacted, Error>> {
        let running = self.running(begun)?;
        let shadowed = &begun.shadowed;
        let surface = &self.conversation.surface;
        let now: Option<Vec<u64>> = surface
            .span(shadowed.start, shadowed.end)
            .ok()
            .map(|(from, to)| surface.slice(from, to).map(Event::seq).collect());
        if now.as_ref() != Some(&shadowed.seqs) {
            self.library_event(COMPACTION_END, end_data(&running, Some("conflict")))?;
            return Ok(Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "the surface changed inside the range {}..{} of compaction {} since it started (seqs {:?} then, {} now); its compaction/end was written with the error",
                    shadowed.start,
                    shadowed.end,
                    crate::json::quote(&begun.id),
                    shadowed.seqs,
                    now.map_or("not a range".to_owned(), |n| format!("{n:?}")),
                ),
            )));
        }
        let summary_seq = self.log.next_seq;
        let data = summary_data(&begun.id, summary, shadowed, provider, model, usage);
        let summary_event = self.library_event(COMPACTION_SUMMARY, data)?;
        let op = format!(
            r#"{{"op":"replace","start":{},"end":{}}}"#,
            shadowed.start, shadowed.end
        );
        let envelope = Envelope {
            surface_op: Some(RawValue::from_string(op).expect("valid JSON")),
            source_event_seqs: Some(
                [begun.seq, summary_seq]
                    .into_iter()
                    .chain(shadowed.seqs.iter().copied())
                    .collect(),
            ),
            ..Envelope::default()
        };
        let message = Event::reserved(
            USER_MESSAGE,
            self.log.next_seq,
            self.time,
            summary_message(&begun.id, summary),
            Body::UserMessage,
            envelope,
        );
        self.push(message.clone())?;
        self.library_event(COMPACTION_END, end_data(&running, None))?;
        Ok(Ok(Compacted {
            compaction_id: begun.id.clone(),
            summary: summary_event,
            message,
        }))
    }

    /// Ends `begun` with `error`: writes `compaction/end {…,"error"}`. `protocol` when it
    /// is not running.
    pub fn abort_compaction(&mut self, begun: &Begun, error: &str) -> Result<()> {
        let running = self.running(begun)?;
        self.library_event(COMPACTION_END, end_data(&running, Some(error)))
            .map(drop)
    }

    /// Ends the compaction running, if one is, with `error` (what `cancel`, `fail` and
    /// the repair on open do first). Whether one was.
    pub(crate) fn end_compaction(&mut self, error: &str) -> Result<bool> {
        let Some(running) = self.conversation.compaction.clone() else {
            return Ok(false);
        };
        self.library_event(COMPACTION_END, end_data(&running, Some(error)))?;
        Ok(true)
    }

    /// `prune(seq)`: when the `tool/result` at `seq` on the surface holds more than
    /// 8,192 code points of text, writes `compaction/prune` and a `tool/result` replacing
    /// it whose text keeps the first 4,096 and the last 1,024 around a marker, and
    /// returns that `tool/result`; `None`, with nothing written, when its text is not
    /// that long. `invalid_input` when `seq` is not a `tool/result` on the surface;
    /// `protocol` while parked.
    pub fn prune(&mut self, seq: u64) -> Result<Option<Event>> {
        self.refuse_parked("prune")?;
        let Some(node) = self.conversation.surface.node(seq) else {
            return Err(invalid(format!("seq {seq} is not on the surface")).with_seq(seq));
        };
        if node.ty() != TOOL_RESULT {
            return Err(invalid(format!(
                "seq {seq} is a {} on the surface, not a tool/result: only a tool result is pruned",
                node.ty()
            ))
            .with_seq(seq));
        }
        let Some(data) = pruned(node.data()) else {
            return Ok(None);
        };
        let tokens = project(node).map_or(4, |m| estimate(&m));
        let shadowed = Shadowed {
            start: seq,
            end: seq,
            seqs: vec![seq],
            tokens,
        };
        let prune_seq = self.log.next_seq;
        self.library_event(COMPACTION_PRUNE, prune_data(&shadowed))?;
        let op = format!(r#"{{"op":"replace","start":{seq},"end":{seq}}}"#);
        let envelope = Envelope {
            surface_op: Some(RawValue::from_string(op).expect("valid JSON")),
            source_event_seqs: Some(vec![prune_seq, seq]),
            ..Envelope::default()
        };
        let event = Event::build(TOOL_RESULT, self.log.next_seq, self.time, data, envelope)?;
        self.push(event.clone())?;
        Ok(Some(event))
    }
}

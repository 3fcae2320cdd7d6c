//! The approvals' calls as one transaction stages them (ARCHITECTURE.md#approvals,
//! SPEC §17): asking, deciding (answering a call that was not allowed), parking the open
//! turn and handing it on, and the guards the step-boundary calls pass first.

use serde_json::value::RawValue;

use crate::conversation::{
    APPROVAL_ASKED, APPROVAL_DECIDED, ApprovalOutcome, TOOL_RESULT, TURN_PARKED, TURN_RESUMED,
    asked_data, decided_data, not_allowed_result, parked_data,
};
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::error_fields::ErrorFields;
use crate::event::{Body, Envelope, Event};
use crate::json;

use super::{Txn, raw_append};

/// What [`Session::resume_parked`](crate::Session::resume_parked) hands on: the
/// `turn/parked` data (with the host's `state`) and how each approval it names was
/// decided, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// The turn handed on.
    pub turn: u64,
    /// The `turn/parked` data, compact JSON: `{"turn","approvals","state"?}`.
    pub parked: String,
    /// Each approval the park named, with its outcome.
    pub decisions: Vec<(String, ApprovalOutcome)>,
}

/// `["a","b"]`, for messages.
fn listed<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = ids.into_iter().map(json::quote).collect();
    format!("[{}]", quoted.join(", "))
}

impl Txn<'_> {
    /// Refuses `call` (`protocol`) while the open turn is parked on approvals.
    pub(crate) fn refuse_parked(&self, call: &str) -> Result<()> {
        match self.conversation.approvals.parked() {
            None => Ok(()),
            Some(p) => Err(Error::new(
                ErrorKind::Protocol,
                format!(
                    "{call} is not allowed now: turn {} is parked on approvals {} (decide them, then resume_parked)",
                    p.turn,
                    listed(p.approvals.iter().map(String::as_str))
                ),
            )),
        }
    }

    /// Refuses `call` (`approvals_pending`) while approvals are pending.
    pub(crate) fn refuse_pending(&self, call: &str) -> Result<()> {
        let pending = self.conversation.approvals.pending();
        if pending.is_empty() {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::ApprovalsPending,
            format!(
                "{call} is not allowed while approvals {} are pending",
                listed(pending.iter().map(|a| a.id.as_str()))
            ),
        ))
    }

    /// The open turn, or `protocol` naming the state when none is.
    fn open_turn_for(&self, call: &str) -> Result<u64> {
        self.log.open_turn.ok_or_else(|| {
            Error::new(
                ErrorKind::Protocol,
                format!(
                    "{call} is not allowed now: the session is {}",
                    self.phase.describe()
                ),
            )
        })
    }

    /// `ask_approval` (ARCHITECTURE.md#approvals): writes `approval/asked`. Needs an
    /// open turn that is not parked; `call_id`, when given, must name a tool call still
    /// waiting for its result; `id` must not have been asked before in this log.
    pub fn ask_approval(
        &mut self,
        id: &str,
        tool_name: &str,
        call_id: Option<&str>,
        arguments: Option<&RawValue>,
        reason: Option<&str>,
    ) -> Result<Event> {
        self.refuse_parked("ask_approval")?;
        self.open_turn_for("ask_approval")?;
        if id.is_empty() || tool_name.is_empty() {
            return Err(invalid("an approval needs a non-empty id and tool name"));
        }
        if self.conversation.approvals.known(id) {
            return Err(invalid(format!(
                "approval {} was asked already in this session",
                json::quote(id)
            )));
        }
        if let Some(call) = call_id
            && !self
                .conversation
                .calls
                .pending()
                .iter()
                .any(|p| p.id == call)
        {
            return Err(invalid(format!(
                "tool call {} is not waiting for its result (write its assistant/message first)",
                json::quote(call)
            )));
        }
        let data = asked_data(id, tool_name, call_id, arguments, reason);
        self.library_event(APPROVAL_ASKED, data)
    }

    /// `decide_approval` (ARCHITECTURE.md#approvals): writes `approval/decided`, and
    /// when the outcome does not allow the call it names and that call still waits,
    /// the `tool/result` answering it `TOOL_NOT_ALLOWED`. A decision for an approval not
    /// pending changes nothing and is recorded as `agent/inbox/rejected` (with `post`,
    /// when it was posted); the error saying why (`not_found`, `already_decided`) is
    /// returned as the value, for the caller to raise once the record is written.
    pub fn decide_approval(
        &mut self,
        id: &str,
        outcome: ApprovalOutcome,
        post: Option<&str>,
    ) -> Result<Option<Error>> {
        let approvals = &self.conversation.approvals;
        let Some(asked) = approvals.asked(id) else {
            let why = if approvals.decided().contains_key(id) {
                Error::new(
                    ErrorKind::AlreadyDecided,
                    format!("approval {} was decided already", json::quote(id)),
                )
            } else {
                Error::new(
                    ErrorKind::NotFound,
                    format!("approval {} is not pending", json::quote(id)),
                )
            };
            self.reject(rejected_decision(id, outcome, &why, post))?;
            return Ok(Some(why));
        };
        let call_id = asked.call_id.clone();
        let decided = self.log.next_seq;
        let mut data = decided_data(id, outcome);
        if let Some(post) = post {
            data.pop();
            data.push_str(",\"post\":");
            json::write_string(&mut data, post);
            data.push('}');
        }
        self.library_event(APPROVAL_DECIDED, data)?;
        if outcome != ApprovalOutcome::AllowedOnce
            && let Some(call_id) = call_id
            && let Some(call) = self
                .conversation
                .calls
                .pending()
                .iter()
                .find(|p| p.id == call_id)
                .cloned()
        {
            let seq = self.log.next_seq;
            let (data, sources) = not_allowed_result(&call, outcome, decided, seq);
            let envelope = Envelope {
                surface_op: Some(raw_append()),
                source_event_seqs: Some(sources),
                ..Envelope::default()
            };
            let event = Event::build(TOOL_RESULT, seq, self.time, data, envelope)?;
            self.push(event)?;
        }
        Ok(None)
    }

    /// Decides every pending approval `cancelled` (what `cancel`, `fail` and the repair
    /// of an interrupted turn do first).
    pub(crate) fn cancel_approvals(&mut self) -> Result<()> {
        let pending: Vec<String> = self
            .conversation
            .approvals
            .pending()
            .iter()
            .map(|a| a.id.clone())
            .collect();
        for id in pending {
            self.decide_approval(&id, ApprovalOutcome::Cancelled, None)?;
        }
        Ok(())
    }

    /// `park` (ARCHITECTURE.md#approvals): writes `turn/parked` naming the pending
    /// approvals, with the host's `state`. Needs an open turn, not parked, and at least
    /// one pending approval.
    pub fn park(&mut self, state: Option<&RawValue>) -> Result<Event> {
        self.refuse_parked("park")?;
        self.refuse_busy("park")?;
        let turn = self.open_turn_for("park")?;
        let pending = self.conversation.approvals.pending();
        if pending.is_empty() {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("park is not allowed now: turn {turn} has no pending approval to wait for"),
            ));
        }
        let data = parked_data(turn, pending, state);
        self.library_event(TURN_PARKED, data)
    }

    /// `resume_parked` (ARCHITECTURE.md#approvals): writes `turn/resumed`, the one commit
    /// that hands the parked run on, and answers what it was parked with. `protocol`
    /// when the turn is not parked; `approvals_pending` while any it names is pending.
    pub fn resume_parked(&mut self) -> Result<Resumed> {
        let approvals = &self.conversation.approvals;
        let Some(parked) = approvals.parked().cloned() else {
            let state = match self.log.open_turn {
                Some(turn) => format!("turn {turn} is open and not parked"),
                None => self.phase.describe(),
            };
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("resume_parked is not allowed now: {state}"),
            ));
        };
        let waiting: Vec<&str> = parked
            .approvals
            .iter()
            .filter(|id| approvals.asked(id).is_some())
            .map(String::as_str)
            .collect();
        if !waiting.is_empty() {
            return Err(Error::new(
                ErrorKind::ApprovalsPending,
                format!(
                    "turn {} cannot resume while approvals {} are pending",
                    parked.turn,
                    listed(waiting)
                ),
            ));
        }
        let decisions = parked
            .approvals
            .iter()
            .map(|id| {
                let outcome = approvals.decided().get(id).copied();
                (id.clone(), outcome.unwrap_or(ApprovalOutcome::Cancelled))
            })
            .collect();
        self.library_event(TURN_RESUMED, format!("{{\"turn\":{}}}", parked.turn))?;
        Ok(Resumed {
            turn: parked.turn,
            parked: parked.data,
            decisions,
        })
    }

    /// Stages a library event of a type whose data the library built.
    pub(super) fn library_event(&mut self, ty: &'static str, data: String) -> Result<Event> {
        let event = Event::reserved(
            ty,
            self.log.next_seq,
            self.time,
            data,
            Body::Host,
            Envelope::default(),
        );
        self.push(event.clone())?;
        Ok(event)
    }
}

/// `{"decision":{"id","outcome"},"reason":{"code","kind","message"},"post"?}`.
fn rejected_decision(
    id: &str,
    outcome: ApprovalOutcome,
    why: &Error,
    post: Option<&str>,
) -> String {
    let mut out = String::from("{\"decision\":");
    out.push_str(&decided_data(id, outcome));
    out.push_str(",\"reason\":");
    let kind = why.kind();
    ErrorFields::new(kind.code(), kind.name(), why.message()).write_json(&mut out);
    if let Some(post) = post {
        out.push_str(",\"post\":");
        json::write_string(&mut out, post);
    }
    out.push('}');
    out
}

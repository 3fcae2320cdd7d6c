//! A person in the loop (ARCHITECTURE.md#approvals, SPEC §17): asking for and deciding
//! approvals in process, parking the open turn on them and handing it on.

use crate::conversation::ApprovalOutcome;
use crate::error::Result;
use crate::event::Event;
use crate::json;
use crate::txn::Resumed;

use super::Session;

/// A turn parked on approvals, as a reader sees it: `store.peek(id)["parked"]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedTurn {
    /// The parked turn.
    pub turn: u64,
    /// The approvals its `turn/parked` names.
    pub approvals: Vec<String>,
    /// Whether every one of them is decided, so the run may resume.
    pub ready: bool,
}

impl ParkedTurn {
    pub(crate) fn of(approvals: &crate::conversation::Approvals) -> Option<ParkedTurn> {
        approvals.parked().map(|p| ParkedTurn {
            turn: p.turn,
            approvals: p.approvals.clone(),
            ready: approvals.ready(),
        })
    }
}

impl Session {
    /// Asks for a person's approval `id` of a call of tool `tool_name`: writes
    /// `approval/asked {"id","toolName","callId"?,"arguments"?,"reason"?}`. `call_id`, when
    /// given, names a tool call still waiting for its result (its `tool/call` comes
    /// first); `arguments` is JSON text. Needs an open turn that is not parked
    /// (`protocol`); an id asked before in this log, an empty id or tool name, or a call
    /// not waiting is `invalid_input`. Nothing is written when refused.
    pub fn ask_approval(
        &self,
        id: &str,
        tool_name: &str,
        call_id: Option<&str>,
        arguments: Option<&str>,
        reason: Option<&str>,
    ) -> Result<Event> {
        let arguments = arguments
            .map(|text| json::raw_value(text, "approval arguments"))
            .transpose()?;
        self.transact(|txn| txn.ask_approval(id, tool_name, call_id, arguments.as_deref(), reason))
    }

    /// Decides approval `id`: writes `approval/decided {"id","outcome"}` and, when the
    /// outcome does not allow the call it names and that call still waits, the
    /// `tool/result` answering it `TOOL_NOT_ALLOWED`. Allowed while parked. A decision
    /// for an approval that is not pending is recorded as `agent/inbox/rejected
    /// {"decision":…}` and then refused: `already_decided`, or `not_found` for an id
    /// never asked.
    pub fn decide_approval(&self, id: &str, outcome: ApprovalOutcome) -> Result<()> {
        match self.transact(|txn| txn.decide_approval(id, outcome, None))? {
            None => Ok(()),
            Some(refused) => Err(refused.with_session(self.id())),
        }
    }

    /// The approvals waiting for a decision, each as its `approval/asked` data (JSON
    /// text), in the order they were asked.
    pub fn pending_approvals(&self) -> Result<Vec<String>> {
        let st = self.state()?;
        let pending = st.ledger.conversation.approvals.pending();
        Ok(pending.iter().map(|a| a.data.clone()).collect())
    }

    /// Parks the open turn on its pending approvals: writes `turn/parked
    /// {"turn","approvals":[ids],"state"?}`, `state` being JSON text of whatever the host
    /// needs to resume the run. The turn stays open with no process alive for it:
    /// opening the session leaves it open. While parked, the step-boundary calls and
    /// appends are refused (`protocol`); `decide_approval`, `cancel` and `fail` are not.
    /// Needs an open turn, not parked, with at least one pending approval (`protocol`).
    pub fn park(&self, state: Option<&str>) -> Result<Event> {
        let state = state
            .map(|text| json::raw_value(text, "parked state"))
            .transpose()?;
        self.transact(|txn| txn.park(state.as_deref()))
    }

    /// The parked turn, if the open turn is parked.
    pub fn parked(&self) -> Result<Option<ParkedTurn>> {
        Ok(ParkedTurn::of(&self.state()?.ledger.conversation.approvals))
    }

    /// Whether the turn is parked and every approval it names is decided, after taking
    /// posted decisions in (ARCHITECTURE.md#posting); `false` when not parked.
    pub fn approvals_ready(&self) -> Result<bool> {
        self.receive_if_posted()?;
        Ok(self.state()?.ledger.conversation.approvals.ready())
    }

    /// Hands the parked run on, after taking posted decisions in: writes `turn/resumed
    /// {"turn"}`, the one commit after which the run continues here (a worker that dies
    /// after it leaves an ordinary open turn, which the next open interrupts), and
    /// answers the `turn/parked` data and the decisions. `approvals_pending` while any
    /// approval it names is pending, `protocol` when the turn is not parked; nothing is
    /// written then.
    pub fn resume_parked(&self) -> Result<Resumed> {
        self.receive_if_posted()?;
        #[allow(clippy::redundant_closure_for_method_calls)]
        // the method is generic over the txn lifetime
        self.transact(|txn| txn.resume_parked())
    }
}

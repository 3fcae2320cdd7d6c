//! Protocol calls fused into one transaction (ARCHITECTURE.md#protocol): a step
//! boundary with no pre-step decision to wait for ([`Session::step_boundary`]), and the
//! last step's end with the turn's close ([`Session::end_step_and_close`]).
//!
//! Each writes exactly the events of the separate calls it stands for, in their order,
//! and refuses exactly where the first of them would (nothing written); the events go
//! to the store in one append, so a `sync` log makes them durable with one fsync where
//! the separate calls take one each.

use crate::error::Result;
use crate::extra::Extra;
use crate::protocol::{Decided, Decision, Proposal, TurnClaim};
use crate::reason::StepOutcome;
use crate::txn::Txn;

use super::Session;

/// What [`Session::step_boundary`] did when the loop went on: the claim, and what
/// entering it unchanged did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepBoundary {
    /// The claimed input, as `propose_step` answers it.
    pub proposal: Proposal,
    /// What `decide` made of entering the claim: a step entered, or the turn ended (an
    /// empty claim at a turn's first boundary completes it, as `decide` does).
    pub decided: Decided,
}

impl Session {
    /// `end_step(outcome)` (when `end` is given), `propose_step_claiming(claim)` and
    /// `decide(Decision::Enter(claimed messages))` in one call: for a loop whose
    /// pre-step decision always enters the claim unchanged (no pre-step plugin sees the
    /// proposal). `end: None` takes a boundary with no step owed (a turn's first).
    ///
    /// The events are the same as the separate calls', in the same order, without host
    /// extras: `step/end`, the claim's `agent/inbox/spliced` events, `step/start` and
    /// one `user/message` per claimed message. They are written in one durable append,
    /// unless posts may wait in the session's mailbox (ARCHITECTURE.md#posting; asked
    /// without a read when the store knows, [`crate::store::Mailbox::may_hold`]): the
    /// separate calls take them in between the step's end and the claim, so then this
    /// makes those calls one by one. When `end_step` answers that the loop must not go
    /// on, only the step ends, nothing is claimed, and the answer is `None` (close the
    /// turn next). A call out of order is refused as the first separate call would
    /// refuse it (`end_step`, or `propose_step` with no `end`), with nothing written.
    pub fn step_boundary(
        &self,
        end: Option<StepOutcome>,
        claim: TurnClaim,
    ) -> Result<Option<StepBoundary>> {
        self.refuse_reentry()?;
        if self.posts_waiting()? {
            if let Some(outcome) = end
                && !self.end_step(outcome)?
            {
                return Ok(None);
            }
            let proposal = self.propose_step_claiming(claim)?;
            let decided = self.decide(Decision::Enter(proposal.messages.clone()))?;
            return Ok(Some(StepBoundary { proposal, decided }));
        }
        self.transact(|txn| fused_boundary(txn, end, claim))
    }

    /// `end_step(outcome)` and, when it answers that no other step is due, `close_turn()`,
    /// in one durable append: the same events as the separate calls (`step/end`, then
    /// `turn/end` with the concluded reason), without host extras. Answers the turn's
    /// end, or `None` when another step must be proposed (the turn concluded with
    /// steering waiting in `next-step`, or owes more work): then only the step ended,
    /// and `close_turn` would be refused, as after the separate `end_step`. With no step
    /// open it is refused as `end_step` is, with nothing written.
    ///
    /// Posts that may wait in the session's mailbox (ARCHITECTURE.md#posting) are taken
    /// in before the turn would close, as `end_step` takes them: then this makes the
    /// separate calls one by one, and steering among the posts keeps the turn open
    /// (`None`).
    pub fn end_step_and_close(&self, outcome: StepOutcome) -> Result<Option<Decided>> {
        self.refuse_reentry()?;
        if self.turn_would_end(outcome)? && self.posts_waiting()? {
            if self.end_step(outcome)? {
                return Ok(None);
            }
            return self.close_turn().map(Some);
        }
        self.transact(|txn| {
            let none = Extra::none();
            if txn.end_step(outcome, &none)? {
                return Ok(None);
            }
            txn.close_turn(&none).map(Some)
        })
    }
}

/// The staging of [`Session::step_boundary`] when no post waits: the separate calls'
/// transitions one after the other in one transaction. It splices each inbox list at
/// most once, as a transaction must: `end_step` and `decide` splice nothing.
fn fused_boundary(
    txn: &mut Txn<'_>,
    end: Option<StepOutcome>,
    claim: TurnClaim,
) -> Result<Option<StepBoundary>> {
    let none = Extra::none();
    if let Some(outcome) = end
        && !txn.end_step(outcome, &none)?
    {
        return Ok(None);
    }
    let proposal = txn.propose_step(claim)?;
    let decided = txn.decide(Decision::Enter(proposal.messages.clone()), &none)?;
    Ok(Some(StepBoundary { proposal, decided }))
}

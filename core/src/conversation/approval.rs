//! Approvals (ARCHITECTURE.md#approvals, SPEC §17): which `approval/asked` still wait
//! for their `approval/decided`, how each one was decided, and whether the open turn is
//! parked on them; the data of the events that say so, and of the `tool/result` that
//! answers a call that was not allowed. Pure: no I/O, part of replay.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Result, invalid};
use crate::event::{APPROVAL_ASKED, APPROVAL_DECIDED, Body, Event, TURN_PARKED, TURN_RESUMED};
use crate::json;

use super::calls::{Pending, error_result};

/// How a person (or the library, for `cancelled`) decided an approval (SPEC §17.1):
/// only [`ApprovalOutcome::AllowedOnce`] lets the one call run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApprovalOutcome {
    /// The call may run, once.
    AllowedOnce,
    /// A person rejected the call.
    Rejected,
    /// The approval was cancelled before a decision (the turn was cancelled or failed).
    Cancelled,
    /// No one could be asked.
    Unavailable,
}

impl ApprovalOutcome {
    /// Every outcome, in the order SPEC §17.1 lists them.
    pub const ALL: [ApprovalOutcome; 4] = [
        ApprovalOutcome::AllowedOnce,
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Cancelled,
        ApprovalOutcome::Unavailable,
    ];

    /// The wire name (`"allowed-once"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::AllowedOnce => "allowed-once",
            ApprovalOutcome::Rejected => "rejected",
            ApprovalOutcome::Cancelled => "cancelled",
            ApprovalOutcome::Unavailable => "unavailable",
        }
    }

    /// Parses a wire name; `invalid_input` naming the four for anything else.
    pub fn parse(name: &str) -> Result<ApprovalOutcome> {
        ApprovalOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == name)
            .ok_or_else(|| {
                invalid(format!(
                    "an approval's outcome must be \"allowed-once\", \"rejected\", \"cancelled\" or \"unavailable\", got {}",
                    json::quote(name)
                ))
            })
    }

    /// What the model is told of a call this outcome did not allow.
    fn told(self) -> &'static str {
        match self {
            ApprovalOutcome::AllowedOnce => "",
            ApprovalOutcome::Rejected => {
                "A person rejected this tool call, so the tool did not run. Do not try it again unless they ask for it."
            }
            ApprovalOutcome::Cancelled => {
                "This tool call was cancelled while it waited for approval, so the tool did not run."
            }
            ApprovalOutcome::Unavailable => {
                "No one could be asked to approve this tool call, so the tool did not run."
            }
        }
    }
}

impl fmt::Display for ApprovalOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `approval/asked` still waiting for its decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Asked {
    pub id: String,
    /// The tool call it is about, when it names one.
    pub call_id: Option<String>,
    /// The seq of its `approval/asked`.
    pub seq: u64,
    /// Its data, compact JSON.
    pub data: String,
}

/// The parked turn: its number, the approvals its `turn/parked` names, and that data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parked {
    pub turn: u64,
    pub approvals: Vec<String>,
    pub data: String,
}

/// The approvals' replay state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Approvals {
    /// Asked and not decided, in the order they were asked.
    pending: Vec<Asked>,
    /// Every decided approval's outcome, by id.
    decided: BTreeMap<String, ApprovalOutcome>,
    parked: Option<Parked>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AskedData {
    id: String,
    #[serde(default)]
    call_id: Option<String>,
}

#[derive(Deserialize)]
struct DecidedData<'a> {
    id: String,
    #[serde(borrow)]
    outcome: std::borrow::Cow<'a, str>,
}

#[derive(Deserialize)]
struct ParkedData {
    turn: u64,
    approvals: Vec<String>,
}

impl Asked {
    /// The asked approval an `approval/asked` at `seq` with `data` records; `None` for
    /// data without a string `id` (a stored log is read as it is).
    pub fn parse(seq: u64, data: &str) -> Option<Asked> {
        let d = json::from_str::<AskedData>(data).ok()?;
        Some(Asked {
            id: d.id,
            call_id: d.call_id,
            seq,
            data: data.to_owned(),
        })
    }
}

impl Parked {
    /// The parked turn a `turn/parked` with `data` records.
    pub fn parse(data: &str) -> Option<Parked> {
        let d = json::from_str::<ParkedData>(data).ok()?;
        Some(Parked {
            turn: d.turn,
            approvals: d.approvals,
            data: data.to_owned(),
        })
    }
}

impl Approvals {
    /// The state as a checkpoint keeps it.
    pub fn from_parts(
        pending: Vec<Asked>,
        decided: BTreeMap<String, ApprovalOutcome>,
        parked: Option<Parked>,
    ) -> Approvals {
        Approvals {
            pending,
            decided,
            parked,
        }
    }

    /// The approvals waiting for a decision, in the order they were asked.
    pub fn pending(&self) -> &[Asked] {
        &self.pending
    }

    /// Every decision taken, by approval id.
    pub fn decided(&self) -> &BTreeMap<String, ApprovalOutcome> {
        &self.decided
    }

    /// The parked turn, if the open turn is parked.
    pub fn parked(&self) -> Option<&Parked> {
        self.parked.as_ref()
    }

    /// The pending approval `id`.
    pub fn asked(&self, id: &str) -> Option<&Asked> {
        self.pending.iter().find(|a| a.id == id)
    }

    /// Whether `id` was asked already (pending or decided).
    pub fn known(&self, id: &str) -> bool {
        self.asked(id).is_some() || self.decided.contains_key(id)
    }

    /// Whether the parked turn's approvals are all decided (false when not parked).
    pub fn ready(&self) -> bool {
        self.parked
            .as_ref()
            .is_some_and(|p| p.approvals.iter().all(|id| self.asked(id).is_none()))
    }

    /// Whether [`Approvals::note`] may change anything for `event` (by its type alone).
    pub fn touched_by(event: &Event) -> bool {
        matches!(event.body(), Body::TurnStart { .. } | Body::TurnEnd { .. })
            || matches!(
                event.ty(),
                APPROVAL_ASKED | APPROVAL_DECIDED | TURN_PARKED | TURN_RESUMED
            )
    }

    /// Records `event`. Lenient, as a stored log is read as it is: data it cannot read
    /// and decisions of approvals not pending change nothing; a turn's end drops what
    /// its approvals left.
    pub fn note(&mut self, event: &Event) {
        match (event.body(), event.ty()) {
            (Body::TurnStart { .. } | Body::TurnEnd { .. }, _) => {
                self.pending.clear();
                self.parked = None;
            }
            (_, APPROVAL_ASKED) => {
                if let Some(asked) = Asked::parse(event.seq(), event.data())
                    && !self.known(&asked.id)
                {
                    self.pending.push(asked);
                }
            }
            (_, APPROVAL_DECIDED) => {
                let Ok(d) = json::from_str::<DecidedData<'_>>(event.data()) else {
                    return;
                };
                let Ok(outcome) = ApprovalOutcome::parse(&d.outcome) else {
                    return;
                };
                if let Some(at) = self.pending.iter().position(|a| a.id == d.id) {
                    self.pending.remove(at);
                    self.decided.insert(d.id, outcome);
                }
            }
            (_, TURN_PARKED) => self.parked = Parked::parse(event.data()),
            (_, TURN_RESUMED) => self.parked = None,
            _ => {}
        }
    }
}

/// `approval/asked` data: `{"id","toolName","callId"?,"arguments"?,"reason"?}`,
/// `arguments` any JSON (checked by the caller), `reason` a string.
pub(crate) fn asked_data(
    id: &str,
    tool_name: &str,
    call_id: Option<&str>,
    arguments: Option<&RawValue>,
    reason: Option<&str>,
) -> String {
    let mut out = String::from("{\"id\":");
    json::write_string(&mut out, id);
    out.push_str(",\"toolName\":");
    json::write_string(&mut out, tool_name);
    if let Some(call) = call_id {
        out.push_str(",\"callId\":");
        json::write_string(&mut out, call);
    }
    if let Some(arguments) = arguments {
        out.push_str(",\"arguments\":");
        out.push_str(arguments.get());
    }
    if let Some(reason) = reason {
        out.push_str(",\"reason\":");
        json::write_string(&mut out, reason);
    }
    out.push('}');
    out
}

/// `approval/decided` data: `{"id","outcome"}`.
pub(crate) fn decided_data(id: &str, outcome: ApprovalOutcome) -> String {
    let mut out = String::from("{\"id\":");
    json::write_string(&mut out, id);
    out.push_str(",\"outcome\":\"");
    out.push_str(outcome.as_str());
    out.push_str("\"}");
    out
}

/// `turn/parked` data: `{"turn","approvals":[ids],"state"?}`.
pub(crate) fn parked_data(turn: u64, approvals: &[Asked], state: Option<&RawValue>) -> String {
    let mut out = format!("{{\"turn\":{turn},\"approvals\":[");
    for (i, a) in approvals.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::write_string(&mut out, &a.id);
    }
    out.push(']');
    if let Some(state) = state {
        out.push_str(",\"state\":");
        out.push_str(state.get());
    }
    out.push('}');
    out
}

/// The data and `sourceEventSeqs` of the `tool/result` at `seq` that answers `call`,
/// not allowed by the `approval/decided` at `decided` with `outcome` (SPEC §17.1): it
/// cites the call's `tool/call` (when there is one) and the decision.
pub(crate) fn not_allowed_result(
    call: &Pending,
    outcome: ApprovalOutcome,
    decided: u64,
    seq: u64,
) -> (String, Vec<u64>) {
    let message_id = format!("not-allowed-tool-result-{}-{seq}", call.id);
    let data = error_result(
        call,
        &message_id,
        "ToolNotAllowedError",
        "TOOL_NOT_ALLOWED",
        outcome.told(),
    );
    let sources = call.dispatched.into_iter().chain([decided]).collect();
    (data, sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ev;
    use crate::conversation::shape;
    use crate::event::TOOL_RESULT;

    #[test]
    fn outcomes_round_trip_and_others_are_named() {
        for o in ApprovalOutcome::ALL {
            assert_eq!(ApprovalOutcome::parse(o.as_str()).unwrap(), o);
        }
        let err = ApprovalOutcome::parse("allowed").unwrap_err();
        assert!(err.message().contains("got \"allowed\""), "{err}");
    }

    #[test]
    fn approvals_wait_from_asked_to_decided_and_park_their_turn() {
        let mut a = Approvals::default();
        for e in [
            ev(0, "turn/start", r#"{"turn":1}"#),
            ev(
                1,
                APPROVAL_ASKED,
                &asked_data("a1", "rm", Some("c1"), None, None),
            ),
            ev(
                2,
                APPROVAL_ASKED,
                &asked_data("a2", "ls", None, None, Some("why")),
            ),
            ev(3, TURN_PARKED, r#"{"turn":1,"approvals":["a1","a2"]}"#),
            ev(
                4,
                APPROVAL_DECIDED,
                &decided_data("a2", ApprovalOutcome::Rejected),
            ),
            // A second decision of the same id changes nothing.
            ev(
                5,
                APPROVAL_DECIDED,
                &decided_data("a2", ApprovalOutcome::AllowedOnce),
            ),
        ] {
            a.note(&e);
        }
        assert_eq!(a.pending().len(), 1);
        assert_eq!(a.pending()[0].call_id.as_deref(), Some("c1"));
        assert!(!a.ready() && a.known("a2") && a.known("a1") && !a.known("a3"));
        assert_eq!(a.decided()["a2"], ApprovalOutcome::Rejected);
        a.note(&ev(
            6,
            APPROVAL_DECIDED,
            &decided_data("a1", ApprovalOutcome::AllowedOnce),
        ));
        assert!(a.ready() && a.pending().is_empty());
        a.note(&ev(7, TURN_RESUMED, r#"{"turn":1}"#));
        assert!(a.parked().is_none() && !a.ready());
    }

    #[test]
    fn a_turn_end_drops_what_its_approvals_left() {
        let mut a = Approvals::default();
        a.note(&ev(0, APPROVAL_ASKED, r#"{"id":"x","toolName":"t"}"#));
        a.note(&ev(1, TURN_PARKED, r#"{"turn":1,"approvals":["x"]}"#));
        a.note(&ev(
            2,
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"interrupted"}}"#,
        ));
        assert_eq!(a, Approvals::default());
    }

    #[test]
    fn the_not_allowed_answer_cites_the_call_and_the_decision() {
        let call = Pending {
            id: "c1".into(),
            turn: 2,
            step: 1,
            dispatched: Some(5),
        };
        let (data, sources) = not_allowed_result(&call, ApprovalOutcome::Rejected, 8, 9);
        assert!(
            data.contains(r#""id":"not-allowed-tool-result-c1-9""#),
            "{data}"
        );
        assert!(
            data.contains(r#""error":{"name":"ToolNotAllowedError","code":"TOOL_NOT_ALLOWED"}"#)
        );
        assert!(data.contains("A person rejected"));
        assert_eq!(sources, [5, 8]);
        shape::check(TOOL_RESULT, &data).unwrap();
        let (_, sources) = not_allowed_result(
            &Pending {
                dispatched: None,
                ..call
            },
            ApprovalOutcome::Cancelled,
            8,
            9,
        );
        assert_eq!(sources, [8]);
    }
}

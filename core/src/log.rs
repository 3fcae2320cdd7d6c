//! The log invariants (ARCHITECTURE.md#log-invariants), checked on every append and on every load.

use crate::error::{Result, invalid};
use crate::event::{Body, Event};

/// What the invariants need to know about a log so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogState {
    /// The seq the next event must have.
    pub next_seq: u64,
    /// Time of the last event (repairs reuse it).
    pub last_time: u64,
    /// Number of the last `turn/start` anywhere in the log (0 before the first).
    pub last_turn: u64,
    /// The open turn, if any.
    pub open_turn: Option<u64>,
    /// Steps started so far in the open turn.
    pub steps: u64,
    /// The open step, if any.
    pub open_step: Option<u64>,
}

impl LogState {
    /// Checks that `event` may follow the log so far, then records it.
    pub fn advance(&mut self, event: &Event) -> Result<()> {
        if event.seq() != self.next_seq {
            return Err(self.discontinuity(event));
        }
        self.apply(event)
    }

    /// [`LogState::advance`] for a reader that skips events: `event` may jump forward
    /// over events the store has checked for contiguity itself and that change no state
    /// here (host events: ARCHITECTURE.md#log-invariants constrains reserved types only). A seq that does not move
    /// forward is refused as `advance` refuses it.
    pub fn advance_after(&mut self, event: &Event) -> Result<()> {
        if event.seq() < self.next_seq {
            return Err(self.discontinuity(event));
        }
        // `apply` refuses before it changes anything; so must the jump.
        let before = std::mem::replace(&mut self.next_seq, event.seq());
        self.apply(event).inspect_err(|_| self.next_seq = before)
    }

    fn discontinuity(&self, event: &Event) -> crate::error::Error {
        invalid(format!(
            "seq {} does not continue the log (expected seq {})",
            event.seq(),
            self.next_seq
        ))
    }

    /// Checks and records `event`, whose seq is `next_seq`.
    fn apply(&mut self, event: &Event) -> Result<()> {
        match *event.body() {
            Body::TurnStart { turn } => {
                if let Some(open) = self.open_turn {
                    return Err(invalid(format!(
                        "turn/start {turn} while turn {open} is open"
                    )));
                }
                if turn != self.last_turn + 1 {
                    return Err(invalid(format!(
                        "turn/start {turn} is not consecutive (expected turn {})",
                        self.last_turn + 1
                    )));
                }
                self.last_turn = turn;
                self.open_turn = Some(turn);
                self.steps = 0;
            }
            Body::TurnEnd { turn, .. } => {
                if self.open_turn != Some(turn) {
                    return Err(invalid(format!(
                        "turn/end {turn} does not name the open turn ({})",
                        self.describe_turn()
                    )));
                }
                if let Some(step) = self.open_step {
                    return Err(invalid(format!(
                        "turn/end {turn} while step {step} is open"
                    )));
                }
                self.open_turn = None;
            }
            Body::StepStart { turn, step } => {
                if self.open_turn != Some(turn) {
                    return Err(invalid(format!(
                        "step/start names turn {turn}, not the open turn ({})",
                        self.describe_turn()
                    )));
                }
                if let Some(open) = self.open_step {
                    return Err(invalid(format!(
                        "step/start {step} while step {open} is open"
                    )));
                }
                if step != self.steps + 1 {
                    return Err(invalid(format!(
                        "step/start {step} is not consecutive (expected step {})",
                        self.steps + 1
                    )));
                }
                self.steps = step;
                self.open_step = Some(step);
            }
            Body::StepEnd { turn, step } => {
                if self.open_turn != Some(turn) || self.open_step != Some(step) {
                    return Err(invalid(format!(
                        "step/end turn {turn} step {step} does not name the open step ({})",
                        match (self.open_turn, self.open_step) {
                            (Some(t), Some(s)) => format!("turn {t} step {s}"),
                            _ => "none is open".to_owned(),
                        }
                    )));
                }
                self.open_step = None;
            }
            Body::Host | Body::UserMessage | Body::Spliced(_) | Body::EndSeed | Body::Rejected => {}
        }
        self.next_seq += 1;
        self.last_time = event.time();
        Ok(())
    }

    fn describe_turn(&self) -> String {
        match self.open_turn {
            Some(t) => format!("turn {t}"),
            None => "no turn is open".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, ty: &str, data: &str) -> Event {
        Event::from_json(&format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{data}}}"#
        ))
        .unwrap()
    }

    fn run(events: &[(&str, &str)]) -> Result<LogState> {
        let mut state = LogState::default();
        for (i, (ty, data)) in events.iter().enumerate() {
            state.advance(&ev(i as u64, ty, data))?;
        }
        Ok(state)
    }

    #[test]
    fn a_balanced_turn_passes() {
        let s = run(&[
            ("turn/start", r#"{"turn":1}"#),
            ("step/start", r#"{"turn":1,"step":1}"#),
            ("x/y", r#"{"turn":9,"step":9}"#),
            ("step/end", r#"{"turn":1,"step":1}"#),
            ("step/start", r#"{"turn":1,"step":2}"#),
            ("step/end", r#"{"turn":1,"step":2}"#),
            ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
            ("turn/start", r#"{"turn":2}"#),
        ])
        .unwrap();
        assert_eq!(
            (s.next_seq, s.last_turn, s.open_turn, s.steps),
            (8, 2, Some(2), 0)
        );
    }

    #[test]
    fn every_break_is_named() {
        let t1 = ("turn/start", r#"{"turn":1}"#);
        let s1 = ("step/start", r#"{"turn":1,"step":1}"#);
        for (events, needle) in [
            (
                vec![("turn/start", r#"{"turn":2}"#)],
                "not consecutive (expected turn 1)",
            ),
            (
                vec![t1, ("turn/start", r#"{"turn":2}"#)],
                "while turn 1 is open",
            ),
            (
                vec![("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#)],
                "no turn is open",
            ),
            (
                vec![
                    t1,
                    s1,
                    ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
                ],
                "while step 1 is open",
            ),
            (
                vec![t1, ("step/start", r#"{"turn":1,"step":2}"#)],
                "expected step 1",
            ),
            (
                vec![t1, s1, ("step/start", r#"{"turn":1,"step":2}"#)],
                "while step 1 is open",
            ),
            (
                vec![t1, ("step/start", r#"{"turn":2,"step":1}"#)],
                "not the open turn",
            ),
            (
                vec![t1, s1, ("step/end", r#"{"turn":1,"step":2}"#)],
                "does not name the open step",
            ),
        ] {
            let err = run(&events).unwrap_err();
            assert!(err.to_string().contains(needle), "{events:?}: {err}");
        }
        let mut s = LogState::default();
        let err = s.advance(&ev(1, "x", "{}")).unwrap_err();
        assert!(
            err.to_string()
                .contains("seq 1 does not continue the log (expected seq 0)"),
            "{err}"
        );
    }

    #[test]
    fn advance_after_jumps_forward_only_and_checks_what_it_sees() {
        let mut s = LogState::default();
        s.advance_after(&ev(3, "turn/start", r#"{"turn":1}"#))
            .unwrap();
        s.advance_after(&ev(9, "step/start", r#"{"turn":1,"step":1}"#))
            .unwrap();
        assert_eq!(
            (s.next_seq, s.last_time, s.open_turn, s.open_step),
            (10, 9, Some(1), Some(1))
        );
        // The invariants still hold across the jump.
        let err = s
            .advance_after(&ev(
                12,
                "turn/end",
                r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            ))
            .unwrap_err();
        assert!(err.to_string().contains("while step 1 is open"), "{err}");
        // Backwards, or the same seq again: refused as `advance` refuses a gap.
        for seq in [9, 4] {
            let err = s.advance_after(&ev(seq, "x", "{}")).unwrap_err();
            assert!(
                err.to_string().contains(&format!(
                    "seq {seq} does not continue the log (expected seq 10)"
                )),
                "{err}"
            );
        }
        // Exactly the next seq is a step of one, as in `advance`.
        s.advance_after(&ev(10, "x", "{}")).unwrap();
        assert_eq!(s.next_seq, 11);
    }
}

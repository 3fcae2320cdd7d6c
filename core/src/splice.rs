//! Splice records: the durable form of every inbox mutation (ARCHITECTURE.md#inbox-mutations–ARCHITECTURE.md#inbox-validation).

use serde::Deserialize;
use serde_json::Number;

use crate::error::{Error, ErrorKind, Result, invalid};
use crate::json::walk::{self, Cursor};
use crate::json::{self, MAX_SAFE_INTEGER};
use crate::message::Message;

/// One of the inbox's two ordered lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Messages that each wait for a turn of their own.
    NextTurn,
    /// Input waiting for the next step boundary.
    NextStep,
}

impl Target {
    /// The wire name: `"next-turn"` or `"next-step"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Result<Target> {
        match name {
            "next-turn" => Ok(Target::NextTurn),
            "next-step" => Ok(Target::NextStep),
            other => Err(invalid(format!(
                "target must be \"next-turn\" or \"next-step\", got {}",
                json::quote(other)
            ))),
        }
    }
}

/// The data of an `agent/inbox/spliced` event, with normalized coordinates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpliceRecord {
    /// The list it changes.
    pub target: Target,
    /// Where the change starts.
    pub start: u64,
    /// How many messages it removes (written as `removedCount` only when non-zero).
    pub removed_count: u64,
    /// The messages it inserts at `start`.
    pub inserted: Vec<Message>,
    /// Whether the removal is a cancellation (`"outcome":"canceled"`).
    pub canceled: bool,
    /// Whether the removal is the first half of a move (`"outcome":"moved"`,
    /// ARCHITECTURE.md#moving-pending-input): neither a claim nor a cancellation.
    pub moved: bool,
}

/// Keys beyond ARCHITECTURE.md#splice-records are host extras (ARCHITECTURE.md#reserved-events): kept in the stored text, not checked.
#[derive(Deserialize)]
struct Wire {
    target: String,
    start: Number,
    #[serde(rename = "removedCount")]
    removed_count: Option<Number>,
    inserted: Vec<Message>,
    outcome: Option<String>,
}

/// `invalid inbox splice` error with a detail.
pub(crate) fn invalid_splice(detail: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::InvalidSplice,
        format!("invalid inbox splice: {detail}"),
    )
}

/// Fills an empty slot; `None` when it was filled already (a repeated key).
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.replace(value).is_none().then_some(())
}

/// A coordinate spelled as plain digits, within the safe range.
fn safe_uint(text: &str) -> Option<u64> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text.len() == 1 || !text.starts_with('0'));
    text.parse()
        .ok()
        .filter(|&n| plain && n <= MAX_SAFE_INTEGER)
}

fn coordinate(name: &str, n: &Number) -> Result<u64> {
    match n.as_u64() {
        Some(v) if v <= MAX_SAFE_INTEGER => Ok(v),
        _ => Err(invalid_splice(format!(
            "{name} {n} is not a safe non-negative integer"
        ))),
    }
}

impl SpliceRecord {
    /// Parses a stored record; coordinates are checked to be safe non-negative integers
    /// (their range against the lists is checked when the record is applied).
    pub fn from_json(text: &str) -> Result<SpliceRecord> {
        // Shape errors keep the ARCHITECTURE.md#inbox-validation wording too, so replay names them alike.
        let wire: Wire = json::from_str(text).map_err(invalid_splice)?;
        let target = Target::parse(&wire.target).map_err(|e| invalid_splice(e.message()))?;
        let start = coordinate("start", &wire.start)?;
        let removed_count = match &wire.removed_count {
            Some(n) => coordinate("removedCount", n)?,
            None => 0,
        };
        let (canceled, moved) = match wire.outcome.as_deref() {
            None => (false, false),
            Some("canceled") => (true, false),
            Some("moved") => (false, true),
            Some(other) => {
                return Err(invalid_splice(format!(
                    "outcome must be \"canceled\" or \"moved\", got {}",
                    json::quote(other)
                )));
            }
        };
        Ok(SpliceRecord {
            target,
            start,
            removed_count,
            inserted: wire.inserted,
            canceled,
            moved,
        })
    }

    /// Parses the data of an event being built (checked, compact JSON): read in place
    /// when it is plain (see [`SpliceRecord::from_plain`]), else by [`SpliceRecord::from_json`].
    pub(crate) fn from_checked(text: &str) -> Result<SpliceRecord> {
        match SpliceRecord::from_plain(text) {
            Some(record) => Ok(record),
            None => SpliceRecord::from_json(text),
        }
    }

    /// The record in checked, compact `text`, read by walking its members once: `None`
    /// for anything [`SpliceRecord::from_json`] must look at (a key with an escape, a
    /// repeated key, a missing one, any value it would refuse), which then decides.
    fn from_plain(text: &str) -> Option<SpliceRecord> {
        let (mut target, mut start, mut removed, mut inserted, mut outcome) =
            (None, None, None, None, None);
        let mut c = Cursor::new(text);
        walk::object(&mut c, |key, c| match key {
            "target" => set(
                &mut target,
                match c.value()? {
                    "\"next-turn\"" => Target::NextTurn,
                    "\"next-step\"" => Target::NextStep,
                    _ => return None,
                },
            ),
            "start" => set(&mut start, safe_uint(c.value()?)?),
            "removedCount" => set(&mut removed, safe_uint(c.value()?)?),
            "inserted" => {
                let mut messages = Vec::new();
                walk::array(c, |c| {
                    messages.push(Message::read_plain(c)?);
                    Some(())
                })?;
                set(&mut inserted, messages)
            }
            "outcome" => set(
                &mut outcome,
                match c.value()? {
                    "\"canceled\"" => (true, false),
                    "\"moved\"" => (false, true),
                    _ => return None,
                },
            ),
            // A host extra, unless an escape spells one of the keys above.
            _ if key.contains('\\') => None,
            _ => c.value().map(drop),
        })?;
        if !c.at_end() {
            return None;
        }
        Some(SpliceRecord {
            target: target?,
            start: start?,
            removed_count: removed.unwrap_or(0),
            inserted: inserted?,
            canceled: outcome.is_some_and(|(canceled, _)| canceled),
            moved: outcome.is_some_and(|(_, moved)| moved),
        })
    }

    /// The record as compact JSON, keys in ARCHITECTURE.md#splice-records order.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(
            64 + self
                .inserted
                .iter()
                .map(|m| m.json().len() + 1)
                .sum::<usize>(),
        );
        out.push_str("{\"target\":\"");
        out.push_str(self.target.as_str());
        out.push_str("\",\"start\":");
        out.push_str(&self.start.to_string());
        if self.removed_count > 0 {
            out.push_str(",\"removedCount\":");
            out.push_str(&self.removed_count.to_string());
        }
        out.push_str(",\"inserted\":[");
        for (i, m) in self.inserted.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(m.json());
        }
        out.push(']');
        if self.canceled {
            out.push_str(",\"outcome\":\"canceled\"");
        } else if self.moved {
            out.push_str(",\"outcome\":\"moved\"");
        }
        out.push('}');
        out
    }

    /// Checks the coordinates against a list of `len` messages (ARCHITECTURE.md#inbox-validation).
    pub(crate) fn check_range(&self, len: usize) -> Result<()> {
        let len = len as u64;
        if self.start > len {
            return Err(invalid_splice(format!(
                "start {} is past the end of {} (length {len})",
                self.start,
                self.target.as_str()
            )));
        }
        if self.start + self.removed_count > len {
            return Err(invalid_splice(format!(
                "start {} + removedCount {} is past the end of {} (length {len})",
                self.start,
                self.removed_count,
                self.target.as_str()
            )));
        }
        Ok(())
    }
}

/// JavaScript `Array.prototype.splice` arithmetic (ARCHITECTURE.md#inbox-mutations): any float, NaN and ±Infinity
/// included, to an in-range `(start, delete)` pair for a list of `len`.
pub fn normalize(len: usize, start: f64, delete_count: f64) -> (usize, usize) {
    let len_f = len as f64;
    let s = if start.is_nan() { 0.0 } else { start.trunc() };
    let actual_start = if s < 0.0 {
        (len_f + s).max(0.0)
    } else {
        s.min(len_f)
    };
    let actual_start = actual_start as usize;
    let d = if delete_count.is_nan() {
        0.0
    } else {
        delete_count.trunc()
    };
    let actual_delete = d.max(0.0).min((len - actual_start) as f64) as usize;
    (actual_start, actual_delete)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_follows_javascript() {
        let n = f64::NAN;
        let inf = f64::INFINITY;
        assert_eq!(normalize(3, n, n), (0, 0));
        assert_eq!(normalize(3, -1.0, 1.0), (2, 1));
        assert_eq!(normalize(3, -inf, inf), (0, 3));
        assert_eq!(normalize(3, inf, 1.0), (3, 0));
        assert_eq!(normalize(3, 1.9, 1.9), (1, 1));
        assert_eq!(normalize(3, -1.5, 5.0), (2, 1));
        assert_eq!(normalize(3, -10.0, -2.0), (0, 0));
        assert_eq!(normalize(3, 1e300, 1e300), (3, 0));
        assert_eq!(normalize(0, -0.0, 1.0), (0, 0));
        assert_eq!(normalize(5, 9_007_199_254_740_993.0, 1.0), (5, 0));
    }

    #[test]
    fn records_round_trip_in_key_order() {
        let text = r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[{"id":"a"}],"outcome":"canceled"}"#;
        let rec = SpliceRecord::from_json(text).unwrap();
        assert_eq!(rec.to_json(), text);
        let plain = r#"{"target":"next-step","start":2,"inserted":[]}"#;
        assert_eq!(SpliceRecord::from_json(plain).unwrap().to_json(), plain);
    }

    #[test]
    fn bad_records_are_invalid_splices() {
        for bad in [
            r#"{"target":"next-turn","start":-1,"inserted":[]}"#,
            r#"{"target":"next-turn","start":1.5,"inserted":[]}"#,
            r#"{"target":"next-turn","start":9007199254740992,"inserted":[]}"#,
            r#"{"target":"later","start":0,"inserted":[]}"#,
            r#"{"target":"next-turn","start":0,"inserted":[],"outcome":"done"}"#,
            r#"{"target":"next-turn","start":0,"removedCount":-1,"inserted":[]}"#,
            r#"{"target":"next-turn","start":0}"#,
        ] {
            let err = SpliceRecord::from_json(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidSplice, "{bad}");
            assert!(err.to_string().contains("invalid inbox splice"), "{err}");
        }
        let rec = SpliceRecord::from_json(
            r#"{"target":"next-turn","start":2,"removedCount":1,"inserted":[]}"#,
        )
        .unwrap();
        assert!(
            rec.check_range(2)
                .unwrap_err()
                .to_string()
                .contains("past the end")
        );
        assert!(rec.check_range(3).is_ok());
    }
}

//! Reading an event line spelled the way the library writes it
//! ([`Event::write_json`]), in one pass over its bytes.
//!
//! Nearly every stored line is in that spelling: the keys in their order, no
//! whitespace, a type without escapes. For such a line the data is checked once by
//! [`plain::value_end`] and the envelope is read in place; anything else (another key
//! order, whitespace, an exponent, an unknown key, any error) answers `None`, and the
//! general parser reads the line and decides, with its own messages. So this module
//! only makes accepting faster: it never accepts what the general parser refuses, and
//! builds the same event (`canonical_lines_read_as_the_general_parser_reads_them`).

use std::ops::Range;

use serde_json::value::RawValue;

use super::{Envelope, Event, event_key};
use crate::json::plain;

/// The event on `line` when it is in the library's own spelling and valid; `None`
/// sends the line to the general parser.
pub(super) fn event(line: &str) -> Option<Event> {
    build(line, &shape(line)?)
}

/// Where the parts of a line in the library's spelling are, found and checked by one
/// pass that allocates nothing: a reader thread can do it ahead of [`build`].
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    ty: Range<usize>,
    seq: u64,
    time: u64,
    data: Range<usize>,
    ignorable: bool,
    surface_op: Option<Range<usize>>,
    /// The digits and commas between the brackets.
    source_event_seqs: Option<Range<usize>>,
}

impl Shape {
    /// The line's seq.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }
}

/// The [`Shape`] of `line`, or `None` when it is not in the library's spelling (or not
/// valid JSON): then the general parser must read it.
pub(crate) fn shape(line: &str) -> Option<Shape> {
    shape_of(line, true)
}

/// The [`Shape`] of an event object whose closing `}` is not in `body` (a version 2
/// line's body: core/FORMAT.md#checksums-version-2); `None` as for [`shape`].
pub(crate) fn shape_open(body: &str) -> Option<Shape> {
    shape_of(body, false)
}

fn shape_of(line: &str, closed: bool) -> Option<Shape> {
    let mut c = Cursor {
        b: line.as_bytes(),
        i: 0,
    };
    c.eat(concat!("{\"", event_key!(type), "\":").as_bytes())?;
    let ty_start = c.i + 1;
    c.i = plain::string_end(c.b, c.i)?;
    let ty = ty_start..c.i - 1;
    if memchr::memchr(b'\\', &c.b[ty.clone()]).is_some() {
        return None;
    }
    c.eat(concat!(",\"", event_key!(seq), "\":").as_bytes())?;
    let seq = c.uint()?;
    c.eat(concat!(",\"", event_key!(time), "\":").as_bytes())?;
    let time = c.uint()?;
    c.eat(concat!(",\"", event_key!(data), "\":").as_bytes())?;
    let data = c.value()?;
    let ignorable = c
        .eat(concat!(",\"", event_key!(ignorable), "\":true").as_bytes())
        .is_some();
    let surface_op = match c.eat(concat!(",\"", event_key!(surface_op), "\":").as_bytes()) {
        Some(()) => Some(c.value()?),
        None => None,
    };
    let source_event_seqs =
        match c.eat(concat!(",\"", event_key!(source_event_seqs), "\":[").as_bytes()) {
            Some(()) => Some(c.uints()?),
            None => None,
        };
    if closed {
        c.eat(b"}")?;
    }
    (c.i == line.len()).then_some(Shape {
        ty,
        seq,
        time,
        data,
        ignorable,
        surface_op,
        source_event_seqs,
    })
}

/// The event `line` holds, whose [`Shape`] is `shape`; `None` when it breaks a rule of
/// the event vocabulary (the general parser then names the error).
pub(crate) fn build(line: &str, shape: &Shape) -> Option<Event> {
    let surface_op = match &shape.surface_op {
        Some(op) => Some(RawValue::from_string(line.get(op.clone())?.to_owned()).ok()?),
        None => None,
    };
    let source_event_seqs = match &shape.source_event_seqs {
        Some(seqs) => {
            let digits = line.get(seqs.clone())?;
            let parsed = digits
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.parse().ok());
            Some(parsed.collect::<Option<Vec<u64>>>()?)
        }
        None => None,
    };
    let envelope = Envelope {
        ignorable: shape.ignorable,
        surface_op,
        source_event_seqs,
    };
    let ty = line.get(shape.ty.clone())?;
    let data = line.get(shape.data.clone())?;
    Event::build(ty, shape.seq, shape.time, data.into(), envelope).ok()
}

/// A position in a line.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    /// Steps over `lit` when the line goes on with it.
    fn eat(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.i + lit.len();
        (self.b.get(self.i..end)? == lit).then(|| self.i = end)
    }

    /// A non-negative integer without sign, fraction or exponent (`0`, `17`), of at
    /// most 19 digits: those cannot overflow a u64, so no digit is checked for it.
    fn uint(&mut self) -> Option<u64> {
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.b.get(self.i).copied() {
            n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            self.i += 1;
        }
        let len = self.i - start;
        // Empty, a leading zero (`01`) or too long (no seq or time is): the general
        // parser names the error.
        (len == 1 || ((2..=19).contains(&len) && self.b[start] != b'0')).then_some(n)
    }

    /// `n,n,…]` after an opening bracket: the range of the numbers and commas.
    fn uints(&mut self) -> Option<Range<usize>> {
        let start = self.i;
        if self.eat(b"]").is_some() {
            return Some(start..start);
        }
        loop {
            self.uint()?;
            let end = self.i;
            if self.eat(b"]").is_some() {
                return Some(start..end);
            }
            self.eat(b",")?;
        }
    }

    /// A checked plain JSON value: its range in the line.
    fn value(&mut self) -> Option<Range<usize>> {
        let start = self.i;
        self.i = plain::value_end(self.b, start)?;
        Some(start..self.i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both readers, on one line: the canonical one must agree whenever it answers.
    fn agree(line: &str) -> bool {
        // A leading space is no canonical spelling: the general parser reads it.
        let general = Event::from_json(&format!(" {line}")).ok();
        match event(line) {
            None => false,
            Some(fast) => {
                let general =
                    general.expect("the general parser accepts what the canonical one does");
                assert_eq!(fast.to_json(), general.to_json(), "{line}");
                assert_eq!(fast.splice(), general.splice(), "{line}");
                assert_eq!(fast.envelope(), general.envelope(), "{line}");
                true
            }
        }
    }

    #[test]
    fn canonical_lines_read_as_the_general_parser_reads_them() {
        for line in [
            r#"{"type":"assistant/message","seq":3,"time":1700000000000,"data":{"text":"a \"b\" é ✓","n":[1,-2.5,null,true]}}"#,
            r#"{"type":"user/message","seq":9,"time":0,"data":{"id":"m"},"ignorable":true,"surfaceOp":"append","sourceEventSeqs":[1,0]}"#,
            r#"{"type":"assistant/message","seq":9,"time":0,"data":{},"surfaceOp":{"op":"replace","start":0,"end":2},"sourceEventSeqs":[]}"#,
            r#"{"type":"agent/inbox/spliced","seq":4,"time":5,"data":{"target":"next-turn","start":0,"removedCount":2,"inserted":[{"role":"user","id":"m1","x":{"id":7}},{"id":"é"}],"outcome":"canceled","host":[1]}}"#,
            r#"{"type":"agent/inbox/spliced","seq":4,"time":5,"data":{"target":"next-step","start":1,"inserted":[]}}"#,
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1,"host":"x"}}"#,
            r#"{"type":"turn/end","seq":7,"time":5,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
            // Keys spelled with escapes: the splice record is read by serde.
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"t\u0061rget":"next-turn","start":0,"inserted":[]}}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":0,"inserted":[{"\u0069d":"a"}]}}"#,
        ] {
            assert!(agree(line), "the canonical reader should take {line}");
        }
    }

    #[test]
    fn other_spellings_and_errors_go_to_the_general_parser() {
        for line in [
            // Spelling: key order, whitespace, escapes, exponents, unknown keys.
            r#"{"seq":0,"type":"x","time":0,"data":{}}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{ }}"#,
            r#"{"type":"x\/y","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":0,"time":0,"data":[1e5]}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{},"other":1}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{},"ignorable":false}"#,
            // Errors, which the general parser names.
            r#"{"type":"","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":01,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":9007199254740992,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":0,"time":18446744073709551616,"data":{}}"#,
            r#"{"type":"x","seq":0,"time":99999999999999999999,"data":{}}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{}}}"#,
            r#"{"type":"x","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#,
            r#"{"type":"user/message","seq":0,"time":0,"data":{},"sourceEventSeqs":[0]}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":-1,"inserted":[]}}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":0,"inserted":[{"id":""}]}}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":0,"inserted":[{"id":"a","id":"b"}]}}"#,
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","target":"next-step","start":0,"inserted":[]}}"#,
            r#"{"type":"turn/start","seq":0,"time":0,"data":[1]}"#,
        ] {
            assert!(event(line).is_none(), "{line}");
        }
    }

    /// Lines built from random pieces: whenever the canonical reader answers, the
    /// general parser reads the same event.
    #[test]
    fn random_lines_agree() {
        use proptest::prelude::*;
        let ty = prop::sample::select(vec![
            "agent/inbox/spliced",
            "user/message",
            "turn/start",
            "x",
            "x\\\"",
        ]);
        let data = prop::sample::select(vec![
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
            r#"{"target":"next-turn","start":0,"removedCount":0,"inserted":[]}"#,
            r#"{"target":"next-step","start":1,"inserted":[{"id":"a","id":"b"}]}"#,
            r#"{"start":0,"target":"next-turn","inserted":[{"x":1,"id":"\n"}],"outcome":"canceled"}"#,
            r#"{"turn":1}"#,
            r#"{"turn":1.5}"#,
            r#"{"id":7}"#,
            "[]",
            r#""s""#,
            "1e5",
            "{}",
        ]);
        let tail = prop::sample::select(vec![
            "",
            ",\"ignorable\":true",
            ",\"surfaceOp\":\"append\"",
            ",\"sourceEventSeqs\":[0]",
            ",\"x\":1",
            " ",
        ]);
        proptest!(ProptestConfig::with_cases(2_000), |(ty in ty, data in data, tail in tail, seq in 0u64..3)| {
            let line = format!(r#"{{"type":"{ty}","seq":{seq},"time":5,"data":{data}{tail}}}"#);
            agree(&line);
        });
    }
}

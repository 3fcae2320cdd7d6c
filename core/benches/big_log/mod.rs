//! The generated 1,000,000-event log of whole turns the `open_1m` bench opens, shared
//! with the instruction count of an open (`examples/open_log.rs`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Events in the generated log.
pub const EVENTS: u64 = 1_000_000;

/// Events per generated turn: splice, turn/start, claim, step/start, user/message,
/// 93 assistant messages, step/end, turn/end.
pub const PER_TURN: u64 = 100;

/// An assistant chunk's text: ASCII with a few escapes and multibyte characters.
pub const TEXT: &str = r#"Here is the next part of the answer, with \"quotes\", a tab\t and a newline\n, some accents (é, ü, ñ), a check ✓ and a clef 𝄞 to keep the parser honest. Lorem ipsum dolor."#;

/// Writes a valid 1,000,000-event log of whole turns to `path`; returns its size.
pub fn generate(path: &Path) -> u64 {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).unwrap());
    writeln!(
        w,
        r#"{{"format":"inboxlog","version":1,"id":"big","createdAt":1700000000000}}"#
    )
    .unwrap();
    let mut seq = 0u64;
    let mut line = |w: &mut BufWriter<File>, ty: &str, data: &str, extra: &str| {
        let time = 1_700_000_000_000 + seq;
        writeln!(
            w,
            r#"{{"type":"{ty}","seq":{seq},"time":{time},"data":{data}{extra}}}"#
        )
        .unwrap();
        seq += 1;
    };
    for turn in 1..=EVENTS / PER_TURN {
        let m =
            format!(r#"{{"id":"m{turn}","role":"user","content":"please do task number {turn}"}}"#);
        line(
            &mut w,
            "agent/inbox/spliced",
            &format!(r#"{{"target":"next-turn","start":0,"inserted":[{m}]}}"#),
            "",
        );
        line(&mut w, "turn/start", &format!(r#"{{"turn":{turn}}}"#), "");
        line(
            &mut w,
            "agent/inbox/spliced",
            r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
            "",
        );
        line(
            &mut w,
            "step/start",
            &format!(r#"{{"turn":{turn},"step":1}}"#),
            "",
        );
        line(&mut w, "user/message", &m, r#","surfaceOp":"append""#);
        for i in 0..PER_TURN - 7 {
            line(
                &mut w,
                "assistant/message",
                &format!(r#"{{"text":"{TEXT}","index":{i}}}"#),
                "",
            );
        }
        line(
            &mut w,
            "step/end",
            &format!(r#"{{"turn":{turn},"step":1}}"#),
            "",
        );
        line(
            &mut w,
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            "",
        );
    }
    assert_eq!(seq, EVENTS);
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

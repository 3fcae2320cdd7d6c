//! `Session::verify` agrees with `Session::open` (ARCHITECTURE.md#log-invariants, ARCHITECTURE.md#header, ARCHITECTURE.md#inbox-validation, ARCHITECTURE.md#replay, ARCHITECTURE.md#opening-a-stored-log):
//! for every rule a stored log can break, both refuse with the same error at the same
//! file, line, byte offset and seq; a log that opens verifies, with the repairs open
//! makes reported as such. Run over the JSONL store and the memory store; verify never
//! changes a byte. The PostgreSQL store runs the same refusals from rows written by
//! hand (see [`postgres`]). Verify on a live log (no lock, the report, a missing
//! session) is in the store suite (`core/tests/store/verify.rs`), over every store.

mod pg_common;

use std::path::Path;

use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{Error, ErrorKind, Event, Header, OpenReport, Session, SessionMeta};

const HEADER: &str = r#"{"format":"inboxlog","version":1,"id":"s","createdAt":0}"#;
const SPLICED: &str = "agent/inbox/spliced";

fn line(seq: u64, ty: &str, data: &str) -> String {
    format!(
        r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}}}"#,
        100 + seq
    )
}

/// Event lines from `(type, data)` pairs, seq counting from 0.
fn lines(events: &[(&str, &str)]) -> Vec<String> {
    (0..)
        .zip(events)
        .map(|(seq, (ty, data))| line(seq, ty, data))
        .collect()
}

/// The whole file: `header`, then each event line, then `tail` (a torn fragment).
fn file(header: &str, events: &[String], tail: &str) -> Vec<u8> {
    let mut text = format!("{header}\n");
    for e in events {
        text.push_str(e);
        text.push('\n');
    }
    text.push_str(tail);
    text.into_bytes()
}

fn location(
    e: &Error,
) -> (
    ErrorKind,
    String,
    Option<&str>,
    Option<&Path>,
    [Option<u64>; 3],
) {
    (
        e.kind(),
        e.to_string(),
        e.session(),
        e.path(),
        [e.line(), e.offset(), e.seq()],
    )
}

/// What `verify` then `open` made of one stored log: `Err` with both errors (equal),
/// or `Ok` with the repairs both saw.
fn agree(store: &dyn Store, before: impl Fn() -> Vec<u8>) -> Result<(u64, Option<u64>), Error> {
    let stored = before();
    let verified = Session::verify(store, "s");
    assert_eq!(before(), stored, "verify changed the log");
    match (verified, Session::open(store, "s")) {
        (Err(v), Err(o)) => {
            assert_eq!(
                location(&v),
                location(&o),
                "verify and open refuse differently"
            );
            assert_eq!(before(), stored, "a refused open changed the log");
            Err(o)
        }
        (Ok(report), Ok(session)) => {
            let opened = session.open_report();
            assert_eq!(report.torn_bytes, opened.torn_bytes);
            assert_eq!(report.open_turn, opened.repaired_turn);
            assert_eq!(report.needs_repair(), opened != &OpenReport::default());
            assert_eq!(
                (report.next_turn, report.next_step),
                (
                    session.inbox().next_turn().unwrap().len(),
                    session.inbox().next_step().unwrap().len()
                )
            );
            assert_eq!(&report.header, session.header());
            let repairs = (report.torn_bytes, report.open_turn);
            drop(session);
            // Repaired: nothing is left to repair.
            let again = Session::verify(store, "s").unwrap();
            assert!(!again.needs_repair(), "{again:?}");
            Ok(repairs)
        }
        (v, o) => panic!(
            "verify and open disagree: verify {:?}, open {:?}",
            v.map(|r| r.events),
            o.map(|s| s.id().to_owned())
        ),
    }
}

/// Runs the log `header` + `events` + `tail` through the JSONL store.
fn jsonl(header: &str, events: &[String], tail: &str) -> Result<(u64, Option<u64>), Error> {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let path = store.path("s").unwrap();
    std::fs::write(&path, file(header, events, tail)).unwrap();
    agree(&store, || std::fs::read(&path).unwrap())
}

/// Runs the events through the memory store, when each parses as an event.
fn memory(events: &[String]) -> Option<Result<(u64, Option<u64>), Error>> {
    let events: Vec<Event> = events
        .iter()
        .map(|e| Event::from_json(e).ok())
        .collect::<Option<_>>()?;
    let store = MemoryStore::new();
    let header = Header::new("s", 0, SessionMeta::default()).unwrap();
    // The store itself checks nothing: the writer is the trusted path, so a hand-made
    // log reaches it only this way.
    drop(store.create(&header, &events).unwrap());
    let inspect = || {
        let (h, e) = store.inspect("s").unwrap();
        let mut text = h.to_json();
        for e in &e {
            text.push_str(&e.to_json());
        }
        text.into_bytes()
    };
    Some(agree(&store, inspect))
}

/// Runs the event lines through the PostgreSQL store as rows written by hand (the seq
/// and type columns from each line where it has them), and returns what verify said.
/// Verify reads every row, so it refuses as the other stores do; open reads the replayed
/// (reserved) rows alone, so it refuses the same way when the fault is in one of them or
/// in the seqs, and opens otherwise (a host row's payload is verify's business). A
/// refused open changes nothing.
fn postgres(events: &[String]) -> Option<Error> {
    let schema = pg_common::Schema::new()?;
    let store = schema.store(Durability::Sync);
    let mut c = pg_common::client()?;
    let s = &schema.name;
    c.execute(
        &format!("INSERT INTO \"{s}\".sessions VALUES ('s', $1, 0, $2)"),
        &[&HEADER, &(events.len() as i64)],
    )
    .unwrap();
    let mut used = std::collections::BTreeSet::new();
    for (index, line) in events.iter().enumerate() {
        let parsed: Option<serde_json::Value> = serde_json::from_str(line).ok();
        let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k).cloned());
        let seq = field("seq")
            .and_then(|v| v.as_i64())
            .filter(|s| !used.contains(s))
            .unwrap_or(index as i64);
        used.insert(seq);
        let ty = field("type")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "host/x".to_owned());
        c.execute(
            &format!("INSERT INTO \"{s}\".events VALUES ('s', $1, $2, $3)"),
            &[&seq, &ty, line],
        )
        .unwrap();
    }
    let before = schema.snapshot("s");
    let verified = Session::verify(&store, "s").expect_err("verify refuses");
    assert_eq!(schema.snapshot("s"), before, "verify changed the rows");
    match Session::open(&store, "s") {
        Err(opened) => {
            assert_eq!(
                location(&opened),
                location(&verified),
                "verify and open refuse differently"
            );
            assert_eq!(
                schema.snapshot("s"),
                before,
                "a refused open changed the rows"
            );
        }
        Ok(_) => {
            // Open never read the faulty row: a host row before the last one.
            let at = verified.seq().expect("the refusal names its seq") as i64;
            let row = c
                .query_opt(
                    &format!("SELECT type FROM \"{s}\".events WHERE session = 's' AND seq = $1"),
                    &[&at],
                )
                .unwrap();
            let ty: String = row.expect("the faulty row").get(0);
            let replayed = inboxlog::REPLAYED.contains(&ty.as_str());
            assert!(
                !replayed && at < *used.iter().max().unwrap(),
                "open read {verified}"
            );
        }
    }
    Some(verified)
}

/// Asserts that both stores refuse `events` at event `seq` (the error naming `seq`),
/// with `needle` in the message; returns the JSONL store's error.
fn refused(events: &[String], seq: u64, needle: &str) -> Error {
    let err = jsonl(HEADER, events, "").expect_err("open refuses");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(needle), "{needle:?} not in {err}");
    let offset: usize = HEADER.len()
        + 1
        + events[..seq as usize]
            .iter()
            .map(|e| e.len() + 1)
            .sum::<usize>();
    // The line of the bad record, which holds (or should have held) seq `seq`.
    let at_line = seq + 2;
    assert_eq!(err.session(), Some("s"));
    assert!(err.path().unwrap().ends_with("s.jsonl"), "{err:?}");
    assert_eq!(err.offset(), Some(offset as u64), "{err}");
    assert_eq!(err.line(), Some(at_line), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("line {at_line} (byte {offset}, seq ")),
        "{err}"
    );
    if let Some(mem) = memory(events) {
        let mem = mem.expect_err("the memory store refuses too");
        assert_eq!(mem.kind(), ErrorKind::Corrupt, "{mem}");
        assert!(mem.to_string().contains(needle), "{needle:?} not in {mem}");
        assert_eq!((mem.session(), mem.seq()), (Some("s"), err.seq()), "{mem}");
    }
    if let Some(pg) = postgres(events) {
        assert_eq!(pg.kind(), ErrorKind::Corrupt, "{pg}");
        // A duplicate seq cannot be two rows (the key is (session, seq)): its row holds
        // an event of another seq, which is how the store words it.
        assert!(
            pg.to_string().contains(needle) || pg.to_string().contains("holds an event of seq"),
            "{needle:?} not in {pg}"
        );
        assert_eq!(pg.session(), Some("s"), "{pg}");
        assert!(pg.seq().is_some(), "{pg}");
    }
    err
}

const T1: (&str, &str) = ("turn/start", r#"{"turn":1}"#);
const S1: (&str, &str) = ("step/start", r#"{"turn":1,"step":1}"#);
const E1: (&str, &str) = ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#);

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#log-invariants, rule by rule.

#[test]
fn a_seq_gap_and_a_duplicate_seq() {
    let mut events = lines(&[("host/a", "{}"), ("host/b", "{}")]);
    events[1] = line(2, "host/b", "{}");
    let err = refused(
        &events,
        1,
        "seq 2 does not continue the log (expected seq 1)",
    );
    assert_eq!(err.seq(), Some(2), "the seq the line holds");
    events[1] = line(0, "host/b", "{}");
    let err = refused(
        &events,
        1,
        "seq 0 does not continue the log (expected seq 1)",
    );
    assert_eq!(err.seq(), Some(0));
}

#[test]
fn a_negative_time() {
    let events = vec![r#"{"type":"host/a","seq":0,"time":-1,"data":{}}"#.to_owned()];
    let err = refused(&events, 0, "invalid event: invalid value: integer `-1`");
    assert_eq!(err.seq(), Some(0));
}

#[test]
fn turn_starts_must_be_consecutive_and_one_at_a_time() {
    let err = refused(
        &lines(&[("turn/start", r#"{"turn":2}"#)]),
        0,
        "turn/start 2 is not consecutive (expected turn 1)",
    );
    assert_eq!(err.seq(), Some(0));
    let err = refused(
        &lines(&[T1, ("turn/start", r#"{"turn":2}"#)]),
        1,
        "turn/start 2 while turn 1 is open",
    );
    assert_eq!(err.seq(), Some(1));
    refused(
        &lines(&[T1, E1, ("turn/start", r#"{"turn":3}"#)]),
        2,
        "expected turn 2",
    );
}

#[test]
fn turn_end_names_the_open_turn_with_no_step_open() {
    refused(
        &lines(&[E1]),
        0,
        "turn/end 1 does not name the open turn (no turn is open)",
    );
    refused(
        &lines(&[
            T1,
            ("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#),
        ]),
        1,
        "turn/end 2 does not name the open turn (turn 1)",
    );
    refused(&lines(&[T1, S1, E1]), 2, "turn/end 1 while step 1 is open");
}

#[test]
fn step_start_names_the_open_turn_counts_from_one_one_at_a_time() {
    // The log of issue #14: a step with no turn open.
    let err = refused(
        &lines(&[("host/a", "{}"), ("step/start", r#"{"turn":7,"step":1}"#)]),
        1,
        "step/start names turn 7, not the open turn (no turn is open)",
    );
    assert_eq!((err.line(), err.seq()), (Some(3), Some(1)));
    refused(
        &lines(&[T1, ("step/start", r#"{"turn":2,"step":1}"#)]),
        1,
        "not the open turn (turn 1)",
    );
    refused(
        &lines(&[T1, ("step/start", r#"{"turn":1,"step":2}"#)]),
        1,
        "step/start 2 is not consecutive (expected step 1)",
    );
    refused(
        &lines(&[T1, S1, ("step/start", r#"{"turn":1,"step":2}"#)]),
        2,
        "step/start 2 while step 1 is open",
    );
}

#[test]
fn step_end_names_the_open_step() {
    refused(
        &lines(&[T1, S1, ("step/end", r#"{"turn":1,"step":2}"#)]),
        2,
        "step/end turn 1 step 2 does not name the open step (turn 1 step 1)",
    );
    refused(
        &lines(&[T1, ("step/end", r#"{"turn":1,"step":1}"#)]),
        1,
        "does not name the open step (none is open)",
    );
}

#[test]
fn host_turn_and_step_keys_are_not_checked() {
    let events = lines(&[("host/a", r#"{"turn":9,"step":4}"#), T1, E1]);
    assert_eq!(jsonl(HEADER, &events, "").unwrap(), (0, None));
    assert_eq!(memory(&events).unwrap().unwrap(), (0, None));
}

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#inbox-validation / ARCHITECTURE.md#replay: the inbox replay.

#[test]
fn a_splice_past_the_end() {
    let err = refused(
        &lines(&[(
            SPLICED,
            r#"{"target":"next-turn","start":1,"inserted":[{"id":"a"}]}"#,
        )]),
        0,
        "invalid persisted inbox splice at session seq 0",
    );
    assert!(err.to_string().contains("invalid inbox splice"), "{err}");
    refused(
        &lines(&[
            (
                SPLICED,
                r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
            ),
            (
                SPLICED,
                r#"{"target":"next-turn","start":0,"removedCount":2,"inserted":[]}"#,
            ),
        ]),
        1,
        "invalid persisted inbox splice at session seq 1",
    );
}

#[test]
fn splice_coordinates_that_are_no_safe_counts() {
    for record in [
        r#"{"target":"next-turn","start":-1,"inserted":[]}"#,
        r#"{"target":"next-turn","start":0,"removedCount":-1,"inserted":[]}"#,
        r#"{"target":"next-turn","start":9007199254740993,"inserted":[]}"#,
        r#"{"target":"next-turn","start":1.0,"inserted":[]}"#,
    ] {
        let err = refused(&lines(&[("host/a", "{}"), (SPLICED, record)]), 1, "splice");
        assert_eq!(err.seq(), Some(1), "{record}");
    }
}

#[test]
fn a_message_id_pending_twice() {
    let err = refused(
        &lines(&[
            (
                SPLICED,
                r#"{"target":"next-step","start":0,"inserted":[{"id":"a"}]}"#,
            ),
            (
                SPLICED,
                r#"{"target":"next-turn","start":0,"inserted":[{"id":"b"},{"id":"a"}]}"#,
            ),
        ]),
        1,
        r#"message "a" is already pending"#,
    );
    assert!(
        err.to_string()
            .contains("invalid persisted inbox splice at session seq 1"),
        "{err}"
    );
}

#[test]
fn an_invalid_message() {
    refused(
        &lines(&[(
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"role":"user"}]}"#,
        )]),
        0,
        "id",
    );
}

#[test]
fn splices_before_seed_length_are_not_replayed() {
    // The seed's splices are the parent's business (ARCHITECTURE.md#replay): out of range here, ignored.
    let header = HEADER.replace(r#""createdAt":0"#, r#""createdAt":0,"seedLength":2"#);
    let events = lines(&[
        (SPLICED, r#"{"target":"next-turn","start":5,"inserted":[]}"#),
        ("session/end-seed", "{}"),
        (
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
        ),
    ]);
    assert_eq!(jsonl(&header, &events, "").unwrap(), (0, None));
}

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#header / ARCHITECTURE.md#opening-a-stored-log: the header, the format version, what is missing.

#[test]
fn the_header_and_its_version() {
    let newer = HEADER.replace(r#""version":1"#, r#""version":3"#);
    let err = jsonl(&newer, &lines(&[("host/a", "{}")]), "").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FormatUnsupported, "{err}");
    assert!(
        err.to_string().contains("written by a newer inboxlog"),
        "{err}"
    );
    assert_eq!(
        (err.line(), err.offset(), err.seq()),
        (Some(1), Some(0), None)
    );

    let foreign = r#"{"type":"session","version":0,"id":"s","createdAt":0}"#;
    let err = jsonl(foreign, &[], "").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FormatUnsupported, "{err}");

    let renamed = HEADER.replace(r#""id":"s""#, r#""id":"t""#);
    let err = jsonl(&renamed, &[], "").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(
        (err.session(), err.line(), err.seq()),
        (Some("s"), Some(1), None)
    );

    let err = jsonl("", &[], "").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FormatUnsupported, "{err}");
    assert!(err.to_string().contains("not an inboxlog log"), "{err}");
}

// ---------------------------------------------------------------------------------
// Repairs are reported, not refused.

#[test]
fn a_torn_tail_and_an_interrupted_turn_are_repairs() {
    let events = lines(&[T1, S1, ("host/a", "{}")]);
    let tail = r#"{"type":"host/b","se"#;
    assert_eq!(
        jsonl(HEADER, &events, tail).unwrap(),
        (tail.len() as u64, Some(1))
    );
    assert_eq!(jsonl(HEADER, &events, "").unwrap(), (0, Some(1)));
    assert_eq!(memory(&events).unwrap().unwrap(), (0, Some(1)));
    let whole = lines(&[T1, S1, ("step/end", r#"{"turn":1,"step":1}"#), E1]);
    assert_eq!(jsonl(HEADER, &whole, "\0\0\0").unwrap(), (3, None));
    assert_eq!(memory(&whole).unwrap().unwrap(), (0, None));
}

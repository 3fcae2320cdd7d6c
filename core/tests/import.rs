//! Importing the reference harness's logs (ARCHITECTURE.md#import): packed runs expand to exactly
//! the events they stand for, the result is a log `open` accepts, and a broken source
//! is refused naming its line with nothing created.
//!
//! The fixtures in `fixtures/reference/` are written by hand from ARCHITECTURE.md#import.

use std::fs;
use std::path::{Path, PathBuf};

use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    ErrorKind, Event, Message, Session, Target, import_reference, reference_session_id,
};

/// The error of an import expected to fail.
fn refusal(result: inboxlog::Result<Session>) -> inboxlog::Error {
    match result {
        Ok(s) => panic!("imported {} instead of refusing", s.id()),
        Err(e) => e,
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(name)
}

/// The stored events as JSONL lines.
fn lines(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

fn imported(name: &str) -> (Session, Vec<String>) {
    let store = MemoryStore::new();
    let session = import_reference(&fixture(name), &store, None).unwrap();
    let events = lines(&session.events(0).unwrap());
    (session, events)
}

/// Every source line that is an event, as it must be stored: unchanged.
fn source_events(name: &str) -> Vec<String> {
    fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| l.contains(r#""seq":"#))
        .map(str::to_owned)
        .collect()
}

/// Asserts that every event line of the source is stored verbatim at its seq.
fn assert_events_kept(name: &str, stored: &[String]) {
    for line in source_events(name) {
        let event = Event::from_json(&line).unwrap();
        assert_eq!(stored[event.seq() as usize], line, "{name}");
    }
}

const T: u64 = 1_700_000_000_000;

fn chunk(seq: u64, time: u64, turn: u64, step: u64, chunk: &str) -> String {
    format!(
        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":{turn},"step":{step},"chunk":{chunk}}}}}"#
    )
}

#[test]
fn a_text_run_expands_member_by_member() {
    let (session, events) = imported("text.jsonl");
    assert_eq!(events.len(), 13);
    assert_eq!(
        &events[5..9],
        [
            chunk(
                5,
                T + 10,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"Hel"}"#
            ),
            chunk(
                6,
                T + 14,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"lo, "}"#
            ),
            chunk(
                7,
                T + 14,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"\"wörld\""}"#
            ),
            chunk(
                8,
                T + 25,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"!\n"}"#
            ),
        ]
    );
    assert_events_kept("text.jsonl", &events);
    let h = session.header();
    assert_eq!(
        h.to_json(),
        r#"{"format":"inboxlog","version":2,"id":"ref-text","createdAt":1700000000000,"cwd":"/work/app","delegationDepth":0,"agentPreset":"default"}"#
    );
    // The inbox was replayed: m1 was claimed by turn 1, m2 is still pending.
    let pending = session.inbox().next_turn().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id(), "m2");
    assert_eq!(session.open_report().repaired_turn, None);
    // A writer like any other: the protocol continues after the imported turn.
    assert_eq!(session.open_turn().unwrap(), 2);
}

#[test]
fn a_reasoning_run_expands_to_reasoning_deltas() {
    let (_, events) = imported("reasoning.jsonl");
    let t = 1_700_000_100_000;
    assert_eq!(
        &events[2..5],
        [
            chunk(
                2,
                t + 5,
                1,
                1,
                r#"{"type":"reasoning-delta","index":0,"text":"Let me "}"#
            ),
            chunk(
                3,
                t + 12,
                1,
                1,
                r#"{"type":"reasoning-delta","index":0,"text":"think."}"#
            ),
            chunk(
                4,
                t + 20,
                1,
                1,
                r#"{"type":"text-delta","index":1,"text":"Done."}"#
            ),
        ]
    );
    assert_eq!(events.len(), 7);
    assert_events_kept("reasoning.jsonl", &events);
}

#[test]
fn a_tool_call_run_carries_its_id_and_name() {
    let (_, events) = imported("tool-call-named.jsonl");
    let t = 1_700_000_200_000;
    assert_eq!(
        &events[2..4],
        [
            chunk(
                2,
                t + 10,
                1,
                1,
                r#"{"type":"tool-call-delta","index":0,"id":"call_1","name":"read_file","argumentsDelta":"{\"pa"}"#
            ),
            chunk(
                3,
                t + 13,
                1,
                1,
                r#"{"type":"tool-call-delta","index":0,"id":"call_1","name":"read_file","argumentsDelta":"th\":\"a.txt\"}"}"#
            ),
        ]
    );
    assert_eq!(events.len(), 10);
    assert_events_kept("tool-call-named.jsonl", &events);
}

#[test]
fn a_tool_call_run_without_a_name_has_no_name_key() {
    let (_, events) = imported("tool-call-nameless.jsonl");
    let t = 1_700_000_300_000;
    assert_eq!(
        &events[2..5],
        [
            chunk(
                2,
                t + 10,
                1,
                1,
                r#"{"type":"tool-call-delta","index":2,"id":"call_9","argumentsDelta":"{"}"#
            ),
            chunk(
                3,
                t + 11,
                1,
                1,
                r#"{"type":"tool-call-delta","index":2,"id":"call_9","argumentsDelta":"}"}"#
            ),
            chunk(
                4,
                t + 12,
                1,
                1,
                r#"{"type":"tool-call-delta","index":2,"id":"call_9","argumentsDelta":""}"#
            ),
        ]
    );
    assert!(!events.iter().any(|e| e.contains(r#""name""#)));
    assert_events_kept("tool-call-nameless.jsonl", &events);
}

#[test]
fn negative_gaps_move_time_back() {
    let (_, events) = imported("negative-gap.jsonl");
    let t = 1_700_000_400_000;
    let times: Vec<u64> = events[2..6]
        .iter()
        .map(|l| Event::from_json(l).unwrap().time())
        .collect();
    assert_eq!(times, [t + 10, t + 15, t + 12, t + 10]);
    assert_eq!(
        events[5],
        chunk(
            5,
            t + 10,
            1,
            1,
            r#"{"type":"text-delta","index":0,"text":"d"}"#
        )
    );
}

#[test]
fn a_fork_keeps_its_seed_and_replays_after_it() {
    let (session, events) = imported("fork.jsonl");
    let h = session.header();
    // Both ids are invalid session ids: derived by the same rule, so they still link.
    assert_eq!(h.id, reference_session_id("team/fork 1"));
    assert!(h.id.starts_with("team_fork_1-"), "{}", h.id);
    assert_eq!(
        h.parent_session.as_deref(),
        Some(reference_session_id("team/main").as_str())
    );
    assert_eq!(h.seed_length, Some(5));
    assert_eq!(
        (
            h.origin.as_deref(),
            h.delegation_depth,
            h.agent_preset.as_deref()
        ),
        (Some("subagent"), Some(1), Some("reviewer"))
    );
    assert_eq!(h.cwd.as_deref(), Some("/work/app"));
    assert_eq!(events.len(), 15);
    assert_events_kept("fork.jsonl", &events);
    // No second end-seed: the events are stored as they were, not re-seeded.
    assert_eq!(
        events
            .iter()
            .filter(|e| e.contains("session/end-seed"))
            .count(),
        1
    );
    // Replayed from seedLength: the parent's p2 is not pending in the child.
    let pending = session.inbox().next_turn().unwrap();
    let ids: Vec<&str> = pending.iter().map(Message::id).collect();
    assert_eq!(ids, ["c2"]);
    assert_eq!(session.open_turn().unwrap(), 3);
}

#[test]
fn an_invalid_id_gets_a_derived_one_or_the_callers() {
    let store = MemoryStore::new();
    let s = import_reference(&fixture("fork.jsonl"), &store, None).unwrap();
    let derived = s.id().to_owned();
    assert_eq!(derived, reference_session_id("team/fork 1"));
    inboxlog::validate_session_id(&derived).unwrap();
    let mine = import_reference(&fixture("fork.jsonl"), &store, Some("my-fork")).unwrap();
    assert_eq!(mine.id(), "my-fork");
    let err = refusal(import_reference(
        &fixture("fork.jsonl"),
        &store,
        Some("a/b"),
    ));
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("may only contain"), "{err}");
    // The caller's id is checked before the source is read: no source line is named.
    assert!(!err.to_string().contains("line "), "{err}");
    let err = refusal(import_reference(
        Path::new("/absent.jsonl"),
        &store,
        Some(""),
    ));
    assert!(
        err.to_string().contains("session id \"\" is empty"),
        "{err}"
    );
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(ids, ["my-fork".to_owned(), derived]);
}

#[test]
fn an_unfinished_turn_is_closed_as_interrupted() {
    let (session, events) = imported("interrupted.jsonl");
    let t = 1_700_000_600_000;
    assert_eq!(session.open_report().repaired_turn, Some(1));
    assert_eq!(
        &events[2..],
        [
            chunk(
                2,
                t + 10,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"cut "}"#
            ),
            chunk(
                3,
                t + 12,
                1,
                1,
                r#"{"type":"text-delta","index":0,"text":"off"}"#
            ),
            format!(
                r#"{{"type":"step/end","seq":4,"time":{},"data":{{"turn":1,"step":1}}}}"#,
                t + 12
            ),
            format!(
                r#"{{"type":"turn/end","seq":5,"time":{},"data":{{"turn":1,"reason":{{"kind":"interrupted"}}}}}}"#,
                t + 12
            ),
        ]
    );
    assert_eq!(session.turn_open().unwrap(), None);
    assert_eq!(session.open_turn().unwrap(), 2);
}

#[test]
fn an_imported_jsonl_log_opens_and_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    for name in [
        "text.jsonl",
        "reasoning.jsonl",
        "tool-call-named.jsonl",
        "tool-call-nameless.jsonl",
        "negative-gap.jsonl",
        "fork.jsonl",
        "interrupted.jsonl",
        "extras.jsonl",
    ] {
        let session = import_reference(&fixture(name), &store, None).unwrap();
        let id = session.id().to_owned();
        let events = session.events(0).unwrap();
        let pending = session.with_inbox(|i| i.list(Target::NextTurn)).unwrap();
        session.close().unwrap();
        let (header, stored) = Session::inspect(&store, &id).unwrap();
        assert_eq!(&header, session.header(), "{name}");
        assert_eq!(stored, events, "{name}");
        // Written as version 2: every line sealed with its checksum, none in the events.
        let raw = fs::read_to_string(store.path(&id).unwrap()).unwrap();
        assert!(
            raw.starts_with(r#"{"format":"inboxlog","version":2,"#),
            "{name}"
        );
        assert!(raw.lines().all(|l| l.contains(r#","crc32c":""#)), "{name}");
        assert!(
            events.iter().all(|e| !e.to_json().contains("crc32c")),
            "{name}"
        );
        let reopened = Session::open(&store, &id).unwrap();
        assert_eq!(reopened.open_report().repaired_turn, None, "{name}");
        assert_eq!(reopened.events(0).unwrap(), events, "{name}");
        assert_eq!(reopened.inbox().next_turn().unwrap(), pending, "{name}");
    }
}

#[test]
fn reserved_events_with_host_extras_and_id_less_context_are_kept_verbatim() {
    let (session, stored) = imported("extras.jsonl");
    assert_events_kept("extras.jsonl", &stored);
    assert_eq!(stored.len(), 10);
    assert!(
        stored[1]
            .contains(r#""data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}"#)
    );
    assert!(!session.inbox().has_pending().unwrap());
    assert_eq!(session.open_turn().unwrap(), 2);
}

#[test]
fn an_existing_session_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    import_reference(&fixture("text.jsonl"), &store, None)
        .unwrap()
        .close()
        .unwrap();
    let path = dir.path().join("ref-text.jsonl");
    let before = fs::read(&path).unwrap();
    let err = refusal(import_reference(
        &fixture("reasoning.jsonl"),
        &store,
        Some("ref-text"),
    ));
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
}

/// Imports `source` into an empty JSONL store, expecting a refusal that names `line`;
/// checks that nothing was created.
fn refused(source: &Path, kind: ErrorKind, line: u64, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let err = refusal(import_reference(source, &store, None));
    let text = err.to_string();
    assert_eq!(err.kind(), kind, "{text}");
    let at = format!("cannot import {}: line {line}: ", source.display());
    assert!(text.starts_with(&at), "{text}");
    assert!(text.contains(needle), "{text}");
    // The location is data too: the source file, its line and that line's offset.
    assert_eq!(err.path(), Some(source), "{text}");
    assert_eq!(err.line(), Some(line), "{text}");
    let bytes = fs::read(source).unwrap();
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        // The offset of a compressed source counts its decompressed text.
        assert!(err.offset().is_some(), "{text}");
    } else {
        let offset = bytes
            .split_inclusive(|&b| b == b'\n')
            .take(line as usize - 1)
            .map(|l| l.len() as u64)
            .sum::<u64>();
        assert_eq!(err.offset(), Some(offset), "{text}");
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "{text}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn broken_sources_are_refused_naming_the_line() {
    for (name, line, needle) in [
        (
            "broken-invariant.jsonl",
            4,
            "step/start names turn 1, not the open turn (no turn is open)",
        ),
        (
            "broken-splice.jsonl",
            4,
            "invalid persisted inbox splice at session seq 2",
        ),
        (
            "broken-dt.jsonl",
            4,
            "3 gaps in \"dt\" for 3 members in \"texts\" (expected 2)",
        ),
        (
            "broken-seq.jsonl",
            5,
            "seq 3 does not continue the log (expected seq 4)",
        ),
        (
            "broken-negative-time.jsonl",
            2,
            "member 2 (seq 2) would have the negative time -1",
        ),
    ] {
        refused(&fixture(name), ErrorKind::InvalidInput, line, needle);
    }
}

/// Writes `text` to a file named `name` in a fresh directory.
fn source(name: &str, text: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn malformed_lines_and_headers_are_refused() {
    let header = r#"{"type":"session","version":0,"id":"x","createdAt":1}"#;
    let turn = r#"{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}"#;
    for (text, kind, line, needle) in [
        (
            r#"{"format":"inboxlog","version":1,"id":"x","createdAt":1}"#.to_owned() + "\n",
            ErrorKind::FormatUnsupported,
            1,
            "is an inboxlog log",
        ),
        (
            r#"{"type":"session","version":3,"id":"x","createdAt":1}"#.to_owned() + "\n",
            ErrorKind::FormatUnsupported,
            1,
            "reference log version 3 is not supported",
        ),
        (
            format!("{header}\n{turn}\n\n"),
            ErrorKind::InvalidInput,
            3,
            "empty line",
        ),
        (
            format!("{header}\n[1]\n"),
            ErrorKind::InvalidInput,
            2,
            "not a JSON object with a string \"type\"",
        ),
        (
            format!(
                "{header}\n{}\n",
                r#"{"type":"x","seq":0,"time":-1,"data":{}}"#
            ),
            ErrorKind::InvalidInput,
            2,
            "invalid event",
        ),
        (
            format!(
                "{header}\n{}\n",
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":"1"}}"#
            ),
            ErrorKind::InvalidInput,
            2,
            "turn/start data",
        ),
        (
            format!(
                "{header}\n{}\n",
                r#"{"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"nowhere","start":0,"inserted":[]}}"#
            ),
            ErrorKind::InvalidInput,
            2,
            "target",
        ),
        (
            format!("{header}\n{}\n", "[".repeat(600)),
            ErrorKind::TooLarge,
            2,
            "nesting deeper",
        ),
        (
            format!("{header}\n{turn}\n{}", r#"{"type":"turn/end","seq":1"#),
            ErrorKind::InvalidInput,
            3,
            "the last line has no newline (a torn write)",
        ),
        (
            r#"{"type":"session","version":0,"id":"x","createdAt":1,"seedLength":2}"#.to_owned()
                + "\n"
                + turn
                + "\n",
            ErrorKind::InvalidInput,
            1,
            "seedLength 2 is past the end of the log (1 events)",
        ),
    ] {
        let (_dir, path) = source("s.jsonl", text.as_bytes());
        refused(&path, kind, line, needle);
    }
    let (_dir, path) = source("s.jsonl", b"{\"type\":\"session\"}\n\xff\n");
    refused(
        &path,
        ErrorKind::FormatUnsupported,
        1,
        "\"version\" is missing",
    );
    let (_dir, path) = source("s.jsonl", format!("{header}\n\u{0}{turn}\n").as_bytes());
    refused(&path, ErrorKind::InvalidInput, 2, "not a JSON object");
    let (_dir, path) = source("s.jsonl", format!("{header}\n\u{ff}").as_bytes());
    refused(&path, ErrorKind::InvalidInput, 2, "");
    let (_dir, path) = source("s.jsonl", &[b'{', b'"', 0xff, b'"', b'\n']);
    refused(&path, ErrorKind::InvalidInput, 1, "not valid UTF-8");
}

#[test]
fn an_empty_or_missing_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let empty = dir.path().join("empty.jsonl");
    fs::write(&empty, b"").unwrap();
    let err = refusal(import_reference(&empty, &store, None));
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("the file is empty"), "{err}");
    let err = refusal(import_reference(
        &dir.path().join("absent.jsonl"),
        &store,
        None,
    ));
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(err.to_string().contains("cannot open"), "{err}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_last_line_without_newline_is_taken_when_it_is_whole() {
    let text = fs::read_to_string(fixture("reasoning.jsonl")).unwrap();
    let (_dir, path) = source("r.jsonl", text.trim_end().as_bytes());
    let store = MemoryStore::new();
    let session = import_reference(&path, &store, None).unwrap();
    assert_eq!(session.events(0).unwrap().len(), 7);
}

/// The plain fixture compressed the way the harness stores it: the header in a frame
/// of its own, the events in a second frame.
fn compress(text: &str) -> Vec<u8> {
    let (head, body) = text.split_at(text.find('\n').unwrap() + 1);
    let mut out = zstd::encode_all(head.as_bytes(), 3).unwrap();
    out.extend(zstd::encode_all(body.as_bytes(), 19).unwrap());
    out
}

#[test]
fn a_zstd_log_imports_like_its_plain_bytes() {
    let plain = fs::read_to_string(fixture("text.jsonl")).unwrap();
    let (_dir, path) = source("text.jsonl.zstd", &compress(&plain));
    let store = MemoryStore::new();
    let zipped = import_reference(&path, &store, Some("zipped")).unwrap();
    let (want, events) = imported("text.jsonl");
    assert_eq!(lines(&zipped.events(0).unwrap()), events);
    assert_eq!(zipped.header().cwd, want.header().cwd);
    // The checked-in compressed fixture (used by the Python tests) holds the same log.
    let fixed = import_reference(&fixture("text.jsonl.zstd"), &store, None).unwrap();
    assert_eq!(fixed.id(), "text-zstd");
    assert_eq!(lines(&fixed.events(0).unwrap()), events);
}

#[test]
fn a_damaged_zstd_log_is_refused() {
    let plain = fs::read_to_string(fixture("text.jsonl")).unwrap();
    let mut bytes = compress(&plain);
    bytes.truncate(bytes.len() - 20);
    let (_dir, path) = source("cut.jsonl.zstd", &bytes);
    refused(&path, ErrorKind::InvalidInput, 2, "cannot decompress");
    let (_dir, path) = source("plain.jsonl.zstd", plain.as_bytes());
    let err = refusal(import_reference(&path, &MemoryStore::new(), None));
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("not zstd-compressed"), "{err}");
}

#[test]
fn a_pipe_is_read_once_into_a_temporary_copy_that_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&pipe)
        .status()
        .unwrap();
    assert!(made.success());
    let copies = || {
        let prefix = format!("inboxlog-import-{}-", std::process::id());
        fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            })
            .count()
    };
    for (name, imported) in [("reasoning.jsonl", true), ("broken-seq.jsonl", false)] {
        let path = pipe.clone();
        let text = fs::read(fixture(name)).unwrap();
        let writer = std::thread::spawn(move || fs::write(path, text).unwrap());
        let store = MemoryStore::new();
        let result = import_reference(&pipe, &store, None);
        writer.join().unwrap();
        match result {
            Ok(s) => {
                assert!(imported, "{name}");
                assert_eq!(
                    lines(&s.events(0).unwrap()),
                    imported_lines("reasoning.jsonl")
                );
            }
            Err(e) => {
                assert!(!imported, "{name}: {e}");
                assert_eq!(e.line(), Some(5), "{e}");
                assert_eq!(e.path(), Some(pipe.as_path()), "{e}");
                assert!(store.list().unwrap().is_empty());
            }
        }
        assert_eq!(copies(), 0, "the temporary copy of {name} was not removed");
    }
}

fn imported_lines(name: &str) -> Vec<String> {
    imported(name).1
}

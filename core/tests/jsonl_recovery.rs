//! Opening stored JSONL logs (ARCHITECTURE.md#opening-a-stored-log, ARCHITECTURE.md#limits): torn tails, corruption, foreign and
//! future formats, limits and hostile input, logs written by other programs. Every
//! refused open must leave the file byte-identical. What every store does when it
//! opens a log (the repair of an interrupted turn, the inbox's replay, forks) is in the
//! store suite (`core/tests/store/`).

mod jsonl_common;

use std::fs;
use std::path::Path;

use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store};
use inboxlog::{Envelope, ErrorKind, Header, Session, SessionMeta};
use jsonl_common::*;

fn open_plain(store: &JsonlStore, id: &str) -> inboxlog::Result<u64> {
    store
        .open(
            id,
            &OpenOptions::default(),
            &mut inboxlog::store::events(|_, _| Ok(())),
        )
        .map(|o| o.torn_bytes)
}

#[test]
fn a_torn_tail_cut_at_every_offset_of_the_last_record_goes_alone() {
    let (_dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/a", r#"{"n":1}"#, Envelope::default())
        .unwrap();
    let tricky = r#"{"text":"q\"uote\\back\nslash é ✓ 𝄞 \u0001","n":[1,2.5e3,{"k":null}]}"#;
    s.append("host/result", tricky, Envelope::default())
        .unwrap();
    drop(s);
    let path = store.path("s").unwrap();
    let full = bytes(&path);
    let last = *line_starts(&full).last().unwrap();
    let record = std::str::from_utf8(&full[last..]).unwrap();
    assert!(
        record.contains(r#"q\"uote\\back\nslash"#) && record.contains('𝄞'),
        "{record}"
    );

    for cut in last..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let (_, events) = store.inspect("s").unwrap();
        assert_eq!(events.len(), 1, "cut {cut}");
        assert_eq!(
            bytes(&path),
            &full[..cut],
            "inspect changed the file at cut {cut}"
        );
        assert_eq!(
            open_plain(&store, "s").unwrap(),
            (cut - last) as u64,
            "cut {cut}"
        );
        assert_eq!(bytes(&path), &full[..last], "cut {cut}");
        assert_eq!(
            open_plain(&store, "s").unwrap(),
            0,
            "second open at cut {cut}"
        );
        assert_eq!(bytes(&path), &full[..last], "cut {cut}");
    }

    // Through a session: the report names the dropped bytes, the log continues.
    fs::write(&path, &full[..full.len() - 1]).unwrap();
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().torn_bytes, (full.len() - 1 - last) as u64);
    assert_eq!(s.last_seq().unwrap(), Some(0));
    let e = s.append("host/b", "{}", Envelope::default()).unwrap();
    assert_eq!(e.seq(), 1);
}

#[test]
fn nul_runs_after_the_last_newline_are_a_torn_tail() {
    let (_dir, store) = store(Durability::None);
    drop(populated(&store));
    let path = store.path("s").unwrap();
    let full = bytes(&path);
    let last = *line_starts(&full).last().unwrap();
    for tail in [
        vec![0u8; 4096],
        [&full[last..last + 10], &[0u8; 100][..]].concat(),
    ] {
        let with_tail = [&full[..], &tail[..]].concat();
        fs::write(&path, &with_tail).unwrap();
        assert_eq!(store.inspect("s").unwrap().1.len(), 10);
        assert_eq!(bytes(&path), with_tail);
        let s = Session::open(&store, "s").unwrap();
        assert_eq!(s.open_report().torn_bytes, tail.len() as u64);
        drop(s);
        assert_eq!(bytes(&path), full);
    }
}

/// Which openers a corruption case must be refused by.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// The store itself (bytes, envelope, seq): store open, inspect and session open.
    Store,
    /// The session's log and inbox invariants: session open only (the store and
    /// inspection show the log as stored).
    Session,
}

/// Writes `bad` as the log of "s", as version 1 and sealed as version 2 (so the
/// checksums match whatever the lines hold: a foreign writer's lines), and checks every
/// opener of `level` refuses it as corruption at `line` (1-based) with `seq`, the cause
/// containing `cause`, leaving the file byte-identical.
#[track_caller]
fn refused(store: &JsonlStore, bad: &[u8], level: Level, line: usize, seq: u64, cause: &str) {
    refused_as(store, bad, level, ErrorKind::Corrupt, (line, seq), cause);
}

/// [`refused`] with the error kind expected (a depth over the limits is `too_large`).
fn refused_as(
    store: &JsonlStore,
    bad: &[u8],
    level: Level,
    kind: ErrorKind,
    (line, seq): (usize, u64),
    cause: &str,
) {
    for bad in [v1(bad), reseal(bad)] {
        refused_once(store, &bad, level, kind, (line, seq), cause);
    }
}

fn refused_once(
    store: &JsonlStore,
    bad: &[u8],
    level: Level,
    kind: ErrorKind,
    (line, seq): (usize, u64),
    cause: &str,
) {
    let path = store.path("s").unwrap();
    fs::write(&path, bad).unwrap();
    let offset = line_starts(bad)[line - 1];
    let at = format!(
        "corrupt log {} line {line} (byte {offset}, seq {seq}): ",
        path.display()
    );
    assert_err(Session::open(store, "s").map(drop), kind, &[&at, cause]);
    if level == Level::Store {
        assert_err(open_plain(store, "s"), kind, &[&at, cause]);
        assert_err(store.inspect("s"), kind, &[&at, cause]);
    } else {
        assert!(open_plain(store, "s").is_ok());
        assert!(store.inspect("s").is_ok());
    }
    assert_eq!(bytes(&path), bad, "a refused open changed the file");
}

#[test]
fn corruption_before_the_tail_is_refused_by_location_and_changes_nothing() {
    let (_dir, store) = store(Durability::None);
    drop(populated(&store));
    let path = store.path("s").unwrap();
    let good = bytes(&path);
    let ls = lines(&good);
    let join = |ls: &[&[u8]], tail: &[u8]| {
        let mut out: Vec<u8> = ls
            .iter()
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        out.extend_from_slice(tail);
        out
    };

    // A flipped byte: `{` becomes `[` at the start of line 3 (seq 1).
    let mut flipped = good.clone();
    flipped[line_starts(&good)[2]] ^= 0x20;
    refused(&store, &flipped, Level::Store, 3, 1, "invalid event");

    // A seq rewritten in place: the location shows the stored seq.
    let text = String::from_utf8(good.clone()).unwrap();
    let reseq = text.replacen(r#""seq":1,"#, r#""seq":7,"#, 1);
    refused(
        &store,
        reseq.as_bytes(),
        Level::Store,
        3,
        7,
        "seq 7 does not continue the log (expected seq 1)",
    );

    // A duplicated line.
    let mut dup = ls.clone();
    dup.insert(3, ls[2]);
    refused(
        &store,
        &join(&dup, b""),
        Level::Store,
        4,
        1,
        "seq 1 does not continue the log (expected seq 2)",
    );

    // A seq gap: a line lost.
    let mut gap = ls.clone();
    gap.remove(2);
    refused(
        &store,
        &join(&gap, b""),
        Level::Store,
        3,
        2,
        "seq 2 does not continue the log (expected seq 1)",
    );

    // A NUL run followed by a newline and valid lines is a bad complete line.
    let mut nul = ls.clone();
    let zeros = [0u8; 64];
    nul.insert(3, &zeros);
    refused(
        &store,
        &join(&nul, b""),
        Level::Store,
        4,
        2,
        "invalid event",
    );

    // The last complete line, just before a torn tail, is checked like any other; the
    // tail is not dropped either.
    assert_eq!(ls.len(), 11, "header and seqs 0..=9");
    let mut last_bad = ls.clone();
    let bent: Vec<u8> = [&b"["[..], &ls[10][1..]].concat();
    last_bad[10] = &bent;
    refused(
        &store,
        &join(&last_bad, b"{\"type\":\"ho"),
        Level::Store,
        11,
        9,
        "invalid event",
    );

    // A log invariant break (ARCHITECTURE.md#log-invariants), found by the session's replay.
    let broken = text.replace(
        r#""data":{"turn":1,"reason":{"kind":"completed"}}"#,
        r#""data":{"turn":2,"reason":{"kind":"completed"}}"#,
    );
    assert_ne!(broken, text);
    refused(
        &store,
        broken.as_bytes(),
        Level::Session,
        11,
        9,
        "turn/end 2 does not name the open turn",
    );

    // An inbox splice that does not apply (ARCHITECTURE.md#replay).
    let splice = text.replacen(
        r#""target":"next-turn","start":1,"#,
        r#""target":"next-turn","start":5,"#,
        1,
    );
    assert_ne!(splice, text);
    refused(
        &store,
        splice.as_bytes(),
        Level::Session,
        4,
        2,
        "invalid persisted inbox splice at session seq 2",
    );

    // Restored, it opens again.
    fs::write(&path, &good).unwrap();
    assert_eq!(open_plain(&store, "s").unwrap(), 0);
    assert_eq!(bytes(&path), good);
}

#[test]
fn foreign_future_past_and_malformed_headers_are_refused_first() {
    let (_dir, store) = store(Durability::None);
    let path = store.path("s").unwrap();
    let cases: [(&str, ErrorKind, &[&str]); 9] = [
        (
            "{\"format\":\"inboxlog\",\"version\":2,\"id\":\"s\",\"createdAt\":1}\n",
            ErrorKind::Corrupt,
            &["line 1 (byte 0, header): record does not end with a checksum"],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":2,\"id\":\"s\",\"createdAt\":1,\"crc32c\":\"00000000\"}\n",
            ErrorKind::Corrupt,
            &["line 1 (byte 0, header): checksum 00000000 does not match the record (expected "],
        ),
        (
            // A version 1 header with a checksum: not a key of version 1.
            "{\"format\":\"inboxlog\",\"version\":1,\"id\":\"s\",\"createdAt\":1,\"crc32c\":\"00000000\"}\n",
            ErrorKind::Corrupt,
            &["line 1 (byte 0, header): invalid header: unknown field `crc32c`"],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":3,\"id\":\"s\",\"createdAt\":1,\"new\":true}\n\0\0not an event\n",
            ErrorKind::FormatUnsupported,
            &[
                "line 1: log format version 3 was written by a newer inboxlog (this library reads versions 1 to 2)",
            ],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n",
            ErrorKind::FormatUnsupported,
            &[
                "line 1: log format version 0 is an older format, no upgrade path (this library reads versions 1 to 2)",
            ],
        ),
        (
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\"}\n{\"type\":\"message\"}\n",
            ErrorKind::FormatUnsupported,
            &["line 1: not an inboxlog log"],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":1,\"id\":\"s\",\"createdAt\":}\n",
            ErrorKind::FormatUnsupported,
            &["line 1: not an inboxlog log"],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":1,\"id\":\"s\",\"createdAt\":-1}\n",
            ErrorKind::Corrupt,
            &["line 1 (byte 0, header): invalid header"],
        ),
        (
            "{\"format\":\"inboxlog\",\"version\":1,\"id\":\"t\",\"createdAt\":1}\n",
            ErrorKind::Corrupt,
            &["(byte 0, header): header names session \"t\", but the file is named for \"s\""],
        ),
    ];
    for (content, kind, needles) in cases {
        fs::write(&path, content).unwrap();
        let shown = path.display().to_string();
        let needles: Vec<&str> = [&shown[..]]
            .into_iter()
            .chain(needles.iter().copied())
            .collect();
        assert_err(Session::open(&store, "s").map(drop), kind, &needles);
        assert_err(store.inspect("s"), kind, &needles);
        assert_err(store.list(), kind, &needles);
        assert_eq!(bytes(&path), content.as_bytes());
    }
}

#[test]
fn a_file_without_a_complete_header_is_refused_never_deleted() {
    let (_dir, store) = store(Durability::None);
    let path = store.path("s").unwrap();
    for content in [&b""[..], b"{\"format\":\"inboxlog\",\"ver"] {
        fs::write(&path, content).unwrap();
        let needle = format!(
            "no complete header line ({} bytes, no newline): a create that never finished",
            content.len()
        );
        assert_err(
            Session::open(&store, "s").map(drop),
            ErrorKind::Corrupt,
            &["line 1 (byte 0, header)", &needle],
        );
        assert_err(store.inspect("s"), ErrorKind::Corrupt, &[&needle]);
        assert_err(
            Session::create(&store, "s", SessionMeta::default()).map(drop),
            ErrorKind::AlreadyExists,
            &["already exists"],
        );
        assert_eq!(bytes(&path), content);
    }
}

/// A record over the limit of the store that reads it is reported where it is; the
/// default limit is 64 MiB. (A record over the writer's limit is refused before
/// anything is written in every store: the store suite.)
#[test]
fn records_over_the_limit_are_refused_where_they_are_and_the_default_is_64_mib() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None)
        .unwrap()
        .with_record_limit(300);
    assert_eq!(store.record_limit(), 300);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[]).unwrap();
    let path = store.path("s").unwrap();
    let base = ev(0, "\"\"").to_json().len();
    let e = ev(0, &format!("\"{}\"", "x".repeat(300 - base)));
    assert_eq!(e.to_json().len(), 300);
    w.append(&[e]).unwrap();
    drop(w);

    let small = JsonlStore::open(dir.path(), Durability::None)
        .unwrap()
        .with_record_limit(200);
    let stored = bytes(&path);
    let offset = line_starts(&stored)[1];
    // The limit holds for the event, not what its checksum adds to the line (a line
    // longer than both is not read whole and is named by its own length).
    let len = lines(&stored)[1].len();
    assert!(len > 300, "{len}");
    assert_err(
        open_plain(&small, "s"),
        ErrorKind::Corrupt,
        &[&format!(
            "line 2 (byte {offset}, seq 0): record of {len} bytes is larger than the limit of 200 bytes"
        )],
    );
    let snug = JsonlStore::open(dir.path(), Durability::None)
        .unwrap()
        .with_record_limit(299);
    assert_err(
        open_plain(&snug, "s"),
        ErrorKind::Corrupt,
        &[&format!(
            "line 2 (byte {offset}, seq 0): record of 300 bytes is larger than the limit of 299 bytes"
        )],
    );
    assert!(open_plain(&store, "s").is_ok());
    assert_eq!(bytes(&path), stored);

    // The default limit: 64 MiB.
    let big = JsonlStore::open(dir.path().join("big"), Durability::None).unwrap();
    assert_eq!(big.record_limit(), 64 << 20);
    let mut w = big
        .create(&Header::new("b", 1, SessionMeta::default()).unwrap(), &[])
        .unwrap();
    let before = bytes(&big.path("b").unwrap());
    let data =
        serde_json::value::RawValue::from_string(format!("\"{}\"", "y".repeat(64 << 20))).unwrap();
    let huge = inboxlog::Event::new("host/x", 0, 1, data, Envelope::default()).unwrap();
    assert_err(
        w.append(&[huge]),
        ErrorKind::TooLarge,
        &["larger than the record limit of 67108864 bytes"],
    );
    assert_eq!(bytes(&big.path("b").unwrap()), before);
}

#[test]
fn deep_nesting_is_refused_without_a_stack_overflow() {
    let (_dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
    assert_err(
        s.append("host/x", &deep, Envelope::default()),
        ErrorKind::TooLarge,
        &["deeper than 512"],
    );
    assert_eq!(bytes(&path), before);
    s.append(
        "host/x",
        &format!("{}{}", "[".repeat(512), "]".repeat(512)),
        Envelope::default(),
    )
    .unwrap();
    drop(s);
    // Data nested exactly 512 deep was accepted, so it must load again.
    Session::open(&store, "s").expect("a log holding data nested 512 deep reopens");

    // On disk: refused at its line as `too_large`, as the append refused it.
    let good = bytes(&path);
    for depth in [200_000, 513, 514] {
        let mut bad = good.clone();
        bad.extend_from_slice(
            format!(
                "{{\"type\":\"host/x\",\"seq\":1,\"time\":1,\"data\":{}{}}}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            )
            .as_bytes(),
        );
        let (kind, line) = (ErrorKind::TooLarge, (3, 1));
        refused_as(
            &store,
            &bad,
            Level::Store,
            kind,
            line,
            "nesting deeper than",
        );
    }
}

#[test]
fn non_finite_numbers_are_refused_in_event_data() {
    let (_dir, store) = store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let path = store.path("s").unwrap();
    let before = bytes(&path);
    for bad in [
        "[1e400]",
        "{\"x\":-1e999}",
        "{\"x\":NaN}",
        "[-Infinity]",
        "[1,]",
    ] {
        assert_err(
            s.append("host/x", bad, Envelope::default()),
            ErrorKind::InvalidInput,
            &["event data"],
        );
    }
    assert_eq!(bytes(&path), before);
    s.append(
        "host/x",
        "[1e300,-0.0,12345678901234567890123]",
        Envelope::default(),
    )
    .unwrap();
    drop(s);

    // On disk: refused as corruption at its line.
    let good = bytes(&path);
    for (data, cause) in [("[1e400]", "not finite"), ("{\"x\":NaN}", "invalid event")] {
        let mut bad = good.clone();
        bad.extend_from_slice(
            format!("{{\"type\":\"host/x\",\"seq\":1,\"time\":1,\"data\":{data}}}\n").as_bytes(),
        );
        refused(&store, &bad, Level::Store, 3, 1, cause);
    }
}

/// A bad id never names a file: no path is made of it, and the calls that create
/// files leave none. (Every call refuses a bad id in every store: the store suite.)
#[test]
fn bad_ids_never_reach_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("logs");
    let store = JsonlStore::open(&root, Durability::None).unwrap();
    drop(Session::create(&store, "s", SessionMeta::default()).unwrap());
    let long = "x".repeat(129);
    for id in [
        "../x",
        "",
        &long,
        "a/b",
        ".hidden",
        "/etc/passwd",
        "a\0b",
        "..",
        "é",
    ] {
        assert_err(store.path(id), ErrorKind::InvalidInput, &["session id"]);
        let _ = Session::create(&store, id, SessionMeta::default());
        let _ = Session::fork(&store, "s", id, SessionMeta::default());
    }
    let names = |p: &Path| {
        let mut v: Vec<String> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&root), ["s.jsonl"]);
    assert_eq!(names(dir.path()), ["logs"]);
}

#[test]
fn list_reads_only_regular_files_named_after_a_valid_id() {
    let (_dir, store) = store(Durability::None);
    drop(Session::create(&store, "a", SessionMeta::default()).unwrap());
    let root = store.root();
    // A directory with a session's name (and a log-like file inside it).
    fs::create_dir(root.join("x.jsonl")).unwrap();
    fs::copy(root.join("a.jsonl"), root.join("x.jsonl").join("a.jsonl")).unwrap();
    // A hidden file, an editor backup, a file whose name is not a valid id.
    fs::copy(root.join("a.jsonl"), root.join(".a.jsonl")).unwrap();
    fs::copy(root.join("a.jsonl"), root.join("a.jsonl~")).unwrap();
    fs::write(root.join("bad id.jsonl"), "not a log").unwrap();
    fs::write(root.join("..jsonl"), "not a log").unwrap();
    let ids = |store: &JsonlStore| -> Vec<String> {
        store.list().unwrap().into_iter().map(|h| h.id).collect()
    };
    assert_eq!(ids(&store), ["a"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        // A link to a regular log is followed (opening follows it as well); a dangling
        // link and a link to a directory are not sessions.
        let elsewhere = tempfile::tempdir().unwrap();
        let other = JsonlStore::open(elsewhere.path(), Durability::None).unwrap();
        drop(Session::create(&other, "linked", SessionMeta::default()).unwrap());
        symlink(other.path("linked").unwrap(), root.join("linked.jsonl")).unwrap();
        symlink(root.join("nowhere.jsonl"), root.join("dangling.jsonl")).unwrap();
        symlink(elsewhere.path(), root.join("todir.jsonl")).unwrap();
        assert_eq!(ids(&store), ["a", "linked"]);
    }
}

/// Files beside the logs are not sessions; a create in progress is skipped, one that
/// never finished and a log of a future format are named. (The headers list sorted by
/// id in every store: the store suite.)
#[test]
fn list_skips_other_files_and_names_broken_logs() {
    let (_dir, store) = store(Durability::None);
    for id in ["b", "a"] {
        drop(Session::create(&store, id, SessionMeta::default()).unwrap());
    }
    // Files that are not sessions are not listed.
    fs::write(store.root().join("notes.txt"), "x").unwrap();
    fs::write(store.root().join(".hidden.jsonl"), "x").unwrap();
    fs::create_dir(store.root().join("sub")).unwrap();
    let ids = |store: &JsonlStore| -> Vec<String> {
        store.list().unwrap().into_iter().map(|h| h.id).collect()
    };
    assert_eq!(ids(&store), ["a", "b"]);
    // A create in progress (locked, no header yet) is skipped; a create that never
    // finished (unlocked) is named.
    let half = store.root().join("b2.jsonl");
    fs::write(&half, "{\"format\":").unwrap();
    let creating = fs::File::open(&half).unwrap();
    creating.lock().unwrap();
    assert_eq!(store.list().unwrap().len(), 2);
    drop(creating);
    assert_err(
        store.list(),
        ErrorKind::Corrupt,
        &["b2.jsonl line 1 (byte 0, header): no complete header line (10 bytes"],
    );
    fs::remove_file(&half).unwrap();
    // A broken one is named.
    fs::write(
        store.root().join("d.jsonl"),
        "{\"format\":\"inboxlog\",\"version\":3}\n",
    )
    .unwrap();
    assert_err(
        store.list(),
        ErrorKind::FormatUnsupported,
        &["d.jsonl line 1: log format version 3"],
    );
}

/// A missing session is named with the file that is not there.
#[test]
fn a_missing_session_is_named_with_its_file() {
    let (_dir, store) = store(Durability::None);
    assert_err(
        Session::open(&store, "nope"),
        ErrorKind::NotFound,
        &["no session \"nope\"", "nope.jsonl does not exist"],
    );
}

/// Copies the checked-in version 1 logs into a fresh store.
fn fixtures() -> (tempfile::TempDir, JsonlStore) {
    let (dir, store) = store(Durability::None);
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonl");
    for name in ["v1-basic.jsonl", "v1-fork.jsonl"] {
        fs::copy(from.join(name), store.root().join(name)).unwrap();
    }
    (dir, store)
}

#[test]
fn version_1_fixtures_still_open() {
    let (_dir, store) = fixtures();
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(ids, ["v1-basic", "v1-fork"]);

    // Every stored line reads back and re-serializes to the same bytes.
    let basic = store.path("v1-basic").unwrap();
    let raw = bytes(&basic);
    let (header, events) = store.inspect("v1-basic").unwrap();
    assert_eq!(header.to_json().as_bytes(), lines(&raw)[0]);
    assert_eq!(events.len(), 16);
    for (e, line) in events.iter().zip(&lines(&raw)[1..]) {
        assert_eq!(e.to_json().as_bytes(), *line);
    }
    let s = Session::open(&store, "v1-basic").unwrap();
    assert_eq!(
        (s.open_report().torn_bytes, s.open_report().repaired_turn),
        (0, None)
    );
    let ids = |ms: Vec<inboxlog::Message>| ms.iter().map(|m| m.id().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(s.inbox().next_turn().unwrap()), ["m3"]);
    assert!(s.inbox().next_step().unwrap().is_empty());
    drop(s);
    assert_eq!(bytes(&basic), raw, "a clean open writes nothing");

    // The fork stopped inside turn 2: its inbox replays from seedLength, the turn is
    // closed as interrupted.
    let s = Session::open(&store, "v1-fork").unwrap();
    assert_eq!(s.header().seed_length, Some(16));
    assert_eq!(s.header().parent_session.as_deref(), Some("v1-basic"));
    assert_eq!(s.open_report().repaired_turn, Some(2));
    assert_eq!(ids(s.inbox().next_turn().unwrap()), ["c1"]);
}

#[test]
fn a_large_log_is_read_on_two_threads_with_the_same_rules() {
    // Over the 4 MiB from which the store reads on a helper thread.
    let (_dir, store) = store(Durability::None);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[]).unwrap();
    let pad = "z".repeat(400);
    for chunk in 0..120u64 {
        let events: Vec<_> = (0..100)
            .map(|i| {
                ev(
                    chunk * 100 + i,
                    &format!("{{\"pad\":\"{pad}\",\"s\":\"é\\n\"}}"),
                )
            })
            .collect();
        w.append(&events).unwrap();
    }
    drop(w);
    let path = store.path("s").unwrap();
    let good = bytes(&path);
    assert!(good.len() > 4 << 20);
    let starts = line_starts(&good);

    // A torn tail goes, alone.
    let mut torn = good.clone();
    torn.extend_from_slice(&good[starts[5]..starts[5] + 100]);
    fs::write(&path, &torn).unwrap();
    assert_eq!(store.inspect("s").unwrap().1.len(), 12_000);
    assert_eq!(open_plain(&store, "s").unwrap(), 100);
    assert_eq!(bytes(&path), good);

    // A bad line deep inside is named exactly.
    let mut bad = good.clone();
    bad[starts[9_001] + 30] = 0xff;
    refused(
        &store,
        &bad,
        Level::Store,
        9_002,
        9_000,
        "record is not UTF-8",
    );
    let mut bad = good.clone();
    bad[starts[11_999]] = b'x';
    refused(&store, &bad, Level::Store, 12_000, 11_998, "invalid event");
}

/// What the reference harness writes opens as it is: a trigger on turn/start, runtime
/// context as a user/message without an id, and host facts on step and turn events.
#[test]
fn a_log_whose_reserved_events_carry_extras_opens_and_round_trips_byte_for_byte() {
    let (_dir, store) = store(Durability::Sync);
    let path = store.path("ref").unwrap();
    // What the reference harness writes: a trigger on turn/start, runtime context as a
    // user/message without an id, and host facts on step and turn events.
    let log = concat!(
        r#"{"format":"inboxlog","version":1,"id":"ref","createdAt":1}"#,
        "\n",
        r#"{"type":"agent/inbox/spliced","seq":0,"time":2,"data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","text":"hi"}]}}"#,
        "\n",
        r#"{"type":"turn/start","seq":1,"time":3,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        "\n",
        r#"{"type":"agent/inbox/spliced","seq":2,"time":3,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}"#,
        "\n",
        r#"{"type":"step/start","seq":3,"time":4,"data":{"turn":1,"step":1,"model":"x"}}"#,
        "\n",
        r#"{"type":"user/message","seq":4,"time":4,"data":{"id":"m1","text":"hi"},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"user/message","seq":5,"time":4,"data":{"text":"<runtime context>"}}"#,
        "\n",
        r#"{"type":"step/end","seq":6,"time":5,"data":{"turn":1,"step":1,"usage":{"out":12345678901234567890}}}"#,
        "\n",
        r#"{"type":"turn/end","seq":7,"time":6,"data":{"turn":1,"reason":{"kind":"completed"},"durationMs":3}}"#,
        "\n",
    );
    std::fs::write(&path, log).unwrap();
    let s = Session::open(&store, "ref").unwrap();
    assert_eq!(s.open_report().repaired_turn, None);
    assert_eq!(bytes(&path), log.as_bytes(), "opening rewrote nothing");
    let stored: Vec<String> = log.lines().skip(1).map(str::to_owned).collect();
    let read: Vec<String> = s
        .events(0)
        .unwrap()
        .iter()
        .map(inboxlog::Event::to_json)
        .collect();
    assert_eq!(read, stored);
    assert_eq!(s.open_turn().unwrap(), 2, "turn numbers continue");
}

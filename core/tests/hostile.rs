//! Hostile imports (issue #28): sources built to exhaust memory or to slip past the
//! limits of ARCHITECTURE.md#limits. Small reproducers are fixtures under
//! `fixtures/reference/hostile-*`; large ones are generated here.
//! The import's peak memory is measured in `import_memory.rs`, a test binary of its
//! own (it starts child processes, which must not race the imports here).

use std::fs;
use std::path::{Path, PathBuf};

use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    Envelope, ErrorKind, Event, ImportLimits, Session, SessionMeta, import_reference,
    import_reference_with,
};

mod hostile_common;
mod pg_common;

use hostile_common::{HEADER, amplified, many_runs, zstd_bomb};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(name)
}

/// Imports `source` into an empty JSONL store: the refusal, after checking that it
/// names `line` and that nothing was created.
fn refused(source: &Path, limits: ImportLimits, line: u64) -> inboxlog::Error {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let Err(err) = import_reference_with(source, &store, None, limits) else {
        panic!("{} was imported", source.display());
    };
    assert_eq!(err.line(), Some(line), "{err}");
    assert_eq!(err.path(), Some(source), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot import {}: line {line}: ",
            source.display()
        )),
        "{err}"
    );
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "{err}");
    err
}

#[test]
fn a_line_over_the_limit_is_refused_before_it_is_held_whole() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ImportLimits {
        line_bytes: 4 << 20,
        ..ImportLimits::default()
    };
    for newline in [true, false] {
        // 64 MiB of one line from about 3 KB of zstd, with and without its newline.
        let bomb = zstd_bomb(dir.path(), 64, newline);
        assert!(fs::metadata(&bomb).unwrap().len() < 64 << 10);
        let err = refused(&bomb, limits, 2);
        assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
        assert!(
            err.to_string()
                .contains("the line is longer than the limit of 4194304 bytes"),
            "{err}"
        );
    }
    // The same on a plain file, and for the header line.
    let plain = dir.path().join("long.jsonl");
    let mut text = format!("{HEADER}\n");
    text.push_str(&format!(
        r#"{{"type":"x","seq":0,"time":0,"data":"{}"}}"#,
        "b".repeat(5 << 20)
    ));
    fs::write(&plain, &text).unwrap();
    let err = refused(&plain, limits, 2);
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert_eq!(err.offset(), Some(HEADER.len() as u64 + 1));
    let head = dir.path().join("head.jsonl");
    fs::write(&head, format!("{{\"pad\":\"{}\"}}\n", "c".repeat(5 << 20))).unwrap();
    assert_eq!(refused(&head, limits, 1).kind(), ErrorKind::TooLarge);
    // A line exactly at the limit is read.
    let exact = ImportLimits {
        line_bytes: text.len() as u64 - HEADER.len() as u64 - 1,
        ..limits
    };
    let store = MemoryStore::new();
    let s = import_reference_with(&plain, &store, None, exact).unwrap();
    assert_eq!(s.last_seq().unwrap(), Some(0));
}

#[test]
fn a_run_that_would_expand_past_its_limit_is_refused_before_any_member_is_built() {
    let dir = tempfile::tempdir().unwrap();
    // Issue #28's reproducer: 100 kB of id times 8,000 members, about 800 MB expanded.
    let source = amplified(dir.path(), 100_000, 8_000);
    assert!(fs::metadata(&source).unwrap().len() < 150_000);
    let err = refused(&source, ImportLimits::default(), 4);
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert!(
        err.to_string().contains(
            "tool-call-chunks run of 8000 members expands to more than the limit of 67108864 bytes"
        ),
        "{err}"
    );
    // Within a limit that holds it, the same run imports whole.
    let small = amplified(dir.path(), 1_000, 100);
    let store = MemoryStore::new();
    let s = import_reference_with(
        &small,
        &store,
        None,
        ImportLimits {
            run_bytes: 200_000,
            ..ImportLimits::default()
        },
    )
    .unwrap();
    // Two events, 100 members, then the interrupted turn's step/end and turn/end.
    assert_eq!(s.last_seq().unwrap(), Some(103));
    let err = refused(
        &small,
        ImportLimits {
            run_bytes: 100_000,
            ..ImportLimits::default()
        },
        4,
    );
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
}

#[test]
fn a_source_expanding_to_many_batches_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let source = many_runs(dir.path(), 6, 2_000, 500);
    let store_dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(store_dir.path(), Durability::None).unwrap();
    let s = import_reference(&source, &store, None).unwrap();
    assert_eq!(s.last_seq().unwrap(), Some(2 + 6 * 500 + 1));
    drop(s);
    let reopened = Session::open(&store, "bomb").unwrap();
    let events = reopened.events(0).unwrap();
    assert_eq!(events.len(), 2 + 6 * 500 + 2);
    assert!(events[2].data().contains(r#""argumentsDelta":"{}""#));
    assert_eq!(events[2 + 500].data().len(), events[2].data().len());
}

#[test]
fn host_data_deeper_than_512_levels_is_too_large_on_every_path() {
    // Import: 512 levels are taken, 513 and 514 refused as an append refuses them.
    let store = MemoryStore::new();
    let s = import_reference(&fixture("hostile-depth-512.jsonl"), &store, None).unwrap();
    let deep = s.events(0).unwrap()[0].data().to_owned();
    for depth in [513, 514] {
        let err = refused(
            &fixture(&format!("hostile-depth-{depth}.jsonl")),
            ImportLimits::default(),
            2,
        );
        assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
        assert!(err.to_string().contains("deeper than 512 levels"), "{err}");
    }
    // Append.
    let data = format!("[{deep}]");
    let err = s
        .append("host/deep", &data, Envelope::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    // Reading an event line, and building one.
    let line = format!(r#"{{"type":"host/deep","seq":0,"time":1,"data":{data}}}"#);
    let err = Event::from_json(&line).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert!(
        err.to_string()
            .contains("data of host/deep event seq 0: JSON nesting deeper than 512 levels"),
        "{err}"
    );
    // A stored log holding it is refused on open as `too_large` naming line and seq
    // (jsonl_recovery.rs, `deep_nesting_is_refused_without_a_stack_overflow`).
}

#[test]
fn a_lone_surrogate_is_one_rule_in_plain_events_and_packed_runs() {
    let store = MemoryStore::new();
    let s = import_reference(&fixture("hostile-surrogates.jsonl"), &store, None).unwrap();
    let data: Vec<String> = s
        .events(0)
        .unwrap()
        .iter()
        .map(|e| e.data().to_owned())
        .collect();
    // The plain event and the run's first member: the same data, kept as written.
    let chunk = r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\ud83d"}}"#;
    assert_eq!(data[2], chunk);
    assert_eq!(data[3], chunk);
    assert_eq!(
        data[4],
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\ude00"}}"#
    );
    assert_eq!(
        data[5],
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c\udc00","name":"n\ud800","argumentsDelta":"\udfff"}}"#
    );
    // An append takes the same text, and the stored log reads back.
    s.append("assistant/chunk", chunk, Envelope::default())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open(dir.path(), Durability::None).unwrap();
    drop(import_reference(&fixture("hostile-surrogates.jsonl"), &jsonl, None).unwrap());
    let (_, events) = jsonl.inspect("hostile-surrogates").unwrap();
    assert_eq!(events[3].data(), chunk);
    Session::open(&jsonl, "hostile-surrogates").unwrap();
}

#[test]
fn a_refusal_by_the_store_while_writing_removes_the_new_session() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("big.jsonl");
    let big = format!(
        "{HEADER}\n{}\n",
        format_args!(
            r#"{{"type":"x","seq":0,"time":0,"data":"{}"}}"#,
            "d".repeat(4096)
        )
    );
    fs::write(&source, big).unwrap();
    let root = tempfile::tempdir().unwrap();
    // The import reads lines up to 64 MiB; this store keeps records of 1 KiB at most,
    // which it says only when the second pass writes.
    let store = JsonlStore::open(root.path(), Durability::Sync)
        .unwrap()
        .with_record_limit(1024);
    let err = import_reference(&source, &store, None)
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert!(
        err.to_string().contains("record limit of 1024 bytes"),
        "{err}"
    );
    // The refusal names the source line of the event the store refused.
    assert_eq!((err.line(), err.seq()), (Some(2), Some(0)), "{err}");
    let at = format!("cannot import {}: line 2: event seq 0", source.display());
    assert!(err.to_string().starts_with(&at), "{err}");
    assert!(store.list().unwrap().is_empty(), "{err}");
    assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0, "{err}");
}

#[test]
fn a_source_that_changes_between_the_passes_is_refused_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("changing.jsonl");
    let first = format!(
        "{HEADER}\n{}\n",
        r#"{"type":"x","seq":0,"time":0,"data":1}"#
    );
    let longer = format!("{first}{}\n", r#"{"type":"x","seq":1,"time":0,"data":2}"#);
    let broken = format!(
        "{HEADER}\n{}\n",
        r#"{"type":"x","seq":5,"time":0,"data":1}"#
    );
    for (later, needle) in [
        (longer, "the file changed while it was being imported"),
        (broken, "seq 5 does not continue the log (expected seq 0)"),
    ] {
        fs::write(&source, &first).unwrap();
        inboxlog::between_import_passes(move |path| fs::write(path, &later).unwrap());
        let root = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(root.path(), Durability::None).unwrap();
        let err = import_reference(&source, &store, None)
            .err()
            .expect("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(needle), "{err}");
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0, "{err}");
    }
}

#[test]
fn deep_data_stored_in_postgresql_is_too_large_naming_session_and_seq() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/x", "[]", Envelope::default()).unwrap();
    s.append("host/tail", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
    schema.exec(&format!(
        "UPDATE {{s}}.events SET crc = NULL, line = '{{\"type\":\"host/x\",\"seq\":0,\"time\":0,\"data\":{deep}}}' \
         WHERE session = 's' AND seq = 0"
    ));
    let before = schema.snapshot("s");
    for err in [
        Session::verify(&store, "s").map(drop).expect_err("refused"),
        Session::inspect(&store, "s")
            .map(drop)
            .expect_err("refused"),
    ] {
        assert_eq!(
            (err.kind(), err.session(), err.seq()),
            (ErrorKind::TooLarge, Some("s"), Some(0)),
            "{err}"
        );
        assert!(err.to_string().contains("deeper than 512 levels"), "{err}");
    }
    assert_eq!(schema.snapshot("s"), before);
}

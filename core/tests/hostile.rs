//! Hostile imports (issue #28): sources built to exhaust memory or to slip past the
//! limits of ARCHITECTURE.md#limits. Small reproducers are fixtures under
//! `fixtures/reference/hostile-*`; large ones are generated here.
//!
//! The memory budget: an import's peak resident memory stays within
//! `4 × ImportLimits::line_bytes + 32 MiB` above the process's resident size before it
//! began, whatever the source (refused or imported, plain or zstd, however far it
//! expands). [`peak_memory_stays_within_the_budget`] measures it in child processes.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    Envelope, ErrorKind, Event, ImportLimits, Session, import_reference, import_reference_with,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(name)
}

const HEADER: &str = r#"{"type":"session","version":0,"id":"bomb","createdAt":1}"#;

/// One zstd frame of `bytes`.
fn frame(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 19).unwrap()
}

/// A `.jsonl.zstd` source of about 40 KB whose second line is `mib` MiB long: the same
/// frame of 1 MiB of `a` repeated, between the line's start and its end (`newline`
/// or not).
fn zstd_bomb(dir: &Path, mib: usize, newline: bool) -> PathBuf {
    let mut out = frame(format!("{HEADER}\n").as_bytes());
    out.extend(frame(br#"{"type":"x","seq":0,"time":0,"data":""#));
    let mega = frame(&vec![b'a'; 1 << 20]);
    for _ in 0..mib {
        out.extend_from_slice(&mega);
    }
    if newline {
        out.extend(frame(b"\"}\n"));
    }
    let path = dir.join(format!("bomb-{mib}-{newline}.jsonl.zstd"));
    fs::write(&path, out).unwrap();
    path
}

/// The packed-run amplification of issue #28: a tool-call run whose `id` of `id_len`
/// bytes is copied into each of its `members` (each member's text empty).
fn amplified(dir: &Path, id_len: usize, members: usize) -> PathBuf {
    let mut text = format!("{HEADER}\n");
    text.push_str(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    text.push('\n');
    text.push_str(r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#);
    text.push('\n');
    let gaps = vec!["0"; members - 1].join(",");
    let args = vec![r#""""#; members].join(",");
    let id = "i".repeat(id_len);
    text.push_str(&format!(
        r#"{{"type":"tool-call-chunks","seq0":2,"time0":1,"data":{{"turn":1,"step":1,"index":0,"dt":[{gaps}],"id":"{id}","args":[{args}]}}}}"#
    ));
    text.push('\n');
    let path = dir.join(format!("amplified-{id_len}-{members}.jsonl"));
    fs::write(&path, text).unwrap();
    path
}

/// A valid source of `runs` tool-call runs, each of `members` members with an `id` of
/// `id_len` bytes: imported whole, it expands to about `runs × members × id_len` bytes.
fn many_runs(dir: &Path, runs: usize, id_len: usize, members: usize) -> PathBuf {
    let mut text = format!("{HEADER}\n");
    text.push_str(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    text.push('\n');
    text.push_str(r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#);
    text.push('\n');
    let gaps = vec!["1"; members - 1].join(",");
    let args = vec![r#""{}""#; members].join(",");
    let id = "i".repeat(id_len);
    for run in 0..runs {
        let seq0 = 2 + run * members;
        text.push_str(&format!(
            r#"{{"type":"tool-call-chunks","seq0":{seq0},"time0":1,"data":{{"turn":1,"step":1,"index":{run},"dt":[{gaps}],"id":"{id}","args":[{args}]}}}}"#
        ));
        text.push('\n');
    }
    let path = dir.join("many-runs.jsonl");
    fs::write(&path, text).unwrap();
    path
}

/// A valid source whose one event line is just under `bytes` long, its data a list of
/// short strings after spaces (so it is compacted before it is stored).
fn spaced_line(dir: &Path, bytes: usize) -> PathBuf {
    let mut line = String::from(r#"{"type":"x","seq":0,"time":0,"data":["#);
    while line.len() + 32 < bytes {
        line.push_str(r#" "abcdefghijk","#);
    }
    line.push_str(r#" "end"]}"#);
    let path = dir.join("spaced.jsonl");
    fs::write(&path, format!("{HEADER}\n{line}\n")).unwrap();
    path
}

/// Imports `source` into an empty JSONL store: the refusal, after checking that it
/// names `line` and that nothing was created.
fn refused(source: &Path, limits: ImportLimits, line: u64) -> inboxlog::Error {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let err = match import_reference_with(source, &store, None, limits) {
        Ok(_) => panic!("{} was imported", source.display()),
        Err(e) => e,
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

/// Runs an import in this test binary as a child process (see [`child_import`]) and
/// returns its peak resident memory above its resident size before the import, in
/// bytes, and whether the import succeeded.
fn peak_of_child(source: &Path, line_bytes: u64) -> (u64, bool) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_import", "--nocapture", "--test-threads=1"])
        .env("INBOXLOG_HOSTILE_SOURCE", source)
        .env("INBOXLOG_HOSTILE_LINE_BYTES", line_bytes.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // The harness may print the test's name on the same line, before the report.
    let line = stdout
        .split("child-import: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    let mut parts = line.split(' ');
    let peak = parts.next().unwrap().parse().unwrap();
    (peak, parts.next() == Some("ok"))
}

/// A field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// The child side of [`peak_of_child`]: does nothing unless run by it.
#[test]
fn child_import() {
    let Some(source) = std::env::var_os("INBOXLOG_HOSTILE_SOURCE") else {
        return;
    };
    let line_bytes = std::env::var("INBOXLOG_HOSTILE_LINE_BYTES")
        .unwrap()
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    // Start the peak over from here: writing 5 to clear_refs resets VmHWM to VmRSS.
    let reset = fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok();
    let before = if reset {
        status_bytes("VmRSS:")
    } else {
        status_bytes("VmHWM:")
    };
    let limits = ImportLimits {
        line_bytes,
        run_bytes: line_bytes,
    };
    let result = import_reference_with(Path::new(&source), &store, None, limits).map(drop);
    let peak = status_bytes("VmHWM:");
    println!(
        "child-import: {} {}",
        peak.saturating_sub(before),
        if result.is_ok() { "ok" } else { "refused" }
    );
}

#[test]
fn peak_memory_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let default = ImportLimits::default().line_bytes;
    let budget = |line_bytes: u64| 4 * line_bytes + (32 << 20);
    let cases = [
        // 1 GiB of one line from about 40 KB of zstd, at the default limits.
        (
            "zstd bomb",
            zstd_bomb(dir.path(), 1024, true),
            default,
            false,
        ),
        (
            "zstd bomb, no newline",
            zstd_bomb(dir.path(), 1024, false),
            default,
            false,
        ),
        (
            "run amplification",
            amplified(dir.path(), 100_000, 8_000),
            default,
            false,
        ),
        // About 44 MB of events written from a 140 KB source, 7 MB per run.
        (
            "many runs",
            many_runs(dir.path(), 6, 2_000, 3_500),
            8 << 20,
            true,
        ),
        // One event line of nearly 8 MiB, spaced so that it is compacted: held whole.
        (
            "a line at the limit",
            spaced_line(dir.path(), 8 << 20),
            8 << 20,
            true,
        ),
    ];
    for (what, source, line_bytes, imported) in cases {
        let (peak, ok) = peak_of_child(&source, line_bytes);
        eprintln!("{what}: peak {} KiB above the baseline", peak >> 10);
        assert_eq!(ok, imported, "{what}");
        assert!(
            peak <= budget(line_bytes),
            "{what}: peak {peak} bytes over the budget of {}",
            budget(line_bytes)
        );
    }
}

//! The fuzz targets' properties (issue #27): one function per target, each taking the
//! fuzzer's bytes and panicking when a property does not hold. The libFuzzer entry
//! points (`fuzz_targets/`) and the plain mutation driver (`fuzz-smoke`) both call
//! them, so a crash found by either replays through the other.
//!
//! Every target checks more than the absence of a crash:
//! - `jsonl_open`: a stored log that opens verifies, reopens with nothing added and
//!   reads back the same events; a refused open leaves the file byte for byte as it
//!   was, and verification refuses it too.
//! - `import_plain`, `import_zstd`: an accepted import opens and verifies and holds what
//!   the source held (the plain and compressed forms of one source import the same
//!   events); a refused one creates nothing and names the source line.
//! - `pg_url`: parsing only, never a connection; a password in the URL never appears in
//!   an error message, in the redacted URL or in the description of a parsed one.
//! - `wire_json`: whatever the JSON readers accept prints back to text they read to
//!   the same value.
//! - `c_abi`: the conventions of the C header on every call of a call sequence
//!   (`inboxlog_ffi::fuzzing`).

use std::fs;
use std::path::Path;

use inboxlog::store::{Durability, JsonlStore, Store};
use inboxlog::wire::{FromJson, ToJson};
use inboxlog::{Baseline, Decision, Envelope, ErrorKind, Event, ImportLimits, Session};

/// Small limits keep each run fast; the limits themselves are what is under test.
const LIMITS: ImportLimits = ImportLimits {
    line_bytes: 16 << 10,
    run_bytes: 64 << 10,
};

/// The header of a session named `s` in the library's format.
const HEADER: &str = r#"{"format":"inboxlog","version":1,"id":"s","createdAt":1}"#;

/// A stored log: the input is the whole file of session `s` (a seed that does not start
/// with `{"format"` gets [`HEADER`] put before it, so mutations explore the events).
pub fn jsonl_open(data: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = JsonlStore::open(dir.path(), Durability::None).expect("store");
    let path = dir.path().join("s.jsonl");
    let mut file = Vec::with_capacity(data.len() + HEADER.len() + 1);
    if !data.starts_with(b"{\"format\"") {
        file.extend_from_slice(HEADER.as_bytes());
        file.push(b'\n');
    }
    file.extend_from_slice(data);
    fs::write(&path, &file).expect("write the log");
    let verified = Session::verify(&store, "s");
    match Session::open(&store, "s") {
        Ok(session) => {
            assert!(verified.is_ok(), "opened, but verify refused: {verified:?}");
            let events = session.events(0).expect("events of an open session");
            drop(session);
            let after_first = fs::read(&path).expect("read the log");
            let again = Session::open(&store, "s").expect("an opened log reopens");
            assert_eq!(again.events(0).expect("events"), events);
            drop(again);
            assert_eq!(
                fs::read(&path).expect("read the log"),
                after_first,
                "a second open changed the log"
            );
            Session::verify(&store, "s").expect("an opened log verifies");
        }
        Err(e) => {
            assert!(verified.is_err(), "verify accepted what open refused: {e}");
            assert_eq!(
                fs::read(&path).expect("read the log"),
                file,
                "a refused open changed the file: {e}"
            );
        }
    }
}

/// The reference importer on a plain `.jsonl` source.
pub fn import_plain(data: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("source.jsonl");
    fs::write(&source, data).expect("write the source");
    let plain = import(&source);
    // The same bytes compressed import the same events, or are refused alike.
    let zipped = dir.path().join("source.jsonl.zstd");
    fs::write(&zipped, zstd::encode_all(data, 1).expect("zstd")).expect("write");
    if !data.is_empty() && !data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        assert_eq!(import(&zipped), plain, "plain and zstd imports differ");
    }
}

/// The reference importer on a `.jsonl.zstd` source: the input is the compressed file
/// (a seed that is not zstd is compressed first, in two frames as the harness writes).
pub fn import_zstd(data: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("source.jsonl.zstd");
    let bytes = if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        data.to_vec()
    } else {
        let cut = data
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |i| i + 1);
        let mut out = zstd::encode_all(&data[..cut], 1).expect("zstd");
        out.extend(zstd::encode_all(&data[cut..], 3).expect("zstd"));
        out
    };
    fs::write(&source, bytes).expect("write the source");
    // The property checks are inside `import`; its outcome has nothing to compare with.
    let _ = import(&source);
}

/// Imports `source` into a fresh JSONL store: the events of an accepted import (after
/// checking it opens and verifies), or the refusal's kind and line.
fn import(source: &Path) -> Result<Vec<Event>, (ErrorKind, Option<u64>)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = JsonlStore::open(dir.path(), Durability::None).expect("store");
    match inboxlog::import_reference_with(source, &store, Some("imported"), LIMITS) {
        Ok(session) => {
            let events = session.events(0).expect("events");
            drop(session);
            Session::verify(&store, "imported").expect("an imported log verifies");
            let reopened = Session::open(&store, "imported").expect("an imported log opens");
            assert_eq!(reopened.events(0).expect("events"), events);
            Ok(events)
        }
        Err(e) => {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::InvalidInput
                        | ErrorKind::FormatUnsupported
                        | ErrorKind::TooLarge
                        | ErrorKind::Io
                ),
                "unexpected kind: {e}"
            );
            assert_eq!(e.path(), Some(source), "{e}");
            assert!(
                store.list().expect("list").is_empty(),
                "a refused import left a session: {e}"
            );
            assert_eq!(
                fs::read_dir(dir.path()).expect("read dir").count(),
                0,
                "a refused import left a file: {e}"
            );
            Err((e.kind(), e.line()))
        }
    }
}

/// A password no URL part the fuzzer writes is likely to hold by chance.
const PASSWORD: &str = "Pw7xQz9Secret";

/// The PostgreSQL URL parser, parsing only: the input is split at its first `\x01`
/// into the text before and after the password, which is put either in the user-info
/// (`before:PASSWORD@after`) or as a parameter (`before?password=PASSWORD&after`),
/// as the input's first byte chooses; an input without `\x01` is parsed as it is.
pub fn pg_url(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let url = match text.split_once('\u{1}') {
        Some((before, after)) => {
            if before.contains(PASSWORD) || after.contains(PASSWORD) {
                return;
            }
            if data.first().is_some_and(|b| b % 2 == 0) {
                format!("{before}:{PASSWORD}@{after}")
            } else {
                format!("{before}?password={PASSWORD}&{after}")
            }
        }
        None => text.into_owned(),
    };
    let secret = url.contains(PASSWORD);
    let leaks = |what: &str, shown: &str| {
        assert!(
            !(secret && shown.contains(PASSWORD)),
            "{what} shows the password of {url:?}: {shown}"
        );
    };
    leaks("redact_url", &inboxlog::store::postgres::redact_url(&url));
    match inboxlog::store::postgres::PgUrl::parse(&url) {
        Ok(parsed) => {
            leaks("describe", &parsed.describe());
            leaks("servers", &parsed.servers());
            leaks("debug", &format!("{parsed:?}"));
        }
        Err(e) => {
            leaks("the error", &e.to_string());
            leaks("the error's debug", &format!("{e:?}"));
        }
    }
}

/// The wire layer's JSON inputs (`inboxlog::wire`, `inboxlog::json`): what a reader
/// accepts prints back to text that reads to the same value.
pub fn wire_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(compact) = inboxlog::json::check(text) {
        let again = inboxlog::json::check(&compact).expect("compact text checks again");
        assert_eq!(again, compact, "compacting twice changed the text");
        serde_json::from_str::<serde::de::IgnoredAny>(&compact)
            .or_else(|e| {
                // serde_json's own recursion limit is 128; the checker allows 512.
                if e.to_string().contains("recursion limit") {
                    Ok(serde::de::IgnoredAny)
                } else {
                    Err(e)
                }
            })
            .expect("checked JSON parses");
    }
    if let Ok(events) = inboxlog::wire::events_from(text, "events") {
        for event in &events {
            assert_eq!(
                &Event::from_json(&event.to_json()).expect("a printed event reads back"),
                event
            );
        }
        let printed = inboxlog::wire::events(&events);
        let again =
            inboxlog::wire::events_from(&printed, "events").expect("printed events read back");
        assert_eq!(again, events);
    }
    if let Ok(messages) = inboxlog::wire::messages_from(text, "messages") {
        let printed = inboxlog::wire::messages(&messages);
        let again = inboxlog::wire::messages_from(&printed, "messages")
            .expect("printed messages read back");
        assert_eq!(again, messages);
    }
    if let Ok(baseline) = Baseline::from_json(text) {
        let again =
            Baseline::from_json(&baseline.to_json()).expect("a printed baseline reads back");
        assert_eq!(again, baseline);
    }
    // Readers without a printer: a status, never a panic.
    let _ = Decision::from_json(text);
    let _ = Envelope::from_json(text);
    let _ = inboxlog::store::StoreOptions::from_json(text);
}

/// The C ABI call-sequence driver on a memory store (`inboxlog_ffi::fuzzing`).
pub fn c_abi(data: &[u8]) {
    inboxlog_ffi::fuzzing::call_sequence(data);
}

/// A target's property function.
pub type Target = fn(&[u8]);

/// Every target by name, for the plain driver.
pub const TARGETS: [(&str, Target); 6] = [
    ("jsonl_open", jsonl_open),
    ("import_plain", import_plain),
    ("import_zstd", import_zstd),
    ("pg_url", pg_url),
    ("wire_json", wire_json),
    ("c_abi", c_abi),
];

//! What the JSONL store's integration tests share, with what every core test shares
//! (`common`).
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;

use inboxlog::store::{Durability, JsonlStore};
use inboxlog::{Envelope, Event, Session, SessionMeta};

pub use common::*;

/// A fresh store in a fresh temp dir (the dir must outlive the store).
pub fn store(durability: Durability) -> (tempfile::TempDir, JsonlStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path().join("logs"), durability).unwrap();
    (dir, store)
}

/// A host event built directly (for store-level appends).
pub fn ev(seq: u64, data: &str) -> Event {
    Event::from_json(&format!(
        r#"{{"type":"host/x","seq":{seq},"time":7,"data":{data}}}"#
    ))
    .unwrap()
}

/// The bytes of a file.
pub fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Start offsets of the complete lines of `bytes` (line 1 first).
pub fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts.pop();
    starts
}

/// The complete lines of `bytes`, without their `\n`.
pub fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    v.pop();
    v
}

/// A session "s" with two host events, a pending message and a finished turn.
pub fn populated(store: &JsonlStore) -> Session {
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    s.append("host/note", r#"{"text":"hello"}"#, Envelope::default())
        .unwrap();
    s.inbox()
        .append(inboxlog::Target::NextTurn, msg("m1"))
        .unwrap();
    s.inbox()
        .append(inboxlog::Target::NextTurn, msg("m2"))
        .unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(inboxlog::Decision::Enter(p.messages)).unwrap();
    s.append(
        "assistant/message",
        r#"{"text":"done"}"#,
        Envelope::default(),
    )
    .unwrap();
    s.end_step(inboxlog::StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
    s
}

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
    s.append("assistant/chunk", r#"{"text":"done"}"#, Envelope::default())
        .unwrap();
    s.end_step(inboxlog::StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
    s
}

/// The end of a version 2 line: `,"crc32c":"` + 8 hex digits + `"}` (core/FORMAT.md#checksums-version-2).
const CRC_END: usize = 21;

/// A version 2 line as its version 1 object: without `,"synced":N` and the checksum.
/// Any other line is returned as it is.
pub fn strip(line: &[u8]) -> Vec<u8> {
    let n = line.len();
    if n < CRC_END || !line[n - CRC_END..].starts_with(b",\"crc32c\":\"") {
        return line.to_vec();
    }
    let mut body = &line[..n - CRC_END];
    let digits = body.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 && body[..body.len() - digits].ends_with(b",\"synced\":") {
        body = &body[..body.len() - digits - 10];
    }
    [body, b"}"].concat()
}

/// Rewrites the complete lines of `bytes` (lines 1.. of a log, maybe with a torn tail)
/// with `line(number, offset in the output, text)`, keeping the tail.
fn rewrite(bytes: &[u8], mut line: impl FnMut(usize, usize, Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    let starts = line_starts(bytes);
    let ls = lines(bytes);
    for (i, l) in ls.iter().enumerate() {
        let text = line(i + 1, out.len(), l.to_vec());
        out.extend_from_slice(&text);
        out.push(b'\n');
    }
    let end = starts
        .last()
        .map_or(0, |&s| s + ls.last().unwrap().len() + 1);
    out.extend_from_slice(&bytes[end..]);
    out
}

/// The log in `bytes` as version 1: every line stripped of its checksum, the header's
/// version 1.
pub fn v1(bytes: &[u8]) -> Vec<u8> {
    rewrite(bytes, |n, _, l| {
        let l = strip(&l);
        if n == 1 {
            let text = String::from_utf8(l).unwrap();
            text.replacen("\"version\":2,", "\"version\":1,", 1)
                .into_bytes()
        } else {
            l
        }
    })
}

/// The log in `bytes` (either version) sealed again as version 2, whatever its lines
/// hold, as a program that follows core/FORMAT.md would write it: each event line's
/// `synced` is its own offset (every earlier byte durable, as in `sync` mode).
pub fn reseal(bytes: &[u8]) -> Vec<u8> {
    let mut chain = 0u32;
    rewrite(bytes, |n, at, l| {
        let mut l = strip(&l);
        if n == 1 && l.starts_with(b"{") {
            let text = String::from_utf8(l).unwrap();
            l = text
                .replacen("\"version\":1,", "\"version\":2,", 1)
                .into_bytes();
        }
        let mut body = l[..l.len().saturating_sub(1)].to_vec();
        if n > 1 {
            body.extend_from_slice(format!(",\"synced\":{at}").as_bytes());
        }
        chain = crc32c::crc32c_append(chain, &body);
        body.extend_from_slice(format!(",\"crc32c\":\"{chain:08x}\"}}").as_bytes());
        body
    })
}

/// `line` (a version 1 object) sealed as the next line of the version 2 log `log`,
/// without its `\n`: its checksum continues the last line's, its `synced` is 0.
pub fn sealed_next(log: &[u8], line: &str) -> String {
    let last = *lines(log).last().unwrap();
    let hex = std::str::from_utf8(&last[last.len() - 10..last.len() - 2]).unwrap();
    let prev = u32::from_str_radix(hex, 16).unwrap();
    let body = format!("{},\"synced\":0", &line[..line.len() - 1]);
    let crc = crc32c::crc32c_append(prev, body.as_bytes());
    format!("{body},\"crc32c\":\"{crc:08x}\"}}")
}

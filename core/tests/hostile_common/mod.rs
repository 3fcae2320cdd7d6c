//! Generators of large hostile sources, shared by `hostile.rs` and `import_memory.rs`.
#![allow(dead_code)] // each test file uses a part

use std::fs;
use std::path::{Path, PathBuf};

/// The header line of every generated source (session `bomb`).
pub const HEADER: &str = r#"{"type":"session","version":0,"id":"bomb","createdAt":1}"#;

/// One zstd frame of `bytes`.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 19).unwrap()
}

/// A `.jsonl.zstd` source of about 40 KB whose second line is `mib` MiB long: the same
/// frame of 1 MiB of `a` repeated, between the line's start and its end (`newline`
/// or not).
pub fn zstd_bomb(dir: &Path, mib: usize, newline: bool) -> PathBuf {
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
pub fn amplified(dir: &Path, id_len: usize, members: usize) -> PathBuf {
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
pub fn many_runs(dir: &Path, runs: usize, id_len: usize, members: usize) -> PathBuf {
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
pub fn spaced_line(dir: &Path, bytes: usize) -> PathBuf {
    let mut line = String::from(r#"{"type":"x","seq":0,"time":0,"data":["#);
    while line.len() + 32 < bytes {
        line.push_str(r#" "abcdefghijk","#);
    }
    line.push_str(r#" "end"]}"#);
    let path = dir.join("spaced.jsonl");
    fs::write(&path, format!("{HEADER}\n{line}\n")).unwrap();
    path
}

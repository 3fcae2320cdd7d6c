//! What every kind of core integration test shares: the one test message, the one
//! check of a refusal, the splices that took posts in and their exactly-once check, a
//! seedable generator, and a child process: this test binary run again, and the reader
//! of its output. Each test binary that needs them says `mod common;` (a shared
//! module of one backend, such as `jsonl_common`, re-exports what its files use).
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::mpsc::{self, Receiver};
use std::thread;

use inboxlog::{Error, ErrorKind, Event, Message, Result};

/// A message with id `id`.
pub fn msg(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","content":"do {id}"}}"#
    ))
    .unwrap()
}

/// Asserts `result` failed with `kind` and a message holding every needle, and returns
/// the error.
#[track_caller]
pub fn assert_err<T>(result: Result<T>, kind: ErrorKind, needles: &[&str]) -> Error {
    let Err(err) = result else {
        panic!("expected a {kind} error, got Ok")
    };
    assert_eq!(err.kind(), kind, "{err}");
    for needle in needles {
        assert!(err.to_string().contains(needle), "{needle:?} not in: {err}");
    }
    err
}

/// The splices that took posts in, in log order: `(message id, post id)`.
pub fn taken_in(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.ty() == "agent/inbox/spliced" && e.data().contains(r#""post":"#))
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
            (
                v["inserted"][0]["id"].as_str().unwrap().to_owned(),
                v["post"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every acknowledged message (`acked`: by poster, in post order) is in `taken` exactly
/// once, in each poster's order; no message or post id appears twice; and the posts of
/// one poster that were taken in, acknowledged or not, keep their order. Message ids
/// are `<poster>-<n>` with `n` rising.
#[track_caller]
pub fn assert_exactly_once(taken: &[(String, String)], acked: &HashMap<String, Vec<String>>) {
    let mut seen = HashMap::new();
    let mut posts = HashMap::new();
    for (i, (m, p)) in taken.iter().enumerate() {
        assert!(seen.insert(m.clone(), i).is_none(), "{m} taken in twice");
        assert!(
            posts.insert(p.clone(), i).is_none(),
            "post {p} taken in twice"
        );
    }
    for (poster, ids) in acked {
        let at: Vec<usize> = ids
            .iter()
            .map(|id| {
                *seen
                    .get(id)
                    .unwrap_or_else(|| panic!("acknowledged {id} was lost"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{poster} out of order");
    }
    let mut by_poster: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (m, _) in taken {
        let (poster, n) = m.rsplit_once('-').unwrap();
        by_poster
            .entry(poster)
            .or_default()
            .push(n.parse().unwrap());
    }
    for (poster, ns) in by_poster {
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{poster}: {ns:?}");
    }
}

/// SplitMix64: small, seedable, good enough to pick moments and operations.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The complete lines `child` writes to its (piped) stdout, read on a thread: only
/// newline-terminated lines count, as a kill can cut the last one.
pub fn lines_of(child: &mut Child) -> Receiver<String> {
    let mut out = BufReader::new(child.stdout.take().expect("a piped stdout"));
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = Vec::new();
        while out.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            if line.last() == Some(&b'\n') {
                line.pop();
                let text = String::from_utf8(std::mem::take(&mut line)).unwrap();
                if tx.send(text).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    rx
}

/// This test binary run again to run only `test`, an ignored test that is a child
/// process's entry point, with its output not captured.
pub fn rerun(test: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args([
        "--ignored",
        "--exact",
        test,
        "--nocapture",
        "--test-threads=1",
    ]);
    command
}

/// Waits until `store`'s handle can tell that session `id` has a post waiting, without
/// taking it in (`Mailbox::may_hold`): at once in memory and JSONL; on PostgreSQL, once
/// the post's wake-up reached the handle (it travels asynchronously from the poster's
/// commit, so a boundary right after a post made elsewhere may see it only at the next
/// one; ARCHITECTURE.md#posting). At most 20 s: a wake-up that never comes fails.
#[track_caller]
pub fn heard(name: &str, store: &dyn inboxlog::store::Store, id: &str) {
    let mut mailbox = store.mailbox(id).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !mailbox.may_hold().unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: the post's wake-up never came"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
}

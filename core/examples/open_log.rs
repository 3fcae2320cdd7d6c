//! Opens a stored JSONL log once, as the `open_1m` bench does, outside the bench harness:
//! a fixed amount of work to count instructions of (docs/benchmarks.md, "JSONL format
//! version 2").
//!
//! ```sh
//! cargo build --profile bench -p inboxlog --example open_log
//! target/release/examples/open_log make DIR     # DIR/v1/big.jsonl and DIR/v2/big.jsonl
//! target/release/examples/open_log open DIR/v1  # opens the log once, prints its events
//! target/release/examples/open_log none DIR/v1  # opens the store only (the baseline)
//! target/release/examples/open_log append DIR N # N appends, durability `none`
//! ```
//!
//! `make` writes the bench's 1,000,000-event log as version 1 and a copy upgraded to
//! version 2; under `valgrind --tool=cachegrind`, `open` minus `none` is the work of one
//! open, on every thread. `append` creates a session `a<N>` in DIR and appends N small
//! events to it as the wheel does (`python/bench/ab_checksums.py`: a `json::Builder`
//! object, durability `none`); `append DIR N` minus `append DIR 0` is N appends.

use std::path::Path;

use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store, events as events_of};
use inboxlog::{Envelope, Session, SessionMeta, json};

#[path = "../benches/big_log/mod.rs"]
mod big_log;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, dir, n) = match &args[..] {
        [mode, dir] => (mode, dir, 0),
        [mode, dir, n] if mode == "append" => (mode, dir, n.parse().expect("a count")),
        _ => {
            eprintln!("usage: open_log make|open|none DIR, or open_log append DIR N");
            std::process::exit(2);
        }
    };
    let dir = Path::new(dir);
    match mode.as_str() {
        "make" => {
            for version in ["v1", "v2"] {
                std::fs::create_dir_all(dir.join(version)).unwrap();
            }
            big_log::generate(&dir.join("v1/big.jsonl"));
            std::fs::copy(dir.join("v1/big.jsonl"), dir.join("v2/big.jsonl")).unwrap();
            let store = JsonlStore::open(dir.join("v2"), Durability::None).unwrap();
            store.upgrade("big").unwrap();
        }
        "open" => {
            let store = JsonlStore::open(dir, Durability::None).unwrap();
            let mut events = 0u64;
            let opened = store
                .open(
                    "big",
                    &OpenOptions::default(),
                    &mut events_of(|_, e| {
                        std::hint::black_box(e);
                        events += 1;
                        Ok(())
                    }),
                )
                .unwrap();
            drop(opened);
            println!("{events} events (the bench's log has {})", big_log::EVENTS);
        }
        "append" => {
            let store = JsonlStore::open(dir, Durability::None).unwrap();
            let s = Session::create(&store, &format!("a{n}"), SessionMeta::default()).unwrap();
            for i in 0..n {
                let mut data = json::Builder::new();
                data.begin_object().unwrap();
                data.key("text");
                data.string("hello world token");
                data.key("index");
                data.int(i);
                data.end();
                s.append_json("assistant/chunk", data.finish(), Envelope::default())
                    .unwrap();
            }
        }
        "none" => {
            let store = JsonlStore::open(dir, Durability::None).unwrap();
            std::hint::black_box(store);
        }
        _ => {
            eprintln!("unknown mode {mode}: make, open, none or append");
            std::process::exit(2);
        }
    }
}

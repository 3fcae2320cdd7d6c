//! The JSONL store's reads from the end (`Session::read`, `Session::tail`;
//! ARCHITECTURE.md#checkpoints-and-reading-without-owning) on the logs only it can
//! have: a torn tail, an unproven broken stretch at the end, damage a later line proves,
//! version 1 logs, lines longer than the reader's block, a log its writer appends to
//! meanwhile. On every file the reads return the slice of what `inspect` returns, or
//! the same `corrupt` error when the damage lies among the lines they return. What they
//! cost is counted by the reader's own unit tests (`store/jsonl/reads.rs`).

#[path = "jsonl_common/mod.rs"]
mod jsonl_common;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use inboxlog::store::{Durability, JsonlStore};
use inboxlog::{Envelope, ErrorKind, Event, Session, SessionMeta};
use jsonl_common::*;

fn json(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// A closed log "s" of `n` host events (one append each, so in `sync` mode each
/// line's `synced` is its own offset); its file.
fn log(store: &JsonlStore, n: u64, pad: usize) -> PathBuf {
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    for i in 0..n {
        let ty = if i % 3 == 0 { "host/a" } else { "host/b" };
        let data = format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(pad));
        s.append(ty, &data, Envelope::default()).unwrap();
    }
    s.close().unwrap();
    store.path("s").unwrap()
}

/// Every read and tail of "s" equals the slice of `inspect`.
fn agrees(store: &JsonlStore) -> Vec<Event> {
    let (header, all) = Session::inspect(store, "s").unwrap();
    let n = all.len();
    for since in [0, 1, n / 2, n.saturating_sub(1), n, n + 5] {
        let (h, read) = Session::read(store, "s", since as u64).unwrap();
        assert_eq!(h, header);
        assert_eq!(json(&read), json(&all[since.min(n)..]), "read({since})");
    }
    for limit in [0, 1, 2, 5, n, n + 3] {
        let (h, tail) = Session::tail(store, "s", limit, None).unwrap();
        assert_eq!(h, header);
        assert_eq!(json(&tail), json(&all[n - limit.min(n)..]), "tail({limit})");
        let (_, a) = Session::tail(store, "s", limit, Some(&["host/a"])).unwrap();
        let want: Vec<&Event> = all.iter().filter(|e| e.ty() == "host/a").collect();
        let want: Vec<String> = want[want.len() - limit.min(want.len())..]
            .iter()
            .map(|e| e.to_json())
            .collect();
        assert_eq!(json(&a), want, "tail({limit}, host/a)");
    }
    all
}

/// The bytes of `path` with `f` applied to line `number` (1-based).
fn edit_line(path: &PathBuf, number: usize, f: impl Fn(&mut Vec<u8>)) {
    let b = bytes(path);
    let starts = line_starts(&b);
    let ls = lines(&b);
    let mut line = ls[number - 1].to_vec();
    f(&mut line);
    let start = starts[number - 1];
    let mut out = b[..start].to_vec();
    out.extend_from_slice(&line);
    out.extend_from_slice(&b[start + ls[number - 1].len()..]);
    fs::write(path, out).unwrap();
}

/// Replaces the first `x` of `line`'s data with `y`: the checksum no longer matches.
#[allow(clippy::ptr_arg)] // an edit of `edit_line`, which may also cut a line
fn flip(line: &mut Vec<u8>) {
    let at = line.iter().position(|&c| c == b'x').unwrap();
    line[at] = b'y';
}

#[test]
fn a_torn_tail_is_ignored_as_inspect_ignores_it() {
    let (_d, store) = store(Durability::Sync);
    let path = log(&store, 30, 10);
    let mut b = bytes(&path);
    b.extend_from_slice(br#"{"type":"host/a","seq":30,"ti"#);
    fs::write(&path, &b).unwrap();
    assert_eq!(agrees(&store).len(), 30);
    // Only NULs after the last line: the same.
    b.extend_from_slice(&[0; 100]);
    fs::write(&path, &b).unwrap();
    assert_eq!(agrees(&store).len(), 30);
}

#[test]
fn an_unproven_broken_last_line_is_part_of_the_torn_tail() {
    let (_d, store) = store(Durability::Sync);
    let path = log(&store, 30, 10);
    // Line 31 holds seq 29, the last: nothing after it proves its damage, once the
    // checkpoint the close wrote (which says it was durable) is gone.
    fs::remove_file(store.path("s").unwrap().with_extension("checkpoint")).unwrap();
    edit_line(&path, 31, flip);
    assert_eq!(agrees(&store).len(), 29);
    // Its checksum digits too.
    let (_d, store) = jsonl_common::store(Durability::Sync);
    let path = log(&store, 30, 10);
    fs::remove_file(store.path("s").unwrap().with_extension("checkpoint")).unwrap();
    edit_line(&path, 31, |l| {
        let n = l.len();
        l[n - 3] = if l[n - 3] == b'0' { b'1' } else { b'0' };
    });
    assert_eq!(agrees(&store).len(), 29);
}

#[test]
fn a_broken_last_line_the_checkpoint_proves_durable_is_refused_as_inspect_refuses_it() {
    let (_d, store) = store(Durability::Sync);
    let path = log(&store, 30, 10);
    edit_line(&path, 31, flip);
    let err = Session::inspect(&store, "s").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("checkpoint"), "{err}");
    for result in [
        Session::tail(&store, "s", 1, None),
        Session::read(&store, "s", 29),
    ] {
        let e = result.unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::Corrupt, err.to_string())
        );
    }
    // A checkpoint not bound to the log is refused by reads as by inspect.
    fs::write(&path, v1(&bytes(&path))).unwrap();
    let err = Session::inspect(&store, "s").unwrap_err();
    let e = Session::tail(&store, "s", 1, None).unwrap_err();
    assert_eq!(
        (e.kind(), e.to_string()),
        (ErrorKind::Corrupt, err.to_string())
    );
}

#[test]
fn a_damaged_line_among_those_returned_is_refused_as_inspect_refuses_it() {
    let (_d, store) = store(Durability::Sync);
    let path = log(&store, 30, 10);
    // Seq 25 is line 27; line 28 was written after it was durable, which proves it.
    edit_line(&path, 27, flip);
    let err = Session::inspect(&store, "s").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    for result in [
        Session::tail(&store, "s", 5, None),
        Session::tail(&store, "s", 2, Some(&["host/a"])),
        Session::read(&store, "s", 25),
        Session::read(&store, "s", 0),
    ] {
        let e = result.unwrap_err();
        assert_eq!(e.to_string(), err.to_string());
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert_eq!(
            (e.line(), e.seq(), e.session()),
            (Some(27), Some(25), Some("s"))
        );
        assert_eq!(e.path(), Some(path.as_path()));
    }
    // The lines after it read, as they do not reach it.
    let (_, tail) = Session::tail(&store, "s", 4, None).unwrap();
    assert_eq!(
        tail.iter().map(Event::seq).collect::<Vec<_>>(),
        [26, 27, 28, 29]
    );
    assert_eq!(Session::read(&store, "s", 26).unwrap().1.len(), 4);
}

#[test]
fn a_version_1_log_reads_from_the_end_and_a_bad_line_in_reach_is_corrupt() {
    let (_d, store) = store(Durability::Sync);
    let path = log(&store, 40, 5);
    // As a version 1 log: no checkpoint (one of the version 2 bytes would not bind).
    fs::remove_file(store.path("s").unwrap().with_extension("checkpoint")).unwrap();
    fs::write(&path, v1(&bytes(&path))).unwrap();
    assert_eq!(Session::inspect(&store, "s").unwrap().0.version, 1);
    assert_eq!(agrees(&store).len(), 40);
    // A torn tail is ignored.
    let mut b = bytes(&path);
    b.extend_from_slice(br#"{"type":"ho"#);
    fs::write(&path, &b).unwrap();
    assert_eq!(agrees(&store).len(), 40);
    // A line that is no event (seq 36) is corrupt, in reach; out of reach it is not
    // read (the last two events are checked from the line of seq 37).
    edit_line(&path, 38, |l| l.truncate(l.len() - 1));
    let err = Session::inspect(&store, "s").unwrap_err();
    let e = Session::tail(&store, "s", 10, None).unwrap_err();
    assert_eq!(
        (e.kind(), e.to_string()),
        (ErrorKind::Corrupt, err.to_string())
    );
    assert_eq!(e.line(), Some(38));
    assert_eq!(Session::tail(&store, "s", 2, None).unwrap().1.len(), 2);
}

#[test]
fn lines_longer_than_the_block_read_whole() {
    let (_d, store) = store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for i in 0..12u64 {
        // Lines of 1 byte to 300 KiB, several longer than the 64 KiB block.
        let pad = "x".repeat(if i % 4 == 1 {
            300_000
        } else {
            i as usize * 7000
        });
        s.append(
            "host/a",
            &format!(r#"{{"i":{i},"pad":"{pad}"}}"#),
            Envelope::default(),
        )
        .unwrap();
    }
    s.close().unwrap();
    let all = agrees(&store);
    assert_eq!(all.len(), 12);
    let (_, last) = Session::tail(&store, "s", 3, None).unwrap();
    assert_eq!(last.iter().map(Event::seq).collect::<Vec<_>>(), [9, 10, 11]);
}

#[test]
fn a_log_written_meanwhile_reads_as_a_prefix_of_what_it_becomes() {
    for durability in [Durability::Sync, Durability::Batched, Durability::None] {
        let (_d, store) = store(durability);
        let store = Arc::new(store);
        let s = Session::create(&*store, "s", SessionMeta::default()).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (store, done) = (store.clone(), done.clone());
            thread::spawn(move || {
                let mut seen = Vec::new();
                // At least once, however late this thread starts.
                loop {
                    let stop = done.load(Ordering::Acquire);
                    let (_, tail) = Session::tail(&*store, "s", 4, None).unwrap();
                    let n = tail.last().map_or(0, |e| e.seq() + 1);
                    let (_, read) = Session::read(&*store, "s", n.saturating_sub(3)).unwrap();
                    seen.push((tail, read));
                    if stop {
                        break seen;
                    }
                }
            })
        };
        for i in 0..300u64 {
            s.append("host/a", &format!(r#"{{"i":{i}}}"#), Envelope::default())
                .unwrap();
        }
        s.close().unwrap();
        done.store(true, Ordering::Release);
        let seen = reader.join().unwrap();
        let (_, all) = Session::inspect(&*store, "s").unwrap();
        assert!(!seen.is_empty());
        for (tail, read) in seen {
            // Each is a contiguous run of the final log, ending where the log then ended.
            for run in [&tail, &read] {
                if let Some(first) = run.first() {
                    let from = first.seq() as usize;
                    assert_eq!(
                        json(run),
                        json(&all[from..from + run.len()]),
                        "{durability}"
                    );
                }
            }
            let end = tail.last().map_or(0, |e| e.seq() + 1);
            assert!(tail.len() == 4 || end == tail.len() as u64, "{durability}");
            assert!(
                read.last().is_none_or(|e| e.seq() + 1 >= end),
                "{durability}"
            );
        }
    }
}

#[test]
fn a_log_with_only_its_header_or_no_complete_header() {
    let (_d, store) = store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.close().unwrap();
    let (header, all) = Session::inspect(&store, "s").unwrap();
    assert!(all.is_empty());
    assert_eq!(
        Session::tail(&store, "s", 5, None).unwrap(),
        (header.clone(), vec![])
    );
    assert_eq!(Session::read(&store, "s", 0).unwrap(), (header, vec![]));
    let path = store.path("s").unwrap();
    let b = bytes(&path);
    fs::write(&path, &b[..b.len() - 1]).unwrap();
    let err = Session::inspect(&store, "s").unwrap_err();
    let e = Session::tail(&store, "s", 5, None).unwrap_err();
    assert_eq!((e.kind(), e.to_string()), (err.kind(), err.to_string()));
    assert_eq!(e.session(), Some("s"));
    let e = Session::read(&store, "s", 0).unwrap_err();
    assert_eq!(e.to_string(), err.to_string());
}

#[test]
fn damage_after_the_last_fsync_reads_as_torn_as_inspect_reads_it() {
    // `none` mode, never flushed: every line vouches only for the created file, so a
    // broken line anywhere after it is the start of a torn tail, however many intact
    // lines follow it (a power cut can persist later blocks and lose earlier ones).
    let (_d, store) = store(Durability::None);
    let path = log(&store, 30, 10);
    // Killed before its close: no checkpoint vouches for the lines either.
    fs::remove_file(store.path("s").unwrap().with_extension("checkpoint")).unwrap();
    edit_line(&path, 22, flip);
    let all = agrees(&store);
    assert_eq!(all.len(), 20);
    let (_, tail) = Session::tail(&store, "s", 3, None).unwrap();
    assert_eq!(
        tail.iter().map(Event::seq).collect::<Vec<_>>(),
        [17, 18, 19]
    );
    assert!(Session::read(&store, "s", 25).unwrap().1.is_empty());
}

#[test]
fn random_damage_never_makes_a_read_disagree_with_inspect() {
    // Cuts, flipped bytes, NUL runs and garbage, anywhere, on logs written in every
    // durability mode: wherever `inspect` reads the file, every read and tail returns
    // its slice; wherever it refuses it, a read either refuses it as corrupt too or
    // returns what lies after the damage (it reads only what it returns).
    let mut rng = Rng(4141);
    let mut agreed = 0;
    for case in 0..150u64 {
        let durability =
            [Durability::Sync, Durability::Batched, Durability::None][case as usize % 3];
        let (_d, store) = store(durability);
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        for i in 0..rng.below(40) + 5 {
            s.append(
                "host/a",
                &format!(r#"{{"i":{i},"pad":"xxxxxxxx"}}"#),
                Envelope::default(),
            )
            .unwrap();
            if rng.below(10) == 0 {
                s.flush().unwrap();
            }
        }
        s.close().unwrap();
        let path = store.path("s").unwrap();
        if case % 4 != 0 {
            // Most logs as a crash leaves them, before the close's checkpoint; the rest
            // with it, which proves damage before the offset it says was durable.
            fs::remove_file(path.with_extension("checkpoint")).unwrap();
        }
        let mut b = bytes(&path);
        let header_end = line_starts(&b)[1];
        for _ in 0..rng.below(3) + 1 {
            let at = header_end + rng.below((b.len() - header_end) as u64) as usize;
            match rng.below(4) {
                0 => b.truncate(at.max(header_end)),
                1 => {
                    let at = at.min(b.len() - 1);
                    b[at] ^= 1 << rng.below(8);
                }
                2 => {
                    let end = (at + rng.below(200) as usize).min(b.len());
                    b[at.min(end)..end].fill(0);
                }
                _ => b.extend_from_slice(b"{\"type\":\"host/a\",\"seq\":9"),
            }
        }
        fs::write(&path, &b).unwrap();
        let inspected = Session::inspect(&store, "s");
        let n = inspected.as_ref().map_or(0, |(_, all)| all.len());
        for limit in [1, 3, 10, 100] {
            let tail = Session::tail(&store, "s", limit, None);
            match (&inspected, tail) {
                (Ok((_, all)), Ok((_, tail))) => {
                    assert_eq!(json(&tail), json(&all[n - limit.min(n)..]), "case {case}");
                    agreed += 1;
                }
                (Ok(_), Err(e)) => panic!("case {case}: inspect reads it, tail({limit}): {e}"),
                // With damage in two places, the read names the one in its reach.
                (Err(i), Err(e)) => assert_eq!(e.kind(), i.kind(), "case {case}: {e}"),
                (Err(_), Ok(_)) => {}
            }
        }
        for since in [0, n as u64 / 2, n as u64] {
            if let (Ok((_, all)), read) = (&inspected, Session::read(&store, "s", since)) {
                let (_, read) = read.unwrap_or_else(|e| panic!("case {case}: read({since}): {e}"));
                assert_eq!(json(&read), json(&all[since as usize..]), "case {case}");
            }
        }
    }
    assert!(agreed > 200, "{agreed}");
}

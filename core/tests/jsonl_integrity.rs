//! The checksums of JSONL format version 2 (core/FORMAT.md#checksums-version-2,
//! core/FORMAT.md#torn-or-corrupt-version-2): every change to a stored log's lines is reported
//! by `verify` and never read back as good by `open`; the crash states of an unsynced
//! write that reached the disk out of order all open by themselves, keeping every
//! acknowledged event; version 1 logs upgrade.

mod jsonl_common;

use std::fs;
use std::path::Path;

use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store};
use inboxlog::{Decision, Envelope, ErrorKind, Event, Header, Session, SessionMeta, StepOutcome};
use jsonl_common::*;

/// `open` of "s" through the store: the events it accepted and the torn bytes it cut.
fn open_events(store: &JsonlStore) -> inboxlog::Result<(Vec<String>, u64)> {
    let mut seen = Vec::new();
    let mut replay = inboxlog::store::events(|_, e: &Event| {
        seen.push(e.to_json());
        Ok(())
    });
    let opened = store.open("s", &OpenOptions::default(), &mut replay)?;
    Ok((seen, opened.torn_bytes))
}

/// A log of 20 short turns written in `sync` mode, one call per mutation.
fn twenty_turns(store: &JsonlStore) {
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    for t in 0..20 {
        s.inbox()
            .append(inboxlog::Target::NextTurn, msg(&format!("m{t}")))
            .unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.append(
            "assistant/chunk",
            &format!(r#"{{"text":"amount is {} dollars"}}"#, 10_000 + t),
            Envelope::default(),
        )
        .unwrap();
        s.end_step(StepOutcome::Completed).unwrap();
        s.close_turn().unwrap();
    }
}

/// The `synced` value of a version 2 event line (0 for the header).
fn synced_of(line: &[u8]) -> u64 {
    let text = std::str::from_utf8(line).unwrap();
    text.rsplit_once(r#","synced":"#).map_or(0, |(_, rest)| {
        rest.split(',').next().unwrap().parse().unwrap()
    })
}

/// Lines `ls` joined with their `\n`s.
fn join(ls: &[Vec<u8>]) -> Vec<u8> {
    ls.iter()
        .flat_map(|l| l.iter().copied().chain([b'\n']))
        .collect()
}

/// One random change to the lines `ls` of a log (round `round` picks its kind): the
/// changed lines and what was done, or `None` when the draw changes nothing.
fn mutate(ls: &[Vec<u8>], rng: &mut Rng, round: u32) -> Option<(Vec<Vec<u8>>, String)> {
    let mut ls2 = ls.to_vec();
    let what = match round % 6 {
        // One byte changed, anywhere in a line (the header included).
        0 | 1 => {
            let k = rng.below(ls.len() as u64) as usize;
            let i = rng.below(ls[k].len() as u64) as usize;
            let old = ls2[k][i];
            let new = if round.is_multiple_of(6) {
                old ^ (1 << rng.below(8))
            } else {
                // A digit for a digit, a letter for a letter where it is one.
                match old {
                    b'0'..=b'9' => b'0' + ((old - b'0' + 1 + rng.below(9) as u8) % 10),
                    b'a'..=b'z' => b'a' + ((old - b'a' + 1 + rng.below(25) as u8) % 26),
                    _ => old.wrapping_add(1 + rng.below(254) as u8),
                }
            };
            ls2[k][i] = new;
            format!("line {} byte {i}: {old:#x} -> {new:#x}", k + 1)
        }
        // A line dropped (not the last: a log cut at a line end is a shorter log).
        2 => {
            let k = 1 + rng.below(ls.len() as u64 - 2) as usize;
            ls2.remove(k);
            format!("line {} dropped", k + 1)
        }
        // A line duplicated.
        3 => {
            let k = 1 + rng.below(ls.len() as u64 - 1) as usize;
            ls2.insert(k + 1, ls[k].clone());
            format!("line {} duplicated", k + 1)
        }
        // Two lines swapped.
        _ => {
            let a = 1 + rng.below(ls.len() as u64 - 1) as usize;
            let b = 1 + rng.below(ls.len() as u64 - 1) as usize;
            if a == b {
                return None;
            }
            ls2.swap(a, b);
            format!("lines {} and {} swapped", a + 1, b + 1)
        }
    };
    Some((ls2, what))
}

#[test]
fn every_change_to_a_version_2_log_is_reported_and_never_read_as_good() {
    let (_dir, store) = store(Durability::Sync);
    twenty_turns(&store);
    let path = store.path("s").unwrap();
    let good = bytes(&path);
    let ls: Vec<Vec<u8>> = lines(&good).into_iter().map(<[u8]>::to_vec).collect();
    let starts = line_starts(&good);
    let (events, torn) = open_events(&store).unwrap();
    assert_eq!((events.len(), torn), (ls.len() - 1, 0));
    assert_eq!(bytes(&path), good);
    // The events read back are the version 1 objects: no checksum in them.
    for (e, line) in events.iter().zip(&ls[1..]) {
        assert!(!e.contains("crc32c") && !e.contains("synced"), "{e}");
        assert_eq!(e.as_bytes(), strip(line));
    }

    let mut rng = Rng(0x5eed_0040);
    let (mut refused, mut cut) = (0, 0);
    for round in 0..600 {
        let Some((ls2, what)) = mutate(&ls, &mut rng, round) else {
            continue;
        };
        let bad = join(&ls2);
        assert_ne!(bad, good);
        // The first line that differs, and whether a later line proves it was durable:
        // one written after its bytes were (`synced` past it), two lines further on so
        // that a broken checksum on the line between cannot hide it.
        let first = (0..ls.len()).find(|&k| ls2.get(k) != Some(&ls[k])).unwrap();
        let vouched = ls[(first + 3).min(ls.len())..]
            .iter()
            .any(|l| synced_of(l) > starts[first] as u64)
            || round % 6 == 3 && first + 1 < ls2.len();
        fs::write(&path, &bad).unwrap();
        let verified = store.verify("s", &mut inboxlog::store::events(|_, _| Ok(())));
        let opened = open_events(&store);
        match (&verified, &opened) {
            (Err(v), Err(o)) => {
                assert_eq!(v.to_string(), o.to_string(), "{what}");
                assert_eq!(bytes(&path), bad, "{what}: a refused open changed the file");
                if first > 0 {
                    assert_eq!(o.kind(), ErrorKind::Corrupt, "{what}: {o}");
                    assert_eq!(o.line(), Some(first as u64 + 1), "{what}: {o}");
                }
                refused += 1;
            }
            (Ok(v), Ok((seen, torn))) => {
                assert!(!vouched, "{what}: read as a torn tail");
                assert!(first > 0, "{what}: a changed header accepted");
                // Reported as bytes to drop, cut, and nothing changed read back.
                assert_eq!(v.torn_bytes, *torn, "{what}");
                assert!(*torn >= (bad.len() - starts[first]) as u64, "{what}");
                assert!(seen.len() < first, "{what}");
                assert_eq!(seen[..], events[..seen.len()], "{what}");
                assert_eq!(bytes(&path).len() as u64, bad.len() as u64 - torn);
                cut += 1;
            }
            _ => panic!("{what}: verify {verified:?} but open {opened:?}"),
        }
    }
    assert!(refused > 400 && cut > 0, "refused {refused}, cut {cut}");
}

/// The same changes to a log closed cleanly, whose checkpoint says every byte of it was
/// durable when it was written (core/FORMAT.md#checkpoints): a reader from seq 0
/// (`verify`, an open that does not resume) refuses every one, the last line's and a
/// cut at a line end included, as corruption; the open of a session, which reads only
/// what follows the checkpoint, refuses those it reads (the header, the checksum the
/// checkpoint is bound to) and never reads a changed line back.
#[test]
fn on_a_cleanly_closed_log_every_change_is_corruption() {
    let (_dir, store) = store(Durability::Sync);
    twenty_turns(&store);
    Session::open(&store, "s").unwrap().close().unwrap();
    let path = store.path("s").unwrap();
    let good = bytes(&path);
    let ls: Vec<Vec<u8>> = lines(&good).into_iter().map(<[u8]>::to_vec).collect();
    let last_seq = ls.len() as u64 - 2;
    let mut rng = Rng(0x5eed_0041);
    let mut resumed = 0;
    for round in 0..400u32 {
        let Some((mut ls2, mut what)) = mutate(&ls, &mut rng, round) else {
            continue;
        };
        if round % 40 == 7 {
            // Whole lines removed from the end: a shorter log only the checkpoint tells.
            ls2 = ls[..ls.len() - 1 - rng.below(3) as usize].to_vec();
            what = format!("cut to {} lines", ls2.len());
        }
        let bad = join(&ls2);
        fs::write(&path, &bad).unwrap();
        let verified = store.verify("s", &mut inboxlog::store::events(|_, _| Ok(())));
        if bad.starts_with(&good) {
            // The last line duplicated: bytes after the checkpoint, as a crash after the
            // next writer's first write leaves them.
            let torn = verified.unwrap().torn_bytes;
            assert_eq!(torn, (bad.len() - good.len()) as u64, "{what}");
            continue;
        }
        let opened = open_events(&store);
        let (Err(v), Err(o)) = (&verified, &opened) else {
            panic!("{what}: verify {verified:?} but open {opened:?}");
        };
        assert_eq!(v.to_string(), o.to_string(), "{what}");
        assert_eq!(bytes(&path), bad, "{what}: a refused open changed the file");
        if ls2[0] == ls[0] {
            assert_eq!(o.kind(), ErrorKind::Corrupt, "{what}: {o}");
        }
        match Session::open(&store, "s") {
            Ok(s) => {
                // From the checkpoint, which covers every event: nothing changed is read.
                assert_eq!(s.last_seq().unwrap(), Some(last_seq), "{what}");
                assert_eq!(ls2[0], ls[0], "{what}: a changed header read");
                drop(s);
                assert_eq!(bytes(&path), bad, "{what}");
                resumed += 1;
            }
            Err(e) => {
                if ls2[0] == ls[0] {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
                }
                assert_eq!(bytes(&path), bad, "{what}: a refused open changed the file");
            }
        }
    }
    assert!(
        resumed > 0,
        "no change was left unread by an open from the checkpoint"
    );
    fs::write(&path, &good).unwrap();
    Session::verify(&store, "s").unwrap();
}

/// A version 2 log whose last `sync` call was in flight at a power cut: its bytes,
/// written after the last fdatasync, reach the disk in 4 KiB blocks in any order (ext4
/// `data=writeback`, a device without barriers), each block whole or never; the file's
/// length is the written one or ends with the last block that arrived. Every such state
/// opens by itself, keeping every acknowledged event, and cuts at the first block lost.
#[test]
fn unsynced_blocks_persisted_out_of_order_open_by_themselves() {
    const BLOCK: usize = 4096;
    let (_dir, store) = store(Durability::Sync);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[]).unwrap();
    let pad = "p".repeat(700);
    let event = |seq: u64| ev(seq, &format!(r#"{{"n":{seq},"pad":"{pad}"}}"#));
    for seq in 0..7 {
        w.append(&[event(seq)]).unwrap();
    }
    let path = store.path("s").unwrap();
    let acked = bytes(&path);
    let durable = acked.len();
    // The call in flight: 24 events, about 18 KiB after the last acknowledged byte.
    w.append(&(7..31).map(event).collect::<Vec<_>>()).unwrap();
    drop(w);
    let full = bytes(&path);
    let acked_events: Vec<String> = (0..7).map(|s| event(s).to_json()).collect();
    let first_block = durable / BLOCK;
    let blocks = full.len().div_ceil(BLOCK) - first_block;
    assert!((4..=6).contains(&blocks), "{blocks} blocks");

    let (mut states, mut v1_refused) = (0, 0);
    for arrived in 0u32..1 << blocks {
        for whole_length in [true, false] {
            let got = |b: usize| arrived & (1 << b) != 0;
            let mut state = full.clone();
            for b in 0..blocks {
                if !got(b) {
                    let from = ((first_block + b) * BLOCK).max(durable);
                    let to = ((first_block + b + 1) * BLOCK).min(full.len());
                    state[from..to].fill(0);
                }
            }
            if !whole_length {
                let last = (0..blocks).rev().find(|&b| got(b));
                let len = last.map_or(durable, |b| ((first_block + b + 1) * BLOCK).min(full.len()));
                state.truncate(len.max(durable));
            }
            states += 1;
            let what = format!("blocks {arrived:0blocks$b}, whole length {whole_length}");
            // Version 1 logs of the same bytes: refused when a lost block is followed by
            // a newline (the figure of issue #40).
            fs::write(&path, v1(&state)).unwrap();
            if store
                .verify("s", &mut inboxlog::store::events(|_, _| Ok(())))
                .is_err()
            {
                v1_refused += 1;
            }

            fs::write(&path, &state).unwrap();
            let verified = store
                .verify("s", &mut inboxlog::store::events(|_, _| Ok(())))
                .unwrap_or_else(|e| panic!("{what}: verify: {e}"));
            let (seen, torn) = open_events(&store).unwrap_or_else(|e| panic!("{what}: open: {e}"));
            assert_eq!(verified.torn_bytes, torn, "{what}");
            assert_eq!(
                seen[..7],
                acked_events[..],
                "{what}: acknowledged events lost"
            );
            let kept = bytes(&path);
            assert!(kept.len() >= durable, "{what}");
            assert_eq!(kept[..], full[..kept.len()], "{what}: kept bytes differ");
            // Every event before the first lost block, and nothing after it.
            let lost = (0..blocks)
                .find(|&b| !got(b))
                .map_or(state.len(), |b| ((first_block + b) * BLOCK).max(durable));
            let before = lines(&full[..lost.min(full.len())]).len() - 1;
            let complete = full[..lost.min(state.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                - 1;
            assert_eq!(seen.len(), complete.min(before), "{what}");
            // Opened again: nothing more to cut, a writer goes on.
            let (again, torn) = open_events(&store).unwrap();
            assert_eq!((again.len(), torn), (seen.len(), 0), "{what}");
        }
    }
    assert_eq!(states, 2 << blocks);
    assert!(
        v1_refused > 0,
        "the same states as version 1 logs: none refused?"
    );
    println!(
        "{states} out-of-order crash states: all open as version 2; {v1_refused} refused as version 1"
    );
}

/// The checked-in version 1 logs upgrade to version 2: the same header and events,
/// every line sealed; upgrading again changes nothing.
#[test]
fn version_1_fixtures_upgrade_once_and_read_back_the_same() {
    let (_dir, store) = store(Durability::Sync);
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonl");
    for name in ["v1-basic", "v1-fork"] {
        fs::copy(
            from.join(format!("{name}.jsonl")),
            store.path(name).unwrap(),
        )
        .unwrap();
        let (header, events) = store.inspect(name).unwrap();
        assert_eq!(header.version, 1);
        let upgraded = store.upgrade(name).unwrap();
        assert_eq!(
            (upgraded.from, upgraded.events),
            (1, events.len() as u64),
            "{name}"
        );
        let raw = bytes(&store.path(name).unwrap());
        assert!(lines(&raw).iter().all(|l| l.ends_with(b"\"}")), "{name}");
        let (h2, e2) = store.inspect(name).unwrap();
        assert_eq!(h2.version, 2);
        assert_eq!(Header { version: 1, ..h2 }, header, "{name}");
        assert_eq!(e2, events, "{name}");
        assert_eq!(
            v1(&raw),
            bytes(&from.join(format!("{name}.jsonl"))),
            "{name}"
        );
        // Twice: nothing to do, nothing written.
        let again = store.upgrade(name).unwrap();
        assert_eq!(again.from, 2, "{name}");
        assert_eq!(bytes(&store.path(name).unwrap()), raw, "{name}");
        store
            .verify(name, &mut inboxlog::store::events(|_, _| Ok(())))
            .unwrap();
    }
    // Still a working log: the fork opens, closes its interrupted turn, appends sealed.
    let s = Session::open(&store, "v1-fork").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(2));
    drop(s);
    let (_, events) = store.inspect("v1-fork").unwrap();
    assert_eq!(events.last().unwrap().ty(), "turn/end");
    assert_eq!(
        store
            .verify("v1-fork", &mut inboxlog::store::events(|_, _| Ok(())))
            .unwrap()
            .torn_bytes,
        0
    );
}

/// An upgrade is refused while a writer holds the log, and for a log that does not
/// read, changing nothing; a torn tail is left out and reported; a temporary file left
/// by a crashed upgrade is replaced.
#[test]
fn an_upgrade_is_refused_under_a_writer_and_for_a_corrupt_log() {
    let (_dir, store) = store(Durability::Sync);
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonl/v1-basic.jsonl");
    let path = store.path("v1-basic").unwrap();
    let original = bytes(&from);

    let mut corrupt = original.clone();
    let third = line_starts(&corrupt)[2];
    corrupt[third] = b'[';
    fs::write(&path, &corrupt).unwrap();
    assert_err(
        store.upgrade("v1-basic"),
        ErrorKind::Corrupt,
        &["line 3 (byte "],
    );
    assert_eq!(bytes(&path), corrupt);

    let mut torn = original.clone();
    torn.extend_from_slice(b"{\"type\":\"host/x\",\"se");
    fs::write(&path, &torn).unwrap();
    let s = Session::open(&store, "v1-basic").unwrap();
    assert_err(
        store.upgrade("v1-basic"),
        ErrorKind::Locked,
        &["cannot be upgraded"],
    );
    drop(s);
    // The open cut the tail; put it back to see the upgrade leave it out.
    fs::write(&path, &torn).unwrap();
    let stale = store.root().join(".v1-basic.jsonl.upgrade");
    fs::write(&stale, b"half of an earlier upgrade").unwrap();
    let up = store.upgrade("v1-basic").unwrap();
    assert_eq!((up.from, up.events, up.torn_bytes), (1, 16, 20));
    assert!(!stale.exists());
    assert_eq!(v1(&bytes(&path)), original);
    assert_eq!(store.list().unwrap().len(), 1);
    assert_err(store.upgrade("absent"), ErrorKind::NotFound, &["absent"]);
}

/// A follower checks the chain as it reads: a broken last line is waited before (a torn
/// tail the next owner cuts), a broken line a later one proves durable ends the follow.
#[test]
fn a_follower_waits_before_a_torn_tail_and_stops_at_corruption() {
    let (_dir, store) = store(Durability::Sync);
    let header = Header::new("s", 1, SessionMeta::default()).unwrap();
    let mut w = store.create(&header, &[]).unwrap();
    for seq in 0..3 {
        w.append(&[ev(seq, "{}")]).unwrap();
    }
    drop(w);
    let path = store.path("s").unwrap();
    let good = bytes(&path);
    let no_wait = std::time::Duration::ZERO;

    let mut torn = good.clone();
    let last = *line_starts(&good).last().unwrap();
    torn[last + 3] ^= 0x01;
    fs::write(&path, &torn).unwrap();
    let mut feed = store.follow("s").unwrap();
    let seen: Vec<u64> = feed
        .poll(0, no_wait)
        .unwrap()
        .iter()
        .map(Event::seq)
        .collect();
    assert_eq!(seen, [0, 1]);
    assert!(feed.poll(2, no_wait).unwrap().is_empty());

    let mut corrupt = good.clone();
    corrupt[line_starts(&good)[2] + 3] ^= 0x01;
    fs::write(&path, &corrupt).unwrap();
    let mut feed = store.follow("s").unwrap();
    let err = feed.poll(0, no_wait).unwrap_err();
    assert_eq!(
        (err.kind(), err.line()),
        (ErrorKind::Corrupt, Some(3)),
        "{err}"
    );
    assert!(
        err.to_string().contains("not a torn tail left by a crash"),
        "{err}"
    );
}

//! Reading a stored log back: the unit tests of `recovery.rs`, a file of their own for
//! their size.

use super::*;

const HEADER: &str = r#"{"format":"inboxlog","version":1,"id":"s","createdAt":0}"#;

fn ev(seq: u64) -> String {
    format!(r#"{{"type":"x/y","seq":{seq},"time":5,"data":{{"n":"é\"\\"}}}}"#)
}

fn log(events: &[String], tail: &str) -> Vec<u8> {
    let mut s = format!("{HEADER}\n");
    for e in events {
        s.push_str(e);
        s.push('\n');
    }
    s.push_str(tail);
    s.into_bytes()
}

/// Replays `bytes` both ways (one thread, two threads) and checks they agree.
fn run(bytes: &[u8]) -> Result<(Replayed, Vec<u64>)> {
    let once = |pipelined: bool| {
        let mut seen = Vec::new();
        let path = Path::new("/r/s.jsonl");
        let mut visit = |_: &Header, e: &Event| {
            seen.push(e.seq());
            Ok(())
        };
        let r = if pipelined {
            replay_pipelined(bytes, path, "s", 1 << 20, &mut visit)
        } else {
            replay(bytes, path, "s", 1 << 20, &mut visit)
        };
        r.map(|r| (r, seen))
    };
    let (one, two) = (once(false), once(true));
    match (&one, &two) {
        (Ok((a, sa)), Ok((b, sb))) => {
            assert_eq!(
                (&a.header, a.next_seq, a.end, a.torn, sa),
                (&b.header, b.next_seq, b.end, b.torn, sb)
            );
        }
        (Err(a), Err(b)) => assert_eq!((a.kind(), a.to_string()), (b.kind(), b.to_string())),
        _ => panic!("one thread and two disagree: {one:?} / {two:?}"),
    }
    one
}

#[test]
fn a_clean_log_replays_in_order() {
    let bytes = log(&[ev(0), ev(1), ev(2)], "");
    let (r, seen) = run(&bytes).unwrap();
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!((r.next_seq, r.end, r.torn), (3, bytes.len() as u64, 0));
    assert_eq!(r.header.id, "s");
    let mark = Mark {
        offset: HEADER.len() as u64 + 1,
        chain: 0,
    };
    assert_eq!(r.index.seek(0), Some((0, mark)));
}

#[test]
fn every_cut_of_the_last_record_is_a_torn_tail() {
    let full = log(&[ev(0), ev(1)], "");
    let keep = log(&[ev(0)], "");
    for cut in keep.len()..full.len() {
        let (r, seen) = run(&full[..cut]).unwrap();
        assert_eq!(seen, [0], "cut {cut}");
        assert_eq!(
            (r.end, r.torn),
            (keep.len() as u64, (cut - keep.len()) as u64),
            "cut {cut}"
        );
    }
    let (r, _) = run(&log(&[ev(0)], "\0\0\0\0")).unwrap();
    assert_eq!((r.next_seq, r.torn), (1, 4));
}

#[test]
fn a_bad_complete_line_is_named() {
    let bytes = log(&[ev(0), "\0\0\0".into(), ev(2)], "");
    let err = run(&bytes).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    let offset = HEADER.len() + 1 + ev(0).len() + 1;
    assert!(
        err.to_string().starts_with(&format!(
            "corrupt log /r/s.jsonl line 3 (byte {offset}, seq 1): invalid event"
        )),
        "{err}"
    );
    assert_eq!(
        (err.path(), err.line(), err.offset(), err.seq()),
        (
            Some(Path::new("/r/s.jsonl")),
            Some(3),
            Some(offset as u64),
            Some(1)
        )
    );

    let err = run(&log(&[ev(0), ev(2)], "")).unwrap_err();
    assert!(err.to_string().contains("line 3 (byte "), "{err}");
    assert!(
        err.to_string()
            .ends_with("seq 2): seq 2 does not continue the log (expected seq 1)"),
        "{err}"
    );

    let err = run(&log(&[ev(0), ev(0)], "")).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("seq 0): seq 0 does not continue the log (expected seq 1)"),
        "{err}"
    );

    let mut bad_utf8 = log(&[ev(0)], "");
    bad_utf8.extend_from_slice(b"\xff\n");
    let err = run(&bad_utf8).unwrap_err();
    assert!(
        err.to_string().contains("seq 1): record is not UTF-8"),
        "{err}"
    );
}

#[test]
fn a_visitor_error_is_corruption_at_its_event() {
    let bytes = log(&[ev(0), ev(1)], "");
    let err = replay(
        &bytes[..],
        Path::new("/r/s.jsonl"),
        "s",
        1 << 20,
        &mut |_, e| {
            if e.seq() == 1 {
                Err(crate::error::invalid("no thanks"))
            } else {
                Ok(())
            }
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().ends_with(", seq 1): no thanks"), "{err}");
    assert_eq!((err.line(), err.seq()), (Some(3), Some(1)));
}

#[test]
fn the_header_is_checked_first() {
    let err = run(b"").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(
        err.to_string()
            .contains("line 1 (byte 0, header): no complete header line (0 bytes"),
        "{err}"
    );
    let err = run(&HEADER.as_bytes()[..20]).unwrap_err();
    assert!(
        err.to_string()
            .contains("(20 bytes, no newline): a create that never finished"),
        "{err}"
    );

    let newer =
        b"{\"format\":\"inboxlog\",\"version\":9,\"id\":\"s\",\"createdAt\":0}\n\0garbage\n";
    let err = run(newer).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FormatUnsupported);
    assert!(
        err.to_string()
            .starts_with("/r/s.jsonl line 1: log format version 9 was written by a newer inboxlog"),
        "{err}"
    );
    assert_eq!(
        (err.path(), err.line(), err.offset(), err.seq()),
        (Some(Path::new("/r/s.jsonl")), Some(1), Some(0), None)
    );

    let other = run(b"{\"type\":\"session\",\"id\":\"s\"}\n").unwrap_err();
    assert_eq!(other.kind(), ErrorKind::FormatUnsupported);
    assert!(other.to_string().contains("not an inboxlog log"), "{other}");

    let renamed = HEADER.replace("\"s\"", "\"t\"") + "\n";
    let err = run(renamed.as_bytes()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(
        err.to_string()
            .ends_with("header names session \"t\", but the file is named for \"s\""),
        "{err}"
    );

    let extra = HEADER.replace("}", ",\"extra\":1}") + "\n";
    let err = run(extra.as_bytes()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(
        err.to_string().contains("(byte 0, header): invalid header"),
        "{err}"
    );
}

#[test]
fn over_long_records_are_refused_where_complete_and_torn_otherwise() {
    let big = format!(
        r#"{{"type":"x/y","seq":0,"time":5,"data":"{}"}}"#,
        "a".repeat(200)
    );
    let bytes = log(std::slice::from_ref(&big), "");
    let err = replay(
        &bytes[..],
        Path::new("/r/s.jsonl"),
        "s",
        big.len() - 1,
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    let msg = format!(
        "seq 0): record of {} bytes is larger than the limit of {} bytes",
        big.len(),
        big.len() - 1
    );
    assert!(err.to_string().ends_with(&msg), "{err}");
    assert!(
        replay(
            &bytes[..],
            Path::new("/r/s.jsonl"),
            "s",
            big.len(),
            &mut |_, _| Ok(())
        )
        .is_ok()
    );
    let torn = log(&[], &"x".repeat(10_000));
    let r = replay(&torn[..], Path::new("/r/s.jsonl"), "s", 100, &mut |_, _| {
        Ok(())
    })
    .unwrap();
    assert_eq!(r.torn, 10_000);
}

#[test]
fn read_from_skips_to_since() {
    let bytes = log(&[ev(0), ev(1), ev(2), ev(3)], "");
    let start = HEADER.len() as u64 + 1;
    let events = read_from(
        &bytes[start as usize..],
        Path::new("/r/s.jsonl"),
        1 << 20,
        (
            0,
            Mark {
                offset: start,
                chain: 0,
            },
            false,
        ),
        2,
    )
    .unwrap();
    assert_eq!(events.iter().map(Event::seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(events[0].to_json(), ev(2));
}

const HEADER2: &str = r#"{"format":"inboxlog","version":2,"id":"s","createdAt":0}"#;

/// A version 2 log of `events`, each line's `synced` given by `synced(i, offset)`.
fn log2(events: &[String], synced: impl Fn(usize, u64) -> u64) -> Vec<u8> {
    let mut s = HEADER2.to_owned();
    let mut chain = chain::seal(&mut s, 0, chain::START, None);
    s.push('\n');
    for (i, e) in events.iter().enumerate() {
        let start = s.len();
        s.push_str(e);
        chain = chain::seal(&mut s, start, chain, Some(synced(i, start as u64)));
        s.push('\n');
    }
    s.into_bytes()
}

/// Byte offsets of the lines of `bytes`.
fn starts(bytes: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
    v.pop();
    v
}

#[test]
fn a_version_2_log_replays_without_its_checksums() {
    let events = [ev(0), ev(1), ev(2)];
    let bytes = log2(&events, |_, at| at);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.lines().all(|l| l.contains(",\"crc32c\":\"")), "{text}");
    let (r, seen) = run(&bytes).unwrap();
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(
        (r.header.version, r.end, r.torn),
        (2, bytes.len() as u64, 0)
    );
    let all = read_from(
        &bytes[..],
        Path::new("/r/s.jsonl"),
        1 << 20,
        (0, r.index.seek(0).unwrap().1, true),
        0,
    );
    assert!(all.is_err(), "read_from starts at the mark, not the header");
    let mark = r.index.seek(0).unwrap().1;
    let events2 = read_from(
        &bytes[mark.offset as usize..],
        Path::new("/r/s.jsonl"),
        1 << 20,
        (0, mark, true),
        1,
    )
    .unwrap();
    assert_eq!(
        events2[0].to_json(),
        ev(1),
        "the event is the version 1 text"
    );
}

#[test]
fn read_from_checks_the_chain_before_and_after_since() {
    let bytes = log2(&[ev(0), ev(1), ev(2), ev(3)], |_, at| at);
    let (r, _) = run(&bytes).unwrap();
    let (first, mark) = r.index.seek(0).unwrap();
    let read = |b: &[u8], since| {
        read_from(
            &b[mark.offset as usize..],
            Path::new("/r/s.jsonl"),
            1 << 20,
            (first, mark, true),
            since,
        )
    };
    assert_eq!(read(&bytes, 2).unwrap().len(), 2);
    let at = starts(&bytes);
    for (line, since) in [(2, 3), (4, 1)] {
        let mut bad = bytes.clone();
        bad[at[line] + 12] ^= 0x02;
        let err = read(&bad, since).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains("checksum"), "{err}");
        assert_eq!(err.line(), Some(line as u64 + 1), "{err}");
    }
}

#[test]
fn a_changed_byte_before_a_vouching_line_is_corruption_and_at_the_end_a_torn_tail() {
    let events = [ev(0), ev(1), ev(2)];
    let bytes = log2(&events, |_, at| at);
    let at = starts(&bytes);
    for i in 0..bytes.len() {
        if bytes[i] == b'\n' {
            continue;
        }
        let mut bad = bytes.clone();
        bad[i] ^= 0x04;
        let line = at.iter().rposition(|&s| s <= i).unwrap();
        match run(&bad) {
            Ok((r, seen)) => {
                // Only a change to the last line may read as a torn tail, cut whole.
                assert_eq!(line, 3, "byte {i} accepted");
                assert_eq!(seen, [0, 1], "byte {i}");
                assert_eq!(
                    (r.end, r.torn),
                    (at[3] as u64, (bytes.len() - at[3]) as u64)
                );
            }
            Err(e) if line == 0 => {
                assert!(e.line() == Some(1), "byte {i}: {e}");
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corrupt, "byte {i}: {e}");
                // The damaged line, or (a changed checksum) the one after it.
                let named = e.line().unwrap() as usize;
                assert!(named == line + 1 || named == line + 2, "byte {i}: {e}");
            }
        }
    }
}

#[test]
fn unsynced_lines_after_damage_are_a_torn_tail_and_a_duplicate_is_not() {
    let events = [ev(0), ev(1), ev(2), ev(3)];
    // Lines 1 to 3 written after the log was durable to the end of seq 0.
    let bytes = log2(&events, |i, at| if i == 0 { at } else { 200 });
    let at = starts(&bytes);
    let synced_end = at[2] as u64;
    let bytes = log2(&events, |i, at| if i == 0 { at } else { synced_end });
    let mut zeroed = bytes.clone();
    zeroed[at[2] + 3..at[3] + 5].fill(0); // seq 1 and the start of seq 2 lost
    let (r, seen) = run(&zeroed).unwrap();
    assert_eq!(seen, [0]);
    assert_eq!((r.end, r.torn), (synced_end, (bytes.len() - at[2]) as u64));

    // The same damage where seq 3 says seq 1 was durable: corruption.
    let bytes = log2(&events, |_, at| at);
    let mut zeroed = bytes.clone();
    zeroed[at[2] + 3..at[2] + 9].fill(b'x');
    let err = run(&zeroed).unwrap_err();
    assert_eq!(
        (err.kind(), err.line()),
        (ErrorKind::Corrupt, Some(3)),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("is not a torn tail left by a crash"),
        "{err}"
    );

    // A line repeated: the copy breaks the chain, the next line holds its seq.
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let dup = [lines[0], lines[1], lines[2], lines[2], lines[3], lines[4]].concat();
    let flat = log2(&events, |_, _| 0);
    let flat_lines: Vec<&[u8]> = flat.split_inclusive(|&b| b == b'\n').collect();
    let flat_dup = [flat_lines[0], flat_lines[1], flat_lines[1], flat_lines[2]].concat();
    for d in [dup, flat_dup] {
        let err = run(&d).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains("checksum"), "{err}");
    }
}

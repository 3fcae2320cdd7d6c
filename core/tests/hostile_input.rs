//! No input makes the library panic, and a refused open changes nothing on disk.
//!
//! Property tests over arbitrary text for every parser that takes outside input, and
//! over mutated log files (bytes flipped, cut, duplicated, NUL runs spliced in) for the
//! JSONL store: opening either succeeds with a log that passes its own checks, or is
//! refused and leaves the file byte-identical; and the read-only `verify` refuses
//! exactly the logs `open` refuses, with the same error at the same location. The
//! PostgreSQL store gets hostile host input, and rows damaged by hand (fewer cases:
//! each is a round trip to a real server, in a schema of its own).

mod pg_common;

use inboxlog::FromJson as _;
use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    CancelCause, Decision, Envelope, ErrorKind, Event, Header, Message, Session, SessionMeta,
    SpliceRecord, StepOutcome, Target, TurnError,
};
use proptest::prelude::*;

/// JSON-ish text: mostly structural characters, so parsers get deep into their work.
fn jsonish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"id\"".to_owned()),
        Just("\"type\"".to_owned()),
        Just("\"seq\"".to_owned()),
        Just("\"data\"".to_owned()),
        Just("\"target\"".to_owned()),
        Just("\"next-turn\"".to_owned()),
        Just("\"turn\"".to_owned()),
        Just("-0".to_owned()),
        Just("1e400".to_owned()),
        Just("9007199254740993".to_owned()),
        Just("\\u0000".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        Just("é".to_owned()),
        "[ -~]{0,3}",
        (0u64..20).prop_map(|n| n.to_string()),
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parsers_refuse_or_accept_without_panicking(text in prop_oneof![jsonish(), any::<String>()]) {
        let _ = Event::from_json(&text);
        let _ = Message::from_json(&text);
        let _ = SpliceRecord::from_json(&text);
        let _ = Header::from_json(&text);
        let _ = Decision::from_json(&text);
        let _ = CancelCause::from_json(&text);
        let _ = TurnError::from_json(&text);
        let _ = SessionMeta::from_json(&text);
        let _ = StepOutcome::parse(&text);
        let _ = Target::parse(&text);
    }

    #[test]
    fn a_session_refuses_bad_host_input_and_stays_consistent(
        ty in prop_oneof![Just("x/y".to_owned()), "[a-z/]{0,12}"],
        data in prop_oneof![jsonish(), any::<String>()],
    ) {
        hostile_host_input(&MemoryStore::new(), &ty, &data)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_postgres_session_refuses_bad_host_input_and_stays_consistent(
        ty in prop_oneof![Just("x/y".to_owned()), "[a-z/]{0,12}"],
        data in prop_oneof![jsonish(), any::<String>()],
    ) {
        if let Some((_schema, store)) = pg_common::store(Durability::Sync) {
            hostile_host_input(&store, &ty, &data)?;
        }
    }
}

fn hostile_host_input(store: &dyn Store, ty: &str, data: &str) -> Result<(), TestCaseError> {
    {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        let before = s.events(0).unwrap().len();
        match s.append(ty, data, Envelope::default()) {
            Ok(e) => prop_assert_eq!(Event::from_json(&e.to_json()).unwrap(), e),
            Err(e) => {
                prop_assert!(
                    matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::TooLarge),
                    "{e}"
                );
                prop_assert_eq!(s.events(0).unwrap().len(), before);
            }
        }
        if let Ok(m) = Message::from_json(data) {
            // A message that parsed is storable and comes back from a replay unchanged.
            s.inbox().append(Target::NextTurn, m.clone()).unwrap();
            drop(s);
            let s = Session::open(store, "s").unwrap();
            prop_assert_eq!(s.inbox().next_turn().unwrap(), vec![m]);
        }
    }
    Ok(())
}

/// A small real log: a turn with steps, inbox splices and host events.
fn sample_log(store: &JsonlStore) -> std::path::PathBuf {
    sample_session(store);
    // Without the checkpoint its close wrote, which an open would start from, trusting
    // the lines before it (core/FORMAT.md#checkpoints): here open reads from seq 0, as
    // verify does. Doctored checkpoints: `checkpoint.rs`.
    let path = store.path("s").unwrap();
    std::fs::remove_file(path.with_extension("checkpoint")).unwrap();
    path
}

/// Writes the sample log as session `s` of `store`.
fn sample_session(store: &dyn Store) {
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    for i in 0..3 {
        let m = Message::from_json(&format!(r#"{{"id":"m{i}","text":"é\"\\ {i}"}}"#)).unwrap();
        s.inbox().append(Target::NextTurn, m).unwrap();
    }
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.append(
        "host/result",
        r#"{"out":[1,2,{"k":null}]}"#,
        Envelope::default(),
    )
    .unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
    s.open_turn().unwrap();
    s.close().unwrap();
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Cut(usize),
    Nuls(usize, usize),
    DuplicateLine(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, x)| Damage::Flip(at, x)),
        any::<usize>().prop_map(Damage::Cut),
        (any::<usize>(), 1usize..40).prop_map(|(at, n)| Damage::Nuls(at, n)),
        any::<usize>().prop_map(Damage::DuplicateLine),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let n = bytes.len();
    match *d {
        Damage::Flip(at, x) => bytes[at % n] ^= x,
        Damage::Cut(at) => bytes.truncate(at % n),
        Damage::Nuls(at, k) => {
            let at = at % n;
            bytes.splice(at..at, std::iter::repeat_n(0u8, k));
        }
        Damage::DuplicateLine(i) => {
            let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
            let line = lines[i % lines.len()].to_vec();
            let at: usize = lines[..=i % lines.len()].iter().map(|l| l.len()).sum();
            bytes.splice(at..at, line);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn damaged_logs_open_cleanly_or_are_refused_untouched(damages in prop::collection::vec(damage(), 1..4)) {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
        let path = sample_log(&store);
        let mut bytes = std::fs::read(&path).unwrap();
        for d in &damages {
            if !bytes.is_empty() {
                apply(&mut bytes, d);
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        let inspected = Session::inspect(&store, "s");
        let verified = Session::verify(&store, "s");
        prop_assert_eq!(std::fs::read(&path).unwrap(), bytes.clone(), "verify changed the file");
        match Session::open(&store, "s") {
            Ok(s) => {
                // Verify said it would open, and named the repairs open made.
                let report = match verified {
                    Ok(r) => r,
                    Err(e) => return Err(TestCaseError::fail(format!("open succeeded, verify refused: {e}"))),
                };
                prop_assert_eq!(report.torn_bytes, s.open_report().torn_bytes);
                prop_assert_eq!(report.open_turn, s.open_report().repaired_turn);
                // What opened is a valid log: its events re-read equal, and a second
                // open (after this writer is gone) changes nothing.
                let events = s.events(0).unwrap();
                prop_assert!(inspected.is_ok());
                drop(s);
                let again = std::fs::read(&path).unwrap();
                let s = Session::open(&store, "s").unwrap();
                prop_assert_eq!(s.events(0).unwrap(), events);
                prop_assert_eq!(s.open_report().torn_bytes, 0);
                prop_assert_eq!(s.open_report().repaired_turn, None);
                drop(s);
                prop_assert_eq!(std::fs::read(&path).unwrap(), again);
            }
            Err(e) => {
                let v = match verified {
                    Ok(r) => return Err(TestCaseError::fail(format!("open refused ({e}), verify passed: {r:?}"))),
                    Err(v) => v,
                };
                prop_assert_eq!(
                    (v.kind(), v.to_string(), v.session(), v.path(), v.line(), v.offset(), v.seq()),
                    (e.kind(), e.to_string(), e.session(), e.path(), e.line(), e.offset(), e.seq())
                );
                // Corruption is located as data, as the message says.
                if e.kind() == ErrorKind::Corrupt {
                    prop_assert_eq!(e.path(), Some(path.as_path()));
                    prop_assert_eq!(e.session(), Some("s"));
                    prop_assert!(e.line().is_some() && e.offset().is_some(), "{e}");
                }
                prop_assert!(
                    matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::FormatUnsupported | ErrorKind::InvalidInput | ErrorKind::TooLarge),
                    "{e}"
                );
                prop_assert_eq!(std::fs::read(&path).unwrap(), bytes, "a refused open changed the file: {}", e);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Rows edited by hand (a line's bytes flipped, cut, NULs put in, as text can hold
    /// them): inspect, verify and open refuse with the session and seq named, or read a
    /// log that passes its checks; a refusal changes no row. Open reads the replayed rows
    /// after the checkpoint alone, so it may open a log whose host row, or any row before
    /// the checkpoint, verify refuses, never the reverse.
    #[test]
    fn damaged_rows_are_refused_naming_session_and_seq_and_left_untouched(
        row in any::<usize>(),
        damages in prop::collection::vec(damage(), 1..3),
    ) {
        let Some((schema, store)) = pg_common::store(Durability::Sync) else { return Ok(()) };
        sample_session(&store);
        let lines = schema.lines("s");
        let seq = row % lines.len();
        let mut bytes = lines[seq].clone().into_bytes();
        for d in &damages {
            if !bytes.is_empty() {
                apply(&mut bytes, d);
            }
        }
        let line = String::from_utf8_lossy(&bytes).replace('\0', "");
        let mut c = pg_common::client().unwrap();
        c.execute(
            &format!("UPDATE \"{}\".events SET crc = NULL, line = $1 WHERE session = 's' AND seq = $2", schema.name),
            &[&line, &(seq as i64)],
        ).unwrap();
        let before = schema.snapshot("s");
        let inspected = Session::inspect(&store, "s");
        let verified = Session::verify(&store, "s");
        prop_assert_eq!(&schema.snapshot("s"), &before, "reading changed the rows");
        for e in [inspected.as_ref().err(), verified.as_ref().err()].into_iter().flatten() {
            prop_assert!(matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::FormatUnsupported | ErrorKind::TooLarge), "{e}");
            prop_assert_eq!(e.session(), Some("s"));
            // The row's checksum was cleared, so a change that still reads as a valid
            // event is found where the replay first disagrees with the checkpoint.
            let at_checkpoint = e.to_string().starts_with("corrupt checkpoint")
                && e.seq().is_some_and(|at| at > seq as u64);
            prop_assert!(e.seq() == Some(seq as u64) || at_checkpoint, "{}", e);
        }
        // Inspect reads the rows as stored; only verify compares them with the checkpoint.
        let checkpoint_only = verified
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().starts_with("corrupt checkpoint"));
        prop_assert!(
            inspected.is_ok() == verified.is_ok() || (inspected.is_ok() && checkpoint_only),
            "inspect {:?}, verify {:?}", inspected.as_ref().err(), verified.as_ref().err()
        );
        match Session::open(&store, "s") {
            Ok(s) => {
                if let Err(v) = &verified {
                    // Only a host row that is not the last one goes unread.
                    let ty: String = c.query_one(
                        &format!("SELECT type FROM \"{}\".events WHERE session = 's' AND seq = $1", schema.name),
                        &[&(seq as i64)],
                    ).unwrap().get(0);
                    // Nor any row before the checkpoint's (open starts there), but the one
                    // it is bound to (its checksum was cleared above).
                    let checkpoint: i64 = c.query_one(
                        &format!("SELECT coalesce(max(seq), 0) FROM \"{}\".checkpoints WHERE session = 's'", schema.name),
                        &[],
                    ).unwrap().get(0);
                    let before_checkpoint = (seq as i64) < checkpoint - 1;
                    prop_assert!(
                        before_checkpoint || (!inboxlog::REPLAYED.contains(&ty.as_str()) && seq + 1 < lines.len()),
                        "open read {}", v
                    );
                }
                drop(s);
            }
            Err(e) => {
                let v = verified.expect_err("open refused, so verify refuses");
                prop_assert_eq!(
                    (v.kind(), v.to_string(), v.session(), v.seq()),
                    (e.kind(), e.to_string(), e.session(), e.seq())
                );
                prop_assert_eq!(schema.snapshot("s"), before, "a refused open changed the rows: {}", e);
            }
        }
    }
}

//! Inbox scenarios with exact expectations: the reference implementation's examples
//! (ARCHITECTURE.md#splice-records), the public operations (ARCHITECTURE.md#inbox-mutations) and replay of a stored log whose splice
//! does not apply (ARCHITECTURE.md#replay).

mod scenarios_common;

use inboxlog::ToJson as _;
use inboxlog::store::MemoryStore;
use inboxlog::{CancelCause, ErrorKind, Message, Session, Target};
use scenarios_common::*;

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#splice-records: the seed example, one prompt's life.

#[test]
fn send_to_next_turn_writes_an_insert() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    let m1 = Message::from_json(r#"{"id":"m1","role":"user","content":"hi"}"#).unwrap();
    s.inbox().append(Target::NextTurn, m1).unwrap();
    assert_eq!(
        written(&s, 0),
        [pair(
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user","content":"hi"}]}"#
        )]
    );
}

#[test]
fn claim_at_turn_one_is_a_pure_deletion_and_the_empty_next_step_claim_writes_nothing() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    let notices = record_inbox(&s);
    s.inbox().append(Target::NextTurn, m("m1")).unwrap();
    taken(&notices);
    assert_eq!(s.open_turn().unwrap(), 1);
    let proposal = s.propose_step().unwrap();
    assert_eq!(
        proposal.to_json(),
        r#"{"turn":1,"step":1,"messages":[{"id":"m1","content":"m1!"}]}"#
    );
    assert_eq!(
        written(&s, 1),
        [
            pair("turn/start", r#"{"turn":1}"#),
            pair(
                SPLICED,
                r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#
            ),
        ]
    );
    assert_eq!(
        taken(&notices),
        [r#"{"type":"agent/inbox/claimed","message":{"id":"m1","content":"m1!"},"turn":1}"#]
    );
    assert!(!s.inbox().has_pending().unwrap());
}

#[test]
fn a_cancel_instead_writes_a_canceled_deletion() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("m1")).unwrap();
    let notices = record_inbox(&s);
    s.cancel(CancelCause::User, false).unwrap();
    assert_eq!(
        written(&s, 1),
        [pair(
            SPLICED,
            r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}"#
        )]
    );
    assert_eq!(
        taken(&notices),
        [r#"{"type":"agent/inbox/discarded","message":{"id":"m1","content":"m1!"}}"#]
    );
}

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#inbox-mutations operations.

#[test]
fn replace_works_across_both_lists() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.inbox().append(Target::NextStep, m("c")).unwrap();
    let notices = record_inbox(&s);

    // In next-step, with a new id.
    assert!(s.inbox().replace("c", m("c2")).unwrap());
    assert_eq!(
        written(&s, 3),
        [pair(
            SPLICED,
            r#"{"target":"next-step","start":0,"removedCount":1,"inserted":[{"id":"c2","content":"c2!"}],"outcome":"canceled"}"#
        )]
    );
    assert_eq!(
        taken(&notices),
        [
            r#"{"type":"agent/inbox/discarded","message":{"id":"c","content":"c!"}}"#,
            r#"{"type":"agent/inbox/inserted","message":{"id":"c2","content":"c2!"}}"#,
        ]
    );

    // In next-turn, keeping its id.
    let b2 = Message::from_json(r#"{"id":"b","content":"edited"}"#).unwrap();
    assert!(s.inbox().replace("b", b2).unwrap());
    assert_eq!(
        written(&s, 4),
        [pair(
            SPLICED,
            r#"{"target":"next-turn","start":1,"removedCount":1,"inserted":[{"id":"b","content":"edited"}],"outcome":"canceled"}"#
        )]
    );
    assert_eq!(
        taken(&notices),
        [
            r#"{"type":"agent/inbox/discarded","message":{"id":"b","content":"b!"}}"#,
            r#"{"type":"agent/inbox/inserted","message":{"id":"b","content":"edited"}}"#,
        ]
    );
    assert_eq!(lists(&s), (vec!["a".into(), "b".into()], vec!["c2".into()]));

    // A replacement whose id is pending elsewhere is refused, naming it; nothing written.
    let err = s.inbox().replace("a", m("c2")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DuplicateMessage);
    assert!(
        err.to_string()
            .contains(r#"message "c2" is already pending"#),
        "{err}"
    );
    // Also when the other holder is in the same list.
    let err = s.inbox().replace("a", m("b")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DuplicateMessage);
    assert!(
        err.to_string()
            .contains(r#"message "b" is already pending"#),
        "{err}"
    );
    // An absent id: false, nothing written.
    assert!(!s.inbox().replace("zz", m("q")).unwrap());
    assert!(!s.inbox().remove("zz").unwrap());
    assert_eq!(next_seq(&s), 5);
    assert!(taken(&notices).is_empty());
    assert_eq!(lists(&s), (vec!["a".into(), "b".into()], vec!["c2".into()]));
}

#[test]
fn nan_nan_splice_inserts_at_zero() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let removed = s
        .inbox()
        .splice(Target::NextTurn, f64::NAN, f64::NAN, vec![m("b")])
        .unwrap();
    assert!(removed.is_empty());
    assert_eq!(lists(&s).0, ["b", "a"]);
    assert_eq!(
        written(&s, 1),
        [pair(
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"b","content":"b!"}]}"#
        )]
    );
}

#[test]
fn minus_one_one_removes_the_last() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    for id in ["a", "b", "c"] {
        s.inbox().append(Target::NextStep, m(id)).unwrap();
    }
    let removed = s
        .inbox()
        .splice(Target::NextStep, -1.0, 1.0, Vec::new())
        .unwrap();
    assert_eq!(ids(&removed), ["c"]);
    assert_eq!(lists(&s).1, ["a", "b"]);
    assert_eq!(
        written(&s, 3),
        [pair(
            SPLICED,
            r#"{"target":"next-step","start":2,"removedCount":1,"inserted":[],"outcome":"canceled"}"#
        )]
    );
}

#[test]
fn a_splice_that_changes_nothing_writes_nothing() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let notices = record_inbox(&s);
    for (start, delete) in [(0.0, 0.0), (5.0, 3.0), (f64::INFINITY, 1.0), (0.0, -2.0)] {
        let removed = s
            .inbox()
            .splice(Target::NextTurn, start, delete, Vec::new())
            .unwrap();
        assert!(removed.is_empty());
    }
    assert_eq!(next_seq(&s), 1);
    assert!(taken(&notices).is_empty());
}

#[test]
fn clear_cancels_next_step_before_next_turn_and_a_second_clear_writes_nothing() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.inbox().append(Target::NextStep, m("c")).unwrap();
    let notices = record_inbox(&s);
    s.inbox().clear().unwrap();
    assert_eq!(
        written(&s, 3),
        [
            pair(
                SPLICED,
                r#"{"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}"#
            ),
            pair(
                SPLICED,
                r#"{"target":"next-turn","start":0,"removedCount":2,"inserted":[],"outcome":"canceled"}"#
            ),
        ]
    );
    assert_eq!(
        taken(&notices),
        [
            r#"{"type":"agent/inbox/discarded","message":{"id":"c","content":"c!"}}"#,
            r#"{"type":"agent/inbox/discarded","message":{"id":"a","content":"a!"}}"#,
            r#"{"type":"agent/inbox/discarded","message":{"id":"b","content":"b!"}}"#,
        ]
    );
    s.inbox().clear().unwrap();
    assert_eq!(next_seq(&s), 5);
    assert!(taken(&notices).is_empty());
}

// ---------------------------------------------------------------------------------
// ARCHITECTURE.md#replay: a stored log whose splice does not apply.

#[test]
fn a_persisted_splice_past_the_end_fails_replay_naming_its_seq() {
    let store = fixed(log(&[(
        SPLICED,
        r#"{"target":"next-turn","start":1,"inserted":[{"id":"a"}]}"#,
    )]));
    let err = Session::open(&store, "fixed").err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert_eq!(err.seq(), Some(0));
    let checked = Session::verify(&store, "fixed").unwrap_err();
    assert_eq!(checked.to_string(), err.to_string());
    let text = err.to_string();
    assert!(
        text.contains("invalid persisted inbox splice at session seq 0"),
        "{text}"
    );
    assert!(text.contains("invalid inbox splice"), "the cause: {text}");
}

#[test]
fn a_persisted_duplicate_fails_replay_naming_its_seq_and_the_id() {
    let store = fixed(log(&[
        ("host/note", "{}"),
        (
            SPLICED,
            r#"{"target":"next-step","start":0,"inserted":[{"id":"a"}]}"#,
        ),
        (
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
        ),
    ]));
    let err = Session::open(&store, "fixed").err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert_eq!(err.seq(), Some(2));
    let checked = Session::verify(&store, "fixed").unwrap_err();
    assert_eq!(checked.to_string(), err.to_string());
    let text = err.to_string();
    assert!(
        text.contains("invalid persisted inbox splice at session seq 2"),
        "{text}"
    );
    assert!(text.contains(r#"message "a" is already pending"#), "{text}");
}

#[test]
fn a_valid_hand_made_log_replays() {
    let store = fixed(log(&[
        (
            SPLICED,
            r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"},{"id":"b"}]}"#,
        ),
        (
            SPLICED,
            r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[{"id":"c"}],"outcome":"canceled"}"#,
        ),
    ]));
    let report = Session::verify(&store, "fixed").unwrap();
    assert_eq!(
        (report.events, report.next_turn, report.next_step),
        (2, 2, 0)
    );
    assert!(!report.needs_repair());
    let s = Session::open(&store, "fixed").unwrap();
    assert_eq!(lists(&s).0, ["c", "b"]);
}

//! Every error kind the core raises with the memory store (ARCHITECTURE.md#errors), each with
//! what it names and the proof that nothing was written. The kinds a store raises for
//! its sessions (`already_exists`, `not_found`, `locked`, `fenced`, `too_large` at the
//! record limit) are in the store suite (`core/tests/store/`), over every store.

mod scenarios_common;

use std::sync::{Arc, Weak};

use inboxlog::store::{MemoryStore, Store};
use inboxlog::{
    Decision, Envelope, ErrorKind, Event, Message, QueueProjection, Session, SessionMeta, Target,
    TurnError,
};
use scenarios_common::*;

#[test]
fn error_invalid_splice() {
    let err = Event::from_json(
        r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":-1,"inserted":[]}}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSplice);
    assert!(err.to_string().contains("invalid inbox splice"), "{err}");
    let err = Event::from_json(
        r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":9007199254740992,"inserted":[]}}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSplice);
    // ARCHITECTURE.md#limits: a -0 or 1.0 in a reserved integer field is refused.
    for bad in ["-0", "1.0", "0.0", "-1", "1e0"] {
        for (key, rest) in [
            ("start", r#""inserted":[]"#),
            ("removedCount", r#""start":0,"inserted":[]"#),
        ] {
            let text = format!(
                r#"{{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{{"target":"next-turn","{key}":{bad},{rest}}}}}"#
            );
            let err = Event::from_json(&text).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidSplice, "{text}");
        }
    }
    // Coordinates out of range for the lists: the projection validates as ARCHITECTURE.md#inbox-validation.
    let events = log(&[(
        SPLICED,
        r#"{"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#,
    )]);
    let err = QueueProjection::replay(&events, 0, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSplice);
    assert!(err.to_string().contains("invalid inbox splice"), "{err}");
}

#[test]
fn error_duplicate_message() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    for attempt in [
        s.inbox().append(Target::NextStep, m("a")),
        s.inbox().prepend(Target::NextTurn, m("a")),
        s.inbox()
            .splice(Target::NextStep, 0.0, 0.0, vec![m("x"), m("x")])
            .map(drop),
    ] {
        let err = attempt.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::DuplicateMessage);
        assert!(err.to_string().contains("is already pending"), "{err}");
    }
    assert_eq!(next_seq(&s), 1);
    // Replacing a message by itself is not a duplicate.
    s.inbox()
        .splice(Target::NextTurn, 0.0, 1.0, vec![m("a")])
        .unwrap();
}

#[test]
fn error_protocol_names_the_state() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    let err = s.decide(Decision::Reject).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol);
    assert!(err.to_string().contains("idle"), "{err}");
    assert_eq!(next_seq(&s), 0);
}

#[test]
fn error_invalid_input() {
    let store = MemoryStore::new();
    // A bad message.
    for (bad, needle) in [
        (r#"{"role":"user"}"#, "id"),
        (r#"{"id":""}"#, "non-empty"),
        ("[1]", "object"),
        (r#"{"id":"a","n":1e400}"#, "finite"),
    ] {
        let err = Message::from_json(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
        assert!(err.to_string().contains(needle), "{bad}: {err}");
    }
    // A bad event.
    let err = Event::from_json(r#"{"type":"","seq":0,"time":0,"data":{}}"#).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    for bad in [
        r#"{"type":"x","seq":1.0,"time":0,"data":{}}"#,
        r#"{"type":"x","seq":-0,"time":0,"data":{}}"#,
        r#"{"type":"x","seq":0,"time":-1,"data":{}}"#,
        r#"{"type":"x","seq":0,"time":0,"data":{},"extra":1}"#,
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":-0}}"#,
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1.0}}"#,
        r#"{"type":"step/start","seq":0,"time":0,"data":{"turn":1,"step":9007199254740992}}"#,
        r#"{"type":"turn/end","seq":0,"time":0,"data":{"turn":1,"reason":"done"}}"#,
        r#"{"type":"x","seq":0,"time":0,"data":{"n":NaN}}"#,
    ] {
        let err = Event::from_json(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}: {err}");
    }
    // A bad session id never reaches the store.
    for bad in ["", "../x", ".hidden", "a/b", &"x".repeat(129)] {
        let err = Session::create(&store, bad, SessionMeta::default())
            .err()
            .expect("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        assert!(err.to_string().contains("session id"), "{err}");
    }
    assert!(store.list().unwrap().is_empty());
    // Reserved types through the generic append; bad data; a bad user/message.
    let s = session(&store, "s");
    for ty in [
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        SPLICED,
        "session/end-seed",
    ] {
        let err = s
            .append(ty, r#"{"turn":1}"#, Envelope::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ty}");
        assert!(err.to_string().contains(ty), "{err}");
    }
    for data in ["NaN", "[1e400]", "{", ""] {
        let err = s.append("host/x", data, Envelope::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{data}");
    }
    for data in [r#""text""#, "[1]", "null"] {
        let err = s
            .append("user/message", data, Envelope::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{data}");
        assert!(err.to_string().contains("must be a JSON object"), "{err}");
    }
    let err = s.append("", "{}", Envelope::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(next_seq(&s), 0);
    // Runtime context without an id is a valid user/message (ARCHITECTURE.md#reserved-events); it is not an
    // inbox message, so nothing is pending.
    let e = s
        .append("user/message", r#"{"text":"no id"}"#, Envelope::default())
        .unwrap();
    assert_eq!(e.data(), r#"{"text":"no id"}"#);
    assert!(!s.inbox().has_pending().unwrap());
    // A host may append user/message with a valid message, and keeps its bytes.
    let e = s
        .append(
            "user/message",
            r#"{"id":"u","n":12345678901234567890}"#,
            Envelope::default(),
        )
        .unwrap();
    assert_eq!(e.data(), r#"{"id":"u","n":12345678901234567890}"#);
    // A turn error without a code.
    let err = TurnError::from_json(r#"{"message":"x"}"#).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn error_too_large_nesting() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    let ok = format!("{}{}", "[".repeat(512), "]".repeat(512));
    s.append("host/deep", &ok, Envelope::default()).unwrap();
    let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
    let err = s
        .append("host/deep", &deep, Envelope::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert!(err.to_string().contains("512"), "{err}");
    let deep_message = format!(r#"{{"id":"a","x":{deep}}}"#);
    assert_eq!(
        Message::from_json(&deep_message).unwrap_err().kind(),
        ErrorKind::TooLarge
    );
    // No stack overflow on absurd input.
    let err = s
        .append("host/deep", &"[".repeat(1_000_000), Envelope::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert_eq!(next_seq(&s), 1);
}

#[test]
fn error_closed() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.close().unwrap();
    s.close().unwrap();
    let err = s.inbox().append(Target::NextTurn, m("a")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert!(err.to_string().contains("\"s\" is closed"), "{err}");
    assert_eq!(s.open_turn().unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(s.events(0).unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(
        s.append("host/x", "{}", Envelope::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Closed
    );
    assert_eq!(s.inbox().next_turn().unwrap_err().kind(), ErrorKind::Closed);
    let (_, events) = Session::inspect(&store, "s").unwrap();
    assert!(events.is_empty());
}

#[test]
fn error_reentrant_mutation_from_an_observer_writes_nothing() {
    let store = MemoryStore::new();
    let s = Arc::new(session(&store, "s"));
    let weak: Weak<Session> = Arc::downgrade(&s);
    let errors = Sink::default();
    let out = errors.clone();
    s.on_inbox(move |_| {
        let s = weak.upgrade().expect("alive");
        for attempt in [
            s.inbox().append(Target::NextStep, m("sneaky")),
            s.append("host/x", "{}", Envelope::default()).map(drop),
            s.open_turn().map(drop),
            s.inbox().clear(),
            s.receive().map(drop),
        ] {
            let err = attempt.unwrap_err();
            out.lock()
                .unwrap()
                .push(format!("{}: {}", err.kind().name(), err));
        }
        // Reading is allowed.
        assert_eq!(s.inbox().next_turn().unwrap().len(), 1);
        Ok(())
    });
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let errors = taken(&errors);
    assert_eq!(errors.len(), 5);
    for e in &errors {
        assert!(e.starts_with("reentrant: "), "{e}");
        assert!(e.contains("observer"), "{e}");
    }
    assert_eq!(next_seq(&s), 1);
    assert_eq!(lists(&s), (vec!["a".into()], vec![]));
    assert!(s.take_observer_failures().is_empty());
}

#[test]
fn error_corrupt_bad_persisted_splice() {
    let store = fixed(log(&[
        INSERT_A,
        (
            SPLICED,
            r#"{"target":"next-turn","start":0,"removedCount":2,"inserted":[]}"#,
        ),
    ]));
    let err = Session::open(&store, "fixed").err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(
        err.to_string()
            .contains("invalid persisted inbox splice at session seq 1"),
        "{err}"
    );
}

//! Scenarios with exact expectations: the reference implementation's examples (SPEC §3),
//! the consumed-work fold (§5.1), every error kind the memory store can raise (§8),
//! seeds and forks (§6) and observers (§1.5).

use std::sync::{Arc, Mutex, Weak};

use inboxlog::store::{LogWriter, MemoryStore, Opened, Store, Verified};
use inboxlog::{
    CancelCause, Decision, ErrorKind, Event, Header, InboxNotice, Message, QueueProjection,
    Session, SessionMeta, StepOutcome, Target, TurnError, fold_consumed_work,
};

fn m(id: &str) -> Message {
    Message::from_json(&format!(r#"{{"id":"{id}","content":"{id}!"}}"#)).unwrap()
}

fn session(store: &MemoryStore, id: &str) -> Session {
    Session::create(store, id, SessionMeta::default()).unwrap()
}

/// `(type, data)` of the events with `seq >= since`.
fn written(s: &Session, since: u64) -> Vec<(String, String)> {
    s.events(since)
        .unwrap()
        .iter()
        .map(|e| (e.ty().to_owned(), e.data().to_owned()))
        .collect()
}

fn next_seq(s: &Session) -> u64 {
    s.last_seq().unwrap().map_or(0, |q| q + 1)
}

fn ids(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.id().to_owned()).collect()
}

fn lists(s: &Session) -> (Vec<String>, Vec<String>) {
    (
        ids(&s.inbox().next_turn().unwrap()),
        ids(&s.inbox().next_step().unwrap()),
    )
}

fn pair(ty: &str, data: &str) -> (String, String) {
    (ty.to_owned(), data.to_owned())
}

const SPLICED: &str = "agent/inbox/spliced";

type Sink = Arc<Mutex<Vec<String>>>;

/// Registers an inbox observer that records each notification's JSON.
fn record_inbox(s: &Session) -> Sink {
    let sink = Sink::default();
    let out = sink.clone();
    s.on_inbox(move |n| {
        out.lock().unwrap().push(n.to_json());
        Ok(())
    });
    sink
}

fn taken(sink: &Sink) -> Vec<String> {
    std::mem::take(&mut *sink.lock().unwrap())
}

// ---------------------------------------------------------------------------------
// §3.3: the seed example, one prompt's life.

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
// §3.2 operations.

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
// §3.5: a stored log whose splice does not apply.

/// A store serving a fixed, hand-made log (the memory store only ever holds logs
/// written through a session, which are valid by construction).
struct FixedStore {
    header: Header,
    events: Vec<Event>,
}

struct VecWriter(Vec<Event>);

impl LogWriter for VecWriter {
    fn append(&mut self, events: &[Event]) -> inboxlog::Result<()> {
        self.0.extend_from_slice(events);
        Ok(())
    }

    fn read(&self, since: u64) -> inboxlog::Result<Vec<Event>> {
        Ok(self.0[(since as usize).min(self.0.len())..].to_vec())
    }

    fn flush(&mut self) -> inboxlog::Result<()> {
        Ok(())
    }
}

impl Store for FixedStore {
    fn create(&self, header: &Header, _seed: &[Event]) -> inboxlog::Result<Box<dyn LogWriter>> {
        Err(inboxlog::Error::new(
            ErrorKind::AlreadyExists,
            format!("session \"{}\" already exists", header.id),
        ))
    }

    fn open(
        &self,
        _id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> inboxlog::Result<()>,
    ) -> inboxlog::Result<Opened> {
        for event in &self.events {
            visit(&self.header, event)?;
        }
        Ok(Opened {
            header: self.header.clone(),
            writer: Box::new(VecWriter(self.events.clone())),
            torn_bytes: 0,
        })
    }

    fn verify(
        &self,
        _id: &str,
        visit: &mut dyn FnMut(&Header, &Event) -> inboxlog::Result<()>,
    ) -> inboxlog::Result<Verified> {
        for event in &self.events {
            visit(&self.header, event)?;
        }
        Ok(Verified {
            header: self.header.clone(),
            torn_bytes: 0,
        })
    }

    fn inspect(&self, _id: &str) -> inboxlog::Result<(Header, Vec<Event>)> {
        Ok((self.header.clone(), self.events.clone()))
    }

    fn list(&self) -> inboxlog::Result<Vec<Header>> {
        Ok(vec![self.header.clone()])
    }

    fn delete(&self, id: &str) -> inboxlog::Result<()> {
        Err(inboxlog::Error::new(
            ErrorKind::Locked,
            format!("session \"{id}\" is fixed and cannot be deleted"),
        ))
    }
}

/// Events from `(type, data)` pairs, seq and time counting from 0.
fn log(list: &[(&str, &str)]) -> Vec<Event> {
    list.iter()
        .enumerate()
        .map(|(seq, (ty, data))| {
            Event::from_json(&format!(
                r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}}}"#,
                1_000 + seq
            ))
            .unwrap()
        })
        .collect()
}

fn fixed(events: Vec<Event>) -> FixedStore {
    FixedStore {
        header: Header::new("fixed", 0, SessionMeta::default()).unwrap(),
        events,
    }
}

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

// ---------------------------------------------------------------------------------
// §5.1: the consumed-work fold.

const INSERT_A: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
);
const CLAIM: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
);
const CANCEL: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}"#,
);
const REPLACE: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[{"id":"b"}],"outcome":"canceled"}"#,
);

fn ts(turn: u64) -> (String, String) {
    pair("turn/start", &format!(r#"{{"turn":{turn}}}"#))
}

fn step(ty: &str, turn: u64, step: u64) -> (String, String) {
    pair(ty, &format!(r#"{{"turn":{turn},"step":{step}}}"#))
}

fn te(turn: u64, reason: &str) -> (String, String) {
    pair(
        "turn/end",
        &format!(r#"{{"turn":{turn},"reason":{reason}}}"#),
    )
}

fn own(p: (&str, &str)) -> (String, String) {
    pair(p.0, p.1)
}

/// A stepped turn `n` that claims one message: 5 events.
fn stepped_turn(n: u64, reason: &str) -> Vec<(String, String)> {
    vec![
        ts(n),
        own(CLAIM),
        step("step/start", n, 1),
        step("step/end", n, 1),
        te(n, reason),
    ]
}

/// Folds the events and returns `(seq of end, droppedUnrun)`.
fn fold(list: &[(String, String)]) -> (Option<u64>, bool) {
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let events = log(&borrowed);
    let out = fold_consumed_work(&events);
    (out.end.map(|e| e.seq()), out.dropped_unrun)
}

const COMPLETED: &str = r#"{"kind":"completed"}"#;
const ERROR: &str = r#"{"kind":"error","error":{"message":"x","code":"E"}}"#;
const ABORTED: &str = r#"{"kind":"aborted","reason":{"kind":"user"}}"#;

#[test]
fn fold_nothing_consumed() {
    assert_eq!(fold(&[]), (None, false));
    let events = log(&[]);
    assert_eq!(
        fold_consumed_work(&events).to_json(),
        r#"{"end":null,"droppedUnrun":false}"#
    );
    assert_eq!(fold(&[own(INSERT_A), pair("host/x", "{}")]), (None, false));
}

#[test]
fn fold_picks_the_latest_stepped_turn_max_tokens_included() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.extend(stepped_turn(2, r#"{"kind":"max-tokens"}"#));
    list.push(pair("host/after", "{}"));
    assert_eq!(fold(&list), (Some(11), false));
    // The result names the whole turn/end event.
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let events = log(&borrowed);
    assert_eq!(
        fold_consumed_work(&events).to_json(),
        r#"{"end":{"type":"turn/end","seq":11,"time":1011,"data":{"turn":2,"reason":{"kind":"max-tokens"}}},"droppedUnrun":false}"#
    );
}

#[test]
fn fold_a_claim_then_error_or_abort_before_any_step_accounts() {
    for reason in [ERROR, ABORTED, r#"{"kind":"interrupted"}"#] {
        let list = [own(INSERT_A), ts(1), own(CLAIM), te(1, reason)];
        assert_eq!(fold(&list), (Some(3), false), "{reason}");
    }
}

#[test]
fn fold_an_unknown_end_kind_after_a_claim_accounts() {
    let list = [
        own(INSERT_A),
        ts(1),
        own(CLAIM),
        te(1, r#"{"kind":"some-future-kind"}"#),
    ];
    assert_eq!(fold(&list), (Some(3), false));
}

#[test]
fn fold_turns_that_took_no_input_do_not_account() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    for (n, reason) in [
        (2, COMPLETED),
        (3, ERROR),
        (4, ABORTED),
        (5, r#"{"kind":"blocked"}"#),
    ] {
        list.push(ts(n));
        list.push(te(n, reason));
    }
    assert_eq!(fold(&list), (Some(5), false));
}

#[test]
fn fold_a_rejected_claim_accounts() {
    let list = [
        own(INSERT_A),
        ts(1),
        own(CLAIM),
        te(1, r#"{"kind":"blocked"}"#),
    ];
    assert_eq!(fold(&list), (Some(3), false));
}

#[test]
fn fold_a_claim_emptied_by_the_turn_itself_does_not_account() {
    let list = [own(INSERT_A), ts(1), own(CLAIM), te(1, COMPLETED)];
    assert_eq!(fold(&list), (None, false));
}

#[test]
fn fold_a_claim_outside_any_open_turn_is_credited_to_none() {
    let list = [
        own(INSERT_A),
        own(CLAIM),
        ts(1),
        te(1, r#"{"kind":"blocked"}"#),
    ];
    assert_eq!(fold(&list), (None, false));
}

#[test]
fn fold_a_cancel_after_the_last_accounting_turn_sets_dropped_unrun() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.push(own(CANCEL));
    assert_eq!(fold(&list), (Some(5), true));
    // A turn that accounts for nothing does not reset it.
    list.push(ts(2));
    list.push(te(2, COMPLETED));
    assert_eq!(fold(&list), (Some(5), true));
    // Before any accounting turn, too.
    assert_eq!(fold(&[own(INSERT_A), own(CANCEL)]), (None, true));
}

#[test]
fn fold_a_replacement_is_not_a_drop() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.push(own(REPLACE));
    assert_eq!(fold(&list), (Some(5), false));
}

#[test]
fn fold_a_later_accounting_turn_absorbs_an_earlier_drop() {
    let mut list = vec![own(INSERT_A), own(CANCEL), own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    assert_eq!(fold(&list), (Some(7), false));
}

#[test]
fn fold_over_a_live_session_log() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.inbox().remove("b").unwrap();
    let events = s.events(0).unwrap();
    let out = fold_consumed_work(&events);
    assert_eq!(out.end.map(|e| e.seq()), Some(6));
    assert!(out.dropped_unrun);
}

// ---------------------------------------------------------------------------------
// §8: each error kind the core raises with the memory store.

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
    // §7.5: a -0 or 1.0 in a reserved integer field is refused.
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
    // Coordinates out of range for the lists: the projection validates as §3.4.
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
            .append(ty, r#"{"turn":1}"#, Default::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{ty}");
        assert!(err.to_string().contains(ty), "{err}");
    }
    for data in ["NaN", "[1e400]", "{", ""] {
        let err = s.append("host/x", data, Default::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{data}");
    }
    for data in [r#""text""#, "[1]", "null"] {
        let err = s
            .append("user/message", data, Default::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{data}");
        assert!(err.to_string().contains("must be a JSON object"), "{err}");
    }
    let err = s.append("", "{}", Default::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(next_seq(&s), 0);
    // Runtime context without an id is a valid user/message (§1.2); it is not an
    // inbox message, so nothing is pending.
    let e = s
        .append("user/message", r#"{"text":"no id"}"#, Default::default())
        .unwrap();
    assert_eq!(e.data(), r#"{"text":"no id"}"#);
    assert!(!s.inbox().has_pending().unwrap());
    // A host may append user/message with a valid message, and keeps its bytes.
    let e = s
        .append(
            "user/message",
            r#"{"id":"u","n":12345678901234567890}"#,
            Default::default(),
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
    s.append("host/deep", &ok, Default::default()).unwrap();
    let deep = format!("{}{}", "[".repeat(513), "]".repeat(513));
    let err = s
        .append("host/deep", &deep, Default::default())
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
        .append("host/deep", &"[".repeat(1_000_000), Default::default())
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
        s.append("host/x", "{}", Default::default())
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
            s.append("host/x", "{}", Default::default()).map(drop),
            s.open_turn().map(drop),
            s.inbox().clear(),
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
    assert_eq!(errors.len(), 4);
    for e in &errors {
        assert!(e.starts_with("reentrant: "), "{e}");
        assert!(e.contains("observer"), "{e}");
    }
    assert_eq!(next_seq(&s), 1);
    assert_eq!(lists(&s), (vec!["a".into()], vec![]));
    assert!(s.take_observer_failures().is_empty());
}

#[test]
fn error_already_exists() {
    let store = MemoryStore::new();
    let s = session(&store, "dup");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    let err = Session::create(&store, "dup", SessionMeta::default())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("\"dup\" already exists"), "{err}");
    // The existing log is untouched.
    assert_eq!(Session::inspect(&store, "dup").unwrap().1.len(), 1);
}

#[test]
fn error_not_found() {
    let store = MemoryStore::new();
    for err in [
        Session::open(&store, "nope").err().expect("refused"),
        Session::inspect(&store, "nope").expect_err("refused"),
        Session::fork(&store, "nope", "child", SessionMeta::default())
            .err()
            .expect("refused"),
    ] {
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.to_string().contains("\"nope\""), "{err}");
    }
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn error_locked_while_the_first_writer_is_open() {
    let store = MemoryStore::new();
    let s = session(&store, "l");
    let err = Session::open(&store, "l").err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Locked);
    assert!(err.to_string().contains("locked"), "{err}");
    s.close().unwrap();
    let again = Session::open(&store, "l").unwrap();
    let err = Session::open(&store, "l").err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Locked);
    // Read-only inspection never locks.
    Session::inspect(&store, "l").unwrap();
    drop(again);
    Session::open(&store, "l").unwrap();
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

// ---------------------------------------------------------------------------------
// §6: seeds and forks.

fn owned_log(list: &[(String, String)]) -> Vec<Event> {
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    log(&borrowed)
}

#[test]
fn create_with_a_seed_appends_end_seed_and_continues_turns() {
    let store = MemoryStore::new();
    let mut seed = vec![pair("host/x", r#"{"k":1}"#), own(INSERT_A)];
    seed.extend(stepped_turn(1, COMPLETED));
    seed.push(ts(2));
    seed.push(te(2, COMPLETED));
    let seed = owned_log(&seed);
    let s = Session::create_seeded(&store, "seeded", SessionMeta::default(), seed.clone(), None)
        .unwrap();
    let events = s.events(0).unwrap();
    assert_eq!(events.len(), seed.len() + 1);
    assert_eq!(&events[..seed.len()], &seed[..]);
    let end = events.last().unwrap();
    assert_eq!(
        (end.ty(), end.seq(), end.data()),
        ("session/end-seed", seed.len() as u64, "{}")
    );
    assert_eq!(s.header().seed_length, None);
    // The seed's splices replay when there is no seedLength: a was inserted, then claimed.
    assert!(!s.inbox().has_pending().unwrap());
    assert_eq!(s.open_turn().unwrap(), 3);
}

#[test]
fn a_seed_that_already_ends_with_end_seed_gets_no_second_one() {
    let store = MemoryStore::new();
    let seed = log(&[("host/x", "{}"), ("session/end-seed", "{}")]);
    let s =
        Session::create_seeded(&store, "s", SessionMeta::default(), seed.clone(), None).unwrap();
    assert_eq!(s.events(0).unwrap(), seed);
    // An empty seed is an empty log.
    let e = Session::create_seeded(&store, "e", SessionMeta::default(), Vec::new(), None).unwrap();
    assert!(e.events(0).unwrap().is_empty());
}

#[test]
fn the_inbox_replays_from_seed_length() {
    let store = MemoryStore::new();
    let seed = log(&[INSERT_A, ("host/x", "{}")]);
    let with = Session::create_seeded(
        &store,
        "with",
        SessionMeta::default(),
        seed.clone(),
        Some(1),
    )
    .unwrap();
    assert_eq!(with.header().seed_length, Some(1));
    assert!(!with.inbox().has_pending().unwrap());
    let without =
        Session::create_seeded(&store, "without", SessionMeta::default(), seed, None).unwrap();
    assert_eq!(lists(&without).0, ["a"]);
    // Reopening replays the same way.
    with.close().unwrap();
    without.close().unwrap();
    assert!(
        !Session::open(&store, "with")
            .unwrap()
            .inbox()
            .has_pending()
            .unwrap()
    );
    assert_eq!(lists(&Session::open(&store, "without").unwrap()).0, ["a"]);
}

#[test]
fn a_seed_is_validated() {
    let store = MemoryStore::new();
    let gap = vec![
        Event::from_json(r#"{"type":"x","seq":0,"time":0,"data":{}}"#).unwrap(),
        Event::from_json(r#"{"type":"x","seq":2,"time":0,"data":{}}"#).unwrap(),
    ];
    let not_from_zero =
        vec![Event::from_json(r#"{"type":"x","seq":1,"time":0,"data":{}}"#).unwrap()];
    let bad_turn = log(&[("turn/start", r#"{"turn":2}"#)]);
    let bad_step = log(&[
        ("turn/start", r#"{"turn":1}"#),
        ("step/end", r#"{"turn":1,"step":1}"#),
    ]);
    let bad_splice = log(&[CLAIM]);
    for (i, seed) in [gap, not_from_zero, bad_turn, bad_step, bad_splice]
        .into_iter()
        .enumerate()
    {
        let id = format!("bad{i}");
        let err = Session::create_seeded(&store, &id, SessionMeta::default(), seed, None)
            .err()
            .expect("refused");
        assert!(
            matches!(
                err.kind(),
                ErrorKind::InvalidInput | ErrorKind::Corrupt | ErrorKind::InvalidSplice
            ),
            "{i}: {err:?}"
        );
        assert!(err.to_string().contains("seq"), "{i}: {err}");
        // Nothing was created.
        assert_eq!(
            Session::inspect(&store, &id).err().map(|e| e.kind()),
            Some(ErrorKind::NotFound)
        );
    }
    // seedLength past the seed.
    let err = Session::create_seeded(
        &store,
        "past",
        SessionMeta::default(),
        log(&[("x", "{}")]),
        Some(5),
    )
    .err()
    .expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// A parent with one finished turn, one pending message, and turn 2 open mid-step.
fn busy_parent(store: &MemoryStore) -> Session {
    let meta = SessionMeta {
        cwd: Some("/work".into()),
        ..SessionMeta::default()
    };
    let p = Session::create(store, "parent", meta).unwrap();
    p.inbox().append(Target::NextTurn, m("a")).unwrap();
    p.open_turn().unwrap();
    let prop = p.propose_step().unwrap();
    p.decide(Decision::Enter(prop.messages)).unwrap();
    p.end_step(StepOutcome::Completed).unwrap();
    p.close_turn().unwrap();
    p.inbox().append(Target::NextTurn, m("b")).unwrap();
    p.inbox().append(Target::NextTurn, m("c")).unwrap();
    p
}

#[test]
fn fork_copies_up_to_the_open_turn() {
    let store = MemoryStore::new();
    let p = busy_parent(&store);
    let cut = next_seq(&p); // turn 2 starts here
    p.open_turn().unwrap();
    let prop = p.propose_step().unwrap();
    p.decide(Decision::Enter(prop.messages)).unwrap();
    let before = Session::inspect(&store, "parent").unwrap();

    let meta = SessionMeta {
        origin: Some("subagent".into()),
        delegation_depth: Some(1),
        agent_preset: Some("reviewer".into()),
        cwd: None,
    };
    let child = Session::fork(&store, "parent", "child", meta).unwrap();
    let h = child.header();
    assert_eq!(h.parent_session.as_deref(), Some("parent"));
    assert_eq!(h.seed_length, Some(cut));
    assert_eq!(h.cwd.as_deref(), Some("/work"));
    assert_eq!(h.origin.as_deref(), Some("subagent"));
    assert_eq!(h.delegation_depth, Some(1));
    assert_eq!(h.agent_preset.as_deref(), Some("reviewer"));
    let events = child.events(0).unwrap();
    assert_eq!(&events[..cut as usize], &before.1[..cut as usize]);
    assert_eq!(events.len() as u64, cut + 1);
    assert_eq!(events[cut as usize].ty(), "session/end-seed");
    assert_eq!(events[cut as usize].seq(), cut);
    // The child's inbox replays from seedLength: empty, although the parent has pending
    // input in the copied part.
    assert!(!child.inbox().has_pending().unwrap());
    // Turn numbers continue after the copied turns.
    assert_eq!(child.open_turn().unwrap(), 2);
    // The parent is unchanged and still usable.
    let after = Session::inspect(&store, "parent").unwrap();
    assert_eq!(after, before);
    assert!(!p.end_step(StepOutcome::Completed).unwrap());
    assert_eq!(lists(&p).0, ["c"]);
}

#[test]
fn fork_of_an_idle_parent_copies_everything() {
    let store = MemoryStore::new();
    let p = busy_parent(&store);
    let parent_events = p.events(0).unwrap();
    let child = Session::fork(&store, "parent", "child", SessionMeta::default()).unwrap();
    let n = parent_events.len() as u64;
    assert_eq!(child.header().seed_length, Some(n));
    assert_eq!(child.header().cwd.as_deref(), Some("/work"));
    assert_eq!(child.header().origin, None);
    let events = child.events(0).unwrap();
    assert_eq!(&events[..n as usize], &parent_events[..]);
    assert_eq!(written(&child, n), [pair("session/end-seed", "{}")]);
    assert!(!child.inbox().has_pending().unwrap());
    assert_eq!(child.open_turn().unwrap(), 2);
    assert_eq!(p.open_turn().unwrap(), 2);
    // Reopened, the child's inbox is still empty.
    child.close().unwrap();
    let child = Session::open(&store, "child").unwrap();
    assert!(!child.inbox().has_pending().unwrap());
    // A fork cannot take an existing id.
    assert_eq!(
        Session::fork(&store, "parent", "child", SessionMeta::default())
            .err()
            .map(|e| e.kind()),
        Some(ErrorKind::AlreadyExists)
    );
}

// ---------------------------------------------------------------------------------
// §1.5: observers.

#[test]
fn observers_run_in_commit_order_then_registration_order() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.inbox().append(Target::NextStep, m("b")).unwrap();
    let (events, notices) = (Sink::default(), Sink::default());
    for name in ["first", "second"] {
        let out = events.clone();
        s.on_event(move |e| {
            out.lock().unwrap().push(format!("{name} {}", e.seq()));
            Ok(())
        });
        let out = notices.clone();
        s.on_inbox(move |n| {
            out.lock()
                .unwrap()
                .push(format!("{name} {} {}", n.ty(), n.message().id()));
            Ok(())
        });
    }
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    assert_eq!(
        taken(&events),
        [
            "first 2", "second 2", "first 3", "second 3", "first 4", "second 4"
        ]
    );
    assert_eq!(
        taken(&notices),
        [
            "first agent/inbox/claimed b",
            "second agent/inbox/claimed b",
            "first agent/inbox/claimed a",
            "second agent/inbox/claimed a",
        ]
    );
}

#[test]
fn observers_run_before_the_call_returns_and_see_the_state_after_it() {
    let store = MemoryStore::new();
    let s = Arc::new(session(&store, "s"));
    for id in ["a", "b", "c"] {
        s.inbox().append(Target::NextTurn, m(id)).unwrap();
    }
    let seen = Sink::default();
    let (weak, out) = (Arc::downgrade(&s), seen.clone());
    s.on_inbox(move |n| {
        let s = weak.upgrade().expect("alive");
        let now = ids(&s.inbox().next_turn().unwrap()).join(",");
        let last = s.last_seq().unwrap().unwrap();
        out.lock()
            .unwrap()
            .push(format!("{} {} [{now}] @{last}", n.ty(), n.message().id()));
        Ok(())
    });
    let (weak, out) = (Arc::downgrade(&s), seen.clone());
    s.on_event(move |e| {
        let s = weak.upgrade().expect("alive");
        let now = ids(&s.inbox().next_turn().unwrap()).join(",");
        out.lock()
            .unwrap()
            .push(format!("event {} [{now}]", e.seq()));
        Ok(())
    });
    let removed = s
        .inbox()
        .splice(Target::NextTurn, 0.0, 2.0, vec![m("d")])
        .unwrap();
    assert_eq!(ids(&removed), ["a", "b"]);
    // Even the event observer of the splice sees the whole call applied.
    let mut got = taken(&seen);
    got.sort();
    assert_eq!(
        got,
        [
            "agent/inbox/discarded a [d,c] @3",
            "agent/inbox/discarded b [d,c] @3",
            "agent/inbox/inserted d [d,c] @3",
            "event 3 [d,c]",
        ]
    );
    // A multi-event call: both observers see the state after the whole call.
    s.open_turn().unwrap();
    s.propose_step().unwrap();
    let got = taken(&seen);
    assert!(got.contains(&"event 4 [d,c]".to_owned()), "{got:?}");
    assert!(got.contains(&"event 5 [c]".to_owned()), "{got:?}");
    assert!(
        got.contains(&"agent/inbox/claimed d [c] @5".to_owned()),
        "{got:?}"
    );
}

#[test]
fn a_failing_or_panicking_observer_is_contained() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.on_event(|_| Err("nope".to_owned()));
    s.on_event(|e| {
        if e.seq() == 0 {
            panic!("observer blew up");
        }
        Ok(())
    });
    s.on_inbox(|n| Err(format!("inbox says no to {}", n.message().id())));
    let later = Sink::default();
    let out = later.clone();
    s.on_event(move |e| {
        out.lock().unwrap().push(format!("event {}", e.seq()));
        Ok(())
    });
    let out = later.clone();
    s.on_inbox(move |n: &InboxNotice| {
        out.lock().unwrap().push(n.ty().to_owned());
        Ok(())
    });
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    assert_eq!(
        taken(&later),
        ["event 0", "agent/inbox/inserted"],
        "later observers still run"
    );
    // The call stays committed.
    assert_eq!(lists(&s).0, ["a"]);
    assert_eq!(Session::inspect(&store, "s").unwrap().1.len(), 1);
    let failures = s.take_observer_failures().lines();
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(failures.iter().any(|f| f.contains("nope")), "{failures:?}");
    assert!(
        failures.iter().any(|f| f.contains("observer blew up")),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("inbox says no to a")),
        "{failures:?}"
    );
    assert!(s.take_observer_failures().is_empty());
    // The session keeps working, and a panic did not poison it.
    s.inbox().remove("a").unwrap();
    assert_eq!(s.take_observer_failures().messages.len(), 2);
}

#[test]
fn canceled_turn_notifies_discarded_then_writes_the_turn_end() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    let notices = record_inbox(&s);
    let since = next_seq(&s);
    s.cancel(
        CancelCause::Hook {
            reason: "stop".into(),
        },
        false,
    )
    .unwrap();
    assert_eq!(
        written(&s, since),
        [
            pair(
                SPLICED,
                r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}"#
            ),
            step("step/end", 1, 1),
            te(
                1,
                r#"{"kind":"aborted","reason":{"kind":"hook","reason":"stop"}}"#
            ),
        ]
    );
    assert_eq!(
        taken(&notices),
        [r#"{"type":"agent/inbox/discarded","message":{"id":"b","content":"b!"}}"#]
    );
}

#[test]
fn observers_see_commit_order_across_threads_before_each_call_returns() {
    let store = MemoryStore::new();
    let s = Arc::new(session(&store, "s"));
    let seqs: Arc<Mutex<Vec<u64>>> = Arc::default();
    let out = seqs.clone();
    s.on_event(move |e| {
        out.lock().unwrap().push(e.seq());
        Ok(())
    });
    let inserted = Sink::default();
    let out = inserted.clone();
    s.on_inbox(move |n| {
        out.lock().unwrap().push(n.message().id().to_owned());
        Ok(())
    });
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (s, seqs, inserted) = (s.clone(), seqs.clone(), inserted.clone());
            std::thread::spawn(move || {
                for i in 0..100 {
                    // Each call's publication happens before the call returns.
                    if i % 2 == 0 {
                        let seq = s
                            .append("host/x", &format!(r#"{{"t":{t}}}"#), Default::default())
                            .unwrap()
                            .seq();
                        assert!(seqs.lock().unwrap().contains(&seq), "seq {seq}");
                    } else {
                        let id = format!("t{t}-{i}");
                        s.inbox().append(Target::NextTurn, m(&id)).unwrap();
                        assert!(inserted.lock().unwrap().contains(&id), "{id}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let seqs = seqs.lock().unwrap().clone();
    assert_eq!(seqs, (0..400).collect::<Vec<u64>>(), "commit order");
    assert_eq!(inserted.lock().unwrap().len(), 200);
}

#[test]
fn an_observer_may_mutate_another_session() {
    let store = MemoryStore::new();
    let a = session(&store, "a");
    let b = Arc::new(session(&store, "b"));
    let mirror = b.clone();
    a.on_inbox(move |n| {
        if let InboxNotice::Inserted(msg) = n {
            mirror
                .inbox()
                .append(Target::NextTurn, msg.clone())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    a.inbox().append(Target::NextTurn, m("x")).unwrap();
    assert!(a.take_observer_failures().is_empty());
    assert_eq!(lists(&b).0, ["x"]);
}

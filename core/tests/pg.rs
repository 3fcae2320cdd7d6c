//! The PostgreSQL store against a real server (ARCHITECTURE.md#postgresql): the stored shape, ownership
//! and fencing within one process, bad input, connection failures (TLS is in `pg_tls.rs`). The
//! multi-process ownership and fault tests are in `pg_fleet.rs`; the behaviour suites
//! shared with the other stores (`store.rs`, `verify.rs`, `model.rs`,
//! `hostile_input.rs`) include this store too.

mod pg_common;

use std::sync::{Arc, Barrier};

use inboxlog::store::postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use inboxlog::store::{Durability, JsonlStore, MemoryStore, OpenOptions, Store};
use inboxlog::{
    Decision, Envelope, ErrorKind, Event, Message, Session, SessionMeta, StepOutcome, Target,
};
use pg_common::{Schema, url};

fn msg(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","big":9007199254740993}}"#
    ))
    .unwrap()
}

#[track_caller]
fn refused<T>(result: inboxlog::Result<T>, kind: ErrorKind, needles: &[&str]) -> inboxlog::Error {
    let Err(err) = result else {
        panic!("expected {kind} error, got Ok")
    };
    assert_eq!(err.kind(), kind, "{err}");
    for needle in needles {
        assert!(err.to_string().contains(needle), "{needle:?} not in {err}");
    }
    err
}

/// A turn with an inbox message, a host event with big integers and reordered keys.
fn drive(s: &Session) {
    s.inbox().append(Target::NextTurn, msg("m1")).unwrap();
    s.append(
        "host/x",
        r#"{"z":1,"a":[12345678901234567890,1.5e300],"m":{"b":null,"a":"é\n"}}"#,
        Envelope::default(),
    )
    .unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
}

#[test]
fn a_log_is_one_select_of_the_lines_the_jsonl_store_writes() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    drive(&s);
    let events = s.events(0).unwrap();
    let lines = schema.lines("s");
    assert_eq!(
        lines,
        events.iter().map(Event::to_json).collect::<Vec<_>>(),
        "each row is the event's compact JSON line"
    );
    assert!(lines[1].contains(r#"{"z":1,"a":[12345678901234567890,1.5e300],"m":{"b":null"#));
    // The same calls on the JSONL store write the same lines (but for their times).
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let j = Session::create(&jsonl, "s", SessionMeta::default()).unwrap();
    drive(&j);
    let text = std::fs::read_to_string(jsonl.path("s").unwrap()).unwrap();
    let strip = |l: &str| {
        let at = l.find(r#","time":"#).unwrap();
        let end = at + l[at..].find(r#","data""#).unwrap();
        format!("{}{}", &l[..at], &l[end..])
    };
    let file: Vec<String> = text.lines().skip(1).map(strip).collect();
    assert_eq!(lines.iter().map(|l| strip(l)).collect::<Vec<_>>(), file);
    // The type column, and the header row.
    let mut c = pg_common::client().unwrap();
    let types: Vec<String> = c
        .query(
            &format!(
                "SELECT type FROM \"{}\".events WHERE session = 's' ORDER BY seq",
                schema.name
            ),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(types, events.iter().map(Event::ty).collect::<Vec<_>>());
    let header: String = c
        .query_one(
            &format!(
                "SELECT header FROM \"{}\".sessions WHERE id = 's'",
                schema.name
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(header, s.header().to_json());
    // Reopened: the same events and inbox; inspect and list agree.
    s.close().unwrap();
    let again = Session::open(&store, "s").unwrap();
    assert_eq!(again.events(0).unwrap(), events);
    assert_eq!(Session::inspect(&store, "s").unwrap().1, events);
    assert_eq!(store.list().unwrap(), vec![again.header().clone()]);
}

#[test]
fn opening_repairs_an_interrupted_turn_and_replays_the_inbox() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for id in ["a", "b", "c"] {
        s.inbox().append(Target::NextTurn, msg(id)).unwrap();
    }
    s.inbox().append(Target::NextStep, msg("st")).unwrap();
    for i in 0..50 {
        s.append(
            "host/chunk",
            &format!(r#"{{"i":{i}}}"#),
            Envelope::default(),
        )
        .unwrap();
    }
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.append("host/chunk", "{}", Envelope::default()).unwrap();
    let last_time = s.events(0).unwrap().last().unwrap().time();
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(1));
    assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("b"), msg("c")]);
    assert!(s.inbox().next_step().unwrap().is_empty());
    let tail = schema.lines("s");
    assert!(tail[tail.len() - 2].starts_with(r#"{"type":"step/end""#));
    assert!(tail[tail.len() - 1].contains(r#""data":{"turn":1,"reason":{"kind":"interrupted"}}"#));
    assert!(tail[tail.len() - 1].contains(&format!(r#""time":{last_time},"#)));
    drop(s);
    let again = Session::open(&store, "s").unwrap();
    assert_eq!(again.open_report().repaired_turn, None);
    assert_eq!(schema.lines("s"), tail, "opening twice adds nothing");
    assert_eq!(again.open_turn().unwrap(), 2);
}

#[test]
fn fork_seeds_and_delete_work_as_on_every_store() {
    let Some((schema, store)) = pg_common::store(Durability::Batched) else {
        return;
    };
    let s = Session::create(&store, "p", SessionMeta::default()).unwrap();
    drive(&s);
    s.flush().unwrap();
    let child = Session::fork(&store, "p", "c", SessionMeta::default()).unwrap();
    let parent = s.events(0).unwrap();
    let copied = child.events(0).unwrap();
    assert_eq!(&copied[..parent.len()], &parent[..]);
    assert_eq!(copied.last().unwrap().ty(), "session/end-seed");
    assert_eq!(child.header().seed_length, Some(parent.len() as u64));
    assert_eq!(child.open_turn().unwrap(), 2);
    child.close().unwrap();
    s.close().unwrap();
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(ids, ["c", "p"]);
    Session::delete(&store, "p").unwrap();
    assert!(
        schema.lines("p").is_empty(),
        "the rows went with the session"
    );
    refused(
        Session::open(&store, "p"),
        ErrorKind::NotFound,
        &["no session \"p\""],
    );
    refused(
        Session::create(&store, "c", SessionMeta::default()),
        ErrorKind::AlreadyExists,
        &["session \"c\" already exists"],
    );
}

#[test]
fn a_second_open_is_locked_and_a_takeover_fences_the_first_writer() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let first = Session::create(&store, "s", SessionMeta::default()).unwrap();
    first.append("host/a", "{}", Envelope::default()).unwrap();
    let err = refused(
        Session::open(&store, "s"),
        ErrorKind::Locked,
        &["session \"s\" is locked by another writer"],
    );
    assert_eq!(err.session(), Some("s"));
    let before = schema.snapshot("s");
    let second = Session::open_with(&store, "s", &OpenOptions::takeover(true)).unwrap();
    assert_eq!(schema.snapshot("s"), before, "a takeover writes no event");
    second.append("host/b", "{}", Envelope::default()).unwrap();
    let err = refused(
        first.append("host/late", "{}", Envelope::default()),
        ErrorKind::Fenced,
        &[
            "session \"s\" was taken over by another writer",
            "epochs name owners, they are not a clock",
            "wrote nothing",
        ],
    );
    assert_eq!(err.session(), Some("s"));
    // Fenced for good, whatever the call; nothing of it was written.
    refused(first.open_turn(), ErrorKind::Fenced, &["taken over"]);
    refused(first.flush(), ErrorKind::Fenced, &[]);
    let lines = schema.lines("s");
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| !l.contains("host/late")));
    // The new owner goes on; the old one released its lock (a plain open is still
    // locked, by the new owner).
    second.open_turn().unwrap();
    refused(Session::open(&store, "s"), ErrorKind::Locked, &[]);
    second.close().unwrap();
    let third = Session::open(&store, "s").unwrap();
    assert_eq!(third.open_report().repaired_turn, Some(1));
}

#[test]
fn takeover_is_refused_by_stores_whose_locks_die_with_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let memory = MemoryStore::new();
    for store in [&jsonl as &dyn Store, &memory] {
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let err = refused(
            Session::open_with(store, "s", &OpenOptions::takeover(true)),
            ErrorKind::InvalidInput,
            &["takeover is for stores whose owner may be alive on another machine"],
        );
        assert_eq!(err.session(), Some("s"));
        // Without takeover the same call opens.
        Session::open_with(store, "s", &OpenOptions::default()).unwrap();
    }
    let Some((_schema, pg)) = pg_common::store(Durability::Sync) else {
        return;
    };
    refused(
        Session::open_with(&pg, "nobody", &OpenOptions::takeover(true)),
        ErrorKind::NotFound,
        &["no session \"nobody\""],
    );
}

#[test]
fn a_foreign_write_behind_the_writer_is_corrupt_and_poisons() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/a", "{}", Envelope::default()).unwrap();
    schema.exec(
        "INSERT INTO {s}.events VALUES ('s', 1, 'host/x', '{\"type\":\"host/x\",\"seq\":1,\"time\":0,\"data\":{}}');
         UPDATE {s}.sessions SET next_seq = 2 WHERE id = 's'",
    );
    let err = refused(
        s.append("host/b", "{}", Envelope::default()),
        ErrorKind::Corrupt,
        &[
            "append at seq 1",
            "the stored tail moved to seq 2",
            "nothing was written",
        ],
    );
    assert_eq!((err.session(), err.seq()), (Some("s"), Some(1)));
    refused(
        s.append("host/c", "{}", Envelope::default()),
        ErrorKind::Poisoned,
        &["reopen"],
    );
    // A row inserted without moving next_seq collides with the next append instead.
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    schema.exec(
        "INSERT INTO {s}.events VALUES ('s', 2, 'host/x', '{\"type\":\"host/x\",\"seq\":2,\"time\":0,\"data\":{}}')",
    );
    refused(
        s.append("host/d", "{}", Envelope::default()),
        ErrorKind::Corrupt,
        &["already stored (a foreign writer)"],
    );
    assert_eq!(schema.lines("s").len(), 3);
}

#[test]
fn batched_appends_are_durable_after_flush_and_a_call_is_all_or_nothing() {
    let Some((schema, store)) = pg_common::store(Durability::Batched) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for i in 0..20 {
        s.append("host/n", &format!("{i}"), Envelope::default())
            .unwrap();
    }
    s.flush().unwrap();
    assert_eq!(schema.lines("s").len(), 20);
    // A record over the limit is refused before anything is written.
    let small = PgStore::connect(
        &url(),
        PgOptions {
            record_limit: 300,
            ..schema.options(Durability::Sync)
        },
    )
    .unwrap();
    let t = Session::create(&small, "t", SessionMeta::default()).unwrap();
    t.inbox().append(Target::NextTurn, msg("a")).unwrap();
    let err = refused(
        t.append(
            "host/big",
            &format!("\"{}\"", "x".repeat(400)),
            Envelope::default(),
        ),
        ErrorKind::TooLarge,
        &["larger than the record limit of 300 bytes"],
    );
    assert_eq!(err.seq(), Some(1));
    assert_eq!(schema.lines("t").len(), 1);
}

#[test]
fn eight_workers_starting_at_once_all_set_up_the_schema() {
    let Some(schema) = Schema::new() else { return };
    let barrier = Arc::new(Barrier::new(8));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let options = schema.options(Durability::Sync);
            std::thread::spawn(move || {
                barrier.wait();
                let store = PgStore::connect(&url(), options).unwrap();
                let s = Session::create(&store, &format!("w{i}"), SessionMeta::default()).unwrap();
                s.append("host/hi", "{}", Envelope::default()).unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let store = schema.store(Durability::Sync);
    assert_eq!(store.list().unwrap().len(), 8);
}

#[test]
fn bad_urls_and_schema_names_are_invalid_input() {
    for (bad, needle) in [
        ("http://127.0.0.1/test", "must start with postgresql://"),
        (
            "postgresql://u:hunter2@127.0.0.1:notaport/test",
            "port \"notaport\"",
        ),
        (
            "postgresql://u:hunter2@127.0.0.1/test?sslmode=sometimes",
            "sslmode",
        ),
    ] {
        let err = refused(
            PgStore::connect(bad, PgOptions::default()),
            ErrorKind::InvalidInput,
            &[needle],
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
    for schema in [
        "",
        "Public",
        "a-b",
        "x\"; DROP TABLE y; --",
        &"s".repeat(64),
    ] {
        refused(
            PgStore::connect(
                &url(),
                PgOptions {
                    schema: schema.to_owned(),
                    ..PgOptions::default()
                },
            ),
            ErrorKind::InvalidInput,
            &["is not a plain SQL identifier"],
        );
    }
}

#[test]
fn a_newer_schema_version_is_refused_naming_both() {
    let Some(schema) = Schema::new() else { return };
    drop(schema.store(Durability::Sync));
    schema.exec(&format!(
        "UPDATE {{s}}.schema_version SET version = {}",
        SCHEMA_VERSION + 1
    ));
    let err = refused(
        PgStore::connect(&url(), schema.options(Durability::Sync)),
        ErrorKind::FormatUnsupported,
        &[
            &format!("holds inboxlog tables of version {}", SCHEMA_VERSION + 1),
            "written by a newer inboxlog",
            &format!("this inboxlog reads version {SCHEMA_VERSION}"),
        ],
    );
    assert!(err.to_string().contains(&schema.name), "{err}");
}

#[test]
fn an_unreachable_server_is_unavailable_naming_host_and_port_never_the_password() {
    for (url, needles) in [
        (
            "postgresql://someone:hunter2@127.0.0.1:9/test?connect_timeout=2",
            &["127.0.0.1:9", "cannot connect"][..],
        ),
        (
            "postgresql://someone:hunter2@no-such-host.invalid:5432/test?connect_timeout=2",
            &["no-such-host.invalid:5432"][..],
        ),
        (
            "postgresql://someone@127.0.0.1:9/test?password=hunter2&connect_timeout=2",
            &["127.0.0.1:9"][..],
        ),
    ] {
        let err = refused(
            PgStore::connect(url, PgOptions::default()),
            ErrorKind::Unavailable,
            needles,
        );
        let all = format!("{err} {err:?}");
        assert!(!all.contains("hunter2"), "{all}");
    }
}

#[test]
fn a_terminated_connection_fails_the_next_call_and_reopening_recovers() {
    let Some(schema) = Schema::new() else { return };
    let app = format!("owner_{}", schema.name);
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let store = PgStore::connect(
        &format!("{base}{sep}application_name={app}"),
        schema.options(Durability::Sync),
    )
    .unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/a", "{}", Envelope::default()).unwrap();
    s.open_turn().unwrap();
    let mut c = pg_common::client().unwrap();
    let killed: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1);
    let err = s.append("host/b", "{}", Envelope::default()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Poisoned),
        "{err}"
    );
    assert!(
        err.to_string().contains("127.0.0.1") || err.kind() == ErrorKind::Poisoned,
        "{err}"
    );
    if err.kind() == ErrorKind::Unavailable {
        assert!(err.to_string().contains("outcome is unknown"), "{err}");
    }
    refused(
        s.append("host/c", "{}", Envelope::default()),
        ErrorKind::Poisoned,
        &["reopen"],
    );
    drop(s);
    // The lock went with the connection: reopening works and nothing acknowledged is lost.
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(1));
    let lines = schema.lines("s");
    assert!(lines[0].contains("host/a") && lines[1].contains("turn/start"));
}

#[test]
fn rows_edited_by_hand_are_refused_naming_session_and_seq_and_nothing_changes() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    drive(&s);
    s.append("host/tail", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    let clean = schema.snapshot("s");

    // A host row into invalid JSON: every reader of rows refuses it, naming its seq;
    // open, which reads the replayed rows alone, is not slowed by it (verify's job).
    schema.exec(
        "UPDATE {s}.events SET line = '{\"type\":\"host/x\",' WHERE session = 's' AND seq = 1",
    );
    let broken = schema.snapshot("s");
    let needles = ["corrupt session \"s\"", "at seq 1", "invalid event"];
    for err in [
        Session::verify(&store, "s").map(drop).unwrap_err(),
        Session::inspect(&store, "s").map(drop).unwrap_err(),
    ] {
        assert_eq!(
            (err.kind(), err.session(), err.seq()),
            (ErrorKind::Corrupt, Some("s"), Some(1))
        );
        for n in needles {
            assert!(err.to_string().contains(n), "{n:?} not in {err}");
        }
    }
    let opened = Session::open(&store, "s").unwrap();
    refused(opened.events(0), ErrorKind::Corrupt, &needles);
    assert_eq!(
        opened.events(2).unwrap().len(),
        7,
        "rows after the bad one read fine"
    );
    drop(opened);
    assert_eq!(schema.snapshot("s"), broken, "opening changed nothing");

    // A replayed row into invalid JSON, a type column that lies, a seq gap: open refuses
    // too, the same way verify does, and nothing changes.
    for (edit, seq, needle) in [
        (
            "UPDATE {s}.events SET line = 'nonsense' WHERE session = 's' AND seq = 2",
            2,
            "invalid event",
        ),
        (
            "UPDATE {s}.events SET type = 'turn/start' WHERE session = 's' AND seq = 1",
            1,
            "the row's type column says \"turn/start\" but its event is of type \"host/x\"",
        ),
        (
            "DELETE FROM {s}.events WHERE session = 's' AND seq = 4",
            5,
            "seq 5 does not continue the log (expected seq 4)",
        ),
        (
            "UPDATE {s}.sessions SET next_seq = 20 WHERE id = 's'",
            9,
            "the session row says the next seq is 20, but the stored events end before seq 9",
        ),
    ] {
        schema.exec("DELETE FROM {s}.events; DELETE FROM {s}.sessions");
        let mut c = pg_common::client().unwrap();
        restore(&mut c, &schema.name, &clean);
        schema.exec(edit);
        let before = schema.snapshot("s");
        let v = Session::verify(&store, "s").map(drop).unwrap_err();
        let o = Session::open(&store, "s").map(drop).unwrap_err();
        for err in [&v, &o] {
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert_eq!((err.session(), err.seq()), (Some("s"), Some(seq)), "{err}");
            assert!(err.to_string().contains(needle), "{needle:?} not in {err}");
        }
        assert_eq!(v.to_string(), o.to_string());
        assert_eq!(schema.snapshot("s"), before, "a refused open changed rows");
    }
}

/// Puts back the rows of session `s` from a [`Schema::snapshot`] text.
fn restore(c: &mut postgres::Client, schema: &str, snapshot: &str) {
    let mut lines = snapshot.lines();
    // The first line is the session row as a Debug list of one string: JSON too.
    let head: Vec<String> = serde_json::from_str(lines.next().unwrap()).unwrap();
    let (header, next) = head[0].rsplit_once(' ').unwrap();
    c.execute(
        &format!("INSERT INTO \"{schema}\".sessions VALUES ('s', $1, 0, $2)"),
        &[&header, &next.parse::<i64>().unwrap()],
    )
    .unwrap();
    for row in lines {
        let mut parts = row.splitn(3, ' ');
        let seq: i64 = parts.next().unwrap().parse().unwrap();
        let ty = parts.next().unwrap();
        let line = parts.next().unwrap();
        c.execute(
            &format!("INSERT INTO \"{schema}\".events VALUES ('s', $1, $2, $3)"),
            &[&seq, &ty, &line],
        )
        .unwrap();
    }
}

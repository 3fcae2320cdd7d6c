//! The PostgreSQL store against a real server (ARCHITECTURE.md#postgresql): the stored
//! shape, rows edited behind the writer or by hand, schema setup and versions, bad
//! input, connection failures (TLS is in `pg_tls.rs`). What every store does alike
//! (ownership, takeover, recovery, forks, limits) is in the store suite
//! (`core/tests/store/`), which runs over this store too, as do `verify.rs`,
//! `model.rs` and `hostile_input.rs`.

mod common;
mod pg_common;

use std::sync::{Arc, Barrier};

use common::{assert_err, msg};
use inboxlog::store::postgres::{PgOptions, PgStore, SCHEMA_VERSION};
use inboxlog::store::{Durability, JsonlStore, Store};
use inboxlog::{Decision, Envelope, ErrorKind, Session, SessionMeta, StepOutcome, Target};
use pg_common::{Schema, url};

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
        events
            .iter()
            .map(inboxlog::Event::to_json)
            .collect::<Vec<_>>(),
        "each row is the event's compact JSON line"
    );
    assert!(lines[1].contains(r#"{"z":1,"a":[12345678901234567890,1.5e300],"m":{"b":null"#));
    // The same calls on the JSONL store write the same lines (but for their times, and
    // the JSONL line's checksum after the event: core/FORMAT.md#checksums-version-2).
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
    let unsealed = |l: &str| format!("{}}}", &l[..l.rfind(r#","synced":"#).unwrap()]);
    let file: Vec<String> = text.lines().skip(1).map(|l| strip(&unsealed(l))).collect();
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
    assert_eq!(
        types,
        events.iter().map(inboxlog::Event::ty).collect::<Vec<_>>()
    );
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
    // Deleted: the rows go with the session.
    again.close().unwrap();
    Session::delete(&store, "s").unwrap();
    assert!(schema.lines("s").is_empty());
    assert!(
        schema.snapshot("s").starts_with("[]"),
        "{}",
        schema.snapshot("s")
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
    let err = assert_err(
        s.append("host/b", "{}", Envelope::default()),
        ErrorKind::Corrupt,
        &[
            "append at seq 1",
            "the stored tail moved to seq 2",
            "nothing was written",
        ],
    );
    assert_eq!((err.session(), err.seq()), (Some("s"), Some(1)));
    assert_err(
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
    assert_err(
        s.append("host/d", "{}", Envelope::default()),
        ErrorKind::Corrupt,
        &["already stored (a foreign writer)"],
    );
    assert_eq!(schema.lines("s").len(), 3);
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
        let err = assert_err(
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
        assert_err(
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
    let err = assert_err(
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

/// Version 4 had no `events.crc`: connecting upgrades the tables in place, the rows
/// written before read as they are (no checksum), the rows written after carry one.
#[test]
fn version_4_tables_gain_event_checksums_in_place() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/old", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    drop(store);
    schema
        .exec("ALTER TABLE {s}.events DROP COLUMN crc; DROP TABLE {s}.checkpoints; UPDATE {s}.schema_version SET version = 4");
    let store = PgStore::connect(&url(), schema.options(Durability::Sync)).unwrap();
    let mut c = pg_common::client().unwrap();
    let version: i32 = c
        .query_one(
            &format!("SELECT version FROM \"{}\".schema_version", schema.name),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    let s = Session::open(&store, "s").unwrap();
    s.append("host/new", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    let crcs: Vec<Option<i32>> = c
        .query(
            &format!(
                "SELECT crc FROM \"{}\".events WHERE session = 's' ORDER BY seq",
                schema.name
            ),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(crcs[0], None, "written before the upgrade");
    assert!(crcs[1..].iter().all(Option::is_some), "{crcs:?}");
    Session::verify(&store, "s").unwrap();
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
        let err = assert_err(
            PgStore::connect(url, PgOptions::default()),
            ErrorKind::Unavailable,
            needles,
        );
        let all = format!("{err} {err:?}");
        assert!(!all.contains("hunter2"), "{all}");
    }
}

/// Every connection of a handle terminated at once (its home connection with its owner
/// lock, and its pooled ones): the next call either goes through on a new connection
/// (the handle re-owned the session) or fails naming the server, its outcome unknown,
/// and then the writer is poisoned. Either way reopening recovers, and nothing
/// acknowledged is lost.
#[test]
fn a_terminated_connection_fails_or_is_replaced_and_reopening_recovers() {
    let Some(schema) = Schema::new() else { return };
    let app = format!("owner_{}", schema.name);
    let store = PgStore::connect(
        &pg_common::url_named(&app),
        schema.options(Durability::Sync),
    )
    .unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/a", "{}", Envelope::default()).unwrap();
    s.open_turn().unwrap();
    assert!(pg_common::terminate(&app) >= 1);
    let after = s.append("host/b", "{}", Envelope::default());
    if let Err(err) = &after {
        assert!(
            matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Poisoned),
            "{err}"
        );
        assert!(
            err.to_string().contains("127.0.0.1") || err.kind() == ErrorKind::Poisoned,
            "{err}"
        );
        if err.kind() == ErrorKind::Unavailable && err.to_string().contains("in flight") {
            assert!(err.to_string().contains("outcome is unknown"), "{err}");
            assert_err(
                s.append("host/c", "{}", Envelope::default()),
                ErrorKind::Poisoned,
                &["reopen"],
            );
        }
    }
    drop(s);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(s.open_report().repaired_turn, Some(1));
    let lines = schema.lines("s");
    assert!(lines[0].contains("host/a") && lines[1].contains("turn/start"));
    if after.is_ok() {
        assert!(lines[2].contains("host/b"), "{lines:?}");
    }
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
    // Without its checkpoint, which open would start from, trusting the rows before it
    // (ARCHITECTURE.md#checkpoints-and-reading-without-owning): here every reader reads
    // from seq 0.
    schema.exec("DELETE FROM {s}.checkpoints");
    let clean = schema.snapshot("s");

    // A line changed by hand, still a valid event, is refused by its checksum (schema
    // version 5); rows without one (written before it) are read as before.
    schema.exec(
        "UPDATE {s}.events SET line = replace(line, '\"host/tail\"', '\"host/tall\"'), type = 'host/tall' \
         WHERE session = 's' AND type = 'host/tail'",
    );
    for err in [
        Session::verify(&store, "s").map(drop).unwrap_err(),
        Session::inspect(&store, "s").map(drop).unwrap_err(),
    ] {
        assert_eq!((err.kind(), err.session()), (ErrorKind::Corrupt, Some("s")));
        assert!(
            err.to_string().contains("does not match its checksum"),
            "{err}"
        );
    }
    schema.exec("UPDATE {s}.events SET crc = NULL WHERE session = 's' AND type = 'host/tall'");
    assert_eq!(
        Session::inspect(&store, "s")
            .unwrap()
            .1
            .last()
            .unwrap()
            .ty(),
        "host/tall"
    );
    schema.exec(
        "UPDATE {s}.events SET line = replace(line, '\"host/tall\"', '\"host/tail\"'), type = 'host/tail' \
         WHERE session = 's' AND type = 'host/tall'",
    );
    schema.exec("DELETE FROM {s}.events; DELETE FROM {s}.sessions");
    restore(&mut pg_common::client().unwrap(), &schema.name, &clean);

    // A host row into invalid JSON: every reader of rows refuses it, naming its seq;
    // open, which reads the replayed rows alone, is not slowed by it (verify's job).
    schema.exec(
        "UPDATE {s}.events SET crc = NULL, line = '{\"type\":\"host/x\",' WHERE session = 's' AND seq = 1",
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
    assert_err(opened.events(0), ErrorKind::Corrupt, &needles);
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
            "UPDATE {s}.events SET crc = NULL, line = 'nonsense' WHERE session = 's' AND seq = 2",
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

/// A session's checkpoint row (ARCHITECTURE.md#checkpoints-and-reading-without-owning)
/// with `edit` applied to its body and its checksum made right again.
fn resealed(body: &str, edit: impl Fn(&str) -> String) -> String {
    let covered = edit(&body[..body.rfind(",\"crc32c\":").unwrap()]);
    format!(
        "{covered},\"crc32c\":\"{:08x}\"}}",
        crc32c::crc32c(covered.as_bytes())
    )
}

/// A doctored checkpoint row is refused by open and verify, named; one with a matching
/// checksum and binding but another state is refused by verify (open trusts it).
#[test]
fn a_doctored_checkpoint_row_is_refused_named() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::Sync);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    drive(&s);
    s.inbox().append(Target::NextTurn, msg("kept")).unwrap();
    s.close().unwrap();
    let mut c = pg_common::client().unwrap();
    let read = |c: &mut postgres::Client| -> String {
        c.query_one(
            &format!(
                "SELECT body FROM \"{}\".checkpoints WHERE session = 's'",
                schema.name
            ),
            &[],
        )
        .unwrap()
        .get(0)
    };
    let good = read(&mut c);
    let write = |c: &mut postgres::Client, body: &str| {
        c.execute(
            &format!(
                "UPDATE \"{}\".checkpoints SET body = $1 WHERE session = 's'",
                schema.name
            ),
            &[&body],
        )
        .unwrap();
    };
    let refused = |needles: &[&str], by_open: bool| {
        let mut all = vec!["corrupt checkpoint of session \"s\""];
        all.extend_from_slice(needles);
        assert_err(Session::verify(&store, "s"), ErrorKind::Corrupt, &all);
        if by_open {
            assert_err(Session::open(&store, "s"), ErrorKind::Corrupt, &all);
        } else {
            drop(Session::open(&store, "s").unwrap());
        }
    };
    write(&mut c, &good.replacen("\"lastTurn\":", "\"lastTurn\":9", 1));
    refused(&["does not match its bytes"], true);
    write(
        &mut c,
        &resealed(&good, |b| {
            let at = b.find("\"chain\":\"").unwrap() + 9;
            let mut s = b.to_owned();
            let d = if &b[at..=at] == "0" { "1" } else { "0" };
            s.replace_range(at..=at, d);
            s
        }),
    );
    refused(&["is not a checkpoint of this log"], true);
    write(
        &mut c,
        &resealed(&good, |b| {
            b.replacen("\"nextTurn\":[", "\"nextTurn\":[{\"id\":\"forged\"},", 1)
        }),
    );
    refused(&["does not match the log replayed up to seq"], false);
    write(&mut c, &good);
    Session::verify(&store, "s").unwrap();
    // Version 5 had no checkpoints: connecting adds the table; the session opens from
    // seq 0 and gets one at its next close.
    drop(store);
    schema.exec("DROP TABLE {s}.checkpoints; UPDATE {s}.schema_version SET version = 5");
    let store = PgStore::connect(&url(), schema.options(Durability::Sync)).unwrap();
    let version: i32 = c
        .query_one(
            &format!("SELECT version FROM \"{}\".schema_version", schema.name),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    let s = Session::open(&store, "s").unwrap();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    assert_ne!(read(&mut c), good);
    Session::verify(&store, "s").unwrap();
}

/// Complexity: a tail reads the rows it returns, whatever the planner believes. A table
/// written a moment ago has no statistics yet, and a tail without a lower bound was then
/// planned as a bitmap scan that read and sorted every row of the session. Counted from
/// the server's own plan (`EXPLAIN ANALYZE`), at 2,000 rows.
#[test]
fn a_tail_reads_only_its_rows_on_a_table_without_statistics() {
    let Some(schema) = Schema::new() else { return };
    let store = schema.store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    for i in 0..2000 {
        s.append("host/x", &format!(r#"{{"i":{i}}}"#), Envelope::default())
            .unwrap();
    }
    s.close().unwrap();
    let text = inboxlog::store::postgres::tail_statement(&schema.name);
    let mut c = pg_common::client().unwrap();
    for (limit, before) in [(1i64, i64::MAX), (16, i64::MAX), (64, 1000)] {
        let plan: Vec<String> = c
            .query(&format!("EXPLAIN ANALYZE {text}"), &[&"s", &limit, &before])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        let scanned = plan
            .iter()
            .filter(|line| line.contains(" on events") || line.contains("using events_pkey"))
            .map(|line| actual_rows(line))
            .max()
            .expect("a node reads the events table");
        assert!(
            scanned <= limit as u64,
            "a tail of {limit} read {scanned} rows of events:\n{}",
            plan.join("\n")
        );
    }
}

/// The `rows=` of a plan line's `(actual time=... rows=N loops=L)`.
fn actual_rows(line: &str) -> u64 {
    let actual = &line[line.find("actual").expect("EXPLAIN ANALYZE")..];
    let rows = &actual[actual.find("rows=").unwrap() + 5..];
    rows[..rows.find(' ').unwrap()].parse().unwrap()
}

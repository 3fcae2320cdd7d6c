//! Posting and following where they meet PostgreSQL (ARCHITECTURE.md#posting): the
//! mailbox table, its move into the log in one transaction with the splices, the schema
//! upgrade that adds it, connections the server terminates under owners and followers,
//! and followers woken by LISTEN/NOTIFY. What every store does alike (posting, posters
//! and owners killed, followers elsewhere, a fenced owner's posts) is in the store suite
//! (`core/tests/store/`).
#![cfg(unix)]

mod common;
mod pg_common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{heard, msg, taken_in};
use inboxlog::store::postgres::SCHEMA_VERSION;
use inboxlog::store::{Durability, OpenOptions, PgStore, Store};
use inboxlog::{
    Envelope, ErrorKind, Follower, Session, SessionMeta, StepOutcome, Target, TurnClaim,
};

/// How many rows wait in the mailbox of the schema.
fn pending_rows(schema: &pg_common::Schema) -> i64 {
    let mut c = pg_common::client().unwrap();
    c.query_one(
        &format!("SELECT count(*) FROM \"{}\".posts", schema.name),
        &[],
    )
    .unwrap()
    .get(0)
}

/// PostgreSQL's part of taking posts in (the behaviour itself is in the store suite,
/// `core/tests/store/post.rs`): the splices and the removal of their rows from the
/// mailbox commit together.
#[test]
fn posts_taken_in_leave_the_posts_table_in_the_same_commit() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    Session::create(&store, "s", SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
    let p1 = store.post("s", Target::NextTurn, &msg("a")).unwrap();
    let p2 = store.post("s", Target::NextStep, &msg("b")).unwrap();
    assert!(p1 < p2, "{p1} {p2}");
    assert_eq!(pending_rows(&schema), 2);
    let s = Session::open(&store, "s").unwrap();
    assert_eq!(taken_in(&s.events(0).unwrap()).len(), 2);
    assert_eq!(pending_rows(&schema), 0);
}

#[test]
fn a_pending_post_the_log_already_holds_is_not_taken_in_twice() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    Session::create(&store, "s", SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
    let post = store.post("s", Target::NextTurn, &msg("a")).unwrap();
    // Keep a copy of the row, take it in, then put the row back: as if the removal
    // had been lost.
    schema.exec("CREATE TABLE {s}.saved AS SELECT * FROM {s}.posts");
    drop(Session::open(&store, "s").unwrap());
    assert_eq!(pending_rows(&schema), 0);
    schema.exec("INSERT INTO {s}.posts SELECT * FROM {s}.saved");
    let s = Session::open(&store, "s").unwrap();
    let taken = taken_in(&s.events(0).unwrap());
    assert_eq!(taken, vec![("a".to_owned(), post)]);
    assert_eq!(pending_rows(&schema), 0, "the stale row is settled");
}

/// Two workers connect to `schema`'s older tables at once: both succeed, and the tables
/// are at the current version afterwards.
fn upgraded_by_two_workers_at_once(schema: &pg_common::Schema) -> Vec<PgStore> {
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let options = schema.options(Durability::Sync);
            thread::spawn(move || PgStore::connect(&pg_common::url(), options).unwrap())
        })
        .collect();
    let stores = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let version: i32 = pg_common::client()
        .unwrap()
        .query_one(
            &format!("SELECT version FROM \"{}\".schema_version", schema.name),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION, "upgraded to the current version");
    stores
}

#[test]
fn version_1_tables_are_upgraded_in_place_and_posts_work() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    Session::create(&store, "s", SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
    drop(store);
    schema.exec(
        "DROP TABLE {s}.posts; DROP SEQUENCE {s}.post_numbers;
         UPDATE {s}.schema_version SET version = 1",
    );
    let stores = upgraded_by_two_workers_at_once(&schema);
    stores[0].post("s", Target::NextTurn, &msg("a")).unwrap();
    let s = Session::open(&stores[1], "s").unwrap();
    assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("a")]);
}

/// Version 3 had a foreign key from `events` to `sessions` (one row-locking lookup per
/// inserted row); the upgrade drops it, and deleting a session then removes its events
/// itself: no row of the deleted session is left, another session keeps all of its, and
/// the id can be created again from seq 0.
#[test]
fn version_3_tables_lose_the_events_key_and_a_delete_takes_the_events_along() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    for id in ["s", "t"] {
        let s = Session::create(&store, id, SessionMeta::default()).unwrap();
        for _ in 0..3 {
            s.append("host/x", "{}", Envelope::default()).unwrap();
        }
        s.close().unwrap();
    }
    store.post("s", Target::NextTurn, &msg("a")).unwrap();
    drop(store);
    schema.exec(
        "ALTER TABLE {s}.events ADD CONSTRAINT events_session_fkey
             FOREIGN KEY (session) REFERENCES {s}.sessions (id) ON DELETE CASCADE;
         UPDATE {s}.schema_version SET version = 3",
    );
    let foreign_keys = || -> i64 {
        let mut c = pg_common::client().unwrap();
        c.query_one(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = $1::text::regclass",
            &[&format!("\"{}\".events", schema.name)],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(foreign_keys(), 1, "the version 3 key is in place");
    let t_before = schema.lines("t");
    let stores = upgraded_by_two_workers_at_once(&schema);
    assert_eq!(foreign_keys(), 0, "the upgrade drops the events' key");

    assert!(schema.lines("s").len() >= 3, "the three appends are stored");
    Session::delete(&stores[0], "s").unwrap();
    assert_eq!(
        schema.lines("s"),
        Vec::<String>::new(),
        "no event row is left"
    );
    assert_eq!(pending_rows(&schema), 0, "nor a pending post");
    assert_eq!(
        schema.lines("t"),
        t_before,
        "another session keeps its rows"
    );
    let s = Session::create(&stores[1], "s", SessionMeta::default()).unwrap();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    assert_eq!(s.events(0).unwrap().len(), schema.lines("s").len());
    assert_eq!(s.events(0).unwrap()[0].seq(), 0);
}

/// The owner's connection dies (the server terminates it) with posts pending and
/// between take-ins: whatever committed is in the log, the rest is still pending, and
/// the next owner takes every post in exactly once.
#[test]
fn an_owner_whose_connection_dies_between_take_ins_delivers_each_post_once() {
    let Some((schema, _)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let store = PgStore::connect(
        &pg_common::url_named("dying-owner"),
        schema.options(Durability::Sync),
    )
    .unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let mut acked = Vec::new();
    for round in 0..5 {
        for i in 0..3 {
            let id = format!("p{round}-{i}");
            store.post("s", Target::NextStep, &msg(&id)).unwrap();
            acked.push(id);
        }
        if round == 0 || round == 2 {
            s.receive().unwrap();
        }
    }
    // Posts of rounds 3 and 4 wait; the owner dies before taking them in.
    let n = pg_common::terminate("dying-owner");
    assert!(n >= 1, "the owner's connection was not found");
    let err = s.receive().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Poisoned),
        "{err}"
    );
    drop(s);
    let other = schema.store(Durability::Sync);
    let s = Session::open_with(&other, "s", &OpenOptions::takeover(true)).unwrap();
    let taken = taken_in(&s.events(0).unwrap());
    let ids: Vec<&str> = taken.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(ids, acked.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(pending_rows(&schema), 0);
}

/// A follower (its own store and connection, in a thread) whose connection the server
/// terminates halfway resumes where it stood, with nothing skipped or repeated. (A
/// follower keeping a projection of the inbox, in every store: the store suite.)
#[test]
fn a_follower_whose_connection_dies_resumes_with_nothing_skipped_or_repeated() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let (tx, rx) = mpsc::channel();
    let options = schema.options(Durability::Sync);
    let follower = thread::spawn(move || {
        let store = PgStore::connect(&pg_common::url_named("follower"), options).unwrap();
        for event in Follower::open(&store, "s", 0).unwrap() {
            let event = event.unwrap();
            tx.send(event.seq()).unwrap();
            if event.ty() == "test/done" {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    for i in 0..200 {
        if i == 100 {
            // The follower is following (it has seen an event): end its handle's
            // connections, not the owner's.
            seen.push(rx.recv_timeout(Duration::from_secs(10)).unwrap());
            let killed = pg_common::terminate("follower");
            assert!(killed >= 1, "the follower's connection was not found");
        }
        s.append("x/n", &i.to_string(), Envelope::default())
            .unwrap();
    }
    s.append("test/done", "{}", Envelope::default()).unwrap();
    follower.join().unwrap();
    seen.extend(rx.try_iter());
    assert_eq!(seen, (0..=200).collect::<Vec<u64>>());
}

/// A follower idle on an idle log is woken by the NOTIFY of the next append, well
/// before its periodic re-read.
#[test]
fn a_follower_is_woken_by_the_appends_notify() {
    let Some((_schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("x/a", "{}", Envelope::default()).unwrap();
    let mut follower = Follower::open(&store, "s", 0).unwrap();
    assert_eq!(
        follower
            .next_timeout(Duration::from_secs(2))
            .unwrap()
            .unwrap()
            .seq(),
        0
    );
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        s.append("x/b", "{}", Envelope::default()).unwrap();
        s
    });
    let start = Instant::now();
    let event = follower
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap();
    let waited = start.elapsed();
    assert_eq!(event.seq(), 1);
    assert!(waited < Duration::from_millis(900), "{waited:?}");
    drop(writer.join().unwrap());
    assert!(
        follower
            .next_timeout(Duration::from_millis(50))
            .unwrap()
            .is_none()
    );
}

/// Moves the schema's `posts` table away (`away`) or back: while it is away, any read
/// of a mailbox fails.
fn hide_posts(schema: &pg_common::Schema, away: bool) {
    let (from, to) = if away {
        ("posts", "posts_away")
    } else {
        ("posts_away", "posts")
    };
    schema.exec(&format!("ALTER TABLE {{s}}.{from} RENAME TO {to}"));
}

/// Counted, not timed: with nothing posted, the step boundaries that decide whether
/// another step is due (`step_boundary`, `end_step_and_close`, `end_step`) read the
/// mailbox zero times, in every durability mode. The server enforces the count: the
/// `posts` table is moved away while three turns run, so a single read would fail
/// them; a `receive` (a read) then does fail.
#[test]
fn step_boundaries_read_no_mailbox_when_nothing_was_posted() {
    for durability in [Durability::Sync, Durability::Batched, Durability::None] {
        let Some((schema, store)) = pg_common::store(durability) else {
            return;
        };
        let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
        // Once the handle LISTENs for posts, a read that finds the mailbox empty lets
        // it answer without reading until a wake-up comes; a probe on the same handle
        // tells when that point is reached.
        let mut probe = store.mailbox("s").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert_eq!(s.receive().unwrap(), 0);
            assert!(probe.pending().unwrap().is_empty());
            hide_posts(&schema, true);
            if probe.may_hold().is_ok_and(|may| !may) {
                break;
            }
            hide_posts(&schema, false);
            assert!(Instant::now() < deadline, "the handle never LISTENed");
            thread::sleep(Duration::from_millis(5));
        }
        for turn in 0..3 {
            s.inbox()
                .append(Target::NextTurn, msg(&format!("q{turn}")))
                .unwrap();
            s.open_turn().unwrap();
            let first = s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
            assert_eq!(first.proposal.messages.len(), 1);
            let again = s
                .step_boundary(Some(StepOutcome::Continue), TurnClaim::First)
                .unwrap();
            assert!(again.is_some(), "{durability:?}");
            match turn {
                0 => {
                    let last = s
                        .step_boundary(Some(StepOutcome::Completed), TurnClaim::First)
                        .unwrap();
                    assert!(last.is_none(), "{durability:?}");
                    s.close_turn().unwrap();
                }
                1 => {
                    let ended = s.end_step_and_close(StepOutcome::Completed).unwrap();
                    assert!(ended.is_some(), "{durability:?}");
                }
                _ => {
                    assert!(!s.end_step(StepOutcome::Completed).unwrap());
                    s.close_turn().unwrap();
                }
            }
        }
        let err = s.receive().unwrap_err();
        assert!(err.to_string().contains("posts"), "{err}");
        hide_posts(&schema, false);
        // A post through the handle itself is known at once.
        s.inbox().append(Target::NextTurn, msg("q")).unwrap();
        s.open_turn().unwrap();
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        store.post("s", Target::NextStep, &msg("steer")).unwrap();
        assert!(
            s.end_step(StepOutcome::Completed).unwrap(),
            "{durability:?}"
        );
        s.flush().unwrap();
    }
}

/// The owner's home connection, which LISTENs for post wake-ups, dies; another worker
/// posts steering while it is down, so its wake-up may reach nobody. The mailbox
/// trusts no count from the loss until it LISTENs again (every count moves then), so
/// the turn's last step still takes the post in and goes on.
#[test]
fn a_post_whose_wake_up_met_a_dead_home_connection_is_read_at_the_last_step() {
    let Some((schema, _)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let name = format!("deaf_{}", schema.name);
    let store = PgStore::connect(
        &pg_common::url_named(&name),
        schema.options(Durability::Sync),
    )
    .unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let mut c = pg_common::client().unwrap();
    let listening = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 \
             AND query LIKE 'LISTEN%'",
            &[&name],
        )
        .unwrap()
        .get(0)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while listening(&mut c) == 0 {
        assert!(Instant::now() < deadline, "the handle never LISTENed");
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(s.receive().unwrap(), 0);
    s.inbox().append(Target::NextTurn, msg("q")).unwrap();
    s.open_turn().unwrap();
    s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
    let killed: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "the home connection");
    schema
        .store(Durability::Sync)
        .post("s", Target::NextStep, &msg("steer"))
        .unwrap();
    heard("postgres", &store, "s");
    assert!(s.end_step(StepOutcome::Completed).unwrap());
    let p = s.propose_step().unwrap();
    assert_eq!(p.messages, vec![msg("steer")]);
    assert_eq!(taken_in(&s.events(0).unwrap()).len(), 1);
}

//! Posting and following on a real PostgreSQL server (ARCHITECTURE.md#posting): the mailbox table,
//! its move into the log in one transaction with the splices, the schema upgrade that
//! adds it, and followers woken by LISTEN/NOTIFY. Posters and followers are threads,
//! each with a store (and connections) of its own as a separate process would have;
//! owners die either as processes killed with SIGKILL (this binary re-executed with
//! `INBOXLOG_PG_POSTS_SCHEMA` set, running only `posts_owner_child`) or as a
//! connection the server terminates.
#![cfg(unix)]

mod pg_common;

use std::collections::{BTreeMap, HashSet};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{Durability, OpenOptions, PgStore, Store};
use inboxlog::{
    Baseline, Decision, Envelope, ErrorKind, Event, Follower, Message, QueueProjection, Session,
    SessionMeta, StepOutcome, Target, ToJson,
};

fn msg(id: &str) -> Message {
    Message::from_json(&format!(
        r#"{{"id":"{id}","role":"user","content":"do {id}"}}"#
    ))
    .unwrap()
}

/// The (message id, post id) of every splice that took a post in, in log order.
fn taken_in(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.ty() == "agent/inbox/spliced" && e.data().contains(r#""post":"#))
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
            (
                v["inserted"][0]["id"].as_str().unwrap().to_owned(),
                v["post"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

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

/// Terminates the server connections of `schema`'s stores (found by the schema's name
/// in their last statement) for which `keep` of that statement is false.
fn terminate(schema: &pg_common::Schema, keep: &dyn Fn(&str) -> bool) -> usize {
    let mut c = pg_common::client().unwrap();
    let rows = c
        .query(
            "SELECT pid, query FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND position($1 in query) > 0",
            &[&schema.name],
        )
        .unwrap();
    let mut n = 0;
    for row in rows {
        let (pid, query): (i32, &str) = (row.get(0), row.get(1));
        if !keep(query) {
            c.execute("SELECT pg_terminate_backend($1)", &[&pid])
                .unwrap();
            n += 1;
        }
    }
    n
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

#[test]
fn a_post_too_large_for_the_record_limit_is_refused() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let store = PgStore::connect(
        &pg_common::url(),
        inboxlog::store::PgOptions {
            record_limit: 300,
            ..schema.options(Durability::Sync)
        },
    )
    .unwrap();
    Session::create(&store, "s", SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
    let big =
        Message::from_json(&format!(r#"{{"id":"x","content":"{}"}}"#, "y".repeat(400))).unwrap();
    let err = store.post("s", Target::NextTurn, &big).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert_eq!(pending_rows(&schema), 0);
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
    // Two workers upgrading at once both succeed.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let options = schema.options(Durability::Sync);
            thread::spawn(move || PgStore::connect(&pg_common::url(), options).unwrap())
        })
        .collect();
    let stores: Vec<PgStore> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut c = pg_common::client().unwrap();
    let version: i32 = c
        .query_one(
            &format!("SELECT version FROM \"{}\".schema_version", schema.name),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, 2);
    stores[0].post("s", Target::NextTurn, &msg("a")).unwrap();
    let s = Session::open(&stores[1], "s").unwrap();
    assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("a")]);
}

/// Four posters (threads with stores of their own) while the owner runs turns: every
/// acknowledged post is in the log exactly once, in each poster's order.
#[test]
fn four_posters_while_the_owner_runs_turns() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let posters: Vec<_> = (0..4)
        .map(|w| {
            let options = schema.options(Durability::Sync);
            thread::spawn(move || {
                let store = PgStore::connect(&pg_common::url(), options).unwrap();
                (0..40)
                    .map(|i| {
                        let id = format!("w{w}-{i:03}");
                        store.post("s", Target::NextTurn, &msg(&id)).unwrap();
                        id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let start = Instant::now();
    let mut turns = 0;
    loop {
        let running = posters.iter().any(|p| !p.is_finished());
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        let empty = p.messages.is_empty();
        s.decide(Decision::Enter(p.messages)).unwrap();
        if !empty {
            s.end_step(StepOutcome::Completed).unwrap();
            s.close_turn().unwrap();
        }
        turns += 1;
        if !running {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "posters hang");
    }
    let acked: Vec<String> = posters
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    s.receive().unwrap();
    assert!(turns > 1);
    let taken = taken_in(&s.events(0).unwrap());
    let ids: Vec<&str> = taken.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(ids.len(), 160);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        160,
        "a post twice"
    );
    let posts: HashSet<&str> = taken.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(posts.len(), 160);
    for id in &acked {
        assert!(ids.contains(&id.as_str()), "{id} lost");
    }
    let mut by_poster: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in &ids {
        by_poster.entry(&id[..2]).or_default().push(id);
    }
    for (poster, order) in by_poster {
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{poster}: {order:?}");
    }
    assert_eq!(pending_rows(&schema), 0);
}

/// The owner's connection dies (the server terminates it) with posts pending and
/// between take-ins: whatever committed is in the log, the rest is still pending, and
/// the next owner takes every post in exactly once.
#[test]
fn an_owner_whose_connection_dies_between_take_ins_delivers_each_post_once() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
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
    let n = terminate(&schema, &|q| !q.contains("WITH owner"));
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

/// A follower (its own store and connection, in a thread) feeding a `QueueProjection`
/// stays equal to the owner's inbox through 1,000 random operations; its connection is
/// terminated halfway and it resumes with nothing skipped or repeated.
#[test]
fn a_follower_keeps_a_projection_equal_to_the_inbox() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let (tx, rx) = mpsc::channel::<(u64, String)>();
    let options = schema.options(Durability::Sync);
    let follower = thread::spawn(move || {
        let store = PgStore::connect(&pg_common::url(), options).unwrap();
        let mut follower = Follower::open(&store, "s", 0).unwrap();
        let mut projection = QueueProjection::new(Baseline {
            seq: None,
            next_turn: Vec::new(),
            next_step: Vec::new(),
        })
        .unwrap();
        for (expected, event) in (&mut follower).enumerate() {
            let event = event.unwrap();
            assert_eq!(event.seq(), expected as u64, "skipped or repeated");
            projection.apply(&event).unwrap();
            let done = event.ty() == "test/done";
            tx.send((event.seq(), projection.baseline().to_json()))
                .unwrap();
            if done {
                return;
            }
        }
    });
    let mut rng = 0x5eed_u64;
    let mut next = || {
        rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut states = BTreeMap::new();
    let inbox = s.inbox();
    let mut killed = 0;
    for i in 0..1_000u64 {
        if i == 500 {
            // The follower's connection only: it LISTENs, the owner's appends.
            killed = terminate(&schema, &|q| q.contains("WITH owner"));
        }
        let target = if next() % 2 == 0 {
            Target::NextTurn
        } else {
            Target::NextStep
        };
        let len = match target {
            Target::NextTurn => inbox.next_turn().unwrap().len(),
            Target::NextStep => inbox.next_step().unwrap().len(),
        } as f64;
        match next() % 10 {
            0..=4 => inbox.append(target, msg(&format!("m{i}"))).unwrap(),
            5 => inbox.prepend(target, msg(&format!("m{i}"))).unwrap(),
            6 | 7 => {
                let at = (next() % (len as u64 + 1)) as f64;
                inbox.splice(target, at, 1.0, Vec::new()).map(drop).unwrap();
            }
            8 => {
                let at = (next() % (len as u64 + 1)) as f64;
                inbox
                    .splice(target, at, 2.0, vec![msg(&format!("r{i}"))])
                    .map(drop)
                    .unwrap();
            }
            _ => s
                .append("x/noise", "{}", Envelope::default())
                .map(drop)
                .unwrap(),
        }
        if let Some(seq) = s.last_seq().unwrap() {
            let state = Baseline {
                seq: Some(seq),
                next_turn: inbox.next_turn().unwrap(),
                next_step: inbox.next_step().unwrap(),
            };
            states.insert(seq, state.to_json());
        }
    }
    assert!(killed >= 1, "the follower's connection was not found");
    s.append("test/done", "{}", Envelope::default()).unwrap();
    let last = s.last_seq().unwrap().unwrap();
    follower.join().unwrap();
    let seen: Vec<(u64, String)> = rx.try_iter().collect();
    assert_eq!(seen.len() as u64, last + 1);
    let mut checked = 0;
    for (seq, state) in seen {
        if let Some(expected) = states.get(&seq) {
            assert_eq!(&state, expected, "at seq {seq}");
            checked += 1;
        }
    }
    // Every state the owner's inbox went through was compared.
    assert_eq!(checked, states.len());
    assert!(checked > 900, "only {checked} states compared");
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

/// A fenced owner's take-in removes nothing from the mailbox: the DELETE runs only
/// when the fence of the same statement matched.
#[test]
fn a_fenced_owner_leaves_the_posts_pending() {
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    store.post("s", Target::NextTurn, &msg("a")).unwrap();
    // Another writer took the session (its epoch moved).
    schema.exec("UPDATE {s}.sessions SET epoch = epoch + 1000");
    let err = s.receive().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert_eq!(pending_rows(&schema), 1);
    drop(s);
    let s = Session::open_with(&store, "s", &OpenOptions::takeover(true)).unwrap();
    assert_eq!(taken_in(&s.events(0).unwrap()).len(), 1);
    assert_eq!(pending_rows(&schema), 0);
}

/// The owner child's entry point (this binary re-executed with `INBOXLOG_PG_POSTS_SCHEMA`
/// set): opens `s` as soon as it is free, says `open`, then takes posts in forever.
#[test]
#[ignore = "the owner process of owners_killed_by_sigkill_deliver_each_post_once"]
fn posts_owner_child() {
    let Ok(schema) = std::env::var("INBOXLOG_PG_POSTS_SCHEMA") else {
        return;
    };
    let store = PgStore::connect(
        &pg_common::url(),
        inboxlog::store::PgOptions {
            schema,
            ..Default::default()
        },
    )
    .unwrap();
    let s = loop {
        match Session::open(&store, "s") {
            Ok(s) => break s,
            Err(e) if e.kind() == ErrorKind::Locked => thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    };
    println!("open");
    loop {
        s.receive().unwrap();
    }
}

/// Owner processes killed with SIGKILL at random points while four posters post:
/// every acknowledged post is in the log exactly once, in each poster's order.
#[test]
fn owners_killed_by_sigkill_deliver_each_post_once() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    Session::create(&store, "s", SessionMeta::default())
        .unwrap()
        .close()
        .unwrap();
    let posters: Vec<_> = (0..4)
        .map(|w| {
            let options = schema.options(Durability::Sync);
            thread::spawn(move || {
                let store = PgStore::connect(&pg_common::url(), options).unwrap();
                (0..50)
                    .map(|i| {
                        let id = format!("w{w}-{i:03}");
                        store.post("s", Target::NextTurn, &msg(&id)).unwrap();
                        thread::sleep(Duration::from_millis(2));
                        id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut kills = 0;
    let mut pause = 7u64;
    while posters.iter().any(|p| !p.is_finished()) || kills < 3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "posts_owner_child", "--nocapture"])
            .env("INBOXLOG_PG_POSTS_SCHEMA", &schema.name)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.unwrap() == "open"),
            "the owner child never opened the session"
        );
        pause = (pause * 7 + 3) % 40;
        thread::sleep(Duration::from_millis(pause));
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
    }
    let acked: Vec<String> = posters
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    // The server releases a killed owner's lock once it sees the connection close: at
    // once for a killed process, give or take the scheduling of this loaded machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let s = loop {
        match Session::open(&store, "s") {
            Err(e) if e.kind() == ErrorKind::Locked && std::time::Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    let taken = taken_in(&s.events(0).unwrap());
    let ids: Vec<&str> = taken.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(ids.len(), 200, "{kills} kills");
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        200,
        "a post twice"
    );
    for id in &acked {
        assert!(ids.contains(&id.as_str()), "{id} lost");
    }
    let mut by_poster: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in &ids {
        by_poster.entry(&id[..2]).or_default().push(id);
    }
    for (poster, order) in by_poster {
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{poster}: {order:?}");
    }
    assert_eq!(pending_rows(&schema), 0);
}

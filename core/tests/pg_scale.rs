//! The PostgreSQL store at fleet scale (ARCHITECTURE.md#postgresql, docs/SCALING.md):
//! thousands of open sessions on a bounded number of connections, many sessions'
//! appends sharing commits while each stays fenced on its own, and a handle whose
//! ownership connection is lost never leaving two writers. Against the real server,
//! each test in a schema of its own.

mod pg_common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{Durability, OpenOptions, PgOptions, PgStore};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta};
use postgres::fallible_iterator::FallibleIterator;

/// The server's connections of one application name.
fn backends(name: &str) -> i64 {
    let mut c = pg_common::client().unwrap();
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
        &[&name],
    )
    .unwrap()
    .get(0)
}

/// Every seq of `id` from 0 without a gap or a repeat, and how many events there are.
fn contiguous(store: &PgStore, id: &str) -> usize {
    let (_, events) = Session::inspect(store, id).unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq(), i as u64, "{id}: gap or repeat");
    }
    events.len()
}

/// 2,000 sessions open at once on one handle, under a role the server lets hold only
/// 10 connections: all created, appended to and closed, on at most the store's bound.
#[test]
fn two_thousand_sessions_on_a_role_limited_to_ten_connections() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let role = format!("{}_r", schema.name);
    let mut admin = pg_common::client().unwrap();
    // The tables first (made by the test's own role), so the limited role only uses them.
    drop(schema.store(Durability::Sync));
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN CONNECTION LIMIT 10;
             GRANT ALL ON SCHEMA {s} TO {role};
             GRANT ALL ON ALL TABLES IN SCHEMA {s} TO {role};
             GRANT ALL ON ALL SEQUENCES IN SCHEMA {s} TO {role};",
            s = schema.name
        ))
        .unwrap();
    let result = std::panic::catch_unwind(|| {
        let url = pg_common::url()
            .replacen("postgres@", &format!("{role}@"), 1)
            .replacen("//root@", &format!("//{role}@"), 1);
        let sep = if url.contains('?') { '&' } else { '?' };
        let store = PgStore::connect(
            &format!("{url}{sep}application_name={role}"),
            schema.options(Durability::Sync),
        )
        .unwrap();
        let sessions: Vec<Session> = (0..2_000)
            .map(|i| Session::create(&store, &format!("s{i}"), SessionMeta::default()).unwrap())
            .collect();
        assert!(backends(&role) <= 8, "{} connections", backends(&role));
        for (i, s) in sessions.iter().enumerate() {
            s.append("host/n", &i.to_string(), Envelope::default())
                .unwrap();
        }
        // A second open of any of them is still refused while they are open.
        let other = schema.store(Durability::Sync);
        let Err(err) = Session::open(&other, "s1999") else {
            panic!("a second writer opened an open session")
        };
        assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
        assert!(backends(&role) <= 8, "{} connections", backends(&role));
        drop(sessions);
        // Closed: free for anyone at once.
        drop(Session::open(&other, "s0").unwrap());
        for i in [0, 999, 1_999] {
            assert_eq!(contiguous(&other, &format!("s{i}")), 1);
        }
    });
    let _ = admin.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};",
        s = schema.name
    ));
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// 32 writers on one handle of 3 connections (so their appends share commits), while
/// another handle takes 8 of their sessions over halfway: exactly those 8 writers are
/// fenced, the other 24 write everything, and no log has a gap or a repeat.
#[test]
fn writers_sharing_commits_are_fenced_each_on_its_own() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let store = Arc::new(
        PgStore::connect(
            &pg_common::url(),
            PgOptions {
                max_connections: 3,
                ..schema.options(Durability::Sync)
            },
        )
        .unwrap(),
    );
    let sessions: Vec<Session> = (0..32)
        .map(|i| Session::create(&*store, &format!("w{i}"), SessionMeta::default()).unwrap())
        .collect();
    let halfway = Arc::new(Barrier::new(33));
    let writers: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            let halfway = Arc::clone(&halfway);
            thread::spawn(move || {
                let mut written = 0;
                for i in 0..100 {
                    if i == 50 {
                        halfway.wait();
                        halfway.wait();
                    }
                    match s.append("host/n", &i.to_string(), Envelope::default()) {
                        Ok(_) => written += 1,
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
                            return (written, true);
                        }
                    }
                }
                (written, false)
            })
        })
        .collect();
    halfway.wait();
    let other = schema.store(Durability::Sync);
    let taken: Vec<Session> = (0..8)
        .map(|i| {
            Session::open_with(&other, &format!("w{i}"), &OpenOptions::takeover(true)).unwrap()
        })
        .collect();
    halfway.wait();
    let outcomes: Vec<(usize, bool)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for (i, (written, fenced)) in outcomes.iter().enumerate() {
        let id = format!("w{i}");
        if i < 8 {
            assert!(*fenced, "{id} was taken over but not fenced");
            assert_eq!(*written, 50, "{id}");
        } else {
            assert!(!fenced, "{id} was fenced though nobody took it");
            assert_eq!(*written, 100, "{id}");
        }
        // Nothing the fenced writers tried after the takeover was written.
        assert_eq!(contiguous(&other, &id), *written, "{id}");
    }
    drop(taken);
}

/// The ownership (home) connection of a handle is terminated while it holds 50
/// sessions and another handle tries to open them all at once: each session is either
/// re-owned by its handle (the other's open is `locked`, the old writer goes on) or
/// opened by the other (the old writer is `fenced`); never two writers.
#[test]
fn a_lost_ownership_connection_fences_or_reacquires_never_two_writers() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let name = format!("home_{}", schema.name);
    let store = PgStore::connect(
        &pg_common::url_named(&name),
        schema.options(Durability::Sync),
    )
    .unwrap();
    let sessions: Vec<Session> = (0..50)
        .map(|i| Session::create(&store, &format!("h{i}"), SessionMeta::default()).unwrap())
        .collect();
    for s in &sessions {
        s.append("host/before", "{}", Envelope::default()).unwrap();
    }
    // The home connection is the one holding the handle's advisory lock.
    let mut admin = pg_common::client().unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a
             WHERE a.application_name = $1 AND EXISTS (
                 SELECT 1 FROM pg_locks l
                 WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "one ownership connection per handle");
    let other = schema.store(Durability::Sync);
    let mut opened = Vec::new();
    for i in 0..50 {
        match Session::open(&other, &format!("h{i}")) {
            Ok(s) => opened.push((i, s)),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Locked, "{e}"),
        }
    }
    let taken: Vec<usize> = opened.iter().map(|(i, _)| *i).collect();
    for (i, s) in sessions.iter().enumerate() {
        let result = s.append("host/after", "{}", Envelope::default());
        if taken.contains(&i) {
            let Err(e) = result else {
                panic!("h{i}: two writers")
            };
            assert_eq!(e.kind(), ErrorKind::Fenced, "h{i}");
        } else {
            result.unwrap_or_else(|e| panic!("h{i} was not taken but failed: {e}"));
        }
    }
    for (_, s) in &opened {
        s.append("host/new-owner", "{}", Envelope::default())
            .unwrap();
    }
    drop(opened);
    drop(sessions);
    for i in 0..50 {
        let id = format!("h{i}");
        let (_, events) = Session::inspect(&other, &id).unwrap();
        let types: Vec<&str> = events.iter().map(inboxlog::Event::ty).collect();
        let expected: &[&str] = if taken.contains(&i) {
            &["host/before", "host/new-owner"]
        } else {
            &["host/before", "host/after"]
        };
        assert_eq!(types, expected, "{id}");
        contiguous(&other, &id);
    }
    // Re-owned sessions stay locked against others until closed, then are free.
    drop(Session::open(&other, "h0").unwrap());
}

/// 16 `batched` writers on one handle with a 1 ms window append as fast as they can: the
/// handle's one flusher writes their staged rows over and over (a writer is often due
/// again before its turn came), and after `flush` every event is stored once, in order.
#[test]
fn one_flusher_serves_many_batched_writers() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let store = Arc::new(
        schema
            .store(Durability::Batched)
            .with_batch_window(Duration::from_millis(1)),
    );
    let writers: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let s = Session::create(&*store, &format!("b{i}"), SessionMeta::default()).unwrap();
                for n in 0..2_000 {
                    s.append("host/n", &n.to_string(), Envelope::default())
                        .unwrap();
                }
                s.flush().unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let other = schema.store(Durability::Sync);
    for i in 0..16 {
        assert_eq!(contiguous(&other, &format!("b{i}")), 2_000);
    }
}

/// Wake-ups for followers are coalesced: a writer whose handle commits every
/// millisecond (`batched`, a 1 ms window) makes it send at most one notification
/// statement per notifier window (5 ms, `notify.rs`), not one per commit, and the last
/// commit's wake-up still arrives. Counts statements (each carries one notification per
/// session), not time: whatever the machine's speed, a run of `t` ms holds at most
/// `t / 5 + 2` of them, where one per commit would be about `t`.
#[test]
fn wake_ups_are_coalesced_into_one_statement_per_window() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let store = schema
        .store(Durability::Batched)
        .with_batch_window(Duration::from_millis(1));
    let s = Session::create(&store, "w", SessionMeta::default()).unwrap();
    s.flush().unwrap();
    let mut listener = pg_common::client().unwrap();
    listener
        .batch_execute(&format!("LISTEN \"{}\"", schema.name))
        .unwrap();
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_millis(300) {
        s.append("host/n", &n.to_string(), Envelope::default())
            .unwrap();
        n += 1;
        if n % 16 == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    }
    s.flush().unwrap();
    // Every statement is sent by the end of the window after the last commit.
    let elapsed = started.elapsed() + Duration::from_millis(5);
    let mut wake_ups = Vec::new();
    let mut notifications = listener.notifications();
    let mut arriving = notifications.timeout_iter(Duration::from_millis(500));
    while let Some(n) = arriving.next().unwrap() {
        wake_ups.push(n.payload().to_owned());
    }
    assert!(!wake_ups.is_empty(), "the last commit's wake-up never came");
    assert!(wake_ups.iter().all(|id| id == "w"), "{wake_ups:?}");
    let bound = elapsed.as_millis() as usize / 5 + 2;
    assert!(
        wake_ups.len() <= bound,
        "{} notification statements for {n} appends in {elapsed:?}: more than one per \
         window ({bound})",
        wake_ups.len()
    );
}

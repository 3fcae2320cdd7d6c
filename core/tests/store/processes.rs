//! Owners, writers and posters in other processes (ARCHITECTURE.md#exclusive-writer,
//! ARCHITECTURE.md#postgresql, ARCHITECTURE.md#posting), in every store other
//! processes reach: a live owner keeps a second process out at once and a killed one
//! lets it in within 2 s with its turn closed as `interrupted`; a stopped owner is
//! taken over where the store has takeover; nothing acknowledged is lost when a writer,
//! a poster or an owner taking posts in is killed with SIGKILL. The children are this
//! binary run again (`child.rs`).

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{OpenOptions, Store};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta, Target};

use crate::post::{LastStep, steering_posted_during_the_last_step};
use crate::{Backend, assert_err, assert_exactly_once, lines, msg, stores, taken_in};

/// Runs `test` over every store other processes reach.
fn each_shared_store(test: impl Fn(&Backend)) {
    for backend in stores().iter().filter(|b| b.processes) {
        test(backend);
    }
}

/// Opens session "s" once the owner killed at `killed` let go of it, within 2 s.
#[track_caller]
fn open_after_kill(name: &str, store: &dyn Store, killed: Instant) -> Session {
    loop {
        match Session::open(store, "s") {
            Ok(s) => return s,
            Err(e) if e.kind() == ErrorKind::Locked => {
                assert!(
                    killed.elapsed() < Duration::from_secs(2),
                    "{name}: still locked {:?} after the kill",
                    killed.elapsed()
                );
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn a_second_process_is_locked_out_at_once_until_the_owner_dies() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let mut holder = b.spawn("holder", "");
        let held: u64 = holder.wait_for("holding ").parse().unwrap();
        let started = Instant::now();
        let err = assert_err(
            Session::open(store, "s"),
            ErrorKind::Locked,
            &["session \"s\" is locked by another writer"],
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{name}: {:?}",
            started.elapsed()
        );
        assert_eq!(err.session(), Some("s"), "{name}");
        assert_eq!(
            lines(store, "s").len() as u64,
            held + 1,
            "{name}: inspection needs no lock"
        );
        holder.say("append");
        assert_eq!(
            holder.line(Duration::from_secs(10)),
            format!("ok {}", held + 1),
            "{name}"
        );
        assert_eq!(holder.kill().signal(), Some(9), "{name}");
        let s = open_after_kill(name, store, Instant::now());
        assert_eq!(s.open_report().repaired_turn, Some(1), "{name}");
        assert_eq!(s.last_seq().unwrap(), Some(held + 2), "{name}");
        assert_eq!(
            s.events(held + 2).unwrap()[0].data(),
            r#"{"turn":1,"reason":{"kind":"interrupted"}}"#,
            "{name}"
        );
    });
}

#[test]
fn a_stopped_owner_process_is_taken_over_and_fenced_where_the_store_has_takeover() {
    each_shared_store(|b| {
        if !b.takeover {
            return; // refused in every case: ownership.rs
        }
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let mut holder = b.spawn("holder", "");
        holder.wait_for("holding ");
        holder.signal("-STOP");
        assert_err(Session::open(store, "s"), ErrorKind::Locked, &[]);
        let started = Instant::now();
        let new = Session::open_with(store, "s", &OpenOptions::takeover(true)).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{name}: {:?}",
            started.elapsed()
        );
        new.append("host/new-owner", "{}", Envelope::default())
            .unwrap();
        let before = lines(store, "s");
        // Continued: its next calls are fenced, and it wrote nothing.
        holder.signal("-CONT");
        for _ in 0..2 {
            holder.say("append");
            assert_eq!(holder.line(Duration::from_secs(10)), "err fenced", "{name}");
        }
        assert_eq!(lines(store, "s"), before, "{name}");
        assert!(before.iter().all(|l| !l.contains("host/late")), "{name}");
        new.append("host/still-mine", "{}", Envelope::default())
            .unwrap();
        holder.say("exit");
        assert!(holder.wait().success(), "{name}");
    });
}

#[test]
fn a_writer_killed_inside_a_sync_append_loop_loses_nothing_acknowledged() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        for round in 0..3u64 {
            let mut writer = b.spawn("writer", "");
            writer.wait_for("turn");
            // Let it run a while, then kill it mid-loop.
            let until = Instant::now() + Duration::from_millis(100 + 150 * round);
            let mut acked = Vec::new();
            while Instant::now() < until {
                if let Ok(line) = writer.lines.recv_timeout(Duration::from_millis(10))
                    && let Some(json) = line.strip_prefix("ack ")
                {
                    acked.push(json.to_owned());
                }
            }
            writer.kill();
            let killed = Instant::now();
            // Every line it printed before it died counts as acknowledged.
            acked.extend(
                writer
                    .lines
                    .iter()
                    .filter_map(|l| l.strip_prefix("ack ").map(str::to_owned)),
            );
            assert!(
                !acked.is_empty(),
                "{name} round {round}: nothing acknowledged"
            );
            let s = open_after_kill(name, store, killed);
            assert_eq!(s.open_report().repaired_turn, Some(round + 1), "{name}");
            let stored = lines(store, "s");
            for line in &acked {
                assert!(
                    stored.contains(line),
                    "{name} round {round}: acknowledged {line} is missing"
                );
            }
            assert!(
                stored
                    .last()
                    .unwrap()
                    .contains(r#""reason":{"kind":"interrupted"}"#),
                "{name}: {:?}",
                stored.last()
            );
            s.close().unwrap();
        }
        Session::verify(store, "s").unwrap();
    });
}

/// Posters killed at random moments: every post they acknowledged is taken in exactly
/// once, in order; a post cut short is never delivered in part.
#[test]
fn posters_killed_mid_post_lose_nothing_acknowledged() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let mut acked = HashMap::new();
        for round in 0..4u64 {
            let poster = format!("k{round}");
            let mut kid = b.spawn("poster", &format!("{poster}:1000000"));
            let mut ids = Vec::new();
            while ids.len() < 3 {
                let line = kid.line(Duration::from_secs(30));
                ids.extend(line.strip_prefix("ack ").map(str::to_owned));
            }
            thread::sleep(Duration::from_millis(5 + round * 7));
            kid.kill();
            ids.extend(
                kid.lines
                    .iter()
                    .filter_map(|l| l.strip_prefix("ack ").map(str::to_owned)),
            );
            acked.insert(poster, ids);
        }
        for _ in 0..2 {
            let s = Session::open(store, "s").unwrap();
            assert_exactly_once(&taken_in(&s.events(0).unwrap()), &acked);
            assert!(!s.events(0).unwrap().is_empty(), "{name}");
        }
    });
}

/// Owner processes killed with SIGKILL while they take posts in, as four posters (with
/// handles of their own) post: every acknowledged post is taken in exactly once, in
/// each poster's order.
#[test]
fn owners_killed_while_taking_posts_in_deliver_each_post_once() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let posters: Vec<_> = (0..4)
            .map(|w| {
                let store = b.connect();
                thread::spawn(move || {
                    let ids: Vec<String> = (0..50)
                        .map(|i| {
                            let id = format!("w{w}-{i}");
                            store.post("s", Target::NextTurn, &msg(&id)).unwrap();
                            thread::sleep(Duration::from_millis(2));
                            id
                        })
                        .collect();
                    (format!("w{w}"), ids)
                })
            })
            .collect();
        let mut kills = 0;
        let mut pause = 7u64;
        while posters.iter().any(|p| !p.is_finished()) || kills < 3 {
            let mut owner = b.spawn("owner", "");
            owner.wait_for("open");
            pause = (pause * 7 + 3) % 40;
            thread::sleep(Duration::from_millis(pause));
            owner.kill();
            kills += 1;
        }
        let acked: HashMap<String, Vec<String>> =
            posters.into_iter().map(|p| p.join().unwrap()).collect();
        let s = open_after_kill(name, store, Instant::now());
        let taken = taken_in(&s.events(0).unwrap());
        assert_eq!(taken.len(), 200, "{name}: {kills} kills");
        assert_exactly_once(&taken, &acked);
    });
}

/// SPEC §4, §11.1, §12: another process posts steering while the model makes what
/// would be the turn's last call (after the step was entered, before it ends): the
/// step's end takes it in, the turn goes on, and the next step claims it exactly once,
/// whichever way the step ends (`end_step`, `end_step_and_close`, `step_boundary`).
#[test]
fn steering_posted_by_another_process_during_the_last_step_is_claimed_once() {
    each_shared_store(|b| {
        for way in LastStep::ALL {
            steering_posted_during_the_last_step(b.name, &*b.store, way, || {
                let mut kid = b.spawn("steerer", "");
                assert_eq!(kid.wait_for("ack "), "steer", "{}", b.name);
                assert!(kid.wait().success(), "{}", b.name);
            });
        }
    });
}

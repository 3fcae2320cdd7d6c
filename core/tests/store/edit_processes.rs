//! Edits of pending input (SPEC §11.3) from and to other processes, in every store
//! other processes reach: posters killed with SIGKILL mid-edit and owners killed while
//! they apply a batch of edits lose no acknowledged edit and apply none twice; a claim
//! and a `remove_pending` of the same message from another process race, and exactly
//! one of them wins each round, as the log says. The children are this binary run
//! again (`child.rs`).

use std::collections::{HashMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::{Decided, Decision, Event, Message, Session, SessionMeta, StepOutcome, Target};

use crate::processes::{each_shared_store, open_after_kill};
use crate::{assert_exactly_once, edited, edits_applied, edits_rejected, msg, taken_in};

/// The post ids the log's spliced and rejected events carry, each checked to be there
/// once: nothing is applied twice.
fn posts_once(name: &str, events: &[Event]) -> HashSet<String> {
    let mut seen = HashSet::new();
    for e in events {
        let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
        if let Some(post) = v["post"].as_str() {
            assert!(seen.insert(post.to_owned()), "{name}: post {post} twice");
        }
    }
    seen
}

fn ids(list: &[Message]) -> Vec<&str> {
    list.iter().map(Message::id).collect()
}

/// Posters that post and then edit their own messages, killed at random moments:
/// every acknowledged post and edit is applied exactly once, each edit after its post
/// (none is rejected, as one applied before its post would be).
#[test]
fn posters_killed_mid_edit_lose_no_acknowledged_edit() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        Session::create(store, "s", SessionMeta::default())
            .unwrap()
            .close()
            .unwrap();
        let mut acked_posts = HashMap::new();
        // Acknowledged edits: post id -> (op, message id).
        let mut acked_edits: HashMap<String, (String, String)> = HashMap::new();
        for round in 0..4u64 {
            let poster = format!("k{round}");
            let mut kid = b.spawn("editor", &format!("{poster}:1000000"));
            let mut lines = Vec::new();
            while lines.len() < 4 {
                lines.push(kid.line(Duration::from_secs(30)));
            }
            thread::sleep(Duration::from_millis(3 + round * 5));
            kid.kill();
            lines.extend(kid.lines.iter());
            let mut posted = Vec::new();
            for line in lines {
                let words: Vec<&str> = line.split(' ').collect();
                match words[..] {
                    ["ack", "post", id] => posted.push(id.to_owned()),
                    ["ack", op, id, post] => {
                        acked_edits.insert(post.to_owned(), (op.to_owned(), id.to_owned()));
                    }
                    _ => {}
                }
            }
            acked_posts.insert(poster, posted);
        }
        assert!(!acked_edits.is_empty(), "{name}: no edit acknowledged");
        for _ in 0..2 {
            // A child spawned meanwhile may hold the lock's descriptor until its exec.
            let s = open_after_kill(name, store, Instant::now());
            let events = s.events(0).unwrap();
            posts_once(name, &events);
            assert_exactly_once(&taken_in(&events), &acked_posts);
            assert!(edits_rejected(&events).is_empty(), "{name}");
            let applied: HashMap<String, String> = edits_applied(&events)
                .into_iter()
                .map(|(id, post)| (post, id.unwrap()))
                .collect();
            for (post, (op, id)) in &acked_edits {
                assert_eq!(applied.get(post), Some(id), "{name}: {op} {id} ({post})");
            }
            // The inbox is what the applied edits left: removed ones gone, replaced
            // ones replaced in place.
            let next_turn = s.inbox().next_turn().unwrap();
            let edited_ids: HashSet<&String> = applied.values().collect();
            for m in &next_turn {
                let i: u64 = m.id().rsplit_once('-').unwrap().1.parse().unwrap();
                let was_edited = edited_ids.contains(&m.id().to_owned());
                match i % 3 {
                    0 => assert!(!was_edited, "{name}: {} was removed", m.id()),
                    1 if was_edited => assert_eq!(m, &edited(m.id()), "{name}"),
                    _ => assert_eq!(m, &msg(m.id()), "{name}"),
                }
            }
            let pending: HashSet<&str> = next_turn.iter().map(Message::id).collect();
            let removed = acked_edits.values().filter(|(op, _)| op == "remove");
            for (_, id) in removed {
                assert!(!pending.contains(id.as_str()), "{name}: {id} is pending");
            }
        }
    });
}

/// Owner processes killed with SIGKILL while they apply batches of edits that four
/// posters (with handles of their own) post: every acknowledged edit is applied exactly
/// once (a removal applied twice would be rejected the second time; every post id is in
/// the log once).
#[test]
fn owners_killed_while_applying_edits_apply_each_once() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        for w in 0..4 {
            for i in 0..30 {
                s.inbox()
                    .append(Target::NextTurn, msg(&format!("w{w}-{i}")))
                    .unwrap();
            }
        }
        s.close().unwrap();
        let posters: Vec<_> = (0..4)
            .map(|w| {
                let store = b.connect();
                thread::spawn(move || {
                    (0..30)
                        .map(|i| {
                            let id = format!("w{w}-{i}");
                            let post = if i % 2 == 0 {
                                store.remove_pending("s", &id).unwrap()
                            } else {
                                store.replace_pending("s", &id, &edited(&id)).unwrap()
                            };
                            if i % 10 == 0 {
                                thread::sleep(Duration::from_millis(3));
                            }
                            post
                        })
                        .collect::<Vec<String>>()
                })
            })
            .collect();
        let mut kills = 0;
        let mut pause = 5u64;
        while posters.iter().any(|p| !p.is_finished()) || kills < 3 {
            let mut owner = b.spawn("owner", "");
            owner.wait_for("open");
            pause = (pause * 7 + 3) % 30;
            thread::sleep(Duration::from_millis(pause));
            owner.kill();
            kills += 1;
        }
        let acked: Vec<String> = posters
            .into_iter()
            .flat_map(|p| p.join().unwrap())
            .collect();
        let s = open_after_kill(name, store, Instant::now());
        let events = s.events(0).unwrap();
        let held = posts_once(name, &events);
        assert_eq!(
            held,
            acked.iter().cloned().collect::<HashSet<_>>(),
            "{name}: {kills} kills"
        );
        assert!(edits_rejected(&events).is_empty(), "{name}");
        assert_eq!(edits_applied(&events).len(), 120, "{name}");
        let expected: Vec<Message> = (0..4)
            .flat_map(|w| {
                (1..30)
                    .step_by(2)
                    .map(move |i| edited(&format!("w{w}-{i}")))
            })
            .collect();
        let mut got = s.inbox().next_turn().unwrap();
        got.sort_by(|a, b| a.id().cmp(b.id()));
        let mut want = expected;
        want.sort_by(|a, b| a.id().cmp(b.id()));
        assert_eq!(ids(&got), ids(&want), "{name}");
        assert_eq!(got, want, "{name}");
    });
}

/// Each round the owner appends a message and, while another process posts its
/// removal, claims it with a turn: exactly one of the two wins. Either the removal's
/// splice cancels it (and the turn claims nothing of it), or the turn claims it and the
/// removal is recorded rejected (`not_found`) — and the log says which.
#[test]
fn a_claim_and_a_remote_removal_race_and_exactly_one_wins() {
    each_shared_store(|b| {
        let (name, store) = (b.name, &*b.store);
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        let mut remover = b.spawn("remover", "");
        let (mut removals_won, mut claims_won) = (0, 0);
        for round in 0..40 {
            let id = format!("r{round}");
            s.inbox().append(Target::NextTurn, msg(&id)).unwrap();
            remover.say(&id);
            s.open_turn().unwrap();
            let p = s.propose_step().unwrap();
            let claimed = ids(&p.messages).contains(&id.as_str());
            match s.decide(Decision::Enter(p.messages)).unwrap() {
                Decided::Step { .. } => {
                    s.end_step(StepOutcome::Completed).unwrap();
                    s.close_turn().unwrap();
                }
                Decided::TurnEnded { .. } => {}
            }
            let post = remover.wait_for("ack ");
            // The removal is durable: the owner takes it in, if it has not yet.
            s.receive().unwrap();
            let events = s.events(0).unwrap();
            let canceled = edits_applied(&events).contains(&(Some(id.clone()), post.clone()));
            let rejected = edits_rejected(&events).contains(&(
                "remove".to_owned(),
                id.clone(),
                "not_found".to_owned(),
                post.clone(),
            ));
            assert!(
                canceled != rejected,
                "{name} round {round}: canceled {canceled}, rejected {rejected}"
            );
            assert_eq!(claimed, rejected, "{name} round {round}");
            if canceled {
                removals_won += 1;
            } else {
                claims_won += 1;
            }
            assert!(!s.inbox().has_pending().unwrap(), "{name} round {round}");
        }
        assert_eq!(removals_won + claims_won, 40, "{name}");
        eprintln!("{name}: the removal won {removals_won} rounds, the claim {claims_won}");
        drop(remover);
        drop(s);
        // A child spawned meanwhile (by another test) may hold the lock's descriptor
        // until its exec: retried while locked, as after a kill.
        let s = open_after_kill(name, store, Instant::now());
        assert_eq!(s.receive().unwrap(), 0, "{name}");
    });
}

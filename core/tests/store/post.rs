//! Posting to a session from anywhere (ARCHITECTURE.md#posting) in every store: taken
//! in exactly once when the session opens, before each proposal and on `receive`, in
//! each poster's order; a post that cannot be taken in is recorded as
//! `agent/inbox/rejected`. Posters and owners killed in other processes are in
//! `processes.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::Store;
use inboxlog::{
    Decided, Decision, Envelope, ErrorKind, Follower, Session, SessionMeta, StepOutcome, Target,
    TurnClaim, TurnEndReason, fold_consumed_work,
};

use crate::{assert_err, assert_exactly_once, each_backend, each_store, heard, msg, taken_in};

#[test]
fn a_post_to_a_closed_session_is_taken_in_when_it_opens() {
    each_store(|_, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.close().unwrap();
        let p1 = store.post("s", Target::NextTurn, &msg("a")).unwrap();
        let p2 = store.post("s", Target::NextStep, &msg("b")).unwrap();
        assert_ne!(p1, p2);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("a")]);
        assert_eq!(s.inbox().next_step().unwrap(), vec![msg("b")]);
        let events = s.events(0).unwrap();
        assert_eq!(
            events[0].data(),
            format!(
                r#"{{"target":"next-turn","start":0,"inserted":[{}],"post":"{p1}"}}"#,
                msg("a").json()
            )
        );
        assert_eq!(taken_in(&events).len(), 2);
        // Taken in once: nothing more on receive, or on the next open.
        assert_eq!(s.receive().unwrap(), 0);
        drop(s);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.events(0).unwrap().len(), 2);
    });
}

#[test]
fn an_open_session_takes_posts_in_before_each_proposal_and_on_receive() {
    each_store(|_, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        s.on_inbox(move |n| {
            sink.lock()
                .unwrap()
                .push(format!("{} {}", n.ty(), n.message().id()));
            Ok(())
        });
        store.post("s", Target::NextTurn, &msg("a")).unwrap();
        assert!(!s.inbox().has_pending().unwrap());
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        assert_eq!(p.messages, vec![msg("a")]);
        s.decide(Decision::Enter(p.messages)).unwrap();
        store.post("s", Target::NextStep, &msg("steer")).unwrap();
        assert_eq!(s.receive().unwrap(), 1);
        assert_eq!(s.inbox().next_step().unwrap(), vec![msg("steer")]);
        assert!(s.end_step(StepOutcome::Completed).unwrap());
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "agent/inbox/inserted a",
                "agent/inbox/claimed a",
                "agent/inbox/inserted steer"
            ]
        );
    });
}

#[test]
fn a_post_that_cannot_be_taken_in_is_rejected_and_the_next_goes_on() {
    each_store(|_, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("dup")).unwrap();
        let p = store.post("s", Target::NextStep, &msg("dup")).unwrap();
        store.post("s", Target::NextTurn, &msg("ok")).unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        s.on_event(move |e| {
            sink.lock().unwrap().push(e.ty().to_owned());
            Ok(())
        });
        assert_eq!(s.receive().unwrap(), 2);
        let log = s.events(1).unwrap();
        assert_eq!(
            log[0].to_json(),
            format!(
                r#"{{"type":"agent/inbox/rejected","seq":1,"time":{},"data":{{"message":{},"reason":{{"code":8,"kind":"duplicate_message","message":"message \"dup\" is already pending"}},"post":"{p}"}},"ignorable":true}}"#,
                log[0].time(),
                msg("dup").json()
            )
        );
        assert_eq!(log[1].ty(), "agent/inbox/spliced");
        assert_eq!(
            *events.lock().unwrap(),
            ["agent/inbox/rejected", "agent/inbox/spliced"]
        );
        assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("dup"), msg("ok")]);
        assert!(s.inbox().next_step().unwrap().is_empty());
        // The rejection changes no turn and no fold, replays, and is not the host's to write.
        let all = s.events(0).unwrap();
        let fold = fold_consumed_work(&all);
        assert!(fold.end.is_none() && !fold.dropped_unrun);
        assert_err(
            s.append("agent/inbox/rejected", "{}", Envelope::default()),
            ErrorKind::InvalidInput,
            &["agent/inbox/rejected is written only by inboxlog"],
        );
        drop(s);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.inbox().next_turn().unwrap(), vec![msg("dup"), msg("ok")]);
        assert_eq!(Session::verify(store, "s").unwrap().events, 3);
    });
}

#[test]
fn posts_to_missing_sessions_and_bad_ids_are_refused() {
    each_store(|_, store| {
        let err = store.post("nope", Target::NextTurn, &msg("a")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert_eq!(err.session(), Some("nope"));
        for bad in ["../x", "", ".hidden", "a/b"] {
            let err = store.post(bad, Target::NextTurn, &msg("a")).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}: {err}");
        }
        let err = Follower::open(store, "nope", 0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        let err = Follower::open(store, "../x", 0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}

/// Four posters, each with a handle of its own as another worker has, while the owner
/// runs turns: every post is taken in exactly once, in each poster's order.
#[test]
fn four_posters_while_the_owner_runs_turns() {
    each_backend(|b| {
        let name = b.name;
        let s = Session::create(&*b.store, "s", SessionMeta::default()).unwrap();
        let posters: Vec<_> = (0..4)
            .map(|w| {
                let store = b.connect();
                thread::spawn(move || {
                    let ids: Vec<String> = (0..40)
                        .map(|i| {
                            let id = format!("w{w}-{i}");
                            store.post("s", Target::NextTurn, &msg(&id)).unwrap();
                            thread::sleep(Duration::from_millis(1));
                            id
                        })
                        .collect();
                    (format!("w{w}"), ids)
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
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{name}: posters hang"
            );
        }
        let acked: HashMap<String, Vec<String>> =
            posters.into_iter().map(|p| p.join().unwrap()).collect();
        s.receive().unwrap();
        assert!(turns > 1, "{name}");
        let taken = taken_in(&s.events(0).unwrap());
        assert_eq!(taken.len(), 160, "{name}");
        assert_exactly_once(&taken, &acked);
    });
}

/// How the loop ends what would be its turn's last step (SPEC §4, §12).
#[derive(Clone, Copy, Debug)]
pub enum LastStep {
    /// `end_step(completed)`, which must answer that another step is due.
    EndStep,
    /// `end_step_and_close(completed)`, which must leave the turn open (`None`).
    EndAndClose,
    /// `step_boundary(completed)`, which must go on and claim the steering.
    Boundary,
}

impl LastStep {
    pub const ALL: [LastStep; 3] = [LastStep::EndStep, LastStep::EndAndClose, LastStep::Boundary];
}

/// A turn whose model makes what would be its last call while `post` posts steering
/// (the message "steer") to session "s" of `store` from elsewhere: the step ends as
/// `way` says, the turn goes on, and the next step claims the steering exactly once.
pub fn steering_posted_during_the_last_step(
    name: &str,
    store: &dyn Store,
    way: LastStep,
    post: impl FnOnce(),
) {
    let what = format!("{name} {way:?}");
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    s.inbox().append(Target::NextTurn, msg("q")).unwrap();
    s.open_turn().unwrap();
    let first = s
        .step_boundary(None, TurnClaim::First)
        .unwrap()
        .expect("the first step");
    assert_eq!(first.proposal.messages, vec![msg("q")], "{what}");
    // The model's last call: it answers without tools while "steer" is posted.
    post();
    heard(name, store, "s");
    let claimed = match way {
        LastStep::EndStep => {
            assert!(s.end_step(StepOutcome::Completed).unwrap(), "{what}");
            let p = s.propose_step().unwrap();
            s.decide(Decision::Enter(p.messages.clone())).unwrap();
            p.messages
        }
        LastStep::EndAndClose => {
            assert_eq!(
                s.end_step_and_close(StepOutcome::Completed).unwrap(),
                None,
                "{what}"
            );
            let p = s.propose_step().unwrap();
            s.decide(Decision::Enter(p.messages.clone())).unwrap();
            p.messages
        }
        LastStep::Boundary => {
            let b = s
                .step_boundary(Some(StepOutcome::Completed), TurnClaim::First)
                .unwrap()
                .expect("the turn goes on");
            assert_eq!(b.decided, Decided::Step { turn: 1, step: 2 }, "{what}");
            b.proposal.messages
        }
    };
    assert_eq!(claimed, vec![msg("steer")], "{what}");
    // Nothing more: the turn ends after the steered step.
    assert_eq!(
        s.end_step_and_close(StepOutcome::Completed).unwrap(),
        Some(Decided::TurnEnded {
            turn: 1,
            reason: TurnEndReason::Completed
        }),
        "{what}"
    );
    let events = s.events(0).unwrap();
    assert_eq!(taken_in(&events).len(), 1, "{what}: taken in once");
    let entered = events
        .iter()
        .filter(|e| e.ty() == "user/message" && e.data().contains(r#""id":"steer""#))
        .count();
    assert_eq!(entered, 1, "{what}: entered once");
    // Settled: neither a later take-in nor a reopen brings it again.
    assert_eq!(s.receive().unwrap(), 0, "{what}");
    drop(s);
    let s = Session::open(store, "s").unwrap();
    assert_eq!(s.events(0).unwrap().len(), events.len(), "{what}");
    assert!(!s.inbox().has_pending().unwrap(), "{what}");
    s.close().unwrap();
    store.delete("s").unwrap();
}

/// SPEC §4, §12: steering posted through another handle of the store (another worker;
/// in memory, a clone) while the model makes what would be its last call keeps the
/// turn going, whichever way the step ends. Another process posting: `processes.rs`.
#[test]
fn steering_posted_from_another_handle_during_the_last_step_is_claimed_once() {
    each_backend(|b| {
        let poster = b.connect();
        for way in LastStep::ALL {
            steering_posted_during_the_last_step(b.name, &*b.store, way, || {
                poster.post("s", Target::NextStep, &msg("steer")).unwrap();
            });
        }
    });
}

/// Nothing posted: the last step ends the turn on every store, and a post through the
/// owner's own handle is known at once, with no wake-up to wait for.
#[test]
fn with_nothing_posted_the_last_step_ends_the_turn_and_an_own_post_is_seen_at_once() {
    each_store(|name, store| {
        for way in LastStep::ALL {
            let s = Session::create(store, "s", SessionMeta::default()).unwrap();
            s.inbox().append(Target::NextTurn, msg("q")).unwrap();
            s.open_turn().unwrap();
            s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
            let ended = match way {
                LastStep::EndStep => !s.end_step(StepOutcome::Completed).unwrap(),
                LastStep::EndAndClose => s
                    .end_step_and_close(StepOutcome::Completed)
                    .unwrap()
                    .is_some(),
                LastStep::Boundary => s
                    .step_boundary(Some(StepOutcome::Completed), TurnClaim::First)
                    .unwrap()
                    .is_none(),
            };
            assert!(ended, "{name} {way:?}");
            s.close().unwrap();
            store.delete("s").unwrap();
        }
        for way in LastStep::ALL {
            // No `heard`: the handle that posts knows of its own post.
            let s = Session::create(store, "s", SessionMeta::default()).unwrap();
            s.inbox().append(Target::NextTurn, msg("q")).unwrap();
            s.open_turn().unwrap();
            s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
            store.post("s", Target::NextStep, &msg("steer")).unwrap();
            let goes_on = match way {
                LastStep::EndStep => s.end_step(StepOutcome::Completed).unwrap(),
                LastStep::EndAndClose => s
                    .end_step_and_close(StepOutcome::Completed)
                    .unwrap()
                    .is_none(),
                LastStep::Boundary => s
                    .step_boundary(Some(StepOutcome::Completed), TurnClaim::First)
                    .unwrap()
                    .is_some_and(|b| b.proposal.messages == vec![msg("steer")]),
            };
            assert!(goes_on, "{name} {way:?}");
            s.close().unwrap();
            store.delete("s").unwrap();
        }
    });
}

//! Event and inbox observers (ARCHITECTURE.md#observers): order, timing, containment, re-entrancy.

mod scenarios_common;

use std::sync::{Arc, Mutex};

use inboxlog::store::MemoryStore;
use inboxlog::{CancelCause, Decision, Envelope, InboxNotice, Session, Target};
use scenarios_common::*;

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
                            .append("host/x", &format!(r#"{{"t":{t}}}"#), Envelope::default())
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

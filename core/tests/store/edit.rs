//! Editing pending input from anywhere (SPEC §11.3, ARCHITECTURE.md#posting) in every
//! store: `remove_pending` and `replace_pending` are delivered as posts are, applied
//! by the owner where it takes posts in as the local `remove`/`replace` (one canceling
//! splice carrying `"post"`), or recorded as `agent/inbox/rejected` when they find
//! nothing to change; a claim that came first wins. Edits from killed processes and
//! racing claims are in `processes.rs`.

use std::sync::{Arc, Mutex};

use inboxlog::{
    Decision, ErrorKind, Message, QueueProjection, Session, SessionMeta, StepOutcome, Target,
    fold_consumed_work,
};

use crate::{assert_err, each_store, edits_applied, edits_rejected, msg};

/// The notices `s` publishes, as `"<type> <message id>"`.
fn notices(s: &Session) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    s.on_inbox(move |n| {
        sink.lock()
            .unwrap()
            .push(format!("{} {}", n.ty(), n.message().id()));
        Ok(())
    });
    seen
}

fn ids(list: &[Message]) -> Vec<&str> {
    list.iter().map(Message::id).collect()
}

#[test]
fn a_pending_message_is_removed_and_replaced_as_the_local_edits_do() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.inbox().append(Target::NextTurn, msg("b")).unwrap();
        s.inbox().append(Target::NextStep, msg("c")).unwrap();
        let seen = notices(&s);
        let p1 = store.remove_pending("s", "a").unwrap();
        let p2 = store.replace_pending("s", "c", &msg("c2")).unwrap();
        // Replacing a message by one of the same id is a replacement too.
        let p3 = store.replace_pending("s", "b", &msg("b")).unwrap();
        assert!(p1 != p2 && p2 != p3, "{name}");
        // Nothing changes before the owner takes them in.
        assert_eq!(ids(&s.inbox().next_turn().unwrap()), ["a", "b"], "{name}");
        assert_eq!(s.receive().unwrap(), 3, "{name}");
        assert_eq!(ids(&s.inbox().next_turn().unwrap()), ["b"], "{name}");
        assert_eq!(ids(&s.inbox().next_step().unwrap()), ["c2"], "{name}");
        let log = s.events(3).unwrap();
        let data: Vec<&str> = log.iter().map(inboxlog::Event::data).collect();
        assert_eq!(
            data,
            [
                format!(
                    r#"{{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled","post":"{p1}"}}"#
                ),
                format!(
                    r#"{{"target":"next-step","start":0,"removedCount":1,"inserted":[{}],"outcome":"canceled","post":"{p2}"}}"#,
                    msg("c2").json()
                ),
                format!(
                    r#"{{"target":"next-turn","start":0,"removedCount":1,"inserted":[{}],"outcome":"canceled","post":"{p3}"}}"#,
                    msg("b").json()
                ),
            ],
            "{name}"
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "agent/inbox/discarded a",
                "agent/inbox/discarded c",
                "agent/inbox/inserted c2",
                "agent/inbox/discarded b",
                "agent/inbox/inserted b",
            ],
            "{name}"
        );
        // A projection and the fold read them as local edits.
        let all = s.events(0).unwrap();
        let mut view = QueueProjection::default();
        for e in &all {
            view.apply(e).unwrap();
        }
        assert_eq!(ids(&view.inbox().list(Target::NextTurn)), ["b"], "{name}");
        assert_eq!(ids(&view.inbox().list(Target::NextStep)), ["c2"], "{name}");
        // A bare removal drops work unrun, as a local `remove` does.
        let fold = fold_consumed_work(&all);
        assert!(fold.end.is_none() && fold.dropped_unrun, "{name}");
        // Applied once: nothing more on receive, and replay rebuilds the same inbox.
        assert_eq!(s.receive().unwrap(), 0, "{name}");
        drop(s);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.events(0).unwrap().len(), 6, "{name}");
        assert_eq!(ids(&s.inbox().next_turn().unwrap()), ["b"], "{name}");
        assert_eq!(ids(&s.inbox().next_step().unwrap()), ["c2"], "{name}");
    });
}

#[test]
fn an_edit_of_a_claimed_or_unknown_message_is_rejected_as_not_found() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        assert_eq!(ids(&p.messages), ["a"], "{name}");
        s.decide(Decision::Enter(p.messages)).unwrap();
        let seen = notices(&s);
        let p1 = store.remove_pending("s", "a").unwrap();
        let p2 = store.replace_pending("s", "a", &msg("a2")).unwrap();
        let p3 = store.remove_pending("s", "never").unwrap();
        assert_eq!(s.receive().unwrap(), 3, "{name}");
        let from = s.events(0).unwrap().len() as u64 - 3;
        let log = s.events(from).unwrap();
        let lines: Vec<String> = log.iter().map(inboxlog::Event::to_json).collect();
        let t = |i: usize| log[i].time();
        assert_eq!(
            lines,
            [
                format!(
                    r#"{{"type":"agent/inbox/rejected","seq":{},"time":{},"data":{{"edit":{{"op":"remove","id":"a"}},"reason":{{"code":5,"kind":"not_found","message":"message \"a\" is not pending"}},"post":"{p1}"}},"ignorable":true}}"#,
                    from,
                    t(0)
                ),
                format!(
                    r#"{{"type":"agent/inbox/rejected","seq":{},"time":{},"data":{{"edit":{{"op":"replace","id":"a","message":{}}},"reason":{{"code":5,"kind":"not_found","message":"message \"a\" is not pending"}},"post":"{p2}"}},"ignorable":true}}"#,
                    from + 1,
                    t(1),
                    msg("a2").json()
                ),
                format!(
                    r#"{{"type":"agent/inbox/rejected","seq":{},"time":{},"data":{{"edit":{{"op":"remove","id":"never"}},"reason":{{"code":5,"kind":"not_found","message":"message \"never\" is not pending"}},"post":"{p3}"}},"ignorable":true}}"#,
                    from + 2,
                    t(2)
                ),
            ],
            "{name}"
        );
        // The claim won: nothing came back, nothing was notified.
        assert!(!s.inbox().has_pending().unwrap(), "{name}");
        assert!(seen.lock().unwrap().is_empty(), "{name}");
        assert!(!s.end_step(StepOutcome::Completed).unwrap(), "{name}");
        s.close_turn().unwrap();
        let all = s.events(0).unwrap();
        let fold = fold_consumed_work(&all);
        assert!(fold.end.is_some() && !fold.dropped_unrun, "{name}");
        // Rejections are remembered as taken in: not recorded twice across a reopen.
        drop(s);
        let s = Session::open(store, "s").unwrap();
        assert_eq!(s.receive().unwrap(), 0, "{name}");
        assert_eq!(s.events(0).unwrap().len(), all.len(), "{name}");
        assert_eq!(
            edits_rejected(&all)
                .iter()
                .map(|(op, id, kind, _)| format!("{op} {id} {kind}"))
                .collect::<Vec<_>>(),
            [
                "remove a not_found",
                "replace a not_found",
                "remove never not_found"
            ],
            "{name}"
        );
    });
}

#[test]
fn a_replacement_whose_new_id_is_pending_is_rejected_as_a_duplicate() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        s.inbox().append(Target::NextStep, msg("b")).unwrap();
        let p = store.replace_pending("s", "a", &msg("b")).unwrap();
        assert_eq!(s.receive().unwrap(), 1, "{name}");
        let log = s.events(2).unwrap();
        assert_eq!(log.len(), 1, "{name}");
        assert_eq!(
            log[0].data(),
            format!(
                r#"{{"edit":{{"op":"replace","id":"a","message":{}}},"reason":{{"code":8,"kind":"duplicate_message","message":"message \"b\" is already pending"}},"post":"{p}"}}"#,
                msg("b").json()
            ),
            "{name}"
        );
        assert_eq!(ids(&s.inbox().next_turn().unwrap()), ["a"], "{name}");
        assert_eq!(ids(&s.inbox().next_step().unwrap()), ["b"], "{name}");
    });
}

#[test]
fn a_post_and_its_edits_from_one_poster_apply_in_order_at_the_next_open() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.close().unwrap();
        // The session is not open: all of these wait for its next open.
        let p1 = store.post("s", Target::NextTurn, &msg("a")).unwrap();
        let p2 = store.remove_pending("s", "a").unwrap();
        let p3 = store.post("s", Target::NextTurn, &msg("b")).unwrap();
        let p4 = store.replace_pending("s", "b", &msg("b2")).unwrap();
        let p5 = store.post("s", Target::NextStep, &msg("b")).unwrap();
        let s = Session::open(store, "s").unwrap();
        assert_eq!(ids(&s.inbox().next_turn().unwrap()), ["b2"], "{name}");
        assert_eq!(ids(&s.inbox().next_step().unwrap()), ["b"], "{name}");
        let events = s.events(0).unwrap();
        assert_eq!(
            crate::taken_in(&events),
            [
                ("a".to_owned(), p1),
                ("b".to_owned(), p3),
                ("b".to_owned(), p5)
            ],
            "{name}"
        );
        assert_eq!(
            edits_applied(&events),
            [(Some("a".to_owned()), p2), (Some("b".to_owned()), p4)],
            "{name}"
        );
        assert!(edits_rejected(&events).is_empty(), "{name}");
        assert_eq!(events.len(), 5, "{name}");
    });
}

#[test]
fn edits_while_the_owner_is_mid_turn_apply_at_receive_and_before_the_next_proposal() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("t1")).unwrap();
        s.inbox().append(Target::NextTurn, msg("t2")).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        // Mid-step: steering arrives, one of it is removed at once, by receive.
        store.post("s", Target::NextStep, &msg("s1")).unwrap();
        store.post("s", Target::NextStep, &msg("s2")).unwrap();
        store.remove_pending("s", "s1").unwrap();
        assert_eq!(s.receive().unwrap(), 3, "{name}");
        assert_eq!(ids(&s.inbox().next_step().unwrap()), ["s2"], "{name}");
        // Before the next proposal: an edit of the steering is applied before the claim.
        store.replace_pending("s", "s2", &msg("s3")).unwrap();
        assert!(s.end_step(StepOutcome::Completed).unwrap(), "{name}");
        let p = s.propose_step().unwrap();
        assert_eq!(ids(&p.messages), ["s3"], "{name}");
        s.decide(Decision::Enter(p.messages)).unwrap();
        // The claimed steering can no longer change; the next turn's input can.
        store.remove_pending("s", "s3").unwrap();
        store.remove_pending("s", "t2").unwrap();
        assert_eq!(s.receive().unwrap(), 2, "{name}");
        assert!(!s.end_step(StepOutcome::Completed).unwrap(), "{name}");
        s.close_turn().unwrap();
        assert!(!s.inbox().has_pending().unwrap(), "{name}");
        let events = s.events(0).unwrap();
        assert_eq!(
            edits_rejected(&events)
                .iter()
                .map(|(op, id, kind, _)| format!("{op} {id} {kind}"))
                .collect::<Vec<_>>(),
            ["remove s3 not_found"],
            "{name}"
        );
        let applied: Vec<_> = edits_applied(&events)
            .into_iter()
            .map(|(id, _)| id.unwrap())
            .collect();
        assert_eq!(applied, ["s1", "s2", "t2"], "{name}");
    });
}

#[test]
fn edits_to_missing_sessions_bad_ids_and_empty_message_ids_are_refused() {
    each_store(|name, store| {
        assert_err(
            store.remove_pending("nope", "a"),
            ErrorKind::NotFound,
            &["nope"],
        );
        assert_err(
            store.replace_pending("nope", "a", &msg("b")),
            ErrorKind::NotFound,
            &["nope"],
        );
        assert_err(
            store.remove_pending("../x", "a"),
            ErrorKind::InvalidInput,
            &[],
        );
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        for result in [
            store.remove_pending("s", ""),
            store.replace_pending("s", "", &msg("b")),
        ] {
            assert_err(
                result,
                ErrorKind::InvalidInput,
                &["the id of the message to edit must not be empty"],
            );
        }
        assert_eq!(s.receive().unwrap(), 0, "{name}");
    });
}

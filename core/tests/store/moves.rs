//! Moving pending input from anywhere on every store (ARCHITECTURE.md#moving-pending-input,
//! SPEC §17.5): one removal (`"outcome":"moved"`) and one insertion in one commit, taken
//! in exactly once, rejected by name when the message is no longer pending or the index
//! is past the end; neither a claim nor a cancellation to the consumed-work fold.

use inboxlog::{Message, Session, SessionMeta, Target, fold_consumed_work};
use serde_json::{Value, json};

use crate::{each_store, msg};

fn ids(list: &[Message]) -> Vec<String> {
    list.iter().map(|m| m.id().to_owned()).collect()
}

#[test]
fn a_posted_move_is_one_removal_and_one_insertion_applied_once() {
    each_store(|name, store| {
        let s = Session::create(store, "m", SessionMeta::default()).unwrap();
        for id in ["a", "b", "c"] {
            s.inbox().append(Target::NextTurn, msg(id)).unwrap();
        }
        s.inbox().append(Target::NextStep, msg("x")).unwrap();
        let before = s.events(0).unwrap().len();
        // "Send now": from next-turn to the end of next-step; then within one list.
        let send_now = store
            .move_pending("m", "c", Target::NextStep, None)
            .unwrap();
        store
            .move_pending("m", "a", Target::NextTurn, Some(1))
            .unwrap();
        store
            .move_pending("m", "zz", Target::NextTurn, None)
            .unwrap();
        store
            .move_pending("m", "x", Target::NextStep, Some(5))
            .unwrap();
        s.receive().unwrap();
        let lists = s
            .with_inbox(|i| (i.list(Target::NextTurn), i.list(Target::NextStep)))
            .unwrap();
        assert_eq!(ids(&lists.0), ["b", "a"], "{name}");
        assert_eq!(ids(&lists.1), ["x", "c"], "{name}");
        let events = s.events(before as u64).unwrap();
        let data: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(e.data()).unwrap())
            .collect();
        assert_eq!(
            data[0],
            json!({"target": "next-turn", "start": 2, "removedCount": 1, "inserted": [], "outcome": "moved"})
        );
        assert_eq!(data[1]["target"], json!("next-step"));
        assert_eq!(data[1]["start"], json!(1));
        assert_eq!(data[1]["post"], json!(send_now));
        assert_eq!(data[2]["outcome"], json!("moved"));
        assert_eq!(
            (data[3]["target"].clone(), data[3]["start"].clone()),
            (json!("next-turn"), json!(1))
        );
        assert_eq!(data[4]["move"], json!({"id": "zz", "target": "next-turn"}));
        assert_eq!(data[4]["reason"]["kind"], json!("not_found"));
        assert_eq!(
            data[5]["move"],
            json!({"id": "x", "target": "next-step", "index": 5})
        );
        assert_eq!(data[5]["reason"]["kind"], json!("invalid_splice"));
        assert_eq!(events.len(), 6, "{name}");
        // A move is neither a claim nor a cancellation.
        let all = s.events(0).unwrap();
        let fold = fold_consumed_work(&all);
        assert!(!fold.dropped_unrun && fold.end.is_none(), "{name}");
        s.close().unwrap();
        // Replayed as written; taken in once.
        let s = Session::open(store, "m").unwrap();
        let lists = s
            .with_inbox(|i| (i.list(Target::NextTurn), i.list(Target::NextStep)))
            .unwrap();
        assert_eq!(
            (ids(&lists.0), ids(&lists.1)),
            (
                vec!["b".to_owned(), "a".to_owned()],
                vec!["x".to_owned(), "c".to_owned()]
            )
        );
        assert_eq!(s.events(0).unwrap().len(), before + 6, "{name}");
        s.close().unwrap();
    });
}

//! The consumed-work fold (ARCHITECTURE.md#consumed-work-fold) over hand-made logs and a live session's log.

mod scenarios_common;

use inboxlog::ToJson as _;
use inboxlog::store::MemoryStore;
use inboxlog::{Decision, Event, StepOutcome, Target, fold_consumed_work};
use scenarios_common::*;

/// Folds the events and returns `(seq of end, droppedUnrun)`.
fn fold(list: &[(String, String)]) -> (Option<u64>, bool) {
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let events = log(&borrowed);
    let out = fold_consumed_work(&events);
    (out.end.map(Event::seq), out.dropped_unrun)
}

#[test]
fn fold_nothing_consumed() {
    assert_eq!(fold(&[]), (None, false));
    let events = log(&[]);
    assert_eq!(
        fold_consumed_work(&events).to_json(),
        r#"{"end":null,"droppedUnrun":false}"#
    );
    assert_eq!(fold(&[own(INSERT_A), pair("host/x", "{}")]), (None, false));
}

#[test]
fn fold_picks_the_latest_stepped_turn_max_tokens_included() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.extend(stepped_turn(2, r#"{"kind":"max-tokens"}"#));
    list.push(pair("host/after", "{}"));
    assert_eq!(fold(&list), (Some(11), false));
    // The result names the whole turn/end event.
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let events = log(&borrowed);
    assert_eq!(
        fold_consumed_work(&events).to_json(),
        r#"{"end":{"type":"turn/end","seq":11,"time":1011,"data":{"turn":2,"reason":{"kind":"max-tokens"}}},"droppedUnrun":false}"#
    );
}

#[test]
fn fold_a_claim_then_error_or_abort_before_any_step_accounts() {
    for reason in [ERROR, ABORTED, r#"{"kind":"interrupted"}"#] {
        let list = [own(INSERT_A), ts(1), own(CLAIM), te(1, reason)];
        assert_eq!(fold(&list), (Some(3), false), "{reason}");
    }
}

#[test]
fn fold_an_unknown_end_kind_after_a_claim_accounts() {
    let list = [
        own(INSERT_A),
        ts(1),
        own(CLAIM),
        te(1, r#"{"kind":"some-future-kind"}"#),
    ];
    assert_eq!(fold(&list), (Some(3), false));
}

#[test]
fn fold_turns_that_took_no_input_do_not_account() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    for (n, reason) in [
        (2, COMPLETED),
        (3, ERROR),
        (4, ABORTED),
        (5, r#"{"kind":"blocked"}"#),
    ] {
        list.push(ts(n));
        list.push(te(n, reason));
    }
    assert_eq!(fold(&list), (Some(5), false));
}

#[test]
fn fold_a_rejected_claim_accounts() {
    let list = [
        own(INSERT_A),
        ts(1),
        own(CLAIM),
        te(1, r#"{"kind":"blocked"}"#),
    ];
    assert_eq!(fold(&list), (Some(3), false));
}

#[test]
fn fold_a_claim_emptied_by_the_turn_itself_does_not_account() {
    let list = [own(INSERT_A), ts(1), own(CLAIM), te(1, COMPLETED)];
    assert_eq!(fold(&list), (None, false));
}

#[test]
fn fold_a_claim_outside_any_open_turn_is_credited_to_none() {
    let list = [
        own(INSERT_A),
        own(CLAIM),
        ts(1),
        te(1, r#"{"kind":"blocked"}"#),
    ];
    assert_eq!(fold(&list), (None, false));
}

#[test]
fn fold_a_cancel_after_the_last_accounting_turn_sets_dropped_unrun() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.push(own(CANCEL));
    assert_eq!(fold(&list), (Some(5), true));
    // A turn that accounts for nothing does not reset it.
    list.push(ts(2));
    list.push(te(2, COMPLETED));
    assert_eq!(fold(&list), (Some(5), true));
    // Before any accounting turn, too.
    assert_eq!(fold(&[own(INSERT_A), own(CANCEL)]), (None, true));
}

#[test]
fn fold_a_replacement_is_not_a_drop() {
    let mut list = vec![own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    list.push(own(INSERT_A));
    list.push(own(REPLACE));
    assert_eq!(fold(&list), (Some(5), false));
}

#[test]
fn fold_a_later_accounting_turn_absorbs_an_earlier_drop() {
    let mut list = vec![own(INSERT_A), own(CANCEL), own(INSERT_A)];
    list.extend(stepped_turn(1, COMPLETED));
    assert_eq!(fold(&list), (Some(7), false));
}

#[test]
fn fold_over_a_live_session_log() {
    let store = MemoryStore::new();
    let s = session(&store, "s");
    s.inbox().append(Target::NextTurn, m("a")).unwrap();
    s.open_turn().unwrap();
    let p = s.propose_step().unwrap();
    s.decide(Decision::Enter(p.messages)).unwrap();
    s.end_step(StepOutcome::Completed).unwrap();
    s.close_turn().unwrap();
    s.inbox().append(Target::NextTurn, m("b")).unwrap();
    s.inbox().remove("b").unwrap();
    let events = s.events(0).unwrap();
    let out = fold_consumed_work(&events);
    assert_eq!(out.end.map(Event::seq), Some(6));
    assert!(out.dropped_unrun);
}

//! Findings of the code review of issue #8, each pinned by a test: the types public
//! functions return can be named, and the open report has one JSON spelling.

use inboxlog::ToJson as _;
use inboxlog::store::{MemoryStore, Opened};
use inboxlog::{
    Baseline, InboxOps, ObserverFailures, OpenReport, QueueProjection, Session, SessionMeta, Target,
};

/// Names every type a `Session` method returns (this file would not compile if one of
/// them were unexported; `#![deny(unnameable_types)]` in the crate keeps it so).
#[test]
fn session_return_types_can_be_named() {
    // The store's open result is public and nameable too.
    fn _named(_: Opened) {}
    let store = MemoryStore::new();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let inbox: InboxOps<'_> = s.inbox();
    inbox
        .append(
            Target::NextTurn,
            inboxlog::Message::from_json(r#"{"id":"a"}"#).unwrap(),
        )
        .unwrap();
    let report: &OpenReport = s.open_report();
    assert_eq!(report, &OpenReport::default());
    let failures: ObserverFailures = s.take_observer_failures();
    assert!(failures.is_empty());
    let baseline: Baseline = QueueProjection::replay(&s.events(0).unwrap(), 0, None)
        .unwrap()
        .baseline();
    assert_eq!(baseline.next_turn.len(), 1);
}

#[test]
fn open_report_json_is_camel_case() {
    assert_eq!(
        OpenReport::default().to_json(),
        r#"{"tornBytes":0,"repairedTurn":null,"repairedCompaction":null}"#
    );
    let report = OpenReport {
        torn_bytes: 17,
        repaired_turn: Some(3),
        repaired_compaction: Some("compaction-4".into()),
    };
    assert_eq!(
        report.to_json(),
        r#"{"tornBytes":17,"repairedTurn":3,"repairedCompaction":"compaction-4"}"#
    );
}

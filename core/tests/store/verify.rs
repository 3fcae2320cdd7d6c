//! `Session::verify` in every store (ARCHITECTURE.md#opening-a-stored-log): it reads a
//! log as `open` would, without locking, waiting for or disturbing its writer, and
//! reports what an open would repair. The rule-by-rule refusals, from logs damaged by
//! hand in each backend's own way, are in `core/tests/verify.rs`.

use inboxlog::{Decision, Envelope, ErrorKind, Session, SessionMeta, Target, ToJson};

use crate::{assert_err, each_store, lines, msg};

#[test]
fn verify_reports_a_live_log_without_locking_or_writing() {
    each_store(|name, store| {
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        for id in ["a", "b", "c"] {
            s.inbox().append(Target::NextTurn, msg(id)).unwrap();
        }
        s.inbox().append(Target::NextStep, msg("d")).unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.inbox().append(Target::NextStep, msg("e")).unwrap();
        let before = lines(store, "s");
        let report = Session::verify(store, "s").unwrap();
        let (next_turn, next_step) = (
            s.inbox().next_turn().unwrap().len(),
            s.inbox().next_step().unwrap().len(),
        );
        assert_eq!(
            (
                report.events,
                report.torn_bytes,
                report.open_turn,
                report.open_step
            ),
            (before.len() as u64, 0, Some(1), Some(1)),
            "{name}"
        );
        assert_eq!(
            (report.next_turn, report.next_step),
            (next_turn, next_step),
            "{name}"
        );
        assert!(report.needs_repair(), "{name}");
        assert_eq!(
            report.to_json(),
            format!(
                r#"{{"header":{},"events":{},"tornBytes":0,"openTurn":1,"openStep":1,"parked":false,"needsRepair":true,"nextTurn":{next_turn},"nextStep":{next_step},"pendingToolCalls":0,"compaction":null,"offSurface":[],"olderShapes":[]}}"#,
                s.header().to_json(),
                before.len()
            ),
            "{name}"
        );
        assert_eq!(lines(store, "s"), before, "{name}: verify wrote nothing");
        // The writer is not disturbed; open is refused as locked, naming the session.
        let err = assert_err(Session::open(store, "s"), ErrorKind::Locked, &[]);
        assert_eq!(
            (err.session(), err.line(), err.seq()),
            (Some("s"), None, None),
            "{name}"
        );
        s.append("host/x", "{}", Envelope::default()).unwrap();
        s.close().unwrap();
    });
}

#[test]
fn verify_and_open_refuse_a_missing_session_alike() {
    each_store(|name, store| {
        let v = Session::verify(store, "nobody").unwrap_err();
        let o = assert_err(Session::open(store, "nobody"), ErrorKind::NotFound, &[]);
        assert_eq!(
            (v.kind(), v.session(), v.to_string()),
            (ErrorKind::NotFound, Some("nobody"), o.to_string()),
            "{name}"
        );
        assert_eq!(
            (v.path(), v.line(), v.offset(), v.seq()),
            (o.path(), o.line(), o.offset(), o.seq()),
            "{name}"
        );
    });
}

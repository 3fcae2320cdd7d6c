//! `inboxlog_store_verify` and the location keys of the error JSON (ARCHITECTURE.md#errors): verify
//! refuses what open refuses with the same error JSON, reports repairs as such, and
//! the keys `session`, `path`, `line`, `offset`, `seq` appear where known, not else.

#[macro_use]
mod common;

use std::ptr::{null, null_mut};

use common::*;

const HEADER: &str = r#"{"format":"inboxlog","version":1,"id":"s","createdAt":0}"#;

/// The log of issue #14: a step with no turn open, on line 2 at byte 57.
fn step_without_turn() -> String {
    format!(
        "{HEADER}\n{}\n",
        r#"{"type":"step/start","seq":0,"time":1,"data":{"turn":7,"step":1}}"#
    )
}

#[test]
fn verify_refuses_what_open_refuses_with_the_same_located_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl_store(dir.path(), "none");
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, step_without_turn()).unwrap();
    assert_eq!(HEADER.len() + 1, 57);

    let verified =
        call_str!(inboxlog_store_verify(store, c("s").as_ptr())).expect_err("verify refuses");
    let opened = open(store, "s").expect_err("open refuses");
    assert_eq!(verified.json, opened.json);
    assert_eq!(verified.code, 2);
    let want = serde_json::json!({
        "code": 2,
        "kind": "corrupt",
        "message": verified.message,
        "session": "s",
        "path": path.to_str().unwrap(),
        "line": 2,
        "offset": 57,
        "seq": 0,
    });
    assert_eq!(verified.json, want);
    assert!(
        verified.message.ends_with(
            "line 2 (byte 57, seq 0): step/start names turn 7, not the open turn (no turn is open)"
        ),
        "{}",
        verified.message
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), step_without_turn());
    // SAFETY: a live handle, released once.
    unsafe { inboxlog_store_free(store) };
}

#[test]
fn verify_reports_repairs_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl_store(dir.path(), "none");
    let s = create(store, "s");
    append(s, "next-turn", r#"{"id":"a"}"#).unwrap();
    let mut turn = 0u64;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    // Verify beside the live writer: no lock taken, nothing written.
    let live = json(&call_str!(inboxlog_store_verify(store, c("s").as_ptr())).unwrap());
    assert_eq!(
        (live["openTurn"].as_u64(), live["needsRepair"].as_bool()),
        (Some(1), Some(true))
    );
    // SAFETY: a live handle, released once (the writer's lock goes with it).
    unsafe { inboxlog_session_free(s) };
    let path = dir.path().join("s.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"type\":");
    std::fs::write(&path, &bytes).unwrap();

    let report = json(&call_str!(inboxlog_store_verify(store, c("s").as_ptr())).unwrap());
    assert_eq!(report["header"]["id"], "s");
    assert_eq!(report["events"], 2);
    assert_eq!(report["tornBytes"], 8);
    assert_eq!(report["openTurn"], 1);
    assert_eq!(report["openStep"], serde_json::Value::Null);
    assert_eq!(report["needsRepair"], true);
    assert_eq!(
        (report["nextTurn"].as_u64(), report["nextStep"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "verify changed the log"
    );

    let s = open(store, "s").unwrap();
    let opened = json(&call_str!(inboxlog_session_open_report(s)).unwrap());
    assert_eq!(
        (&opened["tornBytes"], &opened["repairedTurn"]),
        (&report["tornBytes"], &report["openTurn"])
    );
    // SAFETY: a live handle, released once.
    unsafe { inboxlog_session_free(s) };
    let again = json(&call_str!(inboxlog_store_verify(store, c("s").as_ptr())).unwrap());
    assert_eq!(again["needsRepair"], false);
    // SAFETY: a live handle, released once.
    unsafe { inboxlog_store_free(store) };
}

#[test]
fn location_keys_appear_where_known_and_not_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl_store(dir.path(), "none");
    let s = create(store, "s");
    let path = dir.path().join("s.jsonl");

    // Locked: the session and its file, no line.
    let locked = open(store, "s").expect_err("locked");
    assert_eq!(locked.kind, "locked");
    assert_eq!(locked.json["session"], "s");
    assert_eq!(locked.json["path"], path.to_str().unwrap());
    for key in ["line", "offset", "seq"] {
        assert!(locked.json.get(key).is_none(), "{}", locked.json);
    }
    // Not found and already exists name the session.
    let missing = call_str!(inboxlog_store_verify(store, c("nobody").as_ptr())).unwrap_err();
    assert_eq!(
        (missing.code, &missing.json["session"]),
        (5, &serde_json::json!("nobody"))
    );
    let mut dup = null_mut();
    let exists = call!(inboxlog_session_create(
        store,
        c("s").as_ptr(),
        std::ptr::null(),
        &mut dup
    ))
    .unwrap_err();
    assert_eq!(
        (exists.code, &exists.json["session"]),
        (6, &serde_json::json!("s"))
    );

    // Errors with no location: exactly the three keys.
    let mut json_out = null_mut();
    let idle = call!(inboxlog_session_close_turn(s, null(), &mut json_out)).unwrap_err();
    assert_eq!(idle.kind, "protocol");
    assert_eq!(idle.json.as_object().unwrap().len(), 3, "{}", idle.json);
    let null = call_str!(inboxlog_store_verify(store, std::ptr::null())).unwrap_err();
    assert_eq!(null.code, 100);
    assert_eq!(null.json.as_object().unwrap().len(), 3, "{}", null.json);
    let bad = call_str!(inboxlog_store_verify(store, c("../x").as_ptr())).unwrap_err();
    assert_eq!(bad.code, 10);
    assert_eq!(bad.json.as_object().unwrap().len(), 3, "{}", bad.json);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn the_memory_store_verifies_too() {
    let store = memory_store();
    let s = create(store, "m");
    let mut turn = 0u64;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    let report = json(&call_str!(inboxlog_store_verify(store, c("m").as_ptr())).unwrap());
    assert_eq!(
        (report["events"].as_u64(), report["tornBytes"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(report["openTurn"], 1);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

//! The C ABI called from Rust as a C host would: NULL pointers, invalid UTF-8,
//! malformed and wrongly shaped JSON, close semantics, panics, and whole flows.

#[macro_use]
mod common;

use std::ffi::{CStr, c_char};
use std::ptr::{null, null_mut};

use common::*;

const M1: &str = r#"{"id":"m1","role":"user","content":"hi"}"#;

#[test]
fn null_arguments_are_errors_naming_the_argument() {
    expect_fail(call!(inboxlog_store_new_memory(null_mut())), 100, "`out`");
    let store = memory_store();
    let id = c("s");
    let mut session = null_mut();
    expect_fail(
        call!(inboxlog_session_create(
            null(),
            id.as_ptr(),
            null(),
            &mut session
        )),
        100,
        "`store`",
    );
    expect_fail(
        call!(inboxlog_session_create(store, null(), null(), &mut session)),
        100,
        "`id`",
    );
    expect_fail(
        call!(inboxlog_session_create(
            store,
            id.as_ptr(),
            null(),
            null_mut()
        )),
        100,
        "`out`",
    );
    // The NULL out was found before any work: the id is still free.
    let s = create(store, "s");
    let target = c("next-turn");
    expect_fail(
        call!(inboxlog_inbox_append(
            null_mut(),
            target.as_ptr(),
            c(M1).as_ptr()
        )),
        100,
        "`session`",
    );
    expect_fail(
        call!(inboxlog_inbox_append(s, null(), c(M1).as_ptr())),
        100,
        "`target`",
    );
    expect_fail(
        call!(inboxlog_inbox_append(s, target.as_ptr(), null())),
        100,
        "`message_json`",
    );
    expect_fail(
        call!(inboxlog_inbox_splice(
            s,
            target.as_ptr(),
            0.0,
            0.0,
            null(),
            null_mut()
        )),
        100,
        "`inserted_json`",
    );
    // A NULL out-parameter after valid inputs still refuses before mutating.
    let inserted = c(&format!("[{M1}]"));
    expect_fail(
        call!(inboxlog_inbox_splice(
            s,
            target.as_ptr(),
            0.0,
            0.0,
            inserted.as_ptr(),
            null_mut()
        )),
        100,
        "`out_removed_json`",
    );
    assert_eq!(events(s, 0), "[]", "nothing was written");
    expect_fail(
        call!(inboxlog_session_open_turn(s, null(), null_mut())),
        100,
        "`out_turn`",
    );
    expect_fail(
        call!(inboxlog_session_decide(s, null(), null(), null_mut())),
        100,
        "`decision_json`",
    );
    expect_fail(
        call!(inboxlog_session_fail(s, null(), null())),
        100,
        "`error_json`",
    );
    expect_fail(
        call!(inboxlog_fold_consumed_work(null(), null_mut())),
        100,
        "`events_json`",
    );
    expect_fail(
        call!(inboxlog_projection_new(null(), null_mut())),
        100,
        "`baseline_json`",
    );
    // `error` itself may be NULL: the status still reports the failure.
    // SAFETY: NULL arguments are what is being tested; they must be refused.
    let status = unsafe { inboxlog_session_open_turn(s, null(), null_mut(), null_mut()) };
    assert_eq!(status, 100);
    // NULL is a no-op for every _free function, and only for them: close is no
    // exception (one rule for the whole header).
    // SAFETY: NULL is documented as a no-op.
    unsafe {
        inboxlog_string_free(null_mut());
        inboxlog_session_free(null_mut());
        inboxlog_store_free(null_mut());
        inboxlog_projection_free(null_mut());
    }
    expect_fail(
        call!(inboxlog_session_close(null_mut())),
        100,
        "argument `session` is NULL",
    );
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn invalid_utf8_is_refused_naming_the_argument() {
    let store = memory_store();
    let bad = c"bad\xff\xfeid";
    let mut session = null_mut();
    let f = expect_fail(
        call!(inboxlog_session_create(
            store,
            bad.as_ptr(),
            null(),
            &mut session
        )),
        101,
        "argument `id` is not valid UTF-8",
    );
    assert_eq!(f.kind, "invalid_utf8");
    assert!(f.message.contains("offset 3"), "{f:?}");
    assert!(session.is_null(), "out is written only on success");
    let s = create(store, "s");
    let target = c("next-turn");
    let message = c"{\"id\":\"m\xc3\x28\"}";
    expect_fail(
        call!(inboxlog_inbox_append(s, target.as_ptr(), message.as_ptr())),
        101,
        "`message_json`",
    );
    expect_fail(
        call!(inboxlog_session_end_step(
            s,
            c"con\x80tinue".as_ptr(),
            null(),
            null_mut()
        )),
        101,
        "`outcome`",
    );
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn malformed_json_and_wrong_shapes_are_told_apart() {
    let store = memory_store();
    let s = create(store, "s");
    let target = c("next-turn");
    for (text, code, needle) in [
        ("{", 102, "not valid JSON"),
        ("{\"id\":\"a\"} x", 102, "not valid JSON"),
        ("NaN", 102, "not valid JSON"),
        ("", 102, "not valid JSON"),
        ("{\"id\":\"a\",\"n\":1 2}", 102, "not valid JSON"),
        // Well-formed, but a double cannot hold it: a bad value, told by the core's check.
        ("{\"id\":\"a\",\"n\":1e400}", 10, "is not finite"),
        ("[{\"id\":\"a\"}]", 10, "must be a JSON object"),
        ("{\"role\":\"user\"}", 10, "has no \"id\""),
        ("{\"id\":\"\"}", 10, "non-empty string"),
    ] {
        let f = expect_fail(
            call!(inboxlog_inbox_append(s, target.as_ptr(), c(text).as_ptr())),
            code,
            needle,
        );
        assert!(f.message.contains("message_json"), "{f:?}");
    }
    let deep = format!("{}{}", "[".repeat(600), "]".repeat(600));
    expect_fail(
        call!(inboxlog_session_append(
            s,
            c("host/x").as_ptr(),
            c(&deep).as_ptr(),
            null(),
            null_mut()
        )),
        12,
        "deeper than 512",
    );
    expect_fail(
        call!(inboxlog_session_append(
            s,
            c("host/x").as_ptr(),
            c("{}").as_ptr(),
            c(r#"{"colour":"red"}"#).as_ptr(),
            null_mut()
        )),
        10,
        "`envelope_json`",
    );
    expect_fail(
        call!(inboxlog_session_append(
            s,
            c("turn/start").as_ptr(),
            c(r#"{"turn":1}"#).as_ptr(),
            null(),
            null_mut()
        )),
        10,
        "written only by inboxlog",
    );
    expect_fail(
        call!(inboxlog_inbox_splice(
            s,
            c("later").as_ptr(),
            0.0,
            0.0,
            c("[]").as_ptr(),
            null_mut()
        )),
        10,
        "target must be",
    );
    expect_fail(
        call_str!(inboxlog_inbox_splice(
            s,
            target.as_ptr(),
            0.0,
            0.0,
            c(r#"{"id":"a"}"#).as_ptr()
        ))
        .map(drop),
        10,
        "JSON array of messages",
    );
    expect_fail(
        call!(inboxlog_session_cancel(
            s,
            c(r#"{"kind":"boss"}"#).as_ptr(),
            false,
            null()
        )),
        10,
        "cancel cause",
    );
    let mut child = null_mut();
    expect_fail(
        call!(inboxlog_session_create_seeded(
            store,
            c("t").as_ptr(),
            null(),
            c("[]").as_ptr(),
            -5,
            &mut child
        )),
        10,
        "argument `seed_length` must be INBOXLOG_ABSENT (-1) or 0..=2^53-1, got -5",
    );
    expect_fail(
        call!(inboxlog_session_create(
            store,
            c("t").as_ptr(),
            c(r#"{"origin":"boss"}"#).as_ptr(),
            &mut child
        )),
        10,
        "origin must be",
    );
    expect_fail(
        call!(inboxlog_session_create(
            store,
            c("../t").as_ptr(),
            null(),
            &mut child
        )),
        10,
        "session id",
    );
    assert!(child.is_null());
    assert_eq!(events(s, 0), "[]", "no refused call wrote anything");
    // The protocol refuses out-of-order calls by state; JSON shape errors come first.
    let mut decided = null_mut();
    expect_fail(
        call!(inboxlog_session_decide(
            s,
            c(r#"{"kind":"maybe"}"#).as_ptr(),
            null(),
            &mut decided
        )),
        10,
        "decision kind",
    );
    expect_fail(
        call!(inboxlog_session_decide(
            s,
            c(r#"{"kind":"reject"}"#).as_ptr(),
            null(),
            &mut decided
        )),
        9,
        "idle",
    );
    assert!(decided.is_null());
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn close_twice_is_fine_and_use_after_close_is_closed() {
    let store = memory_store();
    let s = create(store, "s");
    call!(inboxlog_session_watch(s)).unwrap();
    append(s, "next-turn", M1).unwrap();
    call!(inboxlog_session_close(s)).unwrap();
    call!(inboxlog_session_close(s)).unwrap();
    expect_fail(append(s, "next-turn", r#"{"id":"m2"}"#), 13, "closed");
    let mut turn = 0u64;
    expect_fail(
        call!(inboxlog_session_open_turn(s, null(), &mut turn)),
        13,
        "closed",
    );
    for result in [
        call_str!(inboxlog_session_id(s)).map(drop),
        call_str!(inboxlog_session_header(s)).map(drop),
        call_str!(inboxlog_session_open_report(s)).map(drop),
        call_str!(inboxlog_session_events(s, 0)).map(drop),
        call_str!(inboxlog_session_poll(s)).map(drop),
        call_str!(inboxlog_inbox_next_turn(s)).map(drop),
        call_str!(inboxlog_session_baseline(s, INBOXLOG_ABSENT)).map(drop),
        call!(inboxlog_session_watch(s)),
        call!(inboxlog_session_flush(s)),
        call!(inboxlog_inbox_clear(s)),
    ] {
        expect_fail(result, 13, "closed");
    }
    // The lock was released: the log reopens with its inbox replayed.
    let again = open(store, "s").unwrap();
    let next = call_str!(inboxlog_inbox_next_turn(again)).unwrap();
    assert_eq!(
        next,
        format!("[{}]", r#"{"id":"m1","role":"user","content":"hi"}"#)
    );
    // A second writer is refused while one is open.
    expect_fail(open(store, "s").map(drop), 3, "locked");
    // SAFETY: live handles, released once; a closed session is still freed.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_session_free(again);
        inboxlog_store_free(store);
    }
}

#[test]
fn a_panic_becomes_the_panic_status() {
    let f = expect_fail(
        call!(inboxlog_test_panic()),
        199,
        "inboxlog_test_panic was called",
    );
    assert_eq!(f.kind, "panic");
    // SAFETY: NULL error is allowed.
    assert_eq!(unsafe { inboxlog_test_panic(null_mut()) }, 199);
    // The library is still usable.
    let store = memory_store();
    let s = create(store, "after-panic");
    append(s, "next-step", M1).unwrap();
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn version_and_status_names() {
    // SAFETY: static NUL-terminated strings.
    let version = unsafe { CStr::from_ptr(inboxlog_version()) };
    assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    let name = |code| {
        let p: *const c_char = inboxlog_status_name(code);
        // SAFETY: non-NULL results are static strings.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap())
    };
    assert_eq!(name(0), Some("ok"));
    assert_eq!(name(5), Some("not_found"));
    assert_eq!(name(102), Some("invalid_json"));
    assert_eq!(name(199), Some("panic"));
    assert_eq!(name(42), None);
    for kind in inboxlog_core::ErrorKind::ALL {
        assert_eq!(name(kind.code() as i32), Some(kind.name()));
    }
}

/// One prompt through a turn with steering, observed through polled notifications.
#[test]
fn a_turn_with_steering_and_polled_notifications() {
    let store = memory_store();
    let s = create(store, "s");
    call!(inboxlog_session_watch(s)).unwrap();
    call!(inboxlog_session_watch(s)).unwrap(); // watching twice is a no-op
    append(s, "next-turn", M1).unwrap();
    let mut turn = 0;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    assert_eq!(turn, 1);
    let proposal = json(&call_str!(inboxlog_session_propose_step(s)).unwrap());
    assert_eq!(proposal["step"], 1);
    assert_eq!(proposal["messages"][0]["id"], "m1");
    let decision = format!(r#"{{"kind":"enter","messages":{}}}"#, proposal["messages"]);
    let decided = call_str!(inboxlog_session_decide(s, c(&decision).as_ptr(), null())).unwrap();
    assert_eq!(decided, r#"{"kind":"step","turn":1,"step":1}"#);
    // Steering arrives mid-step.
    append(s, "next-step", r#"{"id":"steer"}"#).unwrap();
    let mut again = false;
    call!(inboxlog_session_end_step(
        s,
        c("completed").as_ptr(),
        null(),
        &mut again
    ))
    .unwrap();
    assert!(again, "steering must be proposed");
    expect_fail(
        call_str!(inboxlog_session_close_turn(s, null())).map(drop),
        9,
        "steering",
    );
    let proposal = json(&call_str!(inboxlog_session_propose_step(s)).unwrap());
    assert_eq!(proposal["step"], 2);
    assert_eq!(proposal["messages"][0]["id"], "steer");
    let decision = format!(r#"{{"kind":"enter","messages":{}}}"#, proposal["messages"]);
    call_str!(inboxlog_session_decide(s, c(&decision).as_ptr(), null())).unwrap();
    call!(inboxlog_session_end_step(
        s,
        c("max-tokens").as_ptr(),
        null(),
        &mut again
    ))
    .unwrap();
    assert!(!again);
    let closed = call_str!(inboxlog_session_close_turn(s, null())).unwrap();
    assert_eq!(
        closed,
        r#"{"kind":"turn-end","turn":1,"reason":{"kind":"max-tokens"}}"#
    );

    let polled = json(&call_str!(inboxlog_session_poll(s)).unwrap());
    let kinds: Vec<String> = polled
        .as_array()
        .unwrap()
        .iter()
        .map(|n| match (&n["event"], &n["inbox"]) {
            (e, serde_json::Value::Null) => format!("event {}", e["type"].as_str().unwrap()),
            (_, i) => format!("inbox {}", i["type"].as_str().unwrap()),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "event agent/inbox/spliced",
            "inbox agent/inbox/inserted",
            "event turn/start",
            "event agent/inbox/spliced",
            "inbox agent/inbox/claimed",
            "event step/start",
            "event user/message",
            "event agent/inbox/spliced",
            "inbox agent/inbox/inserted",
            "event step/end",
            "event agent/inbox/spliced",
            "inbox agent/inbox/claimed",
            "event step/start",
            "event user/message",
            "event step/end",
            "event turn/end",
        ]
    );
    assert_eq!(polled[4]["inbox"]["turn"], 1);
    assert_eq!(polled[4]["inbox"]["message"]["id"], "m1");
    let seqs: Vec<u64> = polled
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["event"]["seq"].as_u64())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    // Each poll returns what accumulated since the last one.
    assert_eq!(call_str!(inboxlog_session_poll(s)).unwrap(), "[]");
    let mut removed = false;
    call!(inboxlog_inbox_remove(s, c("nope").as_ptr(), &mut removed)).unwrap();
    assert!(!removed);
    assert_eq!(call_str!(inboxlog_session_poll(s)).unwrap(), "[]");

    // The fold sees turn 1 as the one that accounted for the work.
    let fold = json(&call_str!(inboxlog_fold_consumed_work(c(&events(s, 0)).as_ptr())).unwrap());
    assert_eq!(fold["end"]["type"], "turn/end");
    assert_eq!(fold["droppedUnrun"], false);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn reject_cancel_fail_and_inbox_edits() {
    let store = memory_store();
    let s = create(store, "s");
    append(s, "next-turn", r#"{"id":"a"}"#).unwrap();
    append(s, "next-turn", r#"{"id":"b"}"#).unwrap();
    call!(inboxlog_inbox_prepend(
        s,
        c("next-turn").as_ptr(),
        c(r#"{"id":"z"}"#).as_ptr()
    ))
    .unwrap();
    expect_fail(
        append(s, "next-step", r#"{"id":"a"}"#),
        8,
        r#"message "a" is already pending"#,
    );
    let mut replaced = false;
    call!(inboxlog_inbox_replace(
        s,
        c("b").as_ptr(),
        c(r#"{"id":"b2"}"#).as_ptr(),
        &mut replaced
    ))
    .unwrap();
    assert!(replaced);
    // JS splice arithmetic: -1 is the last message, NaN deletes nothing, Infinity all.
    let removed = call_str!(inboxlog_inbox_splice(
        s,
        c("next-turn").as_ptr(),
        -1.0,
        f64::INFINITY,
        c("[]").as_ptr()
    ))
    .unwrap();
    assert_eq!(removed, r#"[{"id":"b2"}]"#);
    let removed = call_str!(inboxlog_inbox_splice(
        s,
        c("next-turn").as_ptr(),
        f64::NAN,
        f64::NAN,
        c(r#"[{"id":"c"}]"#).as_ptr()
    ))
    .unwrap();
    assert_eq!(removed, "[]");
    assert_eq!(
        call_str!(inboxlog_inbox_next_turn(s)).unwrap(),
        r#"[{"id":"c"},{"id":"z"},{"id":"a"}]"#
    );
    // Reject: the turn ends blocked, the claimed message stays removed.
    let mut turn = 0;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    call_str!(inboxlog_session_propose_step(s)).unwrap();
    let decided = call_str!(inboxlog_session_decide(
        s,
        c(r#"{"kind":"reject"}"#).as_ptr(),
        null()
    ))
    .unwrap();
    assert_eq!(
        decided,
        r#"{"kind":"turn-end","turn":1,"reason":{"kind":"blocked"}}"#
    );
    // Fail inside a step.
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    let p = json(&call_str!(inboxlog_session_propose_step(s)).unwrap());
    let decision = format!(r#"{{"kind":"enter","messages":{}}}"#, p["messages"]);
    call_str!(inboxlog_session_decide(s, c(&decision).as_ptr(), null())).unwrap();
    let mut current = 0i64;
    call!(inboxlog_session_current_turn(s, &mut current)).unwrap();
    assert_eq!(current, 2);
    call!(inboxlog_session_fail(
        s,
        c(r#"{"message":"boom","code":"E1"}"#).as_ptr(),
        null()
    ))
    .unwrap();
    // Cancel with the default cause clears the inbox and aborts the open turn.
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    call!(inboxlog_session_cancel(s, null(), false, null())).unwrap();
    let mut pending = true;
    call!(inboxlog_inbox_has_pending(s, &mut pending)).unwrap();
    assert!(!pending);
    let log = json(&events(s, 0));
    let ends: Vec<&serde_json::Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| &e["data"]["reason"])
        .collect();
    let expected = [
        json(r#"{"kind":"blocked"}"#),
        json(r#"{"kind":"error","error":{"message":"boom","code":"E1"}}"#),
        json(r#"{"kind":"aborted","reason":{"kind":"user"}}"#),
    ];
    assert_eq!(ends, expected.iter().collect::<Vec<_>>());
    let mut last = 0i64;
    call!(inboxlog_session_last_seq(s, &mut last)).unwrap();
    assert_eq!(last as usize, log.as_array().unwrap().len() - 1);
    // The last canceled splice dropped work unrun after the last accounted turn.
    let fold = json(&call_str!(inboxlog_fold_consumed_work(c(&log.to_string()).as_ptr())).unwrap());
    assert_eq!(fold["droppedUnrun"], true);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn projection_follows_the_live_inbox() {
    let store = memory_store();
    let s = create(store, "s");
    append(s, "next-turn", r#"{"id":"a"}"#).unwrap();
    let baseline = call_str!(inboxlog_session_baseline(s, INBOXLOG_ABSENT)).unwrap();
    assert_eq!(
        baseline,
        r#"{"seq":0,"next_turn":[{"id":"a"}],"next_step":[]}"#
    );
    let mut p = null_mut();
    call!(inboxlog_projection_new(c(&baseline).as_ptr(), &mut p)).unwrap();
    append(s, "next-step", r#"{"id":"b"}"#).unwrap();
    call!(inboxlog_session_append(
        s,
        c("host/note").as_ptr(),
        c(r#"{"n": 1}"#).as_ptr(),
        null(),
        null_mut()
    ))
    .unwrap();
    call!(inboxlog_inbox_remove(s, c("a").as_ptr(), &mut false)).unwrap();
    let later = events(s, 1);
    call!(inboxlog_projection_apply_all(p, c(&later).as_ptr())).unwrap();
    let live = call_str!(inboxlog_session_baseline(s, INBOXLOG_ABSENT)).unwrap();
    assert_eq!(call_str!(inboxlog_projection_baseline(p)).unwrap(), live);
    // The same event again is refused, and a failed batch changes nothing.
    let first = json(&later)[0].to_string();
    expect_fail(
        call!(inboxlog_projection_apply(p, c(&first).as_ptr())),
        10,
        "already in the projection",
    );
    let bad = r#"[{"type":"agent/inbox/spliced","seq":4,"time":0,"data":{"target":"next-step","start":9,"inserted":[]}}]"#;
    expect_fail(
        call!(inboxlog_projection_apply_all(p, c(bad).as_ptr())),
        7,
        "invalid inbox splice",
    );
    assert_eq!(call_str!(inboxlog_projection_baseline(p)).unwrap(), live);
    // Every key is required (`seq` too: null is spelled, never implied), as in Python.
    for (bad, needle) in [
        (r#"{"seq":0,"next_turn":[]}"#, "missing field `next_step`"),
        (r#"{"next_turn":[],"next_step":[]}"#, "missing field `seq`"),
        (
            r#"{"seq":9007199254740992,"next_turn":[],"next_step":[]}"#,
            "larger than 2^53-1",
        ),
    ] {
        let err = expect_fail(
            call!(inboxlog_projection_new(c(bad).as_ptr(), &mut null_mut())),
            10,
            "argument `baseline_json`: baseline",
        );
        assert!(err.message.contains(needle), "{bad}: {err:?}");
    }
    // A baseline at an earlier seq, and a replay of the whole log, agree with the live one.
    assert_eq!(
        call_str!(inboxlog_session_baseline(s, 0)).unwrap(),
        r#"{"seq":0,"next_turn":[{"id":"a"}],"next_step":[]}"#
    );
    let mut replayed = null_mut();
    call!(inboxlog_projection_replay(
        c(&events(s, 0)).as_ptr(),
        0,
        INBOXLOG_ABSENT,
        &mut replayed
    ))
    .unwrap();
    assert_eq!(
        call_str!(inboxlog_projection_baseline(replayed)).unwrap(),
        live
    );
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_projection_free(p);
        inboxlog_projection_free(replayed);
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn jsonl_store_sessions_fork_inspect_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = null_mut();
    expect_fail(
        call!(inboxlog_store_open_jsonl(
            c(dir.path().to_str().unwrap()).as_ptr(),
            c("fast").as_ptr(),
            &mut store
        )),
        10,
        "durability must be",
    );
    let store = jsonl_store(dir.path(), "sync");
    let s = create(store, "parent");
    append(s, "next-turn", M1).unwrap();
    let event = call_str!(inboxlog_session_append(
        s,
        c("assistant/message").as_ptr(),
        c(r#"{"turn": 1, "step": 1, "message": {"id": "a", "role": "assistant", "content": [{"type": "text", "text": "hello"}], "source": {"kind": "model", "provider": "p", "model": "m"}},  "big": 123456789012345678901234567890}"#).as_ptr(),
        c(r#"{"surfaceOp":"append","sourceEventSeqs":[0]}"#).as_ptr()
    ))
    .unwrap();
    assert_eq!(
        event.split_once(",\"time\"").unwrap().0,
        r#"{"type":"assistant/message","seq":1"#
    );
    assert!(event.ends_with(
        r#""data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"p","model":"m"}},"big":123456789012345678901234567890},"surfaceOp":"append","sourceEventSeqs":[0]}"#
    ), "{event}");
    call!(inboxlog_session_flush(s)).unwrap();
    let mut child = null_mut();
    call!(inboxlog_session_fork(
        store,
        c("parent").as_ptr(),
        c("child").as_ptr(),
        c(r#"{"origin":"subagent","delegationDepth":1}"#).as_ptr(),
        &mut child
    ))
    .unwrap();
    let header = json(&call_str!(inboxlog_session_header(child)).unwrap());
    assert_eq!(header["parentSession"], "parent");
    assert_eq!(header["seedLength"], 2);
    assert_eq!(call_str!(inboxlog_inbox_next_turn(child)).unwrap(), "[]");
    assert_eq!(call_str!(inboxlog_session_id(child)).unwrap(), "child");
    let list = json(&call_str!(inboxlog_store_list(store)).unwrap());
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["child", "parent"]);
    let inspected = json(&call_str!(inboxlog_store_inspect(store, c("parent").as_ptr())).unwrap());
    assert_eq!(inspected["events"].as_array().unwrap().len(), 2);
    expect_fail(
        call_str!(inboxlog_store_inspect(store, c("nobody").as_ptr())).map(drop),
        5,
        "nobody",
    );
    let mut dup = null_mut();
    expect_fail(
        call!(inboxlog_session_create(
            store,
            c("parent").as_ptr(),
            null(),
            &mut dup
        )),
        6,
        "already exists",
    );
    // A seeded session from the parent's events.
    let seed =
        json(&call_str!(inboxlog_store_inspect(store, c("parent").as_ptr())).unwrap())["events"]
            .to_string();
    let mut seeded = null_mut();
    call!(inboxlog_session_create_seeded(
        store,
        c("seeded").as_ptr(),
        null(),
        c(&seed).as_ptr(),
        2,
        &mut seeded
    ))
    .unwrap();
    let mut last = 0i64;
    call!(inboxlog_session_last_seq(seeded, &mut last)).unwrap();
    assert_eq!(last, 2, "the seed plus session/end-seed");
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(seeded);
        inboxlog_session_free(child);
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
    let file = std::fs::read_to_string(dir.path().join("parent.jsonl")).unwrap();
    assert_eq!(file.lines().count(), 3, "header and two events: {file}");
}

#[test]
fn store_delete_answers_with_the_statuses_of_every_case() {
    let dir = tempfile::tempdir().unwrap();
    for store in [memory_store(), jsonl_store(dir.path(), "sync")] {
        let s = create(store, "s");
        expect_fail(
            call!(inboxlog_store_delete(null(), c("s").as_ptr())),
            100,
            "`store`",
        );
        expect_fail(call!(inboxlog_store_delete(store, null())), 100, "`id`");
        expect_fail(
            call!(inboxlog_store_delete(store, c"s\xff".as_ptr())),
            101,
            "`id`",
        );
        expect_fail(
            call!(inboxlog_store_delete(store, c("../s").as_ptr())),
            10,
            "session id",
        );
        // Held by its writer: refused, and the log is intact.
        expect_fail(
            call!(inboxlog_store_delete(store, c("s").as_ptr())),
            3,
            "is locked by a writer and cannot be deleted",
        );
        // SAFETY: `error` may be NULL.
        assert_eq!(
            unsafe { inboxlog_store_delete(store, c("s").as_ptr(), null_mut()) },
            3
        );
        call_str!(inboxlog_store_inspect(store, c("s").as_ptr())).unwrap();
        call!(inboxlog_session_close(s)).unwrap();
        call!(inboxlog_store_delete(store, c("s").as_ptr())).unwrap();
        expect_fail(
            call!(inboxlog_store_delete(store, c("s").as_ptr())),
            5,
            "no session \"s\"",
        );
        expect_fail(
            call_str!(inboxlog_store_inspect(store, c("s").as_ptr())).map(drop),
            5,
            "no session \"s\"",
        );
        assert_eq!(call_str!(inboxlog_store_list(store)).unwrap(), "[]");
        // SAFETY: live handles, released once.
        unsafe {
            inboxlog_session_free(s);
            inboxlog_store_free(store);
        }
    }
}

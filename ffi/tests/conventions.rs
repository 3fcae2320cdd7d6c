//! The conventions the header states once at its top (ARCHITECTURE.md#c-abi), checked through the
//! functions they govern: flags are bool, an absent number is INBOXLOG_ABSENT, an
//! out-of-range argument is refused naming it (never clamped), and NULL is an error
//! everywhere but the _free functions.

#[macro_use]
mod common;

use std::ptr::{null, null_mut};

use common::*;

/// A session whose log holds `n` host events (seqs 0..n).
fn session_with_events(store: *mut inboxlog_store, id: &str, n: usize) -> *mut inboxlog_session {
    let s = create(store, id);
    for _ in 0..n {
        call!(inboxlog_session_append(
            s,
            c("host/x").as_ptr(),
            c("{}").as_ptr(),
            null(),
            null_mut()
        ))
        .unwrap();
    }
    s
}

fn last_seq(s: *mut inboxlog_session) -> i64 {
    let mut out = 0i64;
    call!(inboxlog_session_last_seq(s, &mut out)).unwrap();
    out
}

fn current_turn(s: *mut inboxlog_session) -> i64 {
    let mut out = 0i64;
    call!(inboxlog_session_current_turn(s, &mut out)).unwrap();
    out
}

#[test]
fn absent_numbers_are_inboxlog_absent_in_and_out() {
    assert_eq!(INBOXLOG_ABSENT, -1);
    let store = memory_store();
    let s = create(store, "s");
    // Out: an empty log has no last seq; an idle session has no current turn (it was
    // 0 before, while the last seq was already -1: two spellings of one idea).
    assert_eq!(last_seq(s), INBOXLOG_ABSENT);
    assert_eq!(current_turn(s), INBOXLOG_ABSENT);
    let mut turn = 0u64;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    assert_eq!(turn, 1);
    assert_eq!(current_turn(s), 1);
    assert_eq!(last_seq(s), 0);
    call!(inboxlog_session_cancel(s, null(), false, null())).unwrap();
    assert_eq!(current_turn(s), INBOXLOG_ABSENT);
    // In: any other negative number is refused, naming the argument.
    for bad in [-2, i64::MIN] {
        expect_fail(
            call_str!(inboxlog_session_baseline(s, bad)).map(drop),
            10,
            &format!("argument `upto` must be INBOXLOG_ABSENT (-1) or 0..=2^53-1, got {bad}"),
        );
        let mut p = null_mut();
        expect_fail(
            call!(inboxlog_projection_replay(c("[]").as_ptr(), 0, bad, &mut p)),
            10,
            "argument `upto` must be INBOXLOG_ABSENT (-1)",
        );
        assert!(p.is_null(), "nothing is written on failure");
    }
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn keep_inbox_is_a_bool_flag() {
    let store = memory_store();
    let s = create(store, "s");
    append(s, "next-turn", r#"{"id":"a"}"#).unwrap();
    append(s, "next-turn", r#"{"id":"b"}"#).unwrap();
    let mut turn = 0u64;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    call_str!(inboxlog_session_propose_step(s)).unwrap();
    // true: the turn is aborted, the unclaimed message stays pending.
    call!(inboxlog_session_cancel(s, null(), true, null())).unwrap();
    assert_eq!(current_turn(s), INBOXLOG_ABSENT);
    assert_eq!(
        call_str!(inboxlog_inbox_next_turn(s)).unwrap(),
        r#"[{"id":"b"}]"#
    );
    // false: the inbox is cleared.
    call!(inboxlog_session_cancel(s, null(), false, null())).unwrap();
    let mut pending = true;
    call!(inboxlog_inbox_has_pending(s, &mut pending)).unwrap();
    assert!(!pending);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn a_baseline_past_the_end_is_refused_not_clamped() {
    let store = memory_store();
    let s = session_with_events(store, "s", 2);
    // The last event is fine; one past it names the argument and the log's length.
    let at_end = call_str!(inboxlog_session_baseline(s, 1)).unwrap();
    assert_eq!(at_end, r#"{"seq":1,"next_turn":[],"next_step":[]}"#);
    let mut out = null_mut();
    let f = expect_fail(
        call!(inboxlog_session_baseline(s, 2, &mut out)),
        10,
        "upto 2 is past the end of the log (2 events, last seq 1)",
    );
    assert_eq!(f.kind, "invalid_input");
    assert!(out.is_null(), "nothing is written on failure");
    expect_fail(
        call_str!(inboxlog_session_baseline(s, 9_007_199_254_740_991)).map(drop),
        10,
        "past the end of the log",
    );
    // An empty log has no seq to stand at: any upto is past its end.
    let empty = create(store, "empty");
    expect_fail(
        call_str!(inboxlog_session_baseline(empty, 0)).map(drop),
        10,
        "upto 0 is past the end of the log (0 events, last seq none)",
    );
    assert_eq!(
        call_str!(inboxlog_session_baseline(empty, INBOXLOG_ABSENT)).unwrap(),
        r#"{"seq":null,"next_turn":[],"next_step":[]}"#
    );
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_session_free(empty);
        inboxlog_store_free(store);
    }
}

#[test]
fn a_replay_past_the_end_of_its_events_is_refused_not_clamped() {
    let store = memory_store();
    let s = session_with_events(store, "s", 3);
    let log = c(&events(s, 0));
    let replay = |replay_from: u64, upto: i64| {
        let mut p = null_mut();
        let result = call!(inboxlog_projection_replay(
            log.as_ptr(),
            replay_from,
            upto,
            &mut p
        ));
        if result.is_ok() {
            // SAFETY: a live handle, released once.
            unsafe { inboxlog_projection_free(p) };
        } else {
            assert!(p.is_null(), "nothing is written on failure");
        }
        result
    };
    replay(0, 2).unwrap();
    replay(3, INBOXLOG_ABSENT).unwrap();
    expect_fail(
        replay(0, 3),
        10,
        "upto 3 is past the end of the log (3 events, last seq 2)",
    );
    expect_fail(
        replay(4, INBOXLOG_ABSENT),
        10,
        "replay_from 4 is past the end of the events (3 events, last seq 2)",
    );
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

#[test]
fn null_is_an_error_everywhere_but_free() {
    let store = memory_store();
    let s = create(store, "s");
    // The functions that used to differ: close took NULL as a no-op.
    let f = expect_fail(
        call!(inboxlog_session_close(null_mut())),
        100,
        "argument `session` is NULL",
    );
    assert_eq!(f.kind, "null_argument");
    expect_fail(
        call!(inboxlog_session_watch(null_mut())),
        100,
        "argument `session` is NULL",
    );
    expect_fail(
        call_str!(inboxlog_session_poll(null_mut())).map(drop),
        100,
        "argument `session` is NULL",
    );
    // A _free takes NULL as a no-op.
    // SAFETY: NULL is documented as a no-op for every _free function.
    unsafe {
        inboxlog_string_free(null_mut());
        inboxlog_session_free(null_mut());
        inboxlog_store_free(null_mut());
        inboxlog_projection_free(null_mut());
    }
    // The session is untouched by the refused close.
    append(s, "next-turn", r#"{"id":"a"}"#).unwrap();
    call!(inboxlog_session_close(s)).unwrap();
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

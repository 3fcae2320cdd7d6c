//! The fleet functions (ARCHITECTURE.md#posting) called as a C host would: post, receive, follow.

#[macro_use]
mod common;

use std::ptr::{null, null_mut};

use common::*;

fn post(
    store: *mut inboxlog_store,
    id: &str,
    target: &str,
    message: &str,
) -> Result<String, Failure> {
    let (id, target, message) = (c(id), c(target), c(message));
    call_str!(inboxlog_store_post(
        store,
        id.as_ptr(),
        target.as_ptr(),
        message.as_ptr()
    ))
}

fn follower(
    store: *mut inboxlog_store,
    id: &str,
    since: u64,
) -> Result<*mut inboxlog_follower, Failure> {
    let mut out = null_mut();
    let id = c(id);
    call!(inboxlog_follower_open(store, id.as_ptr(), since, &mut out))?;
    Ok(out)
}

fn poll(f: *mut inboxlog_follower, timeout_ms: u64) -> serde_json::Value {
    json(&call_str!(inboxlog_follower_poll(f, timeout_ms)).unwrap())
}

#[test]
fn a_post_is_taken_in_and_followed() {
    let dir = tempfile::tempdir().unwrap();
    for store in [memory_store(), jsonl_store(dir.path(), "sync")] {
        let s = create(store, "s");
        let id = post(store, "s", "next-turn", r#"{"id":"a","content":"hi"}"#).unwrap();
        let f = follower(store, "s", 0).unwrap();
        assert_eq!(poll(f, 0), json("[]"));
        let mut n = 0u64;
        call!(inboxlog_inbox_receive(s, &mut n)).unwrap();
        assert_eq!(n, 1);
        let events = poll(f, 5000);
        assert_eq!(events[0]["data"]["post"], json(&format!("\"{id}\"")));
        assert_eq!(events[0]["data"]["inserted"][0]["id"], "a");
        let mut next = 0u64;
        call!(inboxlog_follower_next_seq(f, &mut next)).unwrap();
        assert_eq!(next, 1);
        // A duplicate pending id is rejected, never dropped.
        post(store, "s", "next-step", r#"{"id":"a"}"#).unwrap();
        call!(inboxlog_inbox_receive(s, &mut n)).unwrap();
        let events = poll(f, 5000);
        assert_eq!(events[0]["type"], "agent/inbox/rejected");
        assert_eq!(events[0]["data"]["reason"]["kind"], "duplicate_message");
        // SAFETY: handles made above, each released once.
        unsafe {
            inboxlog_follower_free(f);
            inboxlog_follower_free(null_mut());
            inboxlog_session_free(s);
            inboxlog_store_free(store);
        }
    }
}

#[test]
fn refusals_name_what_is_wrong() {
    let store = memory_store();
    expect_fail(
        post(store, "nope", "next-turn", r#"{"id":"a"}"#).map(drop),
        5,
        "no session",
    );
    let s = create(store, "s");
    expect_fail(
        post(store, "s", "later", r#"{"id":"a"}"#).map(drop),
        10,
        "target",
    );
    expect_fail(
        post(store, "s", "next-turn", r#"{"x":1}"#).map(drop),
        10,
        "message_json",
    );
    expect_fail(
        post(store, "s", "next-turn", "{").map(drop),
        102,
        "message_json",
    );
    expect_fail(
        post(store, "../x", "next-turn", r#"{"id":"a"}"#).map(drop),
        10,
        "",
    );
    expect_fail(follower(store, "nope", 0).map(drop), 5, "no session");
    let id = c("s");
    let m = c(r#"{"id":"a"}"#);
    let t = c("next-turn");
    let mut out = null_mut();
    expect_fail(
        call!(inboxlog_store_post(
            null(),
            id.as_ptr(),
            t.as_ptr(),
            m.as_ptr(),
            &mut out
        )),
        100,
        "store",
    );
    expect_fail(
        call!(inboxlog_store_post(
            store,
            id.as_ptr(),
            t.as_ptr(),
            m.as_ptr(),
            null_mut()
        )),
        100,
        "out_post",
    );
    expect_fail(call!(inboxlog_inbox_receive(s, null_mut())), 100, "out");
    expect_fail(
        call!(inboxlog_follower_poll(null(), 0, &mut out)),
        100,
        "follower",
    );
    let mut next = 0u64;
    expect_fail(
        call!(inboxlog_follower_next_seq(null(), &mut next)),
        100,
        "follower",
    );
    call!(inboxlog_session_close(s)).unwrap();
    let mut n = 0u64;
    expect_fail(call!(inboxlog_inbox_receive(s, &mut n)), 13, "closed");
    // SAFETY: handles made above, each released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

fn remove_pending(
    store: *mut inboxlog_store,
    id: &str,
    message_id: &str,
) -> Result<String, Failure> {
    let (id, message_id) = (c(id), c(message_id));
    call_str!(inboxlog_store_remove_pending(
        store,
        id.as_ptr(),
        message_id.as_ptr()
    ))
}

fn replace_pending(
    store: *mut inboxlog_store,
    id: &str,
    message_id: &str,
    message: &str,
) -> Result<String, Failure> {
    let (id, message_id, message) = (c(id), c(message_id), c(message));
    call_str!(inboxlog_store_replace_pending(
        store,
        id.as_ptr(),
        message_id.as_ptr(),
        message.as_ptr()
    ))
}

#[test]
fn edits_of_pending_input_are_applied_or_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for store in [memory_store(), jsonl_store(dir.path(), "sync")] {
        let s = create(store, "s");
        post(store, "s", "next-turn", r#"{"id":"a"}"#).unwrap();
        let removed = remove_pending(store, "s", "a").unwrap();
        post(store, "s", "next-step", r#"{"id":"b"}"#).unwrap();
        let replaced = replace_pending(store, "s", "b", r#"{"id":"c","v":2}"#).unwrap();
        let missing = remove_pending(store, "s", "a").unwrap();
        let f = follower(store, "s", 0).unwrap();
        let mut n = 0u64;
        call!(inboxlog_inbox_receive(s, &mut n)).unwrap();
        assert_eq!(n, 5);
        let events = poll(f, 5000);
        assert_eq!(
            events[1]["data"],
            json(&format!(
                r#"{{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled","post":"{removed}"}}"#
            ))
        );
        assert_eq!(
            events[3]["data"],
            json(&format!(
                r#"{{"target":"next-step","start":0,"removedCount":1,"inserted":[{{"id":"c","v":2}}],"outcome":"canceled","post":"{replaced}"}}"#
            ))
        );
        assert_eq!(events[4]["type"], "agent/inbox/rejected");
        assert_eq!(
            events[4]["data"],
            json(&format!(
                r#"{{"edit":{{"op":"remove","id":"a"}},"reason":{{"code":5,"kind":"not_found","message":"message \"a\" is not pending"}},"post":"{missing}"}}"#
            ))
        );
        // SAFETY: handles made above, each released once.
        unsafe {
            inboxlog_follower_free(f);
            inboxlog_session_free(s);
            inboxlog_store_free(store);
        }
    }
}

#[test]
fn edit_refusals_name_what_is_wrong() {
    let store = memory_store();
    expect_fail(
        remove_pending(store, "nope", "a").map(drop),
        5,
        "no session",
    );
    expect_fail(
        replace_pending(store, "nope", "a", r#"{"id":"b"}"#).map(drop),
        5,
        "no session",
    );
    let s = create(store, "s");
    expect_fail(
        remove_pending(store, "s", "").map(drop),
        10,
        "must not be empty",
    );
    expect_fail(remove_pending(store, "../x", "a").map(drop), 10, "");
    expect_fail(
        replace_pending(store, "s", "a", r#"{"x":1}"#).map(drop),
        10,
        "message_json",
    );
    expect_fail(
        replace_pending(store, "s", "a", "{").map(drop),
        102,
        "message_json",
    );
    let (id, mid, m) = (c("s"), c("a"), c(r#"{"id":"b"}"#));
    let mut out = null_mut();
    expect_fail(
        call!(inboxlog_store_remove_pending(
            null(),
            id.as_ptr(),
            mid.as_ptr(),
            &mut out
        )),
        100,
        "store",
    );
    expect_fail(
        call!(inboxlog_store_remove_pending(
            store,
            id.as_ptr(),
            null(),
            &mut out
        )),
        100,
        "message_id",
    );
    expect_fail(
        call!(inboxlog_store_remove_pending(
            store,
            id.as_ptr(),
            mid.as_ptr(),
            null_mut()
        )),
        100,
        "out_post",
    );
    expect_fail(
        call!(inboxlog_store_replace_pending(
            store,
            id.as_ptr(),
            mid.as_ptr(),
            null(),
            &mut out
        )),
        100,
        "message_json",
    );
    expect_fail(
        call!(inboxlog_store_replace_pending(
            store,
            id.as_ptr(),
            mid.as_ptr(),
            m.as_ptr(),
            null_mut()
        )),
        100,
        "out_post",
    );
    let bad = [0xffu8, 0];
    expect_fail(
        call!(inboxlog_store_remove_pending(
            store,
            id.as_ptr(),
            bad.as_ptr().cast(),
            &mut out
        )),
        101,
        "message_id",
    );
    // Nothing was delivered.
    let mut n = 0u64;
    call!(inboxlog_inbox_receive(s, &mut n)).unwrap();
    assert_eq!(n, 0);
    // SAFETY: handles made above, each released once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(store);
    }
}

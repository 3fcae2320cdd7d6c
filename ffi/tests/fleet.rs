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

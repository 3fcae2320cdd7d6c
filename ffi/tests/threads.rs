//! Session handles shared by threads: concurrent calls serialize, and closing races
//! other calls safely.

#[macro_use]
mod common;

use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::*;

/// A handle shared across threads, as a C host would share the pointer.
#[derive(Clone, Copy)]
struct Shared(*mut inboxlog_session);
// SAFETY: session handles are documented thread-safe for every call but `_free`, which
// these tests make only after joining every thread.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    fn get(self) -> *mut inboxlog_session {
        self.0
    }
}

const THREADS: usize = 8;
const ROUNDS: usize = 40;

/// One thread's mix of inbox edits, host events and (for thread 0) whole turns.
fn worker(s: *mut inboxlog_session, t: usize) {
    for r in 0..ROUNDS {
        let id = format!("t{t}-r{r}");
        let target = if r % 3 == 0 { "next-step" } else { "next-turn" };
        append(s, target, &format!(r#"{{"id":"{id}","n":{r}}}"#)).unwrap();
        match r % 4 {
            0 => {
                let mut removed = false;
                call!(inboxlog_inbox_remove(s, c(&id).as_ptr(), &mut removed)).unwrap();
            }
            1 => {
                let inserted = c(&format!(r#"[{{"id":"{id}-x"}}]"#));
                call_str!(inboxlog_inbox_splice(
                    s,
                    c("next-turn").as_ptr(),
                    -1.0,
                    1.0,
                    inserted.as_ptr()
                ))
                .unwrap();
            }
            2 => {
                let mut replaced = false;
                let m = c(&format!(r#"{{"id":"{id}-r"}}"#));
                call!(inboxlog_inbox_replace(
                    s,
                    c(&id).as_ptr(),
                    m.as_ptr(),
                    &mut replaced
                ))
                .unwrap();
            }
            _ => {
                let data = c(&format!(r#"{{"thread":{t},"round":{r}}}"#));
                call!(inboxlog_session_append(
                    s,
                    c("host/tick").as_ptr(),
                    data.as_ptr(),
                    null(),
                    null_mut()
                ))
                .unwrap();
            }
        }
        if t == 0 && r % 5 == 0 {
            run_turn(s);
        }
    }
}

/// Runs one whole turn while other threads keep editing the inbox.
fn run_turn(s: *mut inboxlog_session) {
    let mut turn = 0;
    call!(inboxlog_session_open_turn(s, null(), &mut turn)).unwrap();
    loop {
        let p = json(&call_str!(inboxlog_session_propose_step(s)).unwrap());
        let decision = format!(r#"{{"kind":"enter","messages":{}}}"#, p["messages"]);
        let decided =
            json(&call_str!(inboxlog_session_decide(s, c(&decision).as_ptr(), null())).unwrap());
        if decided["kind"] == "turn-end" {
            return;
        }
        let mut again = false;
        call!(inboxlog_session_end_step(
            s,
            c("completed").as_ptr(),
            null(),
            &mut again
        ))
        .unwrap();
        if !again {
            match call_str!(inboxlog_session_close_turn(s, null())) {
                Ok(_) => return,
                // Steering arrived between end_step and close_turn: take another step.
                Err(f) => assert_eq!(f.code, 9, "{f:?}"),
            }
        }
    }
}

#[test]
fn eight_threads_mutating_one_session_serialize() {
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl_store(dir.path(), "none");
    let s = Shared(create(store, "busy"));
    call!(inboxlog_session_watch(s.0)).unwrap();
    thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || worker(s.get(), t));
        }
    });
    // Every committed event was polled once, in commit (seq) order.
    let polled = json(&call_str!(inboxlog_session_poll(s.0)).unwrap());
    let seqs: Vec<u64> = polled
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["event"]["seq"].as_u64())
        .collect();
    let log = events(s.0, 0);
    let count = json(&log).as_array().unwrap().len() as u64;
    assert_eq!(seqs, (0..count).collect::<Vec<_>>());
    let live = call_str!(inboxlog_session_baseline(s.0, INBOXLOG_ABSENT)).unwrap();
    let next_turn = call_str!(inboxlog_inbox_next_turn(s.0)).unwrap();
    call!(inboxlog_session_close(s.0)).unwrap();
    // SAFETY: every thread has joined; released once.
    unsafe { inboxlog_session_free(s.0) };

    // Reopening validates every line against ARCHITECTURE.md#log-invariants and ARCHITECTURE.md#inbox-validation and replays the inbox.
    let reopened = open(store, "busy").unwrap();
    assert_eq!(
        call_str!(inboxlog_session_open_report(reopened)).unwrap(),
        r#"{"tornBytes":0,"repairedTurn":null,"repairedCompaction":null}"#
    );
    assert_eq!(
        call_str!(inboxlog_inbox_next_turn(reopened)).unwrap(),
        next_turn
    );
    assert_eq!(
        call_str!(inboxlog_session_baseline(reopened, INBOXLOG_ABSENT)).unwrap(),
        live
    );
    // A projection replaying the stored log agrees with the replayed inbox.
    let stored = json(&call_str!(inboxlog_store_inspect(store, c("busy").as_ptr())).unwrap());
    assert_eq!(stored["events"].as_array().unwrap().len() as u64, count);
    let mut p = null_mut();
    call!(inboxlog_projection_replay(
        c(&stored["events"].to_string()).as_ptr(),
        0,
        INBOXLOG_ABSENT,
        &mut p
    ))
    .unwrap();
    assert_eq!(call_str!(inboxlog_projection_baseline(p)).unwrap(), live);
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_projection_free(p);
        inboxlog_session_free(reopened);
        inboxlog_store_free(store);
    }
}

#[test]
fn closing_while_other_threads_call_is_safe() {
    let store = memory_store();
    let s = Shared(create(store, "racy"));
    let started = AtomicBool::new(false);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let started = &started;
                scope.spawn(move || {
                    let mut ok = 0u64;
                    for r in 0.. {
                        let m = format!(r#"{{"id":"t{t}-{r}"}}"#);
                        match append(s.get(), "next-turn", &m) {
                            Ok(()) => ok += 1,
                            Err(f) => {
                                assert_eq!(f.code, 13, "only CLOSED after close: {f:?}");
                                return ok;
                            }
                        }
                        started.store(true, Ordering::Release);
                    }
                    unreachable!()
                })
            })
            .collect();
        while !started.load(Ordering::Acquire) {
            thread::yield_now();
        }
        call!(inboxlog_session_close(s.0)).unwrap();
        let appended: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(appended > 0);
    });
    call!(inboxlog_session_close(s.0)).unwrap();
    // SAFETY: every thread has joined; released once.
    unsafe { inboxlog_session_free(s.0) };
    let again = open(store, "racy").unwrap();
    // SAFETY: live handles, released once.
    unsafe {
        inboxlog_session_free(again);
        inboxlog_store_free(store);
    }
}

//! The cost of the C boundary: one small splice pair (insert one message at the end of
//! `next-turn`, then remove it) through the C ABI (JSON in, JSON out, called as extern
//! fns) against the same through the Rust API, on the memory store.
//!
//! Run: `cargo bench -p inboxlog-ffi --bench abi`

use std::ffi::{CString, c_char};
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use inboxlog::{
    inboxlog_inbox_append, inboxlog_inbox_splice, inboxlog_session, inboxlog_session_create,
    inboxlog_session_free, inboxlog_store, inboxlog_store_free, inboxlog_store_new_memory,
    inboxlog_string_free,
};
use inboxlog_core::store::MemoryStore;
use inboxlog_core::{Message, Session, SessionMeta, Target};

/// Messages already waiting, so the splice lands in a non-empty list.
const PENDING: usize = 100;

fn pending(i: usize) -> String {
    format!(r#"{{"id":"p{i}","role":"user","content":"waiting"}}"#)
}

const MESSAGE: &str = r#"{"id":"new","role":"user","content":"hello"}"#;

/// A fresh C session with `PENDING` messages (one per sample, so the log stays small).
fn c_session(store: *mut inboxlog_store, n: usize) -> *mut inboxlog_session {
    let mut s = null_mut();
    let id = CString::new(format!("c{n}")).unwrap();
    let target = CString::new("next-turn").unwrap();
    // SAFETY: valid handles and NUL-terminated strings; out-params are writable.
    unsafe {
        assert_eq!(
            inboxlog_session_create(store, id.as_ptr(), null(), &mut s, null_mut()),
            0
        );
        for i in 0..PENDING {
            let m = CString::new(pending(i)).unwrap();
            assert_eq!(
                inboxlog_inbox_append(s, target.as_ptr(), m.as_ptr(), null_mut()),
                0
            );
        }
    }
    s
}

fn rust_session(store: &MemoryStore, n: usize) -> Session {
    let s = Session::create(store, &format!("r{n}"), SessionMeta::default()).unwrap();
    for i in 0..PENDING {
        let m = Message::from_json(&pending(i)).unwrap();
        s.inbox().append(Target::NextTurn, m).unwrap();
    }
    s
}

fn splice(c: &mut Criterion) {
    let mut group = c.benchmark_group("splice pair (insert 1 + remove 1)");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);

    let mut store = null_mut();
    // SAFETY: a writable out-param.
    assert_eq!(
        unsafe { inboxlog_store_new_memory(&mut store, null_mut()) },
        0
    );
    let target = CString::new("next-turn").unwrap();
    let inserted = CString::new(format!("[{MESSAGE}]")).unwrap();
    let nothing = CString::new("[]").unwrap();
    let mut sessions = 0;
    group.bench_function("C ABI (JSON in and out)", |b| {
        b.iter_custom(|iters| {
            sessions += 1;
            let s = c_session(store, sessions);
            let start = Instant::now();
            for _ in 0..iters {
                let mut out: *mut c_char = null_mut();
                // SAFETY: valid handle and strings; `out` is writable and freed once.
                unsafe {
                    let end = PENDING as f64;
                    assert_eq!(
                        inboxlog_inbox_splice(
                            s,
                            target.as_ptr(),
                            end,
                            0.0,
                            inserted.as_ptr(),
                            &mut out,
                            null_mut()
                        ),
                        0
                    );
                    inboxlog_string_free(out);
                    assert_eq!(
                        inboxlog_inbox_splice(
                            s,
                            target.as_ptr(),
                            -1.0,
                            1.0,
                            nothing.as_ptr(),
                            &mut out,
                            null_mut()
                        ),
                        0
                    );
                    inboxlog_string_free(out);
                }
            }
            let elapsed = start.elapsed();
            // SAFETY: a live handle, released once.
            unsafe { inboxlog_session_free(s) };
            elapsed
        });
    });

    let rust_store = MemoryStore::new();
    group.bench_function("Rust API (message parsed from JSON)", |b| {
        b.iter_custom(|iters| {
            sessions += 1;
            let s = rust_session(&rust_store, sessions);
            let start = Instant::now();
            for _ in 0..iters {
                let m = Message::from_json(MESSAGE).unwrap();
                s.inbox()
                    .splice(Target::NextTurn, PENDING as f64, 0.0, vec![m])
                    .unwrap();
                let removed = s
                    .inbox()
                    .splice(Target::NextTurn, -1.0, 1.0, Vec::new())
                    .unwrap();
                criterion::black_box(removed);
            }
            start.elapsed()
        });
    });

    let message = Message::from_json(MESSAGE).unwrap();
    group.bench_function("Rust API (message pre-parsed)", |b| {
        b.iter_custom(|iters| {
            sessions += 1;
            let s = rust_session(&rust_store, sessions);
            let start = Instant::now();
            for _ in 0..iters {
                s.inbox()
                    .splice(Target::NextTurn, PENDING as f64, 0.0, vec![message.clone()])
                    .unwrap();
                let removed = s
                    .inbox()
                    .splice(Target::NextTurn, -1.0, 1.0, Vec::new())
                    .unwrap();
                criterion::black_box(removed);
            }
            start.elapsed()
        });
    });
    group.finish();
    // SAFETY: a live handle, released once.
    unsafe { inboxlog_store_free(store) };
}

criterion_group!(benches, splice);
criterion_main!(benches);

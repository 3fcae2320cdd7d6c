//! Arbitrary bytes at every string argument: each call returns a status, never a
//! panic (no PANIC status), and a refused call leaves the log as it was.

#[macro_use]
mod common;

use std::ffi::CString;
use std::ptr::null;

use common::*;
use proptest::prelude::*;

const PANIC: i32 = 199;

/// Bytes without NUL (C strings end at the first one), often JSON-shaped.
fn text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(1u8..=255, 0..40),
        "[{}\\[\\]\",:a-z0-9\\\\]{0,40}".prop_map(String::into_bytes),
        Just(br#"{"id":"m1"}"#.to_vec()),
        Just(br#"{"kind":"enter","messages":[{"id":"x"}]}"#.to_vec()),
        Just(b"\"a\\".to_vec()),
        Just(b"next-turn".to_vec()),
        Just(b"next-step".to_vec()),
        Just(b"[\xff]".to_vec()),
    ]
}

fn cstr(bytes: &[u8]) -> CString {
    CString::new(bytes).expect("no NUL in generated text")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_call_answers_with_a_status(a in text(), b in text(), start in any::<f64>(), n in any::<f64>()) {
        let store = memory_store();
        let s = create(store, "s");
        let (a, b) = (cstr(&a), cstr(&b));
        let before = events(s, 0);
        let results = [
            call!(inboxlog_inbox_append(s, a.as_ptr(), b.as_ptr())),
            call_str!(inboxlog_inbox_splice(s, a.as_ptr(), start, n, b.as_ptr())).map(drop),
            call_str!(inboxlog_session_append(s, a.as_ptr(), b.as_ptr(), std::ptr::null())).map(drop),
            call_str!(inboxlog_session_decide(s, a.as_ptr(), null())).map(drop),
            call!(inboxlog_session_cancel(s, a.as_ptr(), false, null())),
            call!(inboxlog_session_fail(s, b.as_ptr(), null())),
            call_str!(inboxlog_fold_consumed_work(a.as_ptr())).map(drop),
            call!(inboxlog_inbox_remove(s, a.as_ptr(), &mut false)),
        ];
        let mut changed = false;
        for r in results {
            match r {
                Ok(()) => changed = true,
                Err(f) => prop_assert_ne!(f.code, PANIC, "{:?}", f),
            }
        }
        if !changed {
            prop_assert_eq!(events(s, 0), before);
        }
        // SAFETY: live handles, each released once.
        unsafe {
            inboxlog_session_free(s);
            inboxlog_store_free(store);
        }
    }
}

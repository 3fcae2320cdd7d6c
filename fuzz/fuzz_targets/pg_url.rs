//! libFuzzer entry point of the `pg_url` target (its properties: `inboxlog_fuzz::pg_url`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::pg_url(data));

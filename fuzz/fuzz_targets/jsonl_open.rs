//! libFuzzer entry point of the `jsonl_open` target (its properties: `inboxlog_fuzz::jsonl_open`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::jsonl_open(data));

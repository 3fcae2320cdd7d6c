//! libFuzzer entry point of the `wire_json` target (its properties: `inboxlog_fuzz::wire_json`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::wire_json(data));

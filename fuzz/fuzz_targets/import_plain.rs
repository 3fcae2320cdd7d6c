//! libFuzzer entry point of the `import_plain` target (its properties: `inboxlog_fuzz::import_plain`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::import_plain(data));

//! libFuzzer entry point of the `import_zstd` target (its properties: `inboxlog_fuzz::import_zstd`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::import_zstd(data));

//! libFuzzer entry point of the `c_abi` target (its properties: `inboxlog_fuzz::c_abi`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inboxlog_fuzz::c_abi(data));

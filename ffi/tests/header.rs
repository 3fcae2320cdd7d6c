//! `include/inboxlog.h` is generated from `ffi/src` by cbindgen and checked in; this test
//! fails when the checked-in header is stale.
//!
//! Regenerate it with `INBOXLOG_BLESS=1 cargo test -p inboxlog-ffi --test header`.

use std::path::Path;

#[test]
fn checked_in_header_is_fresh() {
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(ffi.join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(ffi.join("src/lib.rs"))
        .generate()
        .expect("cbindgen can generate the header from ffi/src");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = ffi.join("../include/inboxlog.h");
    if std::env::var_os("INBOXLOG_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("include/inboxlog.h is writable");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || checked_in.lines().count().min(generated.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "include/inboxlog.h is stale (first difference at line {line}); regenerate it with\n    \
             INBOXLOG_BLESS=1 cargo test -p inboxlog-ffi --test header"
        );
    }
}

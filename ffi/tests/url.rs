//! No password in the C error JSON of `inboxlog_store_open_postgres`, whatever the URL
//! (issues #27 and #28, SPEC §10.4): every URL of the core's fixtures
//! (`core/tests/fixtures/urls/`, passwords made of pieces holding `Qx`). The refused
//! ones fail before any connection; the accepted ones point at port 9 of 127.0.0.1,
//! where nothing listens, so they fail at once as `unavailable`. No server needed.

#[macro_use]
mod common;

use std::path::PathBuf;
use std::ptr::{null, null_mut};

use common::*;

fn fixture(name: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/fixtures/urls")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

fn open(url: &str) -> Failure {
    let mut store = null_mut();
    let url = c(url);
    let result = call!(inboxlog_store_open_postgres(
        url.as_ptr(),
        null(),
        &mut store
    ));
    assert!(store.is_null(), "nothing written on failure");
    result.expect_err("the URL must be refused")
}

#[test]
fn refused_urls_fail_as_invalid_input_without_their_password() {
    let urls = fixture("refused.txt");
    assert!(urls.len() >= 50);
    for url in &urls {
        let f = open(url);
        assert_eq!(
            (f.code, f.kind.as_str()),
            (10, "invalid_input"),
            "{url}: {f:?}"
        );
        assert!(f.message.starts_with("invalid PostgreSQL URL "), "{f:?}");
        assert!(!f.json.to_string().contains("Qx"), "{url}: {}", f.json);
    }
}

#[test]
fn accepted_urls_fail_to_connect_without_their_password() {
    for url in fixture("accepted.txt") {
        let f = open(&url);
        assert_eq!(
            (f.code, f.kind.as_str()),
            (16, "unavailable"),
            "{url}: {f:?}"
        );
        assert!(f.message.contains(":9"), "{f:?}");
        assert!(!f.json.to_string().contains("Qx"), "{url}: {}", f.json);
    }
}

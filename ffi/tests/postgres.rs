//! The PostgreSQL store through the C ABI: `inboxlog_store_open_postgres` (and
//! `inboxlog_store_open` over every store) and its
//! options, `inboxlog_session_open_ex` with takeover, and the `FENCED` and
//! `UNAVAILABLE` statuses. Needs the server at `INBOXLOG_TEST_PG` (default
//! `postgresql://postgres@127.0.0.1:5432/test`); skipped without it, except under
//! `CI=true`.

#[macro_use]
mod common;

use std::ptr::{null, null_mut};

use common::*;

fn url() -> String {
    std::env::var("INBOXLOG_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgresql://postgres@127.0.0.1:5432/test".to_owned())
}

/// A schema of the test's own, dropped at the end.
struct Schema(String);

impl Schema {
    fn new(tag: &str) -> Option<Schema> {
        match postgres::Client::connect(&url(), postgres::NoTls) {
            Ok(_) => Some(Schema(format!("ffi_{tag}_{}", std::process::id()))),
            Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("CI=true and no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
            }
            Err(e) => {
                eprintln!("SKIPPED: no PostgreSQL server at INBOXLOG_TEST_PG ({e})");
                None
            }
        }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0));
        }
    }
}

fn pg_store(url: &str, options: Option<&str>) -> Result<*mut inboxlog_store, Failure> {
    let mut store = null_mut();
    let url = c(url);
    let options = options.map(c);
    call!(inboxlog_store_open_postgres(
        url.as_ptr(),
        options.as_ref().map_or(null(), |o| o.as_ptr()),
        &mut store
    ))?;
    Ok(store)
}

fn open_ex(
    store: *mut inboxlog_store,
    id: &str,
    takeover: bool,
) -> Result<*mut inboxlog_session, Failure> {
    let mut session = null_mut();
    let id = c(id);
    call!(inboxlog_session_open_ex(
        store,
        id.as_ptr(),
        takeover,
        &mut session
    ))?;
    Ok(session)
}

fn note(s: *mut inboxlog_session) -> Result<(), Failure> {
    let (ty, data) = (c("host/note"), c("{}"));
    let mut out = null_mut();
    call!(inboxlog_session_append(
        s,
        ty.as_ptr(),
        data.as_ptr(),
        null(),
        &mut out
    ))?;
    take(out);
    Ok(())
}

#[test]
fn a_takeover_fences_the_old_owner_through_the_abi() {
    let Some(schema) = Schema::new("takeover") else {
        return;
    };
    let options = format!(r#"{{"schema":"{}","durability":"batched"}}"#, schema.0);
    let store = pg_store(&url(), Some(&options)).unwrap();
    let first = create(store, "s");
    note(first).unwrap();
    call!(inboxlog_session_flush(first)).unwrap();
    let locked = open_ex(store, "s", false).unwrap_err();
    assert_eq!((locked.kind.as_str(), locked.code), ("locked", 3));
    let second = open_ex(store, "s", true).unwrap();
    note(second).unwrap();
    // In batched mode the old owner's append is staged without a round trip; the fence
    // stops its batch, reported by flush (or by the next call once the window passed).
    let fenced = match note(first) {
        Err(e) => e,
        Ok(()) => call!(inboxlog_session_flush(first)).unwrap_err(),
    };
    assert_eq!(fenced.code, 15, "{fenced:?}");
    assert!(
        fenced.message.contains("taken over by another writer"),
        "{fenced:?}"
    );
    assert_eq!(fenced.kind, "fenced");
    assert_eq!(fenced.json["session"], "s");
    call!(inboxlog_session_flush(second)).unwrap();
    assert_eq!(json(&events(second, 0)).as_array().unwrap().len(), 2);
    // SAFETY: live handles, freed once.
    unsafe {
        inboxlog_session_free(first);
        inboxlog_session_free(second);
        inboxlog_store_free(store);
    }
}

#[test]
fn options_urls_and_unreachable_servers_are_refused_with_their_status() {
    let bad_options = [
        (
            r#"{"schema":"x","colour":"red"}"#,
            10,
            "unknown field `colour`",
        ),
        (
            r#"{"schema":"Not-Plain"}"#,
            10,
            "not a plain SQL identifier",
        ),
        (r#"{"durability":"sometimes"}"#, 10, "sometimes"),
        (r#"{"maxConnections":"8"}"#, 10, "expected u32"),
        (r#"{"maxConnections":-1}"#, 10, "expected u32"),
        (r#"{"maxConnections":4294967296}"#, 10, "expected u32"),
        (r#"{"schema":"#, 102, "not valid JSON"),
        (r"[]", 10, "an object"),
    ];
    for (options, code, needle) in bad_options {
        expect_fail(pg_store(&url(), Some(options)).map(drop), code, needle);
    }
    expect_fail(
        pg_store("mysql://x", None).map(drop),
        10,
        "must start with postgresql://",
    );
    let f = expect_fail(
        pg_store(
            "postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2",
            None,
        )
        .map(drop),
        16,
        "127.0.0.1:9",
    );
    assert_eq!(f.kind, "unavailable");
    assert!(!f.json.to_string().contains("hunter2"), "{}", f.json);
    let mut store = null_mut();
    expect_fail(
        call!(inboxlog_store_open_postgres(null(), null(), &mut store)),
        100,
        "url",
    );
    // Takeover on a store whose locks die with their owner.
    let memory = memory_store();
    let s = create(memory, "m");
    // SAFETY: a live handle, freed once.
    unsafe { inboxlog_session_free(s) };
    expect_fail(
        open_ex(memory, "m", true).map(drop),
        10,
        "takeover is for stores",
    );
    let s = open_ex(memory, "m", false).unwrap();
    // SAFETY: live handles, freed once.
    unsafe {
        inboxlog_session_free(s);
        inboxlog_store_free(memory);
    }
}

fn open_any(url: &str, options: Option<&str>) -> Result<*mut inboxlog_store, Failure> {
    let mut store = null_mut();
    let url = c(url);
    let options = options.map(c);
    call!(inboxlog_store_open(
        url.as_ptr(),
        options.as_ref().map_or(null(), |o| o.as_ptr()),
        &mut store
    ))?;
    Ok(store)
}

/// `inboxlog_store_open` reaches every backend from its URL or path, and refuses an
/// option the backend has no use for.
#[test]
fn one_constructor_opens_every_store() {
    let Some(schema) = Schema::new("open") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("logs");
    let pg_options = format!(
        r#"{{"schema":"{}","durability":"batched","maxConnections":3}}"#,
        schema.0
    );
    let stores = [
        open_any("memory:", None).unwrap(),
        open_any(jsonl.to_str().unwrap(), Some(r#"{"durability":"none"}"#)).unwrap(),
        open_any(&url(), Some(&pg_options)).unwrap(),
    ];
    for store in stores {
        let s = create(store, "s");
        // SAFETY: a live handle, freed once.
        unsafe { inboxlog_session_free(s) };
        let list = call_str!(inboxlog_store_list(store)).unwrap();
        assert_eq!(json(&list)[0]["id"], "s", "{list}");
        // SAFETY: a live handle, freed once.
        unsafe { inboxlog_store_free(store) };
    }
    assert!(jsonl.join("s.jsonl").is_file());
    let refused = [
        (
            "memory:",
            r#"{"schema":"x"}"#,
            10,
            "a schema is an option of PostgreSQL",
        ),
        (
            "memory:",
            r#"{"recordLimit":5}"#,
            10,
            "a record limit is an option",
        ),
        (
            "memory:",
            r#"{"maxConnections":4}"#,
            10,
            "a connection bound is an option of PostgreSQL stores only",
        ),
        (
            jsonl.to_str().unwrap(),
            r#"{"maxConnections":4}"#,
            10,
            "a connection bound is an option of PostgreSQL stores only",
        ),
        (
            "memory:",
            r#"{"colour":"red"}"#,
            10,
            "unknown field `colour`",
        ),
        ("memory:", r"[]", 10, "store options must be an object"),
        ("memory:", r#"{"durability":"#, 102, "not valid JSON"),
    ];
    for (url, options, code, needle) in refused {
        expect_fail(open_any(url, Some(options)).map(drop), code, needle);
    }
    let f = expect_fail(
        open_any(
            "postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2",
            None,
        )
        .map(drop),
        16,
        "127.0.0.1:9",
    );
    assert!(!f.json.to_string().contains("hunter2"), "{}", f.json);
    let mut store = null_mut();
    expect_fail(
        call!(inboxlog_store_open(null(), null(), &mut store)),
        100,
        "url",
    );
}

/// A store needs its ownership connection and at least one for data: a bound below two
/// is refused by both constructors, naming the key.
#[test]
fn a_connection_bound_below_two_is_refused() {
    let Some(schema) = Schema::new("bound") else {
        return;
    };
    for bound in [0, 1] {
        let options = format!(r#"{{"schema":"{}","maxConnections":{bound}}}"#, schema.0);
        expect_fail(pg_store(&url(), Some(&options)).map(drop), 10, "at least 2");
        expect_fail(open_any(&url(), Some(&options)).map(drop), 10, "at least 2");
    }
    let options = format!(r#"{{"schema":"{}","maxConnections":2}}"#, schema.0);
    let store = pg_store(&url(), Some(&options)).unwrap();
    // SAFETY: a live handle, freed once.
    unsafe { inboxlog_store_free(store) };
}

//! A server restart under load (ARCHITECTURE.md#postgresql). Restarting the shared server breaks every
//! other test using it, so this test is ignored in the workspace run and run alone by
//! `make test-pg-restart` (`cargo test -p inboxlog --test pg_restart -- --ignored
//! --test-threads=1`) after the other suites.
//!
//! The server is restarted by `INBOXLOG_TEST_PG_RESTART` (set by
//! `tests/pg/with-server.sh` for its throwaway cluster), else by `pg_ctlcluster
//! --skip-systemctl-redirect <version> main restart` for the machine's cluster on port
//! 5432. Without either the test is skipped, except under `CI=true`, where it fails.

mod pg_common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{Durability, Store};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta};

/// The shell command that restarts the test server, if there is one.
fn restart_command() -> Option<String> {
    if let Ok(cmd) = std::env::var("INBOXLOG_TEST_PG_RESTART")
        && !cmd.is_empty()
    {
        return Some(cmd);
    }
    let local = pg_common::url().contains("@127.0.0.1:5432/")
        || pg_common::url().contains("@localhost:5432/");
    let found = Command::new("sh")
        .args(["-c", "command -v pg_ctlcluster && ls /etc/postgresql"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&found.stdout);
    let version = text.lines().nth(1)?.trim().to_owned();
    (local && found.status.success())
        .then(|| format!("pg_ctlcluster --skip-systemctl-redirect {version} main restart"))
}

#[test]
#[ignore = "restarts the shared server: run alone by `make test-pg-restart`"]
fn a_server_restart_under_load_loses_nothing_acknowledged() {
    let Some(restart) = restart_command() else {
        assert!(
            !pg_common::required(),
            "CI=true, but there is no way to restart the test server (set INBOXLOG_TEST_PG_RESTART)"
        );
        eprintln!("SKIPPED: no command restarts the test server (set INBOXLOG_TEST_PG_RESTART)");
        return;
    };
    let Some((schema, store)) = pg_common::store(Durability::Sync) else {
        return;
    };
    let store = Arc::new(store);
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let unknown: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Four writers, each on a session of its own, appending in `sync` mode; each
    // reopens after a failure (until the server is back) and goes on.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, acked, unknown, stop) =
                (store.clone(), acked.clone(), unknown.clone(), stop.clone());
            thread::spawn(move || {
                let id = format!("w{w}");
                let mut session =
                    Some(Session::create(&*store, &id, SessionMeta::default()).unwrap());
                let mut failures = 0;
                for i in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let s = match &session {
                        Some(s) => s,
                        None => match Session::open(&*store, &id) {
                            Ok(s) => session.insert(s),
                            Err(e) => {
                                assert!(
                                    matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Locked),
                                    "{e}"
                                );
                                thread::sleep(Duration::from_millis(50));
                                continue;
                            }
                        },
                    };
                    let data = format!(r#"{{"w":{w},"i":{i}}}"#);
                    match s.append("host/load", &data, Envelope::default()) {
                        Ok(e) => acked.lock().unwrap().push(format!("{id} {}", e.to_json())),
                        Err(e) => {
                            assert!(
                                matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Poisoned),
                                "{e}"
                            );
                            assert!(!e.to_string().contains("password"), "{e}");
                            if e.to_string().contains("outcome is unknown") {
                                unknown.lock().unwrap().push(format!("{id} {data}"));
                            }
                            failures += 1;
                            session = None;
                        }
                    }
                }
                failures
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let restarted = Command::new("sh").args(["-c", &restart]).status().unwrap();
    assert!(restarted.success(), "{restart}");
    let back = Instant::now();
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let failures: u32 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    eprintln!(
        "restart: {} acknowledged, {failures} failed calls ({} with an unknown outcome), writers back within {:?}",
        acked.lock().unwrap().len(),
        unknown.lock().unwrap().len(),
        back.elapsed()
    );
    assert!(failures > 0, "the restart interrupted no call");
    // Every acknowledged event is stored, every log verifies, and a call reported as
    // "outcome unknown" is stored at most once.
    for w in 0..4 {
        let id = format!("w{w}");
        Session::verify(&*store, &id).unwrap();
        let lines = schema.lines(&id);
        for entry in acked.lock().unwrap().iter() {
            if let Some(line) = entry.strip_prefix(&format!("{id} ")) {
                assert!(
                    lines.contains(&line.to_owned()),
                    "{id}: acknowledged {line} missing"
                );
            }
        }
        for entry in unknown.lock().unwrap().iter() {
            if let Some(data) = entry.strip_prefix(&format!("{id} ")) {
                let n = lines.iter().filter(|l| l.contains(data)).count();
                assert!(n <= 1, "{id}: {data} stored {n} times");
            }
        }
    }
    // The store's pooled connections recover too.
    assert_eq!(store.list().unwrap().len(), 4);
}

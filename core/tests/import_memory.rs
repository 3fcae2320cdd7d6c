//! The peak memory of an import (issue #28), measured in child processes: this test
//! binary runs itself with `child_import` selected and reads the child's peak resident
//! size from `/proc/self/status`.
//!
//! The budget: an import's peak resident memory stays within
//! `4 × ImportLimits::line_bytes + 32 MiB` above the process's resident size before it
//! began, whatever the source (refused or imported, plain or zstd, however far it
//! expands).

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use inboxlog::store::{Durability, JsonlStore};
use inboxlog::{ImportLimits, import_reference_with};

mod hostile_common;

use hostile_common::{amplified, many_runs, spaced_line, zstd_bomb};

/// Runs an import in this test binary as a child process (see [`child_import`]) and
/// returns its peak resident memory above its resident size before the import, in
/// bytes, and whether the import succeeded.
fn peak_of_child(source: &Path, line_bytes: u64) -> (u64, bool) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_import", "--nocapture", "--test-threads=1"])
        .env("INBOXLOG_HOSTILE_SOURCE", source)
        .env("INBOXLOG_HOSTILE_LINE_BYTES", line_bytes.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // The harness may print the test's name on the same line, before the report.
    let line = stdout
        .split("child-import: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    let mut parts = line.split(' ');
    let peak = parts.next().unwrap().parse().unwrap();
    (peak, parts.next() == Some("ok"))
}

/// A field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// The child side of [`peak_of_child`]: does nothing unless run by it.
#[test]
fn child_import() {
    let Some(source) = std::env::var_os("INBOXLOG_HOSTILE_SOURCE") else {
        return;
    };
    let line_bytes = std::env::var("INBOXLOG_HOSTILE_LINE_BYTES")
        .unwrap()
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    // Start the peak over from here: writing 5 to clear_refs resets VmHWM to VmRSS.
    let reset = fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok();
    let before = if reset {
        status_bytes("VmRSS:")
    } else {
        status_bytes("VmHWM:")
    };
    let limits = ImportLimits {
        line_bytes,
        run_bytes: line_bytes,
    };
    let result = import_reference_with(Path::new(&source), &store, None, limits).map(drop);
    let peak = status_bytes("VmHWM:");
    println!(
        "child-import: {} {}",
        peak.saturating_sub(before),
        if result.is_ok() { "ok" } else { "refused" }
    );
}

#[test]
fn peak_memory_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let default = ImportLimits::default().line_bytes;
    let budget = |line_bytes: u64| 4 * line_bytes + (32 << 20);
    let cases = [
        // 1 GiB of one line from about 40 KB of zstd, at the default limits.
        (
            "zstd bomb",
            zstd_bomb(dir.path(), 1024, true),
            default,
            false,
        ),
        (
            "zstd bomb, no newline",
            zstd_bomb(dir.path(), 1024, false),
            default,
            false,
        ),
        (
            "run amplification",
            amplified(dir.path(), 100_000, 8_000),
            default,
            false,
        ),
        // About 44 MB of events written from a 140 KB source, 7 MB per run.
        (
            "many runs",
            many_runs(dir.path(), 6, 2_000, 3_500),
            8 << 20,
            true,
        ),
        // One event line of nearly 8 MiB, spaced so that it is compacted: held whole.
        (
            "a line at the limit",
            spaced_line(dir.path(), 8 << 20),
            8 << 20,
            true,
        ),
    ];
    for (what, source, line_bytes, imported) in cases {
        let (peak, ok) = peak_of_child(&source, line_bytes);
        eprintln!("{what}: peak {} KiB above the baseline", peak >> 10);
        assert_eq!(ok, imported, "{what}");
        assert!(
            peak <= budget(line_bytes),
            "{what}: peak {peak} bytes over the budget of {}",
            budget(line_bytes)
        );
    }
}

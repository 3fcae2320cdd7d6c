//! The PostgreSQL store at fleet scale, beside bare clients, in one run (issue #21):
//! - acks/s of `n` writers on distinct sessions (1, 8, 32, 64 by default): bare
//!   clients (one connection per writer, a one-row `INSERT` and its commit), one
//!   `PgStore` in `sync` mode with its default connection bound (one session per
//!   writer, one event per call) and in `batched` mode (durable events/s, `flush()`
//!   every [`writers::PER_FLUSH`] appends); the sides take turns, round after round,
//!   each from empty tables and a checkpoint;
//! - the backends each side held at its peak (`pg_stat_activity`, by application name);
//! - commit-to-follower latency with 64 writers and a second handle following their
//!   64 sessions: p50, p99, max;
//! - opening 1,000 sessions on one handle: time and backends.
//!
//! Settings (environment): `INBOXLOG_BENCH_QUICK=1` or `--quick` (a smoke run: 1 s per
//! side, one round), `INBOXLOG_BENCH_SECONDS` per side and round (default 5),
//! `INBOXLOG_BENCH_ROUNDS` (3), `INBOXLOG_BENCH_WRITERS` (`1,8,32,64`),
//! `INBOXLOG_BENCH_LAG_WRITERS` (64), `INBOXLOG_BENCH_OPEN_SESSIONS` (1000). The server
//! is shared: setting up stops, with a message, when the bench would hold more than
//! `INBOXLOG_BENCH_MAX_BACKENDS` (72) backends or leave fewer than
//! `INBOXLOG_BENCH_LEAVE_FREE` (10) connection slots to others.

mod lag;
mod monitor;
mod open_many;
mod writers;

use std::fmt::Write as _;
use std::time::Duration;

use inboxlog::store::Durability;
use inboxlog::store::postgres::redact_url;

use self::monitor::{Backends, PREFIX};
use self::writers::Run;

/// The schema of the store's tables.
pub const FLEET_SCHEMA: &str = "inboxlog_bench_fleet";

/// The schema of the bare clients' table.
pub const BARE_SCHEMA: &str = "inboxlog_bench_bare";

/// The type of every appended event.
pub const TYPE: &str = "assistant/chunk";

/// The run's settings, from the environment.
struct Config {
    quick: bool,
    seconds: f64,
    rounds: usize,
    writers: Vec<usize>,
    lag_writers: usize,
    open_sessions: usize,
    budget: i64,
    leave_free: i64,
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        _ => default,
    }
}

impl Config {
    fn from_env() -> Config {
        let quick = crate::quick();
        let writers = std::env::var("INBOXLOG_BENCH_WRITERS")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map_or_else(
                || vec![1, 8, 32, 64],
                |v| {
                    v.split(',')
                        .map(|n| {
                            n.trim().parse().unwrap_or_else(|_| {
                                panic!("INBOXLOG_BENCH_WRITERS={v:?}: {n:?} is not a count")
                            })
                        })
                        .collect()
                },
            );
        Config {
            quick,
            seconds: env("INBOXLOG_BENCH_SECONDS", if quick { 1.0 } else { 5.0 }),
            rounds: env("INBOXLOG_BENCH_ROUNDS", if quick { 1 } else { 3 }),
            writers,
            lag_writers: env("INBOXLOG_BENCH_LAG_WRITERS", 64),
            open_sessions: env("INBOXLOG_BENCH_OPEN_SESSIONS", 1000),
            budget: env("INBOXLOG_BENCH_MAX_BACKENDS", 72),
            leave_free: env("INBOXLOG_BENCH_LEAVE_FREE", 10),
        }
    }
}

/// The machine's load average (1, 5, 15 minutes), as `/proc/loadavg` says.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// `n` with a comma every three digits.
fn grouped(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn sql() -> Result<postgres::Client, String> {
    postgres::Client::connect(
        &monitor::url_named(&crate::url(), "inboxlog_bench_setup"),
        postgres::NoTls,
    )
    .map_err(|e| {
        format!(
            "no PostgreSQL server at {} ({e}); set INBOXLOG_TEST_PG",
            redact_url(&crate::url())
        )
    })
}

/// Drops the bench's schemas, and with `create` makes the bare clients' table again.
fn reset(create: bool) -> Result<(), String> {
    let mut ddl = format!(
        "DROP SCHEMA IF EXISTS {FLEET_SCHEMA} CASCADE; DROP SCHEMA IF EXISTS {BARE_SCHEMA} CASCADE;"
    );
    if create {
        // Shaped like the store's `events` table: same columns, same key.
        write!(
            ddl,
            "CREATE SCHEMA {BARE_SCHEMA};
             CREATE TABLE {BARE_SCHEMA}.events (
                 session text NOT NULL,
                 seq bigint NOT NULL,
                 type text NOT NULL,
                 line text NOT NULL,
                 PRIMARY KEY (session, seq));"
        )
        .expect("a String takes writes");
    }
    sql()?
        .batch_execute(&ddl)
        .map_err(|e| format!("cannot reset the bench's schemas: {e}"))
}

/// The sides of the throughput table.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Bare,
    Sync,
    Batched,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Bare => "bare",
            Side::Sync => "sync",
            Side::Batched => "batched",
        }
    }

    fn app(self, n: usize) -> String {
        format!("{PREFIX}{}_{n}", self.name())
    }
}

/// Runs the whole matrix and prints its tables.
pub fn run() {
    let cfg = Config::from_env();
    let url = crate::url();
    println!(
        "\n## PostgreSQL at fleet scale: {} (schemas {FLEET_SCHEMA}, {BARE_SCHEMA})",
        redact_url(&url)
    );
    println!(
        "{} s per side per round, {} round(s){}; load average at start: {}",
        cfg.seconds,
        cfg.rounds,
        if cfg.quick { " (quick)" } else { "" },
        load_average()
    );
    if let Err(e) = reset(true) {
        println!("not run: {e}");
        return;
    }
    let (backends, watcher) = match Backends::start(&url, cfg.budget, cfg.leave_free) {
        Ok(started) => started,
        Err(e) => {
            println!("not run: {e}");
            return;
        }
    };
    throughput(&cfg, &url, &backends);
    settle();
    latency(&cfg, &url, &backends);
    settle();
    open_many(&cfg, &url, &backends);
    backends.stop();
    let _ = watcher.join();
    if let Err(e) = reset(false) {
        println!("{e}");
    }
    println!("load average at end: {}", load_average());
}

/// Starts the next phase, or the next side of the throughput table, from the state the
/// first started from: the tables the last one filled (millions of rows after a batched
/// side) dropped and the server's dirty pages written out, so that no run pays for the
/// writes of the one before it (a checkpoint or an autovacuum of those rows running
/// meanwhile): without it the side after a batched one paid for its rows.
fn settle() {
    let settled = reset(true).and_then(|()| {
        sql()?
            .batch_execute("CHECKPOINT")
            .map_err(|e| format!("cannot write the server's dirty pages out (CHECKPOINT): {e}"))
    });
    if let Err(e) = settled {
        println!("between phases: {e}");
    }
}

fn throughput(cfg: &Config, url: &str, backends: &Backends) {
    let duration = Duration::from_secs_f64(cfg.seconds);
    println!(
        "\n| writers | bare acks/s | store sync acks/s | sync / bare | store batched events/s \
         | backends bare / sync / batched |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut notes = Vec::new();
    let mut lines: [Option<f64>; 2] = [None, None];
    for &n in &cfg.writers {
        let mut runs = [Run::default(); 3];
        let mut failed: [Option<String>; 3] = [None, None, None];
        for round in 0..cfg.rounds {
            let order = if round % 2 == 0 {
                [Side::Bare, Side::Sync, Side::Batched]
            } else {
                [Side::Batched, Side::Sync, Side::Bare]
            };
            for side in order {
                let k = side as usize;
                if failed[k].is_some() {
                    continue;
                }
                let key = format!("{}-{n}-{round}", side.name());
                let app = side.app(n);
                settle();
                let result = match side {
                    Side::Bare => writers::bare(url, &app, n, &key, duration, backends),
                    Side::Sync => writers::store_side(
                        url,
                        &app,
                        Durability::Sync,
                        n,
                        &key,
                        duration,
                        backends,
                    ),
                    Side::Batched => writers::store_side(
                        url,
                        &app,
                        Durability::Batched,
                        n,
                        &key,
                        duration,
                        backends,
                    ),
                };
                match result {
                    Ok(run) => runs[k] = runs[k].add(run),
                    Err(e) => failed[k] = Some(e),
                }
                if side != Side::Batched && lines[k].is_none() {
                    lines[k] = average_line(side);
                }
            }
        }
        let mut cell = |side: Side| match &failed[side as usize] {
            Some(e) => {
                notes.push(format!("{n} writers, {}: {e}", side.name()));
                format!("failed ({})", notes.len())
            }
            None => grouped(runs[side as usize].rate()),
        };
        let (bare, sync, batched) = (cell(Side::Bare), cell(Side::Sync), cell(Side::Batched));
        let ratio = if failed[0].is_none() && failed[1].is_none() {
            format!(
                "{:.2}×",
                runs[1].rate() / runs[0].rate().max(f64::MIN_POSITIVE)
            )
        } else {
            "—".to_owned()
        };
        println!(
            "| {n} | {bare} | {sync} | {ratio} | {batched} | {} / {} / {} |",
            backends.peak(&Side::Bare.app(n)),
            backends.peak(&Side::Sync.app(n)),
            backends.peak(&Side::Batched.app(n)),
        );
    }
    for (i, note) in notes.iter().enumerate() {
        println!("({}) {note}", i + 1);
    }
    println!(
        "average line: store {:.0} bytes, bare {:.0} bytes",
        lines[Side::Sync as usize].unwrap_or(0.0),
        lines[Side::Bare as usize].unwrap_or(0.0)
    );
    println!("load average after the table: {}", load_average());
}

/// The average line `side` wrote (read before the next side drops it), to show the
/// rows compared are the same size.
fn average_line(side: Side) -> Option<f64> {
    let query = match side {
        Side::Bare => format!("SELECT avg(length(line))::float8 FROM {BARE_SCHEMA}.events"),
        Side::Sync | Side::Batched => format!(
            "SELECT avg(length(line))::float8 FROM {FLEET_SCHEMA}.events WHERE type = '{TYPE}'"
        ),
    };
    match sql().and_then(|mut c| c.query_one(&query, &[]).map_err(|e| e.to_string())) {
        Ok(row) => row.get(0),
        Err(e) => {
            println!("cannot read the {} side's line size: {e}", side.name());
            None
        }
    }
}

fn latency(cfg: &Config, url: &str, backends: &Backends) {
    let n = cfg.lag_writers;
    let (wapp, fapp) = (
        format!("{PREFIX}lag_writers"),
        format!("{PREFIX}lag_followers"),
    );
    println!(
        "\ncommit-to-follower latency, {n} sync writers on one handle, {n} followers on another, {} s:",
        cfg.seconds
    );
    match lag::run(
        url,
        &wapp,
        &fapp,
        n,
        Duration::from_secs_f64(cfg.seconds),
        backends,
    ) {
        Ok(lag) => println!(
            "p50 {}, p99 {}, max {} over {} events ({} acks/s; {} yielded before their ack \
             returned, counted as 0; {} not yielded within 10 s); backends: writers {}, \
             followers {}",
            ms(lag.percentile(50)),
            ms(lag.percentile(99)),
            ms(lag.latencies.last().copied().unwrap_or_default()),
            lag.latencies.len(),
            grouped(lag.acks_per_s),
            lag.early,
            lag.missed,
            backends.peak(&wapp),
            backends.peak(&fapp),
        ),
        Err(e) => println!(
            "failed: {e} (backends: writers {}, followers {})",
            backends.peak(&wapp),
            backends.peak(&fapp)
        ),
    }
    println!("load average: {}", load_average());
}

fn open_many(cfg: &Config, url: &str, backends: &Backends) {
    let count = cfg.open_sessions;
    let app = format!("{PREFIX}open");
    println!("\nopening {count} sessions on one handle:");
    match open_many::run(url, &format!("{PREFIX}open_setup"), &app, count, backends) {
        Ok(o) => {
            println!(
                "{} of {count} opened in {} ({} per open), held open together; closed in {}; \
                 backends at the peak: {}",
                o.opened,
                ms(o.open_time),
                ms(o.open_time / u32::try_from(o.opened.max(1)).unwrap_or(u32::MAX)),
                ms(o.close_time),
                backends.peak(&app)
            );
            if let Some(why) = o.stopped {
                println!("stopped early: {why}");
            }
        }
        Err(e) => println!("failed: {e}"),
    }
    println!("load average: {}", load_average());
}

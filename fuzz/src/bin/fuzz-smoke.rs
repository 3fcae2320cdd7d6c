//! A plain mutation driver for the fuzz targets, on the stable toolchain and without
//! libFuzzer: it runs every seed of `fuzz/corpus/<target>/`, then inputs mutated from
//! them (byte flips, inserted tokens, cut and duplicated ranges, splices of two seeds)
//! until its time is up. Deterministic for a given seed number; a failing input is
//! written to `fuzz/artifacts/<target>/` and the driver exits non-zero.
//!
//! `fuzz-smoke [--seconds N] [--seed S] [TARGET…]` (all targets when none is named).

use std::panic;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use inboxlog_fuzz::TARGETS;

/// Bytes that matter to the parsers under test, inserted by the mutator.
const TOKENS: [&[u8]; 22] = [
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u",
    b"\\ud83d",
    b",",
    b":",
    b"\n",
    b" ",
    b"9007199254740993",
    b"-0",
    b"1e400",
    b"null",
    b"@",
    b"%",
    b"%00",
    b"?",
    b"/",
    b"\x01",
];

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One to four mutations of `input`, maybe spliced with `other`.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + rng.below(16) + 1).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + rng.below(64) + 1).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            4 if !other.is_empty() => {
                let start = rng.below(other.len());
                out.truncate(at);
                out.extend_from_slice(&other[start..]);
            }
            _ => out.insert(at, rng.next() as u8),
        }
    }
    out.truncate(1 << 16);
    out
}

fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    let mut seeds: Vec<Vec<u8>> = paths.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    seeds
}

/// Runs `input`; on a panic, saves it and says where.
fn run(name: &str, target: fn(&[u8]), input: &[u8], root: &Path) -> bool {
    if panic::catch_unwind(|| target(input)).is_ok() {
        return true;
    }
    let dir = root.join("artifacts").join(name);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("crash-{:016x}", fnv(input)));
    let _ = std::fs::write(&path, input);
    eprintln!(
        "fuzz-smoke: {name}: failing input saved as {}",
        path.display()
    );
    false
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn main() {
    let mut seconds = 5u64;
    let mut seed = 1u64;
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds N")
            }
            "--seed" => seed = args.next().and_then(|s| s.parse().ok()).expect("--seed S"),
            _ => names.push(arg),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failed = false;
    for (name, target) in TARGETS {
        if !names.is_empty() && !names.iter().any(|n| n == name) {
            continue;
        }
        let seeds = corpus(&root.join("corpus").join(name));
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut runs = 0u64;
        let mut ok = seeds.iter().all(|s| run(name, target, s, root));
        runs += seeds.len() as u64;
        while ok && Instant::now() < deadline {
            let input = &seeds[rng.below(seeds.len())];
            let other = &seeds[rng.below(seeds.len())];
            let mutated = mutate(&mut rng, input, other);
            ok = run(name, target, &mutated, root);
            runs += 1;
        }
        println!(
            "fuzz-smoke: {name}: {runs} inputs, {}",
            if ok { "ok" } else { "FAILED" }
        );
        failed |= !ok;
    }
    if failed {
        std::process::exit(1);
    }
}

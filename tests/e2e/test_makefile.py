"""`make test` builds and loads the C library where cargo puts it: `./target` by
default, `$CARGO_TARGET_DIR` when that is set (common in Rust developers' shells).

Checked with `make -n` (print, do not run), so nothing is built here.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def environ(cargo_target_dir: str | None) -> dict[str, str]:
    """This environment with CARGO_TARGET_DIR set or unset (and no outer make's flags)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CARGO_TARGET_DIR", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    }
    if cargo_target_dir is not None:
        env["CARGO_TARGET_DIR"] = cargo_target_dir
    return env


def libdir(cargo_target_dir: str | None) -> str:
    """Where cargo puts the debug library in that environment, by cargo's own account."""
    done = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        env=environ(cargo_target_dir),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    target = json.loads(done.stdout)["target_directory"]
    if cargo_target_dir is not None:
        assert target == cargo_target_dir
    return f"{target}/debug"


def dry_run(target: str, cargo_target_dir: str | None) -> str:
    """What `make -n -B target` would run, with CARGO_TARGET_DIR set or unset."""
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), target],
        env=environ(cargo_target_dir),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("version = "))
    return str(json.loads(line.split("=", 1)[1]))


@pytest.mark.parametrize("cargo_target_dir", [None, "/tmp/inboxlog-elsewhere"])
def test_c_hosts_link_the_library_cargo_built(cargo_target_dir: str | None) -> None:
    lib = libdir(cargo_target_dir)
    out = dry_run("c-hosts", cargo_target_dir)
    links = [
        shlex.split(line) for line in out.splitlines() if line.startswith(("cc ", "c++ ", "g++ "))
    ]
    # One program per host file, found by name (a new host needs no Makefile edit),
    # plus errors.c linked a second time to the static library.
    hosts = {f.stem for f in (ROOT / "tests" / "c").glob("*.c")}
    hosts |= {f.stem for f in (ROOT / "tests" / "cpp").glob("*.cpp")}
    built = sorted(Path(words[words.index("-o") + 1]).name for words in links)
    assert built == sorted(hosts | {"errors-static"}), out
    static = next(w for w in links if w[w.index("-o") + 1].endswith("/errors-static"))
    assert f"{lib}/libinboxlog.a" in static and "tests/c/errors.c" in static, static
    for words in links:
        assert f"-L{lib}" in words or f"{lib}/libinboxlog.a" in words, words
        assert f'-DINBOXLOG_EXPECTED_VERSION="{version()}"' in words, words
    assert "build -p inboxlog-ffi" in out, out


@pytest.mark.parametrize("cargo_target_dir", [None, "/tmp/inboxlog-elsewhere"])
def test_e2e_loads_the_library_cargo_built(cargo_target_dir: str | None) -> None:
    lib = libdir(cargo_target_dir)
    out = dry_run("test-e2e", cargo_target_dir)
    assert f"INBOXLOG_LIB={lib}/libinboxlog.so " in out, out

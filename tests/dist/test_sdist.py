"""The sdist `make sdist` builds (SPEC §13): it carries the extension crate, the core
crate it depends on and the Python package, and `pip wheel` builds the package from it
in a temporary directory, away from the checkout; the result installs and imports.

The build here is cargo's dev profile in the checkout's own target directory, whose
compiled dependencies it reuses, so only the two crates from the sdist (sources away
from the checkout) compile each time: what it proves is that the sources travel. The
release build of the same sources is the wheel's (`make wheel`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION: str = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
VENV_BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=3600
    )
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def cargo_target() -> Path:
    done = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return Path(json.loads(done.stdout)["target_directory"])


@pytest.fixture(scope="module")
def sdist() -> Path:
    found = sorted((ROOT / "dist").glob(f"inboxlog-{VERSION}.tar.gz"))
    assert len(found) == 1, f"want the sdist of {VERSION} in dist/ (make sdist): {found}"
    return found[0]


def test_the_sdist_carries_both_crates_and_the_package(sdist: Path) -> None:
    top = f"inboxlog-{VERSION}"
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
    for want in [
        "PKG-INFO",
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "core/Cargo.toml",
        "core/src/lib.rs",
        "python/Cargo.toml",
        "python/src/lib.rs",
        "inboxlog/__init__.py",
        "inboxlog/_native.pyi",
        "inboxlog/py.typed",
    ]:
        assert f"{top}/{want}" in names, want
    assert any(n.startswith(f"{top}/") and "LICENSE-MIT" in n for n in names)
    assert any(n.startswith(f"{top}/") and "LICENSE-APACHE" in n for n in names)
    for n in names:
        assert "/target/" not in n and "/.venv/" not in n and "__pycache__" not in n, n


def test_pip_wheel_builds_the_package_from_the_sdist_alone(sdist: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    copy = work / sdist.name
    copy.write_bytes(sdist.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["PATH"] = f"{VENV_BIN}:{env['PATH']}"
    env["CARGO_TARGET_DIR"] = str(cargo_target())
    env["MATURIN_PEP517_ARGS"] = "--profile dev"
    run(
        [
            str(VENV_BIN / "python"),
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(work / "out"),
            str(copy),
        ],
        cwd=work,
        env=env,
    )
    built = sorted((work / "out").glob(f"inboxlog-{VERSION}-*.whl"))
    assert len(built) == 1, built

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", str(built[0])],
        cwd=work,
    )
    out = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            (
                "import inboxlog\n"
                "s = inboxlog.Store.memory().create('s')\n"
                "s.inbox.append('next-turn', {'id': 'm1'})\n"
                "print(inboxlog.__version__, s.inbox.next_turn[0]['id'], inboxlog.__file__)"
            ),
        ],
        cwd=work,
    )
    version, message, where = out.split()
    assert (version, message) == (VERSION, "m1")
    assert Path(where).is_relative_to(venv), where

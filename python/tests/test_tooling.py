"""The stubs match the module, the package type-checks strictly, and the demo runs."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy is not installed"
)


def run(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    # A cold strict check of the package reads the integrations' frameworks' types too
    # (about 50 s of CPU with LangChain and LangGraph); a loaded machine stretches it.
    # The run's one cache (conftest's mypy_cache) serves every check after the first.
    env = {**os.environ, "MYPY_CACHE_DIR": str(cache)}
    return subprocess.run(
        args, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@needs_mypy
def test_stubs_match_the_native_module(tmp_path: Path, mypy_cache: Path) -> None:
    done = run([sys.executable, "-m", "mypy.stubtest", "inboxlog._native"], tmp_path, mypy_cache)
    assert done.returncode == 0, done.stdout + done.stderr


def python_floor() -> str:
    """The oldest Python the package claims (`requires-python = ">=3.X"`), checked to be
    the version the tools are configured for."""
    text = (ROOT / "python" / "pyproject.toml").read_text()
    floor = re.search(r'^requires-python = ">=(3\.\d+)"$', text, re.MULTILINE)
    assert floor, "requires-python must read >=3.X"
    version = floor.group(1)
    assert f'python_version = "{version}"' in text, "[tool.mypy] python_version"
    assert f'target-version = "py{version.replace(".", "")}"' in text, "[tool.ruff]"
    abi3 = (ROOT / "python" / "Cargo.toml").read_text()
    assert f'"abi3-py{version.replace(".", "")}"' in abi3, "pyo3 abi3 feature"
    return version


@needs_mypy
def test_package_and_example_type_check_strictly_for_the_oldest_python(
    tmp_path: Path, mypy_cache: Path
) -> None:
    # mypy runs outside python/, so pyproject's [tool.mypy] is not read: the version
    # is passed explicitly, or the floor's claim would go unchecked.
    version = python_floor()
    example = ROOT / "examples" / "agent_loop.py"
    for target in (["-p", "inboxlog"], [str(example)]):
        args = ["--strict", "--python-version", version, *target]
        done = run([sys.executable, "-m", "mypy", *args], tmp_path, mypy_cache)
        assert done.returncode == 0, (
            f"mypy {' '.join(args)}:\n{done.stdout}{done.stderr}\n(a mypy that cannot target "
            f"{version} needs the venv's pin: rm -rf .venv && make venv)"
        )


def test_demo_runs(tmp_path: Path) -> None:
    script = ROOT / "examples" / "agent_loop.py"
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for line in [
        "steering arrives mid-step: m2:'use Celsius' -> next-step",
        "turn 1 step 2: claimed m2:'use Celsius' -> enter",
        "turn 1 ended: completed",
        "turn 2 step 1: claimed m3:'rm -rf / please' -> reject",
        "turn 2 ended: blocked",
        "m5 canceled (outcome 'canceled'), turn 3 ended: aborted",
        "killed mid-step (exit -9)",
        "repaired turn 4: step/end + turn/end interrupted",
        "inbox replayed: next-turn [c2:'then say goodbye']",
        "next-step [c3:'keep it short']",
        "turn 5 ended: completed",
        "fold: end = turn/end of turn 5",
        "droppedUnrun = False",
    ]:
        assert line in out, out
    log = tmp_path / "demo-sessions" / "agent.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["format"] == "inboxlog"
    assert [e["seq"] for e in lines[1:]] == list(range(len(lines) - 1))
    assert str(log.relative_to(tmp_path)) in out


@needs_mypy
def test_stubs_type_the_closed_vocabularies(tmp_path: Path, mypy_cache: Path) -> None:
    """`target`, `outcome` and `durability` take the `Literal` types of `types.py`:
    a checker accepts the spelled names and refuses a typo or a bare `str`."""
    good = tmp_path / "good.py"
    good.write_text(
        "import inboxlog\n"
        "store = inboxlog.Store('logs', durability='batched')\n"
        "s = store.create('s', delegation_depth=1, agent_preset='p')\n"
        "s.inbox.append('next-turn', {'id': 'a'})\n"
        "s.inbox.prepend('next-step', {'id': 'b'})\n"
        "s.inbox.splice('next-step', 0, 1, [])\n"
        "s.append('note', {}, surface_op='append', source_event_seqs=[0])\n"
        "again: bool = s.end_step('max-tokens')\n"
    )
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import inboxlog\n"
        "name: str = 'next-turn'\n"
        "store = inboxlog.Store('logs', durability='fsync')\n"
        "s = store.create('s', delegationDepth=1)\n"
        "s.inbox.append('next-week', {'id': 'a'})\n"
        "s.inbox.prepend(name, {'id': 'b'})\n"
        "s.inbox.splice('next_step', 0, 1, [])\n"
        "s.append('note', {}, surfaceOp='append')\n"
        "s.end_step('done')\n"
    )
    args = ["--strict", "--python-version", python_floor(), "--no-error-summary"]
    done = run([sys.executable, "-m", "mypy", *args, str(good)], tmp_path, mypy_cache)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run([sys.executable, "-m", "mypy", *args, str(bad)], tmp_path, mypy_cache)
    flagged = sorted({int(m) for m in re.findall(r"bad\.py:(\d+): error", done.stdout)})
    assert flagged == [3, 4, 5, 6, 7, 8, 9], done.stdout + done.stderr

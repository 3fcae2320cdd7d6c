"""The wheel `make wheel` builds, as a Python user gets it (SPEC §13).

One abi3 wheel for CPython >= 3.11 that `auditwheel show` accepts as manylinux2014
(glibc 2.17); its contents (the package, its stubs, py.typed, licenses, metadata, no
tests or build leftovers, no debug info); and, installed with `pip install --no-index`
into a fresh venv whose PATH has no cargo or rustc: `import inboxlog`, the `inboxlog`
console script, examples/agent_loop.py and a sample of the pytest suite.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION: str = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
VENV_BIN = Path(sys.executable).parent
# The pytest suite's sample: the public API, errors and scenarios, on every store.
SAMPLE = ["conftest.py", "test_api.py", "test_errors.py", "test_scenarios.py"]


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=1200
    )
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel() -> Path:
    found = sorted((ROOT / "dist").glob(f"inboxlog-{VERSION}-*.whl"))
    assert len(found) == 1, f"want one wheel of {VERSION} in dist/ (make wheel): {found}"
    return found[0]


def test_the_wheel_is_abi3_for_cpython_311_and_manylinux2014(wheel: Path) -> None:
    name, version, python, abi, platform = wheel.stem.split("-")
    assert (name, version, python, abi) == ("inboxlog", VERSION, "cp311", "abi3")
    assert "manylinux_2_17_x86_64" in platform.split("."), platform
    out = run([str(VENV_BIN / "auditwheel"), "show", str(wheel)])
    text = " ".join(out.split())
    tags = re.findall(r'platform tag:? "(manylinux_(\d+)_(\d+)_x86_64)"', text)
    assert tags, text
    for tag, major, minor in tags:
        assert (int(major), int(minor)) <= (2, 17), f"{tag}: {text}"


def test_the_wheel_holds_the_package_its_stubs_and_licenses_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    info = f"inboxlog-{VERSION}.dist-info"
    required = {
        "inboxlog/__init__.py",
        "inboxlog/__main__.py",
        "inboxlog/aio.py",
        "inboxlog/types.py",
        "inboxlog/_native.pyi",
        "inboxlog/py.typed",
        "inboxlog/_native.abi3.so",
        "inboxlog/integrations/__init__.py",
        "inboxlog/otel/__init__.py",
        "inboxlog/console/static/index.html",
        "inboxlog/console/static/session.html",
        "inboxlog/console/static/console.css",
        "inboxlog/console/static/session.js",
        f"{info}/METADATA",
        f"{info}/WHEEL",
        f"{info}/RECORD",
        f"{info}/entry_points.txt",
        f"{info}/licenses/LICENSE-MIT",
        f"{info}/licenses/LICENSE-APACHE",
    }
    assert required <= set(names), sorted(required - set(names))
    leftovers = [
        n
        for n in names
        if re.search(r"(^|/)(tests?|bench|target|src|__pycache__)/|\.pyc$|\.rs$|Cargo\.", n)
        or (
            n.startswith("inboxlog/")
            and not n.startswith(("inboxlog/integrations/", "inboxlog/console/", "inboxlog/otel/"))
            and n.count("/") > 1
        )
    ]
    assert leftovers == []
    for n in names:
        assert n.startswith(("inboxlog/", f"{info}/")), n


def test_the_metadata_describes_the_project(wheel: Path) -> None:
    info = f"inboxlog-{VERSION}.dist-info"
    with zipfile.ZipFile(wheel) as z:
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert meta["Name"] == "inboxlog" and meta["Version"] == VERSION
    assert meta["Summary"].startswith("Append-only session logs for AI agents")
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "MIT OR Apache-2.0"
    assert meta["Description-Content-Type"].startswith("text/markdown")
    assert meta.get_payload().startswith("# inboxlog\n")
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "openai-agents" in (meta.get_all("Provides-Extra") or [])
    assert "inboxlog=inboxlog.__main__:main" in entry_points.replace(" ", "").splitlines()


def test_the_extension_is_stripped(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        so = Path(z.extract("inboxlog/_native.abi3.so", tmp_path))
    sections = run(["readelf", "-S", "-W", str(so)])
    assert ".debug_info" not in sections and ".symtab" not in sections


@pytest.fixture(scope="module")
def fresh(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv holding the wheel, and an environment whose PATH has that venv and
    the system's directories only: no cargo, no rustc."""
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    path = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    for tool in ("cargo", "rustc", "maturin"):
        assert shutil.which(tool, path=path) is None, f"{tool} is on {path}"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CARGO_HOME", "RUSTUP_HOME")
    }
    env["PATH"] = path
    run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", str(wheel)],
        env=env,
    )
    return venv, env


def test_the_wheel_imports_without_a_rust_toolchain(
    fresh: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = fresh
    out = run(
        [
            "python",
            "-c",
            "import inboxlog; print(inboxlog.__file__, inboxlog.__version__)",
        ],
        cwd=tmp_path,
        env=env,
    )
    where, version = out.split()
    assert Path(where).is_relative_to(venv), where
    assert version == VERSION


def test_the_console_script_runs(fresh: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    venv, env = fresh
    assert shutil.which("inboxlog", path=env["PATH"]) == str(venv / "bin" / "inboxlog")
    store = tmp_path / "sessions"
    run(
        [
            "python",
            "-c",
            f"import inboxlog; inboxlog.Store({str(store)!r}).create('s1')",
        ],
        env=env,
    )
    listed = run(["inboxlog", "list", str(store)], cwd=tmp_path, env=env)
    assert "s1" in listed
    assert "usage" in run(["inboxlog", "--help"], cwd=tmp_path, env=env).lower()


def test_the_demo_runs(fresh: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    _, env = fresh
    out = run(
        ["python", str(ROOT / "examples" / "agent_loop.py"), str(tmp_path / "demo")],
        cwd=tmp_path,
        env=env,
    )
    assert "interrupted" in out, out


def test_a_sample_of_the_pytest_suite_passes(
    fresh: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = fresh
    # The test tools come from the index; the package under test only from the wheel.
    pip = [
        str(venv / "bin" / "pip"),
        "install",
        "--quiet",
        "pytest>=8",
        "hypothesis>=6",
    ]
    run(pip, env=env)
    tests = tmp_path / "python" / "tests"
    tests.mkdir(parents=True)
    for name in SAMPLE:
        shutil.copy(ROOT / "python" / "tests" / name, tests / name)
    shutil.copy(ROOT / "Cargo.toml", tmp_path / "Cargo.toml")  # test_api reads the version
    out = run(
        [
            "python",
            "-m",
            "pytest",
            "-q",
            "-W",
            "error",
            "-p",
            "no:cacheprovider",
            str(tests),
        ],
        cwd=tmp_path,
        env=env,
    )
    assert " passed" in out and " failed" not in out, out

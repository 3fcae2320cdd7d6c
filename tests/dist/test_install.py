"""`make install` as a C or C++ host author uses it (SPEC §13).

The library installed under a temporary PREFIX: a C11 program built with `pkg-config`
and a C++17 program built by a CMake project (`find_package(inboxlog CONFIG)`) each run
a turn, once against the shared library and once against the static one; the soname,
the installed files and the exported functions are checked; `make uninstall` removes
them all. `make test-dist-install` runs this after building the release library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VERSION: str = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
MAJOR = VERSION.split(".")[0]
SONAME = f"libinboxlog.so.{MAJOR}"
WARN = ["-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    """Runs cmd; its stdout, or a failure that shows both streams."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return str(done.stdout)


def make_env() -> dict[str, str]:
    """This environment without an outer make's flags."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        env=make_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )


def install(prefix: Path, *more: str) -> None:
    done = make("install", f"PREFIX={prefix}", *more)
    assert done.returncode == 0, done.stdout + done.stderr


def files_under(root: Path) -> set[str]:
    """Every file and link under root, relative to it."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_symlink() or not p.is_dir()}


def needed(binary: Path) -> list[str]:
    out = run(["readelf", "-d", str(binary)])
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def pkg_config(prefix: Path, *args: str) -> list[str]:
    env = {**os.environ, "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}
    return run(["pkg-config", *args, "inboxlog"], env=env).split()


def check_turn_output(out: str) -> None:
    first, events = out.splitlines()[:2]
    assert first.startswith(f"inboxlog {VERSION}: turn 1: "), out
    assert '{"type":"turn/end","seq":' in events, out
    assert '"data":{"turn":1,"reason":{"kind":"completed"}}' in events, out


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prefix")
    install(root)
    return root


def test_install_puts_exactly_the_library_headers_and_package_files(
    prefix: Path,
) -> None:
    assert files_under(prefix) == {
        f"lib/libinboxlog.so.{VERSION}",
        f"lib/{SONAME}",
        "lib/libinboxlog.so",
        "lib/libinboxlog.a",
        "lib/pkgconfig/inboxlog.pc",
        "lib/cmake/inboxlog/inboxlogConfig.cmake",
        "lib/cmake/inboxlog/inboxlogConfigVersion.cmake",
        "include/inboxlog.h",
        "include/inboxlog.hpp",
        "share/inboxlog/valgrind.supp",
    }
    assert (prefix / "share/inboxlog/valgrind.supp").read_bytes() == (
        ROOT / "ffi/valgrind.supp"
    ).read_bytes()
    lib = prefix / "lib"
    assert not (lib / f"libinboxlog.so.{VERSION}").is_symlink()
    assert os.readlink(lib / SONAME) == f"libinboxlog.so.{VERSION}"
    assert os.readlink(lib / "libinboxlog.so") == SONAME
    for header in ("inboxlog.h", "inboxlog.hpp"):
        assert (prefix / "include" / header).read_bytes() == (
            ROOT / "include" / header
        ).read_bytes()


def test_the_shared_library_has_its_soname_and_no_debug_info(prefix: Path) -> None:
    real = prefix / "lib" / f"libinboxlog.so.{VERSION}"
    assert f"Library soname: [{SONAME}]" in run(["readelf", "-d", str(real)])
    sections = run(["readelf", "-S", "-W", str(real)])
    assert ".debug_info" not in sections
    assert ".debug_info" not in run(["readelf", "-S", "-W", str(prefix / "lib" / "libinboxlog.a")])


def test_the_library_exports_the_functions_of_the_abi_baseline(prefix: Path) -> None:
    out = run(["nm", "-D", "--defined-only", str(prefix / "lib" / SONAME)])
    exported = {line.split()[2] for line in out.splitlines() if line.split()[1].isupper()}
    baseline = {
        line.split("(")[0].rsplit(" ", 1)[-1].lstrip("*")
        for line in (ROOT / "include" / "inboxlog.abi").read_text().splitlines()
        if line.startswith("fn ")
    }
    assert len(baseline) > 40
    assert exported == baseline


def test_pkg_config_describes_the_install(prefix: Path) -> None:
    assert pkg_config(prefix, "--modversion") == [VERSION]
    assert pkg_config(prefix, "--cflags") == [f"-I{prefix}/include"]
    assert pkg_config(prefix, "--libs") == [f"-L{prefix}/lib", "-linboxlog"]
    static = pkg_config(prefix, "--static", "--libs")
    assert static[:2] == [f"-L{prefix}/lib", "-linboxlog"]
    assert {"-lpthread", "-ldl", "-lm"} <= set(static[2:])


def test_a_c11_host_built_with_pkg_config_runs_a_turn_shared(prefix: Path, tmp_path: Path) -> None:
    app = tmp_path / "app"
    libdir = pkg_config(prefix, "--variable=libdir")[0]
    run(
        [
            "cc",
            "-std=c11",
            *WARN,
            f'-DINBOXLOG_EXPECTED_VERSION="{VERSION}"',
            *pkg_config(prefix, "--cflags"),
            str(HERE / "turn.c"),
            "-o",
            str(app),
            *pkg_config(prefix, "--libs"),
            f"-Wl,-rpath,{libdir}",
        ]
    )
    assert needed(app).count(SONAME) == 1
    check_turn_output(run([str(app)]))


def test_a_c11_host_built_with_pkg_config_runs_a_turn_static(prefix: Path, tmp_path: Path) -> None:
    app = tmp_path / "app"
    private = [f for f in pkg_config(prefix, "--static", "--libs-only-l") if f != "-linboxlog"]
    run(
        [
            "cc",
            "-std=c11",
            *WARN,
            f'-DINBOXLOG_EXPECTED_VERSION="{VERSION}"',
            *pkg_config(prefix, "--cflags"),
            str(HERE / "turn.c"),
            "-o",
            str(app),
            *pkg_config(prefix, "--libs-only-L"),
            "-Wl,-Bstatic",
            "-linboxlog",
            "-Wl,-Bdynamic",
            *private,
        ]
    )
    assert not [n for n in needed(app) if "inboxlog" in n]
    check_turn_output(run([str(app)]))


@pytest.mark.parametrize("static", [False, True], ids=["shared", "static"])
def test_a_cxx17_host_built_with_cmake_runs_a_turn(
    prefix: Path, tmp_path: Path, static: bool
) -> None:
    build = tmp_path / "build"
    run(
        [
            "cmake",
            "-S",
            str(HERE / "cmake"),
            "-B",
            str(build),
            f"-DCMAKE_PREFIX_PATH={prefix}",
            f"-DINBOXLOG_WANT_VERSION={MAJOR}.0",
            f"-DINBOXLOG_LINK_STATIC={'ON' if static else 'OFF'}",
        ]
    )
    run(["cmake", "--build", str(build)])
    app = build / "app"
    libs = [n for n in needed(app) if "inboxlog" in n]
    assert libs == ([] if static else [SONAME])
    check_turn_output(run([str(app)]))


def test_cmake_refuses_another_major_version(prefix: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            "cmake",
            "-S",
            str(HERE / "cmake"),
            "-B",
            str(tmp_path / "build"),
            f"-DCMAKE_PREFIX_PATH={prefix}",
            f"-DINBOXLOG_WANT_VERSION={int(MAJOR) + 1}.0",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode != 0
    err = " ".join(done.stderr.split())
    assert f'compatible with requested version "{int(MAJOR) + 1}.0"' in err, err
    assert f"inboxlogConfig.cmake, version: {VERSION}" in err, err


def test_uninstall_leaves_the_prefix_empty(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    install(prefix)
    assert files_under(prefix)
    done = make("uninstall", f"PREFIX={prefix}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(prefix.iterdir()) == []


def test_uninstall_keeps_what_install_did_not_write(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "include").mkdir(parents=True)
    (prefix / "include" / "other.h").write_text("/* another library's */\n")
    install(prefix)
    done = make("uninstall", f"PREFIX={prefix}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert files_under(prefix) == {"include/other.h"}


def test_destdir_stages_the_install_for_its_prefix(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    install(Path("/opt/inboxlog"), f"DESTDIR={stage}")
    root = stage / "opt" / "inboxlog"
    assert f"lib/libinboxlog.so.{VERSION}" in files_under(root)
    assert files_under(stage) == {f"opt/inboxlog/{f}" for f in files_under(root)}
    pc = (root / "lib" / "pkgconfig" / "inboxlog.pc").read_text()
    assert "prefix=/opt/inboxlog\n" in pc
    done = make("uninstall", "PREFIX=/opt/inboxlog", f"DESTDIR={stage}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert files_under(stage) == set()


def test_install_refuses_a_library_without_its_soname(tmp_path: Path) -> None:
    libdir = tmp_path / "release"
    libdir.mkdir()
    (tmp_path / "empty.c").write_text("int inboxlog_nothing(void) { return 0; }\n")
    run(
        [
            "cc",
            "-shared",
            "-fPIC",
            str(tmp_path / "empty.c"),
            "-o",
            str(libdir / "libinboxlog.so"),
        ]
    )
    prefix = tmp_path / "prefix"
    done = make("install", f"PREFIX={prefix}", f"C_RELEASE_LIBDIR={libdir}")
    assert done.returncode != 0
    assert f"libinboxlog.so lacks the soname {SONAME}" in done.stderr, done.stderr
    assert not prefix.exists()


def test_the_tools_are_here() -> None:
    for tool in ("cmake", "pkg-config", "readelf", "nm", "cc"):
        assert shutil.which(tool), f"{tool} is missing (make dist-tools-apt installs it)"

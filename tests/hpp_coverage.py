"""Every function of the C header has its C++ wrapper (issue #25).

python3 tests/hpp_coverage.py check [HEADER HPP]   fails naming each function of the
                                                   header (include/inboxlog.h) that
                                                   the wrapper (include/inboxlog.hpp)
                                                   never calls and EXCEPTIONS does not
                                                   list, and each stale exception
python3 tests/hpp_coverage.py selftest             runs the check on doctored copies
                                                   and fails unless each is refused

A function counts as wrapped when the wrapper's code (comments stripped) calls it:
its name followed by `(`, or passed on with `,` or `)` to a detail:: helper that calls
it. A name that only appears as a template argument (the handle's `_free` in
`detail::Handle<T, Free>`) or in a comment does not count.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "include/inboxlog.h"
HPP = ROOT / "include/inboxlog.hpp"

# Functions of the header with no call in the wrapper, each with its reason. Only
# what RAII covers belongs here: a handle's destructor releases it.
EXCEPTIONS = {
    # detail::Handle<inboxlog_store, inboxlog_store_free>, Store's destructor.
    "inboxlog_store_free": "Store's destructor",
    # detail::Handle<inboxlog_session, inboxlog_session_free>, Session's destructor.
    "inboxlog_session_free": "Session's destructor",
    # detail::Handle<inboxlog_projection, inboxlog_projection_free>.
    "inboxlog_projection_free": "Projection's destructor",
    # detail::Handle<inboxlog_follower, inboxlog_follower_free>.
    "inboxlog_follower_free": "Follower's destructor",
}

DECLARED = re.compile(r"^[a-z][a-z0-9_ *]*?\b(inboxlog_[a-z0-9_]+)\(", re.MULTILINE)


def declared(header: str) -> list[str]:
    """The functions the header declares, in order."""
    return DECLARED.findall(header)


def code_of(source: str) -> str:
    """C++ source without its comments (string and character literals kept)."""
    out = []
    i = 0
    while i < len(source):
        if source.startswith("//", i):
            i = source.find("\n", i)
            if i < 0:
                break
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            i = len(source) if end < 0 else end + 2
        elif source[i] in "\"'":
            # A string or character literal ('"' is one), escapes included.
            end = i + 1
            while end < len(source) and source[end] != source[i]:
                end += 2 if source[end] == "\\" else 1
            out.append(source[i : end + 1])
            i = end + 1
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def problems(header: str, hpp: str) -> list[str]:
    """What keeps the wrapper from covering the header; empty when it does."""
    code = code_of(hpp)
    names = declared(header)
    found = []
    for name in names:
        called = re.search(rf"\b{name}\s*[(,)]", code) is not None
        if not called and name not in EXCEPTIONS:
            found.append(f"{name}: declared in the header, no wrapper in the .hpp")
        if called and name in EXCEPTIONS:
            found.append(f"{name}: wrapped, yet listed as an exception")
    for name in sorted(set(EXCEPTIONS) - set(names)):
        found.append(f"{name}: listed as an exception, not declared in the header")
    if not names:
        found.append("the header declares no inboxlog_ function")
    return found


def check(header: Path, hpp: Path) -> int:
    found = problems(header.read_text(), hpp.read_text())
    for line in found:
        print(f"hpp coverage: {line}", file=sys.stderr)
    if not found:
        n = len(declared(header.read_text()))
        print(f"hpp coverage: {hpp.name} wraps all {n} functions of {header.name}")
    return 1 if found else 0


def selftest() -> int:
    """Doctored copies the check must refuse, and the real pair it must pass."""
    header = HEADER.read_text()
    hpp = HPP.read_text()
    extra = "int inboxlog_session_frobnicate(struct inboxlog_session *s, char **error);\n"
    doctored = {
        "a header with an extra function": (
            header.replace(
                "void inboxlog_follower_free(",
                extra + "void inboxlog_follower_free(",
                1,
            ),
            hpp,
        ),
        "a wrapper that lost one": (
            header,
            hpp.replace("inboxlog_store_verify,", "inboxlog_store_inspect,"),
        ),
        "a wrapper that only names one in a comment": (
            header,
            hpp.replace(
                "detail::str(inboxlog_follower_poll,",
                "/* inboxlog_follower_poll( */ detail::str(inboxlog_store_list,",
            ),
        ),
        "an exception that is called after all": (
            header,
            hpp + "\ninline void release(inboxlog_store *s) { inboxlog_store_free(s); }\n",
        ),
        "an exception the header no longer declares": (
            header.replace("void inboxlog_follower_free(", "void inboxlog_follower_release(", 1),
            hpp,
        ),
    }
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, (h, p) in doctored.items():
            if (h, p) == (header, hpp):
                print(
                    f"hpp coverage selftest: {what}: the doctoring changed nothing",
                    file=sys.stderr,
                )
                failed = 1
                continue
            hpath, ppath = Path(tmp, "inboxlog.h"), Path(tmp, "inboxlog.hpp")
            hpath.write_text(h)
            ppath.write_text(p)
            if not problems(h, p):
                print(f"hpp coverage selftest: {what} passed the check", file=sys.stderr)
                failed = 1
            else:
                print(f"hpp coverage selftest: {what} is refused: {problems(h, p)[0]}")
    if problems(header, hpp):
        print("hpp coverage selftest: the real pair fails the check", file=sys.stderr)
        failed = 1
    return failed


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"] and len(argv) in (1, 3):
        paths = [Path(a) for a in argv[1:]] or [HEADER, HPP]
        return check(paths[0], paths[1])
    if argv == ["selftest"]:
        return selftest()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""No password in any exception or CLI output, whatever the PostgreSQL URL (#27, #28).

The URLs are the core's fixtures (core/tests/fixtures/urls/, one per line): each
password is made of pieces holding ``Qx``, which nothing else in them holds, so a
``Qx`` anywhere in what the user sees is a password leaking. The refused ones fail
before any connection; the accepted ones point at port 9 of 127.0.0.1, where nothing
listens, so they fail at once as unavailable. No server is needed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import inboxlog
from inboxlog.__main__ import main

FIXTURES = Path(__file__).resolve().parents[2] / "core" / "tests" / "fixtures" / "urls"


def urls(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


REFUSED = urls("refused.txt")
ACCEPTED = urls("accepted.txt")


def seen(e: BaseException) -> str:
    """All an exception shows: str, repr, args and attributes."""
    return " ".join([str(e), repr(e), repr(e.args), repr(vars(e))])


@pytest.mark.parametrize("url", REFUSED)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(inboxlog.InvalidInputError) as err:
        inboxlog.Store.postgres(url)
    assert (err.value.kind, err.value.code) == ("invalid_input", 10)
    assert str(err.value).startswith("invalid PostgreSQL URL ")
    assert "Qx" not in seen(err.value)


@pytest.mark.parametrize("url", ACCEPTED)
def test_an_accepted_url_that_cannot_connect_never_shows_its_password(url: str) -> None:
    with pytest.raises(inboxlog.UnavailableError) as err:
        inboxlog.Store.postgres(url)
    assert ":9" in str(err.value)
    assert "Qx" not in seen(err.value)


def test_the_issue_27_reproducer() -> None:
    with pytest.raises(inboxlog.InvalidInputError) as err:
        inboxlog.Store.postgres("postgres//u:Secret123@db:5432/x")
    assert str(err.value) == (
        'invalid PostgreSQL URL starting "postgres//" (the rest not shown): '
        "it must start with postgresql:// or postgres://"
    )


# The CLI takes a root that starts like a URL (a scheme and ":", or "postgres//") as one;
# any other (``//u:pw@h``, ``QxPw1``) names a directory, as a path may hold "@" or ":".
URL_LIKE = [
    u
    for u in REFUSED + ACCEPTED
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|postgres(ql)?//", u, re.IGNORECASE)
]


@pytest.mark.parametrize("url", URL_LIKE)
def test_the_cli_never_prints_a_password(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("inboxlog: "), err
    assert "Qx" not in out + err
    # Usage errors quote arguments: one that may carry a password is shown as ***.
    with pytest.raises(SystemExit) as exit:
        main([url, "list"])
    assert exit.value.code == 2
    out, err = capsys.readouterr()
    assert "invalid choice: '***'" in err, err
    assert "Qx" not in out + err


def test_most_fixture_urls_start_like_urls() -> None:
    assert len(URL_LIKE) >= len(REFUSED + ACCEPTED) - 5


def test_a_mistyped_url_is_not_taken_for_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["list", "postgres//u:Secret123@db:5432/x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("inboxlog: invalid_input: invalid PostgreSQL URL starting"), err
    assert "Secret" not in err
    assert list(tmp_path.iterdir()) == [], "no directory named after the URL"
    # A directory whose name starts like a scheme is still reachable as ./NAME, and
    # one named postgres... is a directory.
    assert main(["list", "./data:v2"]) == 0
    assert main(["list", "postgres-sessions"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data:v2", "postgres-sessions"]


def test_python_m_inboxlog_prints_no_password(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inboxlog", "verify", "postgresql://u:Qx1/Qx2@h/db"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,  # not python/, whose source tree has no built extension
    )
    assert done.returncode == 1
    assert "invalid_input" in done.stderr and "Qx" not in done.stdout + done.stderr

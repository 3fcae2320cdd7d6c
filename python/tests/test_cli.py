"""The operator commands: `python -m inboxlog list|inspect|verify|repair`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import inboxlog
from inboxlog.__main__ import main


def make_log(root: Path, id: str = "s1") -> Path:
    store = inboxlog.Store(root, durability="none")
    with store.create(id) as s:
        s.inbox.append("next-turn", {"id": "a"})
        s.inbox.append("next-turn", {"id": "b"})
        s.open_turn()
        p = s.propose_step()
        s.decide({"kind": "enter", "messages": p["messages"]})
    return root / f"{id}.jsonl"


def test_verify_and_inspect_report_without_changing_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_log(tmp_path)
    before = path.read_bytes()
    assert main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out == (
        "s1: ok, 6 events, 1 pending, droppedUnrun=false; "
        "open will repair: close interrupted turn 1\n"
    )
    assert main(["inspect", str(tmp_path), "s1", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["id"] == "s1"
    assert [json.loads(line)["seq"] for line in lines[1:]] == list(range(6))
    assert main(["list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("s1\tcreatedAt=")
    assert path.read_bytes() == before


def test_repair_drops_the_torn_tail_and_closes_the_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_log(tmp_path)
    with path.open("ab") as f:
        f.write(b'{"type":"x","se')
    assert main(["repair", str(tmp_path), "s1"]) == 0
    out = capsys.readouterr().out
    assert "dropped 15 torn byte(s), closed interrupted turn 1" in out
    assert main(["repair", str(tmp_path), "s1"]) == 0
    assert "dropped 0 torn byte(s), no open turn" in capsys.readouterr().out
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}


def test_corruption_is_refused_with_its_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_log(tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"seq":1', b'"seq":7')
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    assert main(["verify", str(tmp_path), "s1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"s1: REFUSED (corrupt) at {path} line 3, byte "), err
    assert ", seq 7: corrupt log " in err, err
    assert main(["repair", str(tmp_path), "s1"]) == 1
    assert "inboxlog: corrupt:" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_verify_refuses_what_open_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue #14: every record parses, but a step starts with no turn open.
    make_log(tmp_path, "good")
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"format":"inboxlog","version":1,"id":"s","createdAt":0}\n'
        '{"type":"step/start","seq":0,"time":1,"data":{"turn":7,"step":1}}\n'
    )
    before = path.read_bytes()
    assert main(["verify", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("good: ok, 6 events"), out
    message = (
        f"corrupt log {path} line 2 (byte 57, seq 0): "
        "step/start names turn 7, not the open turn (no turn is open)"
    )
    assert err == f"s: REFUSED (corrupt) at {path} line 2, byte 57, seq 0: {message}\n"
    with pytest.raises(inboxlog.CorruptLogError, match=r"line 2 \(byte 57, seq 0\)"):
        inboxlog.Store(tmp_path).open("s")
    assert path.read_bytes() == before


def test_verify_reports_repairs_with_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_log(tmp_path)
    with path.open("ab") as f:
        f.write(b'{"type":"x","se')
    before = path.read_bytes()
    assert main(["verify", str(tmp_path), "s1"]) == 0
    assert capsys.readouterr().out == (
        "s1: ok, 6 events, 1 pending, droppedUnrun=false; "
        "open will repair: drop 15 torn byte(s), close interrupted turn 1\n"
    )
    assert path.read_bytes() == before
    assert main(["repair", str(tmp_path), "s1"]) == 0
    assert main(["verify", str(tmp_path), "s1"]) == 0
    assert capsys.readouterr().out.endswith("s1: ok, 8 events, 1 pending, droppedUnrun=false\n")


def test_verify_names_a_missing_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path), "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nope: REFUSED (not_found) at {tmp_path / 'nope.jsonl'}: "), err


def test_runs_as_a_module(tmp_path: Path) -> None:
    make_log(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "inboxlog", "verify", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,  # not python/, whose source tree has no built extension
    )
    assert done.returncode == 0, done.stderr
    assert "s1: ok" in done.stdout


def test_delete_refuses_a_held_session_then_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_log(tmp_path)
    make_log(tmp_path, "s2")
    held = inboxlog.Store(tmp_path, durability="none").open("s1")
    before = path.read_bytes()
    assert main(["delete", str(tmp_path), "s1"]) == 1
    assert "inboxlog: locked:" in capsys.readouterr().err
    assert path.read_bytes() == before
    held.close()
    assert main(["delete", str(tmp_path), "s1"]) == 0
    assert capsys.readouterr().out == "s1: deleted\n"
    assert not path.exists()
    assert main(["delete", str(tmp_path), "s1"]) == 1
    assert "inboxlog: not_found:" in capsys.readouterr().err
    assert main(["list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("s2\t")


def test_every_command_takes_a_postgresql_url(
    postgres: inboxlog.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    from conftest import PG_URL, sql

    schema = repr(postgres).split('schema="', 1)[1].split('"', 1)[0]

    def pg(command: str, *rest: str) -> int:
        return main([command, PG_URL, *rest, "--schema", schema])

    s = postgres.create("s1")
    s.inbox.append("next-turn", {"id": "a"})
    s.open_turn()
    s.close()
    postgres.create("s2").close()
    assert pg("list") == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["s1", "s2"]
    assert pg("inspect", "s1", "--json") == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["id"] == "s1" and len(lines) == 3
    assert pg("verify") == 0
    out = capsys.readouterr().out
    assert "s1: ok, 2 events, 1 pending" in out and "close interrupted turn 1" in out
    assert pg("repair", "s1") == 0
    assert capsys.readouterr().out == "s1: dropped 0 torn byte(s), closed interrupted turn 1\n"
    # A row edited by hand is refused, located by session and seq.
    sql(f"UPDATE \"{schema}\".events SET line = 'x' WHERE session = 's1' AND seq = 1")
    assert pg("verify", "s1") == 1
    err = capsys.readouterr().err
    assert err.startswith("s1: REFUSED (corrupt) at session s1 seq 1: corrupt session"), err
    held = postgres.open("s2")
    assert pg("delete", "s2") == 1
    assert "inboxlog: locked:" in capsys.readouterr().err
    held.close()
    assert pg("delete", "s2") == 0
    assert capsys.readouterr().out == "s2: deleted\n"
    # A server that is not there: one line, no password, exit 1.
    assert main(["list", "postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("inboxlog: unavailable:") and "hunter2" not in err

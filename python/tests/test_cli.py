"""The operator commands: `inboxlog` (or `python -m inboxlog`) and its subcommands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import inboxlog
from inboxlog.__main__ import main
from inboxlog.types import Durability


def make_log(root: Path, id: str = "s1", durability: Durability = "none") -> Path:
    store = inboxlog.Store(root, durability=durability)
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
    # Written in sync mode: the later lines say the changed one was durable, so the
    # change cannot be a crash's torn tail.
    path = make_log(tmp_path, durability="sync")
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"seq":1', b'"seq":7')
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    assert main(["verify", str(tmp_path), "s1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"s1: REFUSED (corrupt) at {path} line 3, byte "), err
    assert ", seq 1: corrupt log " in err, err
    assert "checksum" in err and "not a torn tail left by a crash" in err, err
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


def test_verify_stops_at_the_first_bad_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_log(tmp_path, "a")
    # In sync mode: the lines after the changed one prove it durable (not a torn tail).
    bad = make_log(tmp_path, "b", durability="sync")
    make_log(tmp_path, "c")
    lines = bad.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"seq":1', b'"seq":9')
    bad.write_bytes(b"\n".join(lines))
    assert main(["verify", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("a: ok") and "c:" not in out, out
    assert err.startswith(f"b: REFUSED (corrupt) at {bad} line 3, byte "), err
    # Not a terminal: no progress on stderr.
    assert err.count("\n") == 1 and "verify 1/3" not in err


class _Tty:
    """A stderr that says it is a terminal."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_verify_shows_progress_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_log(tmp_path, "a")
    make_log(tmp_path, "b")
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["verify", str(tmp_path)]) == 0
    assert "verify 0/2 a" in tty.text and "verify 1/2 b" in tty.text
    assert tty.text.endswith("\r\033[K")
    assert capsys.readouterr().out.count(": ok") == 2


def test_tail_prints_events_from_a_seq(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_log(tmp_path)
    assert main(["tail", str(tmp_path), "s1", "--json", "--since", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [4, 5]
    assert main(["tail", str(tmp_path), "s1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 6 and out[1].split()[:2] == ["1", "agent/inbox/spliced"]
    assert main(["tail", str(tmp_path), "nope"]) == 1
    assert "inboxlog: not_found:" in capsys.readouterr().err


def test_tail_follow_prints_events_as_they_commit(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path, durability="none")
    script = Path(sys.executable).parent / "inboxlog"
    with store.create("s") as s:
        s.append("x/a", {"n": 0})
        tail = subprocess.Popen(
            [str(script), "tail", "-f", "--json", str(tmp_path), "s"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        try:
            assert tail.stdout is not None
            assert json.loads(tail.stdout.readline())["seq"] == 0
            s.append("x/a", {"n": 1})
            s.inbox.append("next-turn", {"id": "m"})
            assert json.loads(tail.stdout.readline())["data"] == {"n": 1}
            assert json.loads(tail.stdout.readline())["type"] == "agent/inbox/spliced"
        finally:
            tail.kill()
            tail.wait()
            assert tail.stdout is not None
            tail.stdout.close()


@pytest.mark.parametrize(
    "command",
    [["inspect", "{root}", "s"], ["tail", "{root}", "s"], ["tail", "--json", "{root}", "s"]],
)
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    tmp_path: Path, command: list[str]
) -> None:
    store = inboxlog.Store(tmp_path, durability="none")
    with store.create("s") as s:
        for n in range(20_000):  # far more than a pipe's buffer holds
            s.append("x/a", {"n": n})
    script = Path(sys.executable).parent / "inboxlog"
    args = [str(script), *(a.format(root=tmp_path) for a in command)]
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    ) as cli:
        assert cli.stdout is not None and cli.stderr is not None
        head = [cli.stdout.readline() for _ in range(3)]
        cli.stdout.close()  # what `| head -3` does
        err = cli.stderr.read()
        status = cli.wait(timeout=60)
    assert all(head)
    assert err == ""
    assert status == 141


def test_tail_follow_ends_quietly_when_its_reader_goes(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path, durability="none")
    script = Path(sys.executable).parent / "inboxlog"
    with store.create("s") as s:
        s.append("x/a", {"n": 0})
        with subprocess.Popen(
            [str(script), "tail", "-f", str(tmp_path), "s"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        ) as tail:
            assert tail.stdout is not None and tail.stderr is not None
            assert tail.stdout.readline().split()[:2] == ["0", "x/a"]
            tail.stdout.close()
            # The next events it prints find the pipe closed.
            n = 1
            while tail.poll() is None and n < 10_000:
                s.append("x/a", {"n": n})
                n += 1
                time.sleep(0.01)
            assert tail.wait(timeout=60) == 141
            assert tail.stderr.read() == ""


def test_list_and_inspect_show_times_in_iso_8601_utc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    created = 1796108744671
    (tmp_path / "s.jsonl").write_text(
        json.dumps({"format": "inboxlog", "version": 1, "id": "s", "createdAt": created}) + "\n"
    )
    assert main(["list", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "s\tcreatedAt=2026-12-01T07:05:44.671Z\n"
    assert main(["list", "--json", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["createdAt"] == created
    assert main(["inspect", str(tmp_path), "s"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "session s: 0 events, format version 1, created 2026-12-01T07:05:44.671Z"


def test_json_output_is_the_cores_text_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Spellings a reader of dicts would change: an exponent, trailing zeros, a big int,
    # non-ASCII text, keys out of alphabetical order.
    header = '{"format":"inboxlog","version":1,"id":"s","createdAt":5,"cwd":"/tmp/é"}'
    events = [
        '{"type":"note","seq":0,"time":1,"data":{"z":1e5,"a":1.50,"big":123456789012345678901234}}',
        '{"type":"note","seq":1,"time":2,"data":{"text":"é ✓ 😀","q":"\\"x\\""},"ignorable":true}',
    ]
    (tmp_path / "s.jsonl").write_text("\n".join([header, *events]) + "\n", encoding="utf-8")
    assert main(["inspect", str(tmp_path), "s", "--json"]) == 0
    assert capsys.readouterr().out.splitlines() == [header, *events]
    assert main(["list", "--json", str(tmp_path)]) == 0
    assert capsys.readouterr().out == header + "\n"
    assert main(["tail", "--json", str(tmp_path), "s"]) == 0
    assert capsys.readouterr().out.splitlines() == events
    assert main(["fold", "--json", str(tmp_path), "s"]) == 0
    assert capsys.readouterr().out == '{"end":null,"droppedUnrun":false}\n'
    # The human lines spell values as the core writes them: non-ASCII as it is.
    assert main(["inspect", str(tmp_path), "s"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith('{"text":"é ✓ 😀","q":"\\"x\\""}'), lines
    assert main(["tail", str(tmp_path), "s", "--since", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[2:]


def test_fold_reports_the_consumed_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_log(tmp_path)
    assert main(["fold", str(tmp_path), "s1"]) == 0
    assert capsys.readouterr().out == "s1: no turn accounted for work yet, droppedUnrun=false\n"
    assert main(["repair", str(tmp_path), "s1"]) == 0
    capsys.readouterr()
    assert main(["fold", str(tmp_path), "s1", "--json"]) == 0
    text = capsys.readouterr().out
    fold = json.loads(text)
    assert fold["end"]["data"]["reason"] == {"kind": "interrupted"}
    # The end event as the log holds it, inside the core's text of the fold.
    # The last event as the library spells it: the line without its checksum.
    last = (tmp_path / "s1.jsonl").read_text().splitlines()[-1]
    stored = last[: last.rindex(',"synced":')] + "}"
    assert text == f'{{"end":{stored},"droppedUnrun":false}}\n'

    assert main(["fold", str(tmp_path), "s1"]) == 0
    assert capsys.readouterr().out == (
        "s1: turn 1 accounted for work (interrupted, seq 7), droppedUnrun=false\n"
    )


def test_post_delivers_to_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_log(tmp_path)
    assert main(["post", str(tmp_path), "s1", '{"id":"p1","content":"hi"}']) == 0
    post = capsys.readouterr().out.strip()
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"id":"p2"}'))
    assert main(["post", str(tmp_path), "s1", "-", "--target", "next-step"]) == 0
    capsys.readouterr()
    with inboxlog.Store(tmp_path).open("s1") as s:
        assert s.inbox.next_turn == [{"id": "b"}, {"id": "p1", "content": "hi"}]
        assert s.inbox.next_step == [{"id": "p2"}]
        assert post in [e["data"].get("post") for e in s.events()]
    assert main(["post", str(tmp_path), "s1", "{not json"]) == 2
    assert "the message is not JSON" in capsys.readouterr().err
    assert main(["post", str(tmp_path), "s1", "[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["post", str(tmp_path), "nope", '{"id":"x"}']) == 1
    assert "inboxlog: not_found:" in capsys.readouterr().err


def test_post_removes_and_replaces_pending_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_log(tmp_path)
    root = str(tmp_path)
    assert main(["post", root, "s1", '{"id":"p1"}']) == 0
    assert main(["post", root, "s1", "--remove", "p1"]) == 0
    assert main(["post", root, "s1", '{"id":"p2"}', "--target", "next-step"]) == 0
    assert main(["post", root, "s1", "--replace", "p2", '{"id":"p3","content":"hi"}']) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"id":"b2"}'))
    assert main(["post", root, "s1", "--replace", "b", "-"]) == 0
    assert main(["post", root, "s1", "--remove", "never"]) == 0
    posts = capsys.readouterr().out.split()
    assert len(set(posts)) == 6
    with inboxlog.Store(tmp_path).open("s1") as s:
        assert s.inbox.next_turn == [{"id": "b2"}]
        assert s.inbox.next_step == [{"id": "p3", "content": "hi"}]
        events = s.events()
        assert [e["data"].get("post") for e in events if "post" in e["data"]] == posts
        assert events[-1]["type"] == "agent/inbox/rejected"
        assert events[-1]["data"]["edit"] == {"op": "remove", "id": "never"}
    for argv, says in [
        (["--remove", "a", "--replace", "b", "{}"], "give one of them"),
        (["--remove", "a", "--target", "next-step"], "--target is for a new message"),
        (['{"id":"x"}', "--remove", "a"], "--remove takes no MESSAGE"),
        (['{"id":"x"}', "--replace", "a", '{"id":"y"}'], "--replace takes no MESSAGE"),
        ([], "MESSAGE is required"),
        (["--replace", "a", "[1]"], "must be a JSON object"),
    ]:
        assert main(["post", root, "s1", *argv]) == 2, argv
        assert says in capsys.readouterr().err, argv
    assert main(["post", root, "s1", "--remove", ""]) == 1
    assert "invalid_input" in capsys.readouterr().err
    assert main(["post", root, "nope", "--remove", "a"]) == 1
    assert "inboxlog: not_found:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    ["list", "inspect", "verify", "repair", "delete", "import", "tail", "fold", "post"],
)
def test_every_subcommand_has_help_with_an_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main([command, "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: inboxlog {command} ")
    assert "example" in out and f"  inboxlog {command} " in out


def test_the_console_script_is_the_module(tmp_path: Path) -> None:
    make_log(tmp_path)
    script = Path(sys.executable).parent / "inboxlog"
    done = subprocess.run(
        [str(script), "verify", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "s1: ok" in done.stdout


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


FIXTURES = Path(__file__).resolve().parents[2] / "core" / "tests" / "fixtures" / "jsonl"


def test_repair_upgrade_rewrites_a_version_1_log_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v1-basic.jsonl"
    original = (FIXTURES / "v1-basic.jsonl").read_bytes()
    path.write_bytes(original)
    store = inboxlog.Store(tmp_path)
    header, events = store.inspect("v1-basic")
    assert header["version"] == 1
    assert main(["repair", str(tmp_path), "v1-basic", "--upgrade"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "v1-basic: dropped 0 torn byte(s), no open turn\n"
        "v1-basic: upgraded from format version 1 to 2, 16 events\n"
    )
    lines = path.read_text().splitlines()
    assert all(',"crc32c":"' in line for line in lines)
    assert json.loads(lines[0])["version"] == 2  # still one JSON object a line
    header2, events2 = store.inspect("v1-basic")
    assert header2 == {**header, "version": 2}
    assert events2 == events
    assert not any("crc32c" in e or "synced" in e for e in events2)
    # Twice: nothing to do, nothing written.
    upgraded = path.read_bytes()
    assert main(["repair", str(tmp_path), "v1-basic", "--upgrade"]) == 0
    assert capsys.readouterr().out.endswith(
        "v1-basic: already format version 2, nothing to upgrade\n"
    )
    assert path.read_bytes() == upgraded
    assert store.upgrade("v1-basic") == {"from": 2, "events": 16, "tornBytes": 0}
    # Refused while a writer holds it. (The version 1 bytes put back by hand: the
    # version 2 log's checkpoint goes too, or it would be refused as not this log's.)
    path.with_suffix(".checkpoint").unlink()
    path.write_bytes(original)
    with (
        store.open("v1-basic"),
        pytest.raises(inboxlog.LockedError, match="cannot be upgraded"),
    ):
        store.upgrade("v1-basic")
    assert main(["repair", str(tmp_path), "absent", "--upgrade"]) == 1
    assert "inboxlog: not_found:" in capsys.readouterr().err


def test_a_version_2_log_reads_back_without_its_checksums(tmp_path: Path) -> None:
    path = make_log(tmp_path, durability="sync")
    raw = path.read_text().splitlines()
    assert json.loads(raw[0])["version"] == 2
    assert all(',"crc32c":"' in line for line in raw)
    store = inboxlog.Store(tmp_path)
    _, events = store.inspect("s1")
    with store.open("s1") as s:
        events_open = s.events()
        for e in [*events, *events_open]:
            assert set(e) <= {
                "type",
                "seq",
                "time",
                "data",
                "ignorable",
                "surfaceOp",
                "sourceEventSeqs",
            }, e
    with store.follow("s1") as f:
        first = f.next(0)
    assert first is not None and "crc32c" not in first

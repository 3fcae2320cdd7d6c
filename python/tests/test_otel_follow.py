"""Following sessions into traces (SPEC §18) and ``inboxlog trace``: each turn goes out
once it ends and not before, a follower started again with its state file sends no
turn twice, and the command's exit statuses. The endpoint is a real OTLP/HTTP receiver
(``otlp_receiver.Receiver``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import m, said
from otlp_receiver import Receiver, Span

import inboxlog
from inboxlog.__main__ import main
from inboxlog.otel import Sender, SpanRecord, follow, otlp_exporter


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def one_turn(session: inboxlog.Session, n: int) -> None:
    """One whole turn: a prompt, one step answered by the model, the end."""
    session.inbox.append("next-turn", m(f"q{n}", role="user", content=f"question {n}"))
    turn = session.open_turn()
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    session.append("assistant/message", said(turn, 1, f"a{n}", f"answer {n}"))
    session.end_step("completed")
    session.close_turn()


def turns(spans: list[Span]) -> list[int]:
    """The turn numbers of the invoke_agent spans, in the order they came."""
    return [s.attributes["inboxlog.turn"] for s in spans if s.name.startswith("invoke_agent")]


def test_following_exports_each_turn_as_it_ends(jsonl: inboxlog.Store, receiver: Receiver) -> None:
    """Turns already stored go out first; then each turn once its ``turn/end`` is
    committed: while a turn runs, nothing of it has been sent."""
    session = jsonl.create("s1")
    one_turn(session, 1)
    stop = threading.Event()
    sent: list[tuple[str, int]] = []

    def noted(id: str, spans: list[SpanRecord]) -> None:
        sent.append((id, len(spans)))

    sender = Sender(otlp_exporter(receiver.url))
    worker = threading.Thread(
        target=follow,
        args=(jsonl, sender, ["s1"]),
        kwargs={"stop": stop, "on_trace": noted, "poll": 0.05},
    )
    worker.start()
    try:
        receiver.wait_for(2)
        for n in (2, 3):
            session.inbox.append("next-turn", m(f"q{n}", role="user", content="more"))
            turn = session.open_turn()
            session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
            session.append("assistant/message", said(turn, 1, f"a{n}", "..."))
            session.end_step("completed")
            # The turn has not ended: the follower has nothing of it to send.
            assert turns(receiver.spans) == list(range(1, n))
            session.close_turn()
            receiver.wait_for(2 * n)
        assert turns(receiver.spans) == [1, 2, 3]
    finally:
        stop.set()
        worker.join()
        session.close()
        sender.close()
    assert sent == [("s1", 2)] * 3


def test_following_every_session_takes_in_new_ones(
    jsonl: inboxlog.Store, receiver: Receiver
) -> None:
    stop = threading.Event()
    sender = Sender(otlp_exporter(receiver.url))
    worker = threading.Thread(
        target=follow, args=(jsonl, sender), kwargs={"stop": stop, "poll": 0.05, "rescan": 0.05}
    )
    worker.start()
    try:
        with jsonl.create("a") as a:
            one_turn(a, 1)
        receiver.wait_for(2)
        with jsonl.create("b") as b:
            one_turn(b, 1)
            one_turn(b, 2)
        spans = receiver.wait_for(6)
        assert (
            sorted(s.attributes["gen_ai.conversation.id"] for s in spans) == ["a"] * 2 + ["b"] * 4
        )
    finally:
        stop.set()
        worker.join()
        sender.close()


def trace_command(root: Path, *args: str) -> subprocess.Popen[str]:
    """``inboxlog trace ROOT ...`` in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "inboxlog", "trace", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until(done: Callable[[], bool], timeout: float = 30.0) -> None:
    """Waits until ``done()`` (fails after ``timeout`` s: a bound on a hang)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


def test_a_follower_started_again_sends_no_turn_twice(tmp_path: Path, receiver: Receiver) -> None:
    """``inboxlog trace --follow --state FILE`` killed and started again goes on after
    the last turn it noted: turns written while it was down go out once, earlier turns
    not again. Without the state, the same turns go out again with the same ids."""
    root = tmp_path / "sessions"
    store = inboxlog.Store(root, durability="none")
    state = tmp_path / "trace.json"
    session = store.create("s1")
    one_turn(session, 1)
    args = ("s1", "--endpoint", receiver.url, "--follow", "--state", str(state))
    first = trace_command(root, *args)
    try:
        receiver.wait_for(2)
        one_turn(session, 2)
        receiver.wait_for(4)
        # Killed once turn 2 is noted (killed between its export and its note, the
        # next run would send turn 2 again, under the same ids).
        noted = session.last_seq + 1  # type: ignore[operator]
        until(lambda: state.exists() and json.loads(state.read_text()) == {"s1": noted})
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    one_turn(session, 3)
    one_turn(session, 4)
    second = trace_command(root, *args)
    try:
        receiver.wait_for(8)
        one_turn(session, 5)
        spans = receiver.wait_for(10)
        noted = session.last_seq + 1  # type: ignore[operator]
        until(lambda: json.loads(state.read_text()) == {"s1": noted})
    finally:
        second.send_signal(signal.SIGINT)
        out, _ = second.communicate(timeout=60)
    assert second.returncode == 0
    assert turns(spans) == [1, 2, 3, 4, 5]
    assert len(out.splitlines()) == 3  # turns 3, 4 and 5, one line each
    assert json.loads(state.read_text()) == {"s1": session.last_seq + 1}  # type: ignore[operator]
    session.close()
    # A state file lost: everything again, under the same ids.
    ids = {(s.trace_id, s.span_id) for s in spans}
    assert main(["trace", str(root), "s1", "--endpoint", receiver.url]) == 0
    again = receiver.spans[len(spans) :]
    assert {(s.trace_id, s.span_id) for s in again} == ids


def test_trace_exports_every_session_and_says_what_it_sent(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    store = inboxlog.Store(tmp_path, durability="none")
    with store.create("a") as a:
        one_turn(a, 1)
    with store.create("b") as b:
        one_turn(b, 1)
        one_turn(b, 2)
        b.inbox.append("next-turn", m("q3"))
        b.open_turn()  # still open: left for later
    assert main(["trace", str(tmp_path), "--endpoint", receiver.url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "a: 1 trace(s), 2 span(s) from 8 events",
        "b: 2 trace(s), 4 span(s) from 18 events",
    ]
    assert len(receiver.spans) == 6
    assert main(["trace", str(tmp_path), "b", "--endpoint", receiver.url]) == 0
    assert capsys.readouterr().out == "b: 2 trace(s), 4 span(s) from 18 events\n"


def test_trace_resumes_from_its_state_file(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    store = inboxlog.Store(tmp_path / "sessions", durability="none")
    state = tmp_path / "trace.json"
    session = store.create("s1")
    one_turn(session, 1)
    session.inbox.append("next-turn", m("q2"))
    session.open_turn()
    args = ["trace", str(tmp_path / "sessions"), "--endpoint", receiver.url, "--state", str(state)]
    assert main(args) == 0
    assert turns(receiver.spans) == [1]
    # Turn 2 was open: the state names its start, so the next run sends it once ended.
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    session.end_step("completed")
    session.close_turn()
    one_turn(session, 3)
    assert main(args) == 0
    assert turns(receiver.spans) == [1, 2, 3]
    assert main(args) == 0
    assert turns(receiver.spans) == [1, 2, 3]
    assert capsys.readouterr().out.splitlines()[-1] == "s1: 0 trace(s), 0 span(s) from 23 events"
    session.close()


def test_trace_refusals(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    store = inboxlog.Store(tmp_path / "sessions", durability="none")
    with store.create("s1") as session:
        one_turn(session, 1)
    root = str(tmp_path / "sessions")
    # No endpoint: a usage error.
    with pytest.raises(SystemExit) as exit:
        main(["trace", root, "s1"])
    assert exit.value.code == 2
    assert "--endpoint" in capsys.readouterr().err
    # An endpoint that refuses the spans: status 1, naming it.
    receiver.refuse = True
    assert main(["trace", root, "s1", "--endpoint", receiver.url]) == 1
    assert f"inboxlog trace: {receiver.url}: the exporter refused 2 span(s)" in (
        capsys.readouterr().err
    )
    # A state file that is not one: status 2, nothing sent.
    bad = tmp_path / "bad.json"
    bad.write_text('["s1"]')
    assert main(["trace", root, "--endpoint", receiver.url, "--state", str(bad)]) == 2
    assert "is not a trace state file" in capsys.readouterr().err
    # No such session: the library's not_found, status 1.
    receiver.refuse = False
    assert main(["trace", root, "nope", "--endpoint", receiver.url]) == 1
    assert "not_found" in capsys.readouterr().err
    assert receiver.spans == []


def test_the_otel_extra_is_named_when_missing(tmp_path: Path) -> None:
    """Without the SDK, ``inboxlog trace`` says which extra to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "opentelemetry").mkdir()
    (blocker / "opentelemetry" / "__init__.py").write_text("raise ImportError('no SDK here')\n")
    # No empty PYTHONPATH entry: it would stand for the working directory, and from
    # python/ that is the source tree, which has no built extension.
    paths = [str(blocker), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "inboxlog", "trace", str(tmp_path), "--endpoint", "x"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "pip install 'inboxlog[otel]'" in done.stderr

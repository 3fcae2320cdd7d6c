"""A scripted agent writing a session while the web console serves it: open the page,
watch its steps arrive, and steer it from the composer.

    pip install "./python[console]"
    python examples/console_demo.py [DIR] [--port 8765]
    python examples/console_demo.py --check [DIR]

DIR (default: a fresh temporary directory) is the JSONL store. The first form serves the
console at http://127.0.0.1:8765/ and runs the agent until Ctrl-C: each turn takes a few
steps of a second or two, and anything posted from the page (the composer's "Post", to
the next step or to a turn of its own) is what its next step or turn takes in. ``--check``
runs it unattended: the agent steps quickly, a message is posted through the console's API
exactly as the page's composer posts it, and the run checks that the agent's next step
took it (exit status 0), then stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import inboxlog
import inboxlog.console
import uvicorn
from inboxlog.types import Message

SESSION = "trip-planner"
# What wrote each assistant/message (SPEC §15.1): the scripted model.
MODEL = {"kind": "model", "provider": "scripted", "model": "planner-1"}
# A tool the agent calls in a step: its name, its arguments, and what it answers.
Tool = tuple[str, dict[str, Any], str]
# Each step's work: what the agent says, and the tool it calls (or None).
PLAN: list[tuple[str, Tool | None]] = [
    ("Reading the request.", None),
    (
        "Looking up flights.",
        ("search_flights", {"to": "LIS", "days": ["Sat", "Sun"]}, "3 flights, from 89 € return"),
    ),
    (
        "Comparing three hotels.",
        ("search_hotels", {"city": "Lisbon", "nights": 2}, "Baixa 120 €, Alfama 140 €, Belém 95 €"),
    ),
    ("Drafting a day-by-day plan.", None),
    (
        "Checking opening hours.",
        ("opening_hours", {"place": "Jerónimos Monastery"}, "Tuesday to Sunday, 9:30 to 18:00"),
    ),
    ("Writing the answer.", None),
]


def show(line: str) -> None:
    print(line, flush=True)


def respond(session: inboxlog.Session, turn: int, step: int, reply: str, tool: Tool | None) -> None:
    """One step's response as the conversation of SPEC §15: an ``assistant/message``
    (the reply, then the tool call it makes), and for the call a ``tool/call`` when it
    is dispatched and a ``tool/result`` with the tool's answer."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply}]
    call_id = f"call-{turn}-{step}"
    arguments = "" if tool is None else json.dumps(tool[1], ensure_ascii=False)
    if tool is not None:
        content.append(
            {"type": "tool-call", "id": call_id, "name": tool[0], "arguments": arguments}
        )
    message = {"id": f"a-{turn}-{step}", "role": "assistant", "content": content, "source": MODEL}
    session.append(
        "assistant/message", {"turn": turn, "step": step, "message": message}, surface_op="append"
    )
    if tool is None:
        return
    name, _, output = tool
    called = session.append(
        "tool/call",
        {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments},
    )
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": output}],
    }
    result = {
        "id": f"result-{call_id}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    session.append(
        "tool/result",
        {"turn": turn, "step": step, "message": result},
        surface_op="append",
        source_event_seqs=[called["seq"]],
    )


class Agent:
    """The scripted agent: a turn whenever input is pending, len(PLAN) steps each; every
    step takes in what was posted before it (``propose_step`` receives posts first)."""

    def __init__(self, store: inboxlog.Store, step_seconds: float) -> None:
        self.store = store
        self.step_seconds = step_seconds
        self.stop = threading.Event()
        self.lock = threading.Lock()
        #: Steps started so far, and which step (by that count) took each message id.
        self.steps = 0
        self.took: dict[str, int] = {}

    def run(self) -> None:
        with self.store.open(SESSION) as session:
            while not self.stop.is_set():
                session.inbox.receive()
                if not session.inbox.has_pending:
                    self.stop.wait(0.1)
                    continue
                self.turn(session)

    def turn(self, session: inboxlog.Session) -> None:
        turn = session.open_turn()
        for index, (work, tool) in enumerate(PLAN):
            proposal = session.propose_step()
            with self.lock:
                self.steps += 1
                for m in proposal["messages"]:
                    self.took[m["id"]] = self.steps
            session.decide({"kind": "enter", "messages": proposal["messages"]})
            for m in proposal["messages"]:
                show(f"turn {turn} step {proposal['step']} took {m['id']}: {m.get('content')!r}")
            steering = proposal["messages"] if index > 0 else []
            reply = work if not steering else f"Noted: {steering[-1].get('content')} {work}"
            respond(session, turn, proposal["step"], reply, tool)
            self.stop.wait(self.step_seconds)
            last = index == len(PLAN) - 1 or self.stop.is_set()
            if not session.end_step("completed" if last else "continue"):
                break
        ended = session.close_turn()
        assert ended["kind"] == "turn-end"
        show(f"turn {turn} ended: {ended['reason']['kind']}")


def serve(store: inboxlog.Store, port: int) -> tuple[uvicorn.Server, threading.Thread, str]:
    """The console on 127.0.0.1:``port`` (0: any free port) in a thread of its own."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    # Open pages hold their live streams open: shutting down waits for them 1 s at most.
    config = uvicorn.Config(
        inboxlog.console.app(store), log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, url


def api(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A call of the console's API, as the page makes it (JSON in, JSON out)."""
    request = urllib.request.Request(
        url + "api/" + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json", "accept": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def check(agent: Agent, url: str) -> None:
    """Posts steering as the composer does and checks the agent's next step takes it."""
    while agent.steps < 2:
        time.sleep(0.01)
    steering: Message = {"id": "web-check-1", "role": "user", "content": "Keep it under 300 euros."}
    before = agent.steps
    posted = api(url, f"sessions/{SESSION}/inbox", {"target": "next-step", "message": steering})
    after = agent.steps
    show(f"posted from the console: {steering['id']} -> next-step (post {posted['post']})")
    deadline = time.monotonic() + 30
    while steering["id"] not in agent.took:
        assert time.monotonic() < deadline, "the agent never took the steering in"
        time.sleep(0.01)
    took = agent.took[steering["id"]]
    assert before < took <= after + 1, (before, took, after)
    show("the agent's next step took it")
    events = api(url, f"sessions/{SESSION}/events?since=0&limit=1000")["events"]
    seen = [e for e in events if e["type"] == "user/message" and e["data"]["id"] == steering["id"]]
    assert len(seen) == 1, seen
    summary = api(url, f"sessions/{SESSION}")
    show(f"the console shows it at seq {seen[0]['seq']} of {summary['lastSeq'] + 1} events")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("dir", nargs="?", help="the JSONL store (default: a temporary one)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--check", action="store_true", help="run unattended and check")
    args = parser.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="inboxlog-console-"))
    store = inboxlog.Store(root)
    with contextlib.suppress(inboxlog.AlreadyExistsError):  # a DIR of an earlier run
        store.create(SESSION, agent_preset="planner").close()
    store.post(
        SESSION, "next-turn", {"id": "p1", "role": "user", "content": "Plan a weekend in Lisbon."}
    )

    server, thread, url = serve(store, 0 if args.check else args.port)
    agent = Agent(inboxlog.Store(root), step_seconds=0.05 if args.check else 1.5)
    worker = threading.Thread(target=agent.run)
    worker.start()
    show(f"console: {url}sessions/{SESSION}  (store {root})")
    try:
        if args.check:
            check(agent, url)
        else:
            show("post from the page to steer the agent; Ctrl-C stops")
            while worker.is_alive():
                worker.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        agent.stop.set()
        worker.join()
        server.should_exit = True
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())

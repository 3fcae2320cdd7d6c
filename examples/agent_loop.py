"""A small agent loop over inboxlog's JSONL store, with a fake model.

    python examples/agent_loop.py [DIR]        (default DIR: ./demo-sessions, made fresh)

It walks one session through: a user prompt, two pre-step plugins (one adds context,
one rejects a forbidden prompt), steering that arrives mid-turn, a cancel, then a
crash (the loop runs in a child process that is killed with SIGKILL mid-step) and a
resume that shows the interrupted turn repaired and the pending inbox replayed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import inboxlog
from inboxlog.types import Decision, Message, Proposal, StepOutcome, TurnEnded

SESSION = "agent"
counter = 0


def msg(content: str, role: str = "user") -> Message:
    global counter
    counter += 1
    return {"id": f"m{counter}", "role": role, "content": content}


# -- plugins: pre-step middleware (ARCHITECTURE.md#pre-step-composer) ---------------------------


def guard(proposal: Proposal, next: Callable[[], Decision]) -> Decision:
    """Rejects a step whose input asks for something forbidden."""
    if any("rm -rf" in str(m.get("content", "")) for m in proposal["messages"]):
        return {"kind": "reject"}
    return next()


def add_context(proposal: Proposal, next: Callable[[], Decision]) -> Decision:
    """Adds a context message in front of the first step of each turn."""
    decision = next()
    if decision["kind"] == "enter" and proposal["step"] == 1:
        context = {
            "id": f"ctx-{proposal['turn']}",
            "role": "system",
            "content": "user is in Paris",
        }
        return {"kind": "enter", "messages": [context, *decision["messages"]]}
    return decision


PLUGINS = [guard, add_context]


# -- a fake model and its one tool --------------------------------------------------

# What wrote each assistant/message (SPEC §15.1): the model's provider and name.
MODEL = {"kind": "model", "provider": "fake", "model": "fake-1"}
# A tool call the model asks for: the tool's name and its arguments as JSON text.
ToolCall = tuple[str, str]


def fake_model(messages: list[Message]) -> tuple[str, ToolCall | None, StepOutcome]:
    """Returns (reply, tool call or None, outcome) for one model call."""
    text = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    if "weather" in text:
        return "Let me look it up.", ("get_weather", json.dumps({"city": "Paris"})), "continue"
    if "Celsius" in text:
        return "It is 18 °C in Paris.", None, "completed"
    return f"Done: {text or 'tool result read'}.", None, "completed"


def get_weather(arguments: str) -> str:
    city = json.loads(arguments)["city"]
    return f"{city}: 18 °C, light rain"


TOOLS: dict[str, Callable[[str], str]] = {"get_weather": get_weather}


def answer(s: inboxlog.Session, turn: int, step: int, reply: str, call: ToolCall | None) -> None:
    """Writes one model response and the tool run it asks for as the conversation of
    SPEC §15: ``assistant/message`` (the reply, then its tool call), ``tool/call`` when
    the call is dispatched, ``tool/result`` once the tool answered."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply}]
    call_id = f"call-{turn}-{step}"
    if call is not None:
        content.append({"type": "tool-call", "id": call_id, "name": call[0], "arguments": call[1]})
    message = {"id": f"a-{turn}-{step}", "role": "assistant", "content": content, "source": MODEL}
    s.append(
        "assistant/message", {"turn": turn, "step": step, "message": message}, surface_op="append"
    )
    if call is None:
        return
    name, arguments = call
    called = s.append(
        "tool/call",
        {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments},
    )
    output = TOOLS[name](arguments)
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
    s.append(
        "tool/result",
        {"turn": turn, "step": step, "message": result},
        surface_op="append",
        source_event_seqs=[called["seq"]],
    )
    show(f"    tool: {name}({arguments}) -> {output}")


def show(line: str) -> None:
    print(line, flush=True)


def names(messages: Sequence[Message]) -> str:
    return ", ".join(f"{m['id']}:{m.get('content', '')!r}" for m in messages) or "-"


def run_turn(
    s: inboxlog.Session,
    during_step: Callable[[int], None] | None = None,
) -> TurnEnded:
    """One turn of the loop: claim, ask the plugins, run steps until the turn ends."""
    turn = s.open_turn()
    while True:
        proposal = s.propose_step()
        decision = inboxlog.pre_step(proposal, PLUGINS)
        show(
            f"  turn {turn} step {proposal['step']}: claimed {names(proposal['messages'])}"
            f" -> {decision['kind']}"
        )
        decided = s.decide(decision)
        if decided["kind"] == "turn-end":
            return decided
        reply, call, outcome = fake_model(
            decision["messages"] if decision["kind"] == "enter" else []
        )
        show(f"    model: {reply} ({outcome})")
        answer(s, turn, proposal["step"], reply, call)
        if during_step is not None:
            during_step(proposal["step"])
        if not s.end_step(outcome):
            ended = s.close_turn()
            assert ended["kind"] == "turn-end"
            return ended


# -- the crash: a child process killed mid-step ------------------------------------


def child(root: str) -> None:
    """Runs a turn in a child process and stops mid-step, waiting to be killed."""
    store = inboxlog.Store(root)
    s = store.open(SESSION)
    s.inbox.append("next-turn", {"id": "c1", "role": "user", "content": "summarize the log"})
    s.inbox.append("next-turn", {"id": "c2", "role": "user", "content": "then say goodbye"})
    s.open_turn()
    proposal = s.propose_step()
    s.decide(inboxlog.pre_step(proposal, PLUGINS))
    s.append("assistant/chunk", {"text": "Summar"})
    s.inbox.append("next-step", {"id": "c3", "role": "user", "content": "keep it short"})
    print(
        f"turn {proposal['turn']} step 1 open with c1; c2 waits in next-turn, c3 in next-step",
        flush=True,
    )
    signal.pause()


def main(root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    store = inboxlog.Store(root, durability="sync")
    show(f"inboxlog {inboxlog.__version__}: agent loop over {root}/ (JSONL, durability=sync)")

    with store.create(SESSION, cwd=os.getcwd()) as s:
        notices: list[str] = []
        s.on_inbox(lambda n: notices.append(f"{n['type'].rsplit('/', 1)[1]} {n['message']['id']}"))

        show("1. a user prompt, steering mid-turn")
        s.inbox.append("next-turn", msg("what is the weather?"))

        def steer(step: int) -> None:
            if step == 1:
                m = msg("use Celsius")
                s.inbox.append("next-step", m)
                show(f"    steering arrives mid-step: {m['id']}:{m['content']!r} -> next-step")

        ended = run_turn(s, steer)
        show(f"  turn {ended['turn']} ended: {ended['reason']['kind']}")

        show("2. a forbidden prompt, rejected by the guard plugin")
        s.inbox.append("next-turn", msg("rm -rf / please"))
        ended = run_turn(s)
        show(f"  turn {ended['turn']} ended: {ended['reason']['kind']}")

        show("3. a cancel mid-step while another prompt waits")
        s.inbox.append("next-turn", msg("write a long poem"))
        waiting = msg("and another one")
        s.inbox.append("next-turn", waiting)
        turn = s.open_turn()
        proposal = s.propose_step()
        s.decide(inboxlog.pre_step(proposal, PLUGINS))
        show(f"  turn {turn} step 1: claimed {names(proposal['messages'])} -> enter")
        since = (s.last_seq or 0) + 1
        s.cancel({"kind": "user"})
        written = list(s.events(since))
        canceled = [e["data"] for e in written if e["type"] == "agent/inbox/spliced"]
        show(
            f"  user cancels: {waiting['id']} canceled (outcome {canceled[0]['outcome']!r}), "
            f"turn {turn} ended: {written[-1]['data']['reason']['kind']}"
        )
        show(f"  inbox notices: {', '.join(notices)}")

    show("4. a crash: a child process runs turn 4 and is killed with SIGKILL mid-step")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--child", root],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    show(f"  child: {line}")
    show(f"  killed mid-step (exit {proc.returncode})")

    show("5. resume: reopen the log")
    with store.open(SESSION) as s:
        report = s.open_report
        tail = [
            f"{e['type']} {e['data'].get('reason', {}).get('kind', '')}" for e in s.events()[-2:]
        ]
        show(f"  repaired turn {report['repairedTurn']}: {' + '.join(t.strip() for t in tail)}")
        show(f"  inbox replayed: next-turn [{names(s.inbox.next_turn)}]")
        show(f"                  next-step [{names(s.inbox.next_step)}]")
        while s.inbox.has_pending:
            ended = run_turn(s)
            show(f"  turn {ended['turn']} ended: {ended['reason']['kind']}")
        events = s.events()
        fold = inboxlog.fold_consumed_work(events)

    end = fold["end"]
    assert end is not None
    show(
        f"fold: end = turn/end of turn {end['data']['turn']} at seq {end['seq']} "
        f"({end['data']['reason']['kind']}), droppedUnrun = {fold['droppedUnrun']}"
    )
    path = os.path.join(root, f"{SESSION}.jsonl")
    show(f"log: {path} ({len(events)} events), e.g.")
    show(f"  jq -c 'select(.type | startswith(\"turn/\")) | .data' {path}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "demo-sessions")

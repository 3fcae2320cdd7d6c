"""What InboxlogCapability adds to a Pydantic AI model request (issue #23: at most 1 ms
per request on a JSONL store with ``sync`` durability, beyond the appends' own fsync).

    .venv/bin/python python/bench/bench_pydantic_ai.py [--quick | --parts]

The same agent (``FunctionModel``, one tool call then an answer: two model requests per
run) runs conversations of ``RUNS`` runs each, taking turns between:

- ``plain``: no capability; each run gets the previous run's ``all_messages()`` as
  ``message_history`` (what an application keeps itself without the log);
- ``noop``: the same with a capability that has InboxlogCapability's hooks and does
  nothing in them (what Pydantic AI spends on running such hooks);
- ``sync``: ``InboxlogCapability`` on a JSONL store, durability ``sync`` (the default);
- ``none``: the same, durability ``none`` (each log write is one ``write`` to the page
  cache, no fsync).

Beside them, in the same run: ``append``, one ``session.append`` of a model response's
JSON on each of those two stores (the bare append cost), and the log writes per model
request (``write`` system calls counted in ``/proc/self/io``, one per inboxlog call).
Then: the overhead per request beyond the appends' own fsync = ``sync`` − ``plain`` −
writes × (sync ``append`` − none ``append``), in wall-clock time; and the capability's
own work as CPU time (``time.process_time``, every thread), ``sync`` − ``plain`` and
``none`` − ``plain``, which waiting for the disk does not count and a busy machine
disturbs far less than wall-clock time.

Last, the parts of the log work a request does, each timed alone in CPU time
(``--parts``: only these).

Each figure is the best of a few rounds, the sides taking turns, so the machine's noise
weighs on all alike.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import AgentNode, NodeResult, WrapRunHandler
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext

import inboxlog
from inboxlog.integrations.pydantic_ai import InboxlogCapability

QUICK = "--quick" in sys.argv
# Many short rounds rather than a few long ones: the best of each side then comes from a
# quiet moment even on a busy machine.
CONVERSATIONS = 1 if QUICK else 2
RUNS = 5 if QUICK else 10
REQUESTS_PER_RUN = 2
ROUNDS = 3 if QUICK else 12
APPENDS = 50 if QUICK else 100


Clock = tuple[float, float]
"""Wall-clock and CPU seconds (``time.process_time``: every thread of the process)."""


def _clock() -> Clock:
    return time.perf_counter(), time.process_time()


def _since(start: Clock) -> Clock:
    now = _clock()
    return now[0] - start[0], now[1] - start[1]


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if any(p.part_kind == "tool-return" for p in last.parts):
        return ModelResponse(parts=[TextPart("It is sunny, 22 C in Paris.")])
    return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])


def build(capabilities: list[Any]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        FunctionModel(respond), instructions="Be brief.", capabilities=capabilities
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny, 22 C in {city}"

    return agent


class Noop(AbstractCapability[Any]):
    """A capability with the hooks InboxlogCapability has, doing nothing in them: what
    Pydantic AI itself spends on running such hooks."""

    async def for_run(self, ctx: RunContext[Any]) -> Noop:
        return Noop()

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> Any:
        return await handler()

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return request_context

    async def after_node_run(
        self, ctx: RunContext[Any], *, node: AgentNode[Any], result: NodeResult[Any]
    ) -> NodeResult[Any]:
        return result


def writes() -> int:
    """The process's ``write``-family system calls so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscw:"):
            return int(line.split()[1])
    raise RuntimeError("no syscw in /proc/self/io")


async def plain(root: Path) -> Clock:
    return await keep_history(build([]))


async def noop(root: Path) -> Clock:
    return await keep_history(build([Noop()]))


async def keep_history(agent: Agent[None, str]) -> Clock:
    start = _clock()
    for c in range(CONVERSATIONS):
        history: list[ModelMessage] = []
        for r in range(RUNS):
            result = await agent.run(f"Weather in Paris? ({c}.{r})", message_history=history)
            history = result.all_messages()
    return _since(start)


def with_log(durability: str) -> Callable[[Path], Awaitable[Clock]]:
    async def run(root: Path) -> Clock:
        start = _clock()
        store = inboxlog.Store(root, durability=durability)  # type: ignore[arg-type]
        agent = build([InboxlogCapability(store)])
        for c in range(CONVERSATIONS):
            for r in range(RUNS):
                await agent.run(f"Weather in Paris? ({c}.{r})", conversation_id=f"c{c}")
        return _since(start)

    return run


def bare_append(durability: str) -> Callable[[Path], Awaitable[Clock]]:
    response = ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])
    data = {"messages": ModelMessagesTypeAdapter.dump_python([response], mode="json")}

    async def run(root: Path) -> Clock:
        session = inboxlog.Store(root, durability=durability).create("bare")  # type: ignore[arg-type]
        start = _clock()
        for _ in range(APPENDS):
            session.append("pydantic-ai/messages", data)
        elapsed = _since(start)
        session.close()
        return elapsed

    return run


def main() -> None:
    sides: dict[str, Callable[[Path], Awaitable[Clock]]] = {
        "plain": plain,
        "noop": noop,
        "sync": with_log("sync"),
        "none": with_log("none"),
        "append sync": bare_append("sync"),
        "append none": bare_append("none"),
    }
    best: dict[str, list[float]] = {}  # per side: best wall, best CPU seconds
    wrote: dict[str, int] = {}
    scratch = Path(tempfile.mkdtemp(prefix="bench-pydantic-ai-"))
    try:
        for round in range(ROUNDS):
            for name, side in sides.items():
                root = scratch / f"{name.replace(' ', '-')}-{round}"
                gc.collect()
                before = writes()
                wall, cpu = asyncio.run(side(root))
                wrote[name] = writes() - before
                kept = best.setdefault(name, [wall, cpu])
                best[name] = [min(kept[0], wall), min(kept[1], cpu)]
                shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    requests = CONVERSATIONS * RUNS * REQUESTS_PER_RUN
    w = wrote["sync"] / requests
    print(
        f"{CONVERSATIONS} conversations x {RUNS} runs x {REQUESTS_PER_RUN} model requests "
        f"= {requests} requests; best of {ROUNDS} rounds; ms per request (append: per append)"
    )
    print(f"{'side':<36} {'wall':>9} {'CPU':>9}")
    rows = [
        ("plain (no capability)", "plain", requests),
        ("a no-op capability, same hooks", "noop", requests),
        ("InboxlogCapability, JSONL sync", "sync", requests),
        ("InboxlogCapability, JSONL none", "none", requests),
        ("bare append, JSONL sync", "append sync", APPENDS),
        ("bare append, JSONL none", "append none", APPENDS),
    ]
    ms = {key: [t / n * 1e3 for t in best[key]] for _, key, n in rows}
    for label, key, _ in rows:
        print(f"{label:<36} {ms[key][0]:>9.3f} {ms[key][1]:>9.3f}")
    print(f"log writes per model request: {w:.2f}")
    fsync = ms["append sync"][0] - ms["append none"][0]
    added = ms["sync"][0] - ms["plain"][0]
    print(
        f"JSONL sync, wall: the capability adds {added:.3f} ms per request; beyond "
        f"{w:.2f} x {fsync:.3f} ms of fsync: {added - w * fsync:.3f} ms"
    )
    print(
        "the capability's own work (CPU, no disk wait): "
        f"sync {ms['sync'][1] - ms['plain'][1]:.3f} ms, "
        f"none {ms['none'][1] - ms['plain'][1]:.3f} ms per request; of which Pydantic AI "
        f"running the hooks (no-op capability): {ms['noop'][1] - ms['plain'][1]:.3f} ms"
    )


def parts() -> None:
    """What a model request's log work is made of, each timed alone in CPU time."""
    response = ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])
    data = {"messages": ModelMessagesTypeAdapter.dump_python([response], mode="json")}
    session = inboxlog.Store.memory().create("parts")

    def cpu(fn: Callable[[], object], n: int = 2000) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            for _ in range(n):
                fn()
            best = min(best, (time.process_time() - start) / n)
        return best * 1e6

    async def hops(n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            await asyncio.to_thread(int)
        return (time.process_time() - start) / n * 1e6

    hop = min(asyncio.run(hops(2000)) for _ in range(3))
    dump = cpu(lambda: ModelMessagesTypeAdapter.dump_python([response], mode="json"))
    append = cpu(lambda: session.append("pydantic-ai/messages", data))
    print(f"parts, CPU: a worker-thread call (asyncio.to_thread) {hop:.1f} us")
    print(f"parts, CPU: ModelMessagesTypeAdapter.dump_python of one response {dump:.1f} us")
    print(f"parts, CPU: an append of it to a memory store {append:.1f} us")


if __name__ == "__main__":
    if "--parts" not in sys.argv:
        main()
    parts()

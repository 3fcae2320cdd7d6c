"""What InboxlogCapability adds to a Pydantic AI model request (issue #23: at most 1 ms
per request on a JSONL store with ``sync`` durability, beyond the appends' own fsync).

    .venv/bin/python python/bench/bench_pydantic_ai.py [--quick | --parts | --calls]
    .venv/bin/python python/bench/bench_pydantic_ai.py --alone SIDE N

The same agent (``FunctionModel``, one tool call then an answer: two model requests per
run) runs conversations of ``RUNS`` runs each, taking turns between:

- ``plain``: no capability; each run gets the previous run's ``all_messages()`` as
  ``message_history`` (what an application keeps itself without the log);
- ``noop``: the same with a capability that has InboxlogCapability's hooks and does
  nothing in them (what Pydantic AI spends on running such hooks);
- ``sync``: ``InboxlogCapability`` on a JSONL store, durability ``sync`` (the default);
- ``none``: the same, durability ``none`` (each log write is one ``write`` to the page
  cache, no fsync).

Beside them, in the same round: ``append sync`` and ``append none``, one
``session.append`` of a model response's JSON on each of those two stores (the bare
append cost), and the log writes per model request (``write`` system calls counted in
``/proc/self/io``, one per inboxlog call). Then: the overhead per request beyond the
appends' own fsync = ``sync`` − ``plain`` − writes × (``append sync`` − ``append
none``), in wall-clock time; and the capability's own work, ``none`` − ``plain``, in
wall-clock and in CPU time (``time.process_time``, every thread), which waiting for the
disk does not count and a busy machine disturbs far less than wall-clock time.

Every difference is taken within one round (the sides of a round run back to back, so
the machine's noise of that moment weighs on all alike) and the figure printed is the
median of those differences over the rounds; each side's own figures are the medians of
its rounds. ``--quick``: one conversation of five runs, three rounds.

Last, the parts of the log work a request does, each timed alone in CPU time
(``--parts``: only these). ``--alone SIDE N`` runs one side (``plain``, ``noop``,
``sync``, ``none``) N times and prints its medians: what to run under a profiler, e.g.
``.venv/bin/python -m pyinstrument python/bench/bench_pydantic_ai.py --alone none 5``.
``--calls`` times the ``sync`` side's worker-thread calls through their life (see
:func:`calls`).
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
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
from inboxlog.integrations._common import Job, call
from inboxlog.integrations.pydantic_ai import InboxlogCapability

QUICK = "--quick" in sys.argv
# Many short rounds rather than a few long ones: a round's sides then run at the same
# moment's load, and the median over the rounds leaves the noisiest rounds out.
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


SIDES: dict[str, Callable[[Path], Awaitable[Clock]]] = {
    "plain": plain,
    "noop": noop,
    "sync": with_log("sync"),
    "none": with_log("none"),
    "append sync": bare_append("sync"),
    "append none": bare_append("none"),
}
"""Every side, in the order a round runs them."""

REQUESTS = CONVERSATIONS * RUNS * REQUESTS_PER_RUN


def per_call(name: str, clock: Clock) -> Clock:
    """A side's figures in ms per model request (per append for the bare appends)."""
    n = APPENDS if name.startswith("append") else REQUESTS
    return clock[0] / n * 1e3, clock[1] / n * 1e3


def measure(names: list[str], rounds: int) -> list[dict[str, Clock]]:
    """Runs the sides ``names`` in turn, ``rounds`` times after a round left uncounted
    (the first run of each side builds Pydantic AI's schemas and warms the caches); per
    round, each side's ms per model request (per append) and, under ``"writes"``, the
    ``sync`` side's log writes per request (as the wall figure)."""
    results: list[dict[str, Clock]] = []
    scratch = Path(tempfile.mkdtemp(prefix="bench-pydantic-ai-"))
    try:
        for round in range(rounds + 1):
            result: dict[str, Clock] = {}
            for name in names:
                root = scratch / f"{name.replace(' ', '-')}-{round}"
                gc.collect()
                before = writes()
                result[name] = per_call(name, asyncio.run(SIDES[name](root)))
                if name == "sync":
                    result["writes"] = ((writes() - before) / REQUESTS, 0.0)
                shutil.rmtree(root, ignore_errors=True)
            if round > 0:
                results.append(result)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def median(values: Iterable[float]) -> float:
    return statistics.median(values)


def main() -> None:
    results = measure(list(SIDES), ROUNDS)

    def side(key: str) -> Clock:
        return median(r[key][0] for r in results), median(r[key][1] for r in results)

    def beyond_fsync(r: dict[str, Clock]) -> float:
        fsync = r["append sync"][0] - r["append none"][0]
        return r["sync"][0] - r["plain"][0] - r["writes"][0] * fsync

    print(
        f"{CONVERSATIONS} conversations x {RUNS} runs x {REQUESTS_PER_RUN} model requests "
        f"= {REQUESTS} requests; {ROUNDS} rounds; ms per request (append: per append), "
        "medians over the rounds"
    )
    print(f"{'side':<36} {'wall':>9} {'CPU':>9}")
    rows = [
        ("plain (no capability)", "plain"),
        ("a no-op capability, same hooks", "noop"),
        ("InboxlogCapability, JSONL sync", "sync"),
        ("InboxlogCapability, JSONL none", "none"),
        ("bare append, JSONL sync", "append sync"),
        ("bare append, JSONL none", "append none"),
    ]
    for label, key in rows:
        wall, cpu = side(key)
        print(f"{label:<36} {wall:>9.3f} {cpu:>9.3f}")
    w = side("writes")[0]
    fsync = median(r["append sync"][0] - r["append none"][0] for r in results)
    print(f"log writes per model request: {w:.2f}; fsync (append sync - none): {fsync:.3f} ms")
    print("differences within each round, medians over the rounds, ms per request:")
    added = median(r["sync"][0] - r["plain"][0] for r in results)
    print(
        f"  JSONL sync, wall: the capability adds {added:.3f} ms; beyond the writes' "
        f"fsync: {median(beyond_fsync(r) for r in results):.3f} ms"
    )
    for key in ("none", "sync", "noop"):
        wall = median(r[key][0] - r["plain"][0] for r in results)
        cpu = median(r[key][1] - r["plain"][1] for r in results)
        what = "a no-op capability (Pydantic AI running the hooks)" if key == "noop" else key
        print(f"  {what} - plain: wall {wall:.3f} ms, CPU {cpu:.3f} ms")


def alone(name: str, rounds: int) -> None:
    """Runs one side ``rounds`` times and prints its medians (to run under a profiler)."""
    if name not in SIDES:
        sys.exit(f"--alone: no side {name!r}; one of {', '.join(SIDES)}")
    results = measure([name], rounds)
    wall = median(r[name][0] for r in results)
    cpu = median(r[name][1] for r in results)
    print(f"{name}: {rounds} rounds, medians: wall {wall:.3f} ms, CPU {cpu:.3f} ms per call")


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

    async def hops(hop: Callable[..., Awaitable[object]], n: int) -> float:
        start = time.process_time()
        for _ in range(n):
            await hop(int)
        return (time.process_time() - start) / n * 1e6

    to_thread = min(asyncio.run(hops(asyncio.to_thread, 2000)) for _ in range(3))
    hop = min(asyncio.run(hops(call, 2000)) for _ in range(3))
    dump = cpu(lambda: ModelMessagesTypeAdapter.dump_python([response], mode="json"))
    append = cpu(lambda: session.append("pydantic-ai/messages", data))
    print(f"parts, CPU: a worker-thread call (asyncio.to_thread) {to_thread:.1f} us")
    print(f"parts, CPU: a worker-thread call (the integrations' own) {hop:.1f} us")
    print(f"parts, CPU: ModelMessagesTypeAdapter.dump_python of one response {dump:.1f} us")
    print(f"parts, CPU: an append of it to a memory store {append:.1f} us")


def calls(rounds: int) -> None:
    """The ``sync`` side's worker-thread calls through their life, medians per call in
    microseconds: queued (from the hook's submit until the worker starts it: the worker
    waits for the loop's thread to let go of the GIL), work (the log call itself, its
    fsync included), handed back (from its end until the loop runs its outcome), and
    waited (how long the hook that awaits it waits)."""
    marks: dict[int, list[Any]] = {}
    lives: list[list[Any]] = []
    clock = time.perf_counter
    init, run, settle, outcome = Job.__init__, Job.run, Job.settle, Job.outcome

    def timed_init(job: Job, loop: Any, fn: Callable[..., Any], args: Any) -> None:
        init(job, loop, fn, args)
        marks[id(job)] = [getattr(fn, "__name__", "?"), clock()]

    def timed_run(job: Job) -> None:
        marks[id(job)].append(clock())
        run(job)
        marks[id(job)].append(clock())

    def timed_settle(job: Job) -> None:
        marks[id(job)].append(clock())
        settle(job)

    async def timed_outcome(job: Job) -> Any:
        entered = clock()
        try:
            return await outcome(job)
        finally:
            lives.append([*marks.pop(id(job)), entered, clock()])

    Job.__init__ = timed_init  # type: ignore[method-assign]
    Job.run = timed_run  # type: ignore[method-assign]
    Job.settle = timed_settle  # type: ignore[method-assign]
    Job.outcome = timed_outcome  # type: ignore[method-assign]
    try:
        measure(["sync"], rounds)
    finally:
        Job.__init__, Job.run, Job.settle, Job.outcome = init, run, settle, outcome  # type: ignore[method-assign]
    requests = REQUESTS * (rounds + 1)
    print("the sync side's worker-thread calls, medians, us per call:")
    columns = ("per request", "queued", "work", "handed back", "waited")
    print(f"{'call':<18} " + " ".join(f"{c:>11}" for c in columns))
    for name in dict.fromkeys(life[0] for life in lives):
        mine = [life for life in lives if life[0] == name]
        queued = median(t1 - t0 for _, t0, t1, *_ in mine) * 1e6
        work = median(t2 - t1 for _, _, t1, t2, *_ in mine) * 1e6
        back = median(t3 - t2 for _, _, _, t2, t3, *_ in mine) * 1e6
        waited = median(t5 - t4 for *_, t4, t5 in mine) * 1e6
        print(
            f"{name:<18} {len(mine) / requests:>11.2f} {queued:>11.1f} {work:>11.1f} "
            f"{back:>11.1f} {waited:>11.1f}"
        )


if __name__ == "__main__":
    if "--calls" in sys.argv:
        calls(ROUNDS)
    elif "--alone" in sys.argv:
        at = sys.argv.index("--alone")
        alone(sys.argv[at + 1], int(sys.argv[at + 2]))
    else:
        if "--parts" not in sys.argv:
            main()
        parts()

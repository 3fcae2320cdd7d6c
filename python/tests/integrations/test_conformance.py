"""SPEC §12 over every framework integration: the same scenarios, each run through every
framework's adapter (``adapters.py``: the real framework package, a scripted model, no
network) on the stores the scenario needs.

Only what one framework alone does is tested beside its integration
(``tests/test_openai_agents.py``, ``test_langgraph.py``, ``test_pydantic_ai.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from adapters import ADAPTERS, Adapter, Script, cut, fail, hang, say, tool, weather_report
from conftest import Place, missing_extra
from conftest import entered as entered_ids

import inboxlog
from inboxlog.integrations._common import StepRejectedError

HERE = Path(__file__).parent
EXTRAS = {
    "openai_agents": ("agents", "openai-agents"),
    "langgraph": ("langchain", "langgraph"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "adk": ("google.adk", "adk"),
}
pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> Adapter:
    """Every integration (its framework's package comes with the test extras)."""
    name: str = request.param
    if missing_extra(*EXTRAS[name]):  # pragma: no cover - CI has them
        pytest.skip(f"the {name} extra is not installed")
    return ADAPTERS[name]


# -- reading the log ----------------------------------------------------------------------


def events_of(store: inboxlog.Store, id: str = "chat") -> list[dict[str, Any]]:
    return store.inspect(id)[1]


def turn_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


POSTED = {"p1", "p2", "s1", "later"}
"""The ids of the messages the tests post; any other is a run's own input."""


def entered(events: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """(turn, step, message id) of every user/message; a run's own input id as
    ``input``."""
    return entered_ids(events, lambda id: id not in POSTED and not id.startswith("continue-turn-"))


def steps(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(e["data"]["turn"], e["data"]["step"]) for e in events if e["type"] == "step/start"]


def user(text: str) -> tuple[str, str]:
    return ("user", text)


def post(store: inboxlog.Store, target: str, id: str, text: str) -> Callable[[], None]:
    """Posts to session ``chat`` from this process when called."""
    return lambda: store.post("chat", target, {"id": id, "content": text})  # type: ignore[arg-type]


POSTER = (
    "import inboxlog, sys; "
    "inboxlog.Store.open(sys.argv[1], schema=sys.argv[2] or None)"
    ".post('chat', 'next-step', {'id': sys.argv[3], 'content': sys.argv[4]})"
)


def post_elsewhere(place: Place, id: str, text: str, cwd: Path) -> Callable[[], None]:
    """Posts to ``chat``'s ``next-step`` from another process when called (a web server
    that received a user's message)."""

    def run() -> None:
        argv = [sys.executable, "-P", "-c", POSTER, *place.argv(), id, text]
        subprocess.run(argv, check=True, cwd=cwd, timeout=60)

    return run


Q = "Weather in Paris?"
PARIS = weather_report("Paris")


# -- a run is a turn, a model call a step ------------------------------------------------


async def test_a_tool_call_then_an_answer_is_one_turn_of_two_steps(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    script = Script(tool("Paris"), say("Sunny."))
    await adapter.run(store, "chat", Q, script)
    assert script.seen == [[user(Q)], [user(Q), ("tool", PARIS)]]
    events = events_of(store)
    assert steps(events) == [(1, 1), (1, 2)]
    assert entered(events) == [(1, 1, "input")]
    assert turn_ends(events) == [{"kind": "completed"}]


async def test_steering_posted_during_a_tool_reaches_the_next_model_call_only(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    steer = post(store, "next-step", "s1", "In Fahrenheit.")
    script = Script(tool("Paris"), say("72 F."), during_tool=steer)
    await adapter.run(store, "chat", Q, script)
    assert script.seen[0] == [user(Q)]
    assert script.seen[1] == [user(Q), ("tool", PARIS), user("In Fahrenheit.")]
    events = events_of(store)
    assert entered(events) == [(1, 1, "input"), (1, 2, "s1")]
    assert turn_ends(events) == [{"kind": "completed"}]


async def test_steering_posted_from_another_process_during_the_final_call_gets_one_more_call(
    adapter: Adapter, place: Place, tmp_path: Path
) -> None:
    """The model answers without tools while another process posts: SPEC §12's one more
    model call takes the post, in the same turn (the session takes posts in before it
    decides whether another step is due)."""
    store = place.open()
    steer = post_elsewhere(place, "p1", "In Fahrenheit.", tmp_path)
    script = Script(say("Sunny.", before=steer), say("72 F."))
    await adapter.run(store, "chat", Q, script)
    assert script.seen == [[user(Q)], [user(Q), ("assistant", "Sunny."), user("In Fahrenheit.")]]
    events = events_of(store)
    posted = [e for e in events if e["type"] == "agent/inbox/spliced" and e["data"].get("post")]
    assert [e["data"]["inserted"][0]["id"] for e in posted] == ["p1"]
    assert entered(events) == [(1, 1, "input"), (1, 2, "p1")]
    assert turn_ends(events) == [{"kind": "completed"}]


async def test_next_turn_input_waits_for_the_next_run_and_comes_before_its_input(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    later = post(store, "next-turn", "later", "And tomorrow?")
    first = Script(tool("Paris"), say("Sunny."), during_tool=later)
    await adapter.run(store, "chat", Q, first)
    assert all(user("And tomorrow?") not in seen for seen in first.seen)
    assert turn_ends(events_of(store)) == [{"kind": "completed"}]

    second = Script(say("Rain."))
    await adapter.run(store, "chat", "Thanks!", second)
    assert second.seen[0][-2:] == [user("And tomorrow?"), user("Thanks!")]
    events = events_of(store)
    assert entered(events)[1:] == [(2, 1, "later"), (2, 1, "input")]
    assert turn_ends(events) == [{"kind": "completed"}] * 2


async def test_a_runs_own_input_goes_behind_pending_input_which_its_first_step_claims(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    with store.create("chat") as session:
        session.inbox.append("next-turn", {"id": "p1", "content": "First this."})
    store.post("chat", "next-turn", {"id": "p2", "content": "Then this."})
    script = Script(say("Done."))
    await adapter.run(store, "chat", "And this.", script)
    assert script.seen == [[user("First this."), user("Then this."), user("And this.")]]
    assert entered(events_of(store)) == [(1, 1, "p1"), (1, 1, "p2"), (1, 1, "input")]


async def test_a_run_without_input_takes_what_is_pending_else_continues_the_history(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    store.create("chat").close()
    store.post("chat", "next-turn", {"id": "p1", "content": "Hello?"})
    first = Script(say("Hi."))
    await adapter.run(store, "chat", None, first)
    assert first.seen == [[user("Hello?")]]
    second = Script(say("Still here."))
    await adapter.run(store, "chat", None, second)
    assert second.seen == [[user("Hello?"), ("assistant", "Hi.")]]
    events = events_of(store)
    assert entered(events) == [(1, 1, "p1"), (2, 1, "continue-turn-2")]
    assert turn_ends(events) == [{"kind": "completed"}] * 2


# -- pre-step plugins -----------------------------------------------------------------------


def guard(proposal: Any, next: Any) -> Any:
    """Rejects a step that would carry a forbidden message."""
    if any(m.get("content") == "forbidden" for m in proposal["messages"]):
        return {"kind": "reject"}
    return next()


async def test_a_plugin_that_rejects_the_first_step_blocks_the_turn_before_the_model(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    script = Script(say("never"))
    with pytest.raises(StepRejectedError):
        await adapter.run(store, "chat", "forbidden", script, plugins=[guard])
    assert script.seen == []
    events = events_of(store)
    assert [r["kind"] for r in turn_ends(events)] == ["blocked"]
    assert steps(events) == []


async def test_a_plugin_that_rejects_steering_stops_the_run_at_that_step(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    steer = post(store, "next-step", "s1", "forbidden")
    script = Script(tool("Paris"), say("never"), during_tool=steer)
    with pytest.raises(StepRejectedError):
        await adapter.run(store, "chat", Q, script, plugins=[guard])
    assert len(script.seen) == 1
    events = events_of(store)
    assert steps(events) == [(1, 1)]
    assert [r["kind"] for r in turn_ends(events)] == ["blocked"]


async def test_a_plugin_may_rewrite_what_the_model_sees(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    async def polite(proposal: Any, next: Any) -> Any:
        decision = await next()
        rewritten = [{**m, "content": f"{m['content']} Please."} for m in decision["messages"]]
        return {"kind": "enter", "messages": rewritten}

    script = Script(say("Sunny."))
    await adapter.run(store, "chat", Q, script, plugins=[polite])
    assert script.seen == [[user(f"{Q} Please.")]]


# -- endings ---------------------------------------------------------------------------------


async def test_a_length_stop_ends_the_turn_max_tokens(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    script = Script(tool("Paris"), cut("Sunny in Par"))
    with contextlib.suppress(*adapter.length_errors):
        await adapter.run(store, "chat", Q, script)
    assert len(script.seen) == 2
    assert turn_ends(events_of(store)) == [{"kind": "max-tokens"}]


async def test_steering_pending_at_a_length_stop_gets_one_more_call_and_the_turn_stays_max_tokens(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    steer = post(store, "next-step", "s1", "Shorter, please.")
    script = Script(cut("Sunny in Par", before=steer), say("Sunny."))
    await adapter.run(store, "chat", Q, script)
    assert len(script.seen) == 2
    assert script.seen[1][0] == user(Q) and script.seen[1][-1] == user("Shorter, please.")
    events = events_of(store)
    assert entered(events) == [(1, 1, "input"), (1, 2, "s1")]
    assert turn_ends(events) == [{"kind": "max-tokens"}]


async def test_an_exception_ends_the_turn_error_and_propagates(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    script = Script(tool("Paris"), fail(RuntimeError("model down")))
    with pytest.raises(RuntimeError, match="model down"):
        await adapter.run(store, "chat", Q, script)
    events = events_of(store)
    assert turn_ends(events) == [
        {"kind": "error", "error": {"message": "model down", "code": "RuntimeError"}}
    ]
    assert [e["type"] for e in events][-2:] == ["step/end", "turn/end"]


@pytest.mark.parametrize("keep", [False, True])
async def test_a_cancelled_run_ends_the_turn_aborted(
    adapter: Adapter, store: inboxlog.Store, keep: bool
) -> None:
    queued = post(store, "next-turn", "queued", "later")
    script = Script(hang(before=queued))
    script.calling = asyncio.Event()
    task = asyncio.create_task(adapter.run(store, "chat", Q, script, keep_inbox_on_cancel=keep))
    await script.calling.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert [e["type"] for e in events][-2:] == ["step/end", "turn/end"]
    with store.open("chat") as session:
        assert [m["id"] for m in session.inbox.next_turn] == (["queued"] if keep else [])


def test_a_keyboard_interrupt_ends_the_turn_aborted(
    adapter: Adapter, store: inboxlog.Store
) -> None:
    """``KeyboardInterrupt`` ends a turn as a cancellation does (run on a loop of its
    own: one escaping a task stops the loop that runs it). ``GeneratorExit`` takes the
    same path in the driver (``test_driver.py``)."""
    script = Script(tool("Paris"), fail(KeyboardInterrupt()))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(adapter.run(store, "chat", Q, script))
        except BaseException as error:
            raised.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert [type(e) for e in raised] == [KeyboardInterrupt]
    assert len(script.seen) == 2
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]


# -- the history, a new store handle, a killed worker ---------------------------------------


async def test_the_history_is_rebuilt_from_the_log_on_a_new_store_handle(
    adapter: Adapter, place: Place
) -> None:
    first = Script(tool("Paris"), say("Sunny."))
    await adapter.run(place.open(), "chat", Q, first)
    second = Script(say("Rain."))
    await adapter.run(place.open(), "chat", "And tomorrow?", second)
    assert second.seen == [
        [user(Q), ("tool", PARIS), ("assistant", "Sunny."), user("And tomorrow?")]
    ]


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[5])
    import inboxlog
    from adapters import ADAPTERS, Script, hang, tool

    ready = lambda: Path(sys.argv[4]).write_text("calling")
    store = inboxlog.Store.open(sys.argv[2], "sync", schema=sys.argv[3] or None)
    script = Script(tool("Paris"), hang(before=ready))
    asyncio.run(ADAPTERS[sys.argv[1]].run(store, "job", "Weather in Paris?", script))
    """
)


def kill_worker_during_its_second_model_call(name: str, place: Place, cwd: Path) -> None:
    """Runs WORKER in a child process and kills it with SIGKILL while its second model
    call waits."""
    kill_worker(WORKER, name, place, cwd)


def kill_worker(program: str, name: str, place: Place, cwd: Path) -> None:
    """Runs ``program`` (WORKER, IN_TOOL) in a child process and kills it with SIGKILL
    once it says it is where it waits (its file ``ready``)."""
    ready = cwd / "ready"
    argv = [sys.executable, "-P", "-c", program, name, *place.argv(), str(ready), str(HERE)]
    with subprocess.Popen(argv, cwd=cwd, stderr=subprocess.PIPE, text=True) as worker:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never got where it waits"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL


async def test_a_worker_killed_mid_run_is_resumed_elsewhere_from_what_was_committed(
    adapter: Adapter, place: Place, tmp_path: Path
) -> None:
    kill_worker_during_its_second_model_call(adapter.name, place, tmp_path)
    store = place.open()
    with store.open("job") as session:
        assert session.open_report["repairedTurn"] == 1
    script = Script(say("Sunny in Paris."))
    await adapter.run(store, "job", None, script)  # continues from the history
    assert script.seen == [[user(Q), ("tool", PARIS)]]
    events = events_of(store, "job")
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    assert entered(events)[-1] == (2, 1, "continue-turn-2")
    work = inboxlog.fold_consumed_work(events)
    assert work["end"] is not None and work["end"]["data"]["turn"] == 2


IN_TOOL = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[5])
    import inboxlog
    from adapters import ADAPTERS, Script, tool

    def inside():
        Path(sys.argv[4]).write_text("inside the tool")
        time.sleep(600)  # the tool's side effect is under way when the worker dies

    store = inboxlog.Store.open(sys.argv[2], "sync", schema=sys.argv[3] or None)
    script = Script(tool("Paris"), during_tool=inside)
    asyncio.run(ADAPTERS[sys.argv[1]].run(store, "job", "Weather in Paris?", script))
    """
)


async def test_a_worker_killed_inside_a_tool_leaves_the_call_answered_and_the_tool_not_rerun(
    adapter: Adapter, place: Place, tmp_path: Path
) -> None:
    # SPEC §15.4, §15.5: the call the model made and its dispatch are in the log before
    # the tool runs, so the next open answers the call (its outcome unknown), and the
    # resumed run's model call sees it answered, as its framework's own tool result.
    kill_worker(IN_TOOL, adapter.name, place, tmp_path)
    store = place.open()
    events = events_of(store, "job")
    calls = [e for e in events if e["type"] == "tool/call"]
    assert [c["data"]["name"] for c in calls] == ["weather"], "tool/call before the tool ran"
    with store.open("job") as session:
        assert session.open_report["repairedTurn"] == 1
    answered = [e for e in events_of(store, "job") if e["type"] == "tool/result"]
    assert [a["data"]["error"]["code"] for a in answered] == ["TOOL_OUTCOME_UNKNOWN"]
    assert answered[0]["sourceEventSeqs"] == [calls[0]["seq"]]
    ran: list[str] = []
    script = Script(say("I could not tell; let me not guess."), during_tool=lambda: ran.append("x"))
    await adapter.run(store, "job", None, script)  # continues from the history
    assert ran == [], "the tool ran again by itself"
    [seen] = script.seen
    assert seen[0] == user(Q)
    assert [role for role, _ in seen] == ["user", "tool"], seen
    assert "unknown" in seen[1][1], seen
    events = events_of(store, "job")
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    # The surface holds what the model saw: the question, the call, its answer (then
    # the driver's continue marker, which enters no model input, and the reply).
    messages = store.messages("job")
    assert [m.get("role") for m in messages[:3]] == ["user", "assistant", "user"]
    assert messages[2]["content"][0]["isError"] is True

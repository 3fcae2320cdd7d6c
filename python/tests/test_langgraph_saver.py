"""inboxlog.integrations.langgraph.InboxlogSaver: LangGraph's own checkpointer
conformance suite on every store, one writer per thread, and deltas, not history."""

from __future__ import annotations

import operator
import re
import uuid
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import pg_store
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, Capability
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

import inboxlog
from inboxlog.integrations.langgraph import CHECKPOINT, WRITES, InboxlogSaver

pytestmark = pytest.mark.anyio

# The extended capabilities this saver claims; the others it leaves to the base class.
CLAIMED = {Capability.COPY_THREAD}


def fresh_stores(kind: str, root: Path) -> Iterator[inboxlog.Store]:
    """A new empty store of ``kind`` per call (the suite wants a fresh saver per
    capability); PostgreSQL schemas are dropped when the generator closes."""
    made: list[Iterator[inboxlog.Store]] = []
    try:
        while True:
            if kind == "memory":
                yield inboxlog.Store.memory()
            elif kind == "jsonl":
                yield inboxlog.Store(root / uuid.uuid4().hex, durability="none")
            else:
                gen = pg_store()
                made.append(gen)
                yield next(gen)
    finally:
        for gen in made:
            next(gen, None)  # runs pg_store's cleanup: the schema is dropped


@pytest.mark.parametrize("kind", ["memory", "jsonl", "postgres"])
async def test_the_saver_passes_langgraphs_conformance_suite(kind: str, tmp_path: Path) -> None:
    stores = fresh_stores(kind, tmp_path)

    async def factory() -> AsyncGenerator[InboxlogSaver, None]:
        with InboxlogSaver(next(stores)) as saver:
            yield saver

    registered = checkpointer_test(name=f"InboxlogSaver[{kind}]")(factory)
    try:
        report: CapabilityReport = await validate(registered)
    finally:
        stores.close()
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert not failures, failures
    for capability in BASE_CAPABILITIES | CLAIMED:
        result = report.results[capability.value]
        assert result.detected and result.passed and result.tests_passed > 0, capability


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    turns: int


# -- one writer per thread ----------------------------------------------------------


def config(thread: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(n: int, messages: list[str]) -> Any:
    return {
        "v": 4,
        "id": f"1ef-{n:08}",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"messages": list(messages), "count": n},
        "channel_versions": {"messages": str(n), "count": str(n)},
        "versions_seen": {},
        "updated_channels": ["messages", "count"],
    }


def put(saver: InboxlogSaver, thread: str, n: int, messages: list[str], parent: Any = None) -> Any:
    versions = {"messages": str(n), "count": str(n)}
    target = config(thread, parent["configurable"]["checkpoint_id"] if parent else None)
    return saver.put(target, checkpoint(n, messages), {"step": n}, versions)


def test_a_second_saver_reads_a_held_thread_but_may_not_write_it(
    store: inboxlog.Store,
) -> None:
    with InboxlogSaver(store) as first, InboxlogSaver(store) as second:
        done = put(first, "t", 1, ["a"])
        # Reading takes no ownership: the holder keeps the thread.
        tup = second.get_tuple(config("t"))
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == ["a"]
        assert [t.checkpoint["id"] for t in second.list(config("t"))] == ["1ef-00000001"]
        with pytest.raises(inboxlog.LockedError):
            put(second, "t", 2, ["a", "b"], parent=done)
        with pytest.raises(inboxlog.LockedError):
            second.put_writes(done, [("x", 1)], "task")
        put(first, "t", 2, ["a", "c"], parent=done)
        first.release("t")
        put(second, "t", 3, ["a", "c", "d"])
        tup = first.get_tuple(config("t"))
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == ["a", "c", "d"]


def test_a_takeover_fences_the_stuck_saver(postgres: inboxlog.Store) -> None:
    stuck = InboxlogSaver(postgres)
    done = put(stuck, "t", 1, ["a"])
    with InboxlogSaver(postgres, takeover=True) as taker:
        # Reading takes nothing over; the first write does.
        assert taker.get_tuple(config("t")) is not None
        put(taker, "t", 2, ["a", "c"], parent=done)
        with pytest.raises(inboxlog.FencedError):
            put(stuck, "t", 3, ["a", "b"], parent=done)
        with pytest.raises(inboxlog.FencedError):
            stuck.put_writes(config("t", "1ef-00000001"), [("x", 1)], "task")
        _, events = postgres.inspect("t")
        assert [e["data"]["id"] for e in events if e["type"] == CHECKPOINT] == [
            "1ef-00000001",
            "1ef-00000002",
        ]
    stuck.close()


# -- what a put stores ----------------------------------------------------------------


def long(n: int) -> str:
    """A message long enough that a put's own record does not outweigh it."""
    return f"m{n}" + "." * 2000


def test_a_growing_list_is_stored_as_its_new_tail_and_read_back_whole(
    store: inboxlog.Store,
) -> None:
    messages: list[str] = []
    parent = None
    with InboxlogSaver(store) as saver:
        for n in range(1, 6):
            messages = [*messages, long(n)]
            parent = put(saver, "t", n, messages, parent)
        # Not a prefix of the last value: stored whole.
        parent = put(saver, "t", 6, ["other"], parent)
        for n in range(1, 6):
            tup = saver.get_tuple(config("t", f"1ef-{n:08}"))
            assert tup is not None
            assert tup.checkpoint["channel_values"] == {
                "messages": [long(i) for i in range(1, n + 1)],
                "count": n,
            }
        assert saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"] == ["other"]  # type: ignore[union-attr]
        stored = [
            e["data"]["values"]["messages"]
            for e in saver.session("t").events()
            if e["type"] == CHECKPOINT
        ]
    assert "blob" in stored[0] and "base" not in stored[0]
    for n, entry in enumerate(stored[1:5], start=2):
        assert entry["base"] == str(n - 1) and "blob" not in entry
        assert saver._load(entry["tail"]) == [long(n)]
    assert "blob" in stored[5]
    # Another saver (another worker) reads the same history from the log.
    with InboxlogSaver(store) as again:
        tup = again.get_tuple(config("t", "1ef-00000004"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == [long(n) for n in range(1, 5)]
        assert [t.checkpoint["id"] for t in again.list(config("t"), limit=2)] == [
            "1ef-00000006",
            "1ef-00000005",
        ]


def test_a_new_saver_reads_from_the_last_full_put_not_the_whole_thread(
    store: inboxlog.Store,
) -> None:
    # A state of constant size: full puts come every few puts, so the fold that answers
    # the latest checkpoint starts near the end however long the thread is.
    parent = None
    with InboxlogSaver(store) as saver:
        for n in range(1, 301):
            parent = put(saver, "t", n, [long(n)], parent)
            saver.put_writes(parent, [("messages", f"w{n}")], f"task-{n}")
        events = saver.session("t").events()
    puts = [e for e in events if e["type"] == CHECKPOINT]
    fulls = [e["seq"] for e in puts if e["data"].get("full")]
    assert fulls[0] == puts[0]["seq"] and len(fulls) > 50
    assert puts[-1]["data"]["from"] == fulls[-1]
    reader = InboxlogSaver(store)
    thread = reader._read_only("t", whole=False)
    assert thread is not None and thread.start == fulls[-1]
    assert len(thread.checkpoints[""]) < 10  # of 300
    tup = reader.get_tuple(config("t"))
    assert tup is not None and tup.checkpoint["channel_values"] == {
        "messages": [long(300)],
        "count": 300,
    }
    assert tup.pending_writes == [("task-300", "messages", "w300")]
    # An older checkpoint is still there: read from the whole log.
    old = reader.get_tuple(config("t", "1ef-00000005"))
    assert old is not None and old.checkpoint["channel_values"]["messages"] == [long(5)]
    assert old.pending_writes == [("task-5", "messages", "w5")]
    assert len(list(reader.list(config("t")))) == 300
    # The next writer folds from there too, and its puts go on from it.
    with InboxlogSaver(store) as writer:
        put(writer, "t", 301, [long(301)], parent)
        assert writer._threads["t"].start == fulls[-1]
        last = writer.session("t").events()[-1]
        assert last["data"]["from"] >= fulls[-1]
    tup = reader.get_tuple(config("t"))
    assert tup is not None and tup.checkpoint["channel_values"]["count"] == 301


def test_a_log_written_before_puts_recorded_from_is_read_whole(store: inboxlog.Store) -> None:
    with InboxlogSaver(store) as saver:
        parent = None
        for n in range(1, 4):
            parent = put(saver, "t", n, [long(n)], parent)
        events = saver.session("t").events()
    # The same log as an older saver wrote it: no "full", no "from".
    with store.create("old") as old:
        for e in events:
            data = {k: v for k, v in e["data"].items() if k not in ("full", "from")}
            old.append(e["type"], data)
    reader = InboxlogSaver(store)
    thread = reader._read_only("old", whole=False)
    assert thread is not None and thread.start == 0
    tup = reader.get_tuple(config("old"))
    assert tup is not None and tup.checkpoint["channel_values"]["messages"] == [long(3)]


def test_writes_already_stored_are_not_appended_again(store: inboxlog.Store) -> None:
    with InboxlogSaver(store) as saver:
        done = put(saver, "t", 1, ["a"])
        saver.put_writes(done, [("messages", "b"), ("count", 2)], "task-1")
        saver.put_writes(done, [("messages", "b"), ("count", 2)], "task-1")
        saver.put_writes(done, [("__error__", "first")], "task-1")
        saver.put_writes(done, [("__error__", "second")], "task-1")
        kinds = [e["data"]["writes"] for e in saver.session("t").events() if e["type"] == WRITES]
        assert [[w[:2] for w in ws] for ws in kinds] == [
            [[0, "messages"], [1, "count"]],
            [[-1, "__error__"]],
            [[-1, "__error__"]],
        ]
        tup = saver.get_tuple(done)
        assert tup is not None
        assert sorted(tup.pending_writes) == sorted(
            [("task-1", "messages", "b"), ("task-1", "count", 2), ("task-1", "__error__", "second")]
        )


def test_a_thread_that_does_not_exist_reads_as_nothing_and_deletes_as_a_no_op(
    store: inboxlog.Store,
) -> None:
    with InboxlogSaver(store) as saver:
        assert saver.get_tuple(config("nope")) is None
        assert list(saver.list(config("nope"))) == []
        saver.delete_thread("nope")
        assert store.list() == []


def test_the_constructor_refuses_what_is_not_a_store() -> None:
    with pytest.raises(TypeError, match=re.escape("expected an inboxlog.Store, got str")):
        InboxlogSaver("logs")  # type: ignore[arg-type]


def test_an_invalid_thread_id_is_refused(store: inboxlog.Store) -> None:
    with InboxlogSaver(store) as saver, pytest.raises(inboxlog.InvalidInputError):
        put(saver, "../escape", 1, ["a"])


def test_in_memory_and_inboxlog_savers_agree_on_a_graph(store: inboxlog.Store) -> None:
    def work(state: State) -> dict[str, Any]:
        return {"items": [f"item-{state['turns']}"], "turns": state["turns"] + 1}

    builder = StateGraph(State)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_edge("work", END)
    results = []
    with InboxlogSaver(store) as ours:
        for saver in (InMemorySaver(), ours):
            graph = builder.compile(checkpointer=saver)
            cfg = config("g")
            for turn in range(3):
                graph.invoke({"items": [f"in-{turn}"], "turns": turn}, cfg)
            history = [s.values for s in graph.get_state_history(cfg)]
            results.append((graph.get_state(cfg).values, history))
    assert results[0] == results[1]
    assert results[0][0]["items"] == ["in-0", "item-0", "in-1", "item-1", "in-2", "item-2"]

"""`inboxlog.aio`: the Python surface as coroutines, blocking work off the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import m, pg_store, said

import inboxlog
import inboxlog.aio


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(params=["memory", "jsonl", "postgres"])
def astore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[inboxlog.aio.Store]:
    if request.param == "memory":
        yield inboxlog.aio.Store.memory()
    elif request.param == "jsonl":
        yield inboxlog.aio.Store(tmp_path / "logs", durability="none")
    else:
        for store in pg_store():
            yield inboxlog.aio.Store.wrap(store)


async def one_turn(store: inboxlog.aio.Store, id: str) -> list[dict[str, Any]]:
    async with await store.create(id) as s:
        await s.inbox.append("next-turn", m(f"{id}-m"))
        assert await s.inbox.has_pending()
        turn = await s.open_turn()
        proposal = await s.propose_step()
        await s.decide({"kind": "enter", "messages": proposal["messages"]})
        answer = said(proposal["turn"], proposal["step"], f"{id}-a", f"done {id}")
        await s.append("assistant/message", answer, surface_op="append")
        assert not await s.end_step("completed")
        await s.close_turn()
        assert turn == 1
        assert await s.last_seq() == 7
        return await s.events()


async def fused_turn(store: inboxlog.aio.Store, id: str) -> list[dict[str, Any]]:
    """`one_turn` with the fused protocol calls: the same events."""
    async with await store.create(id) as s:
        await s.inbox.append("next-turn", m(f"{id}-m"))
        await s.open_turn()
        boundary = await s.step_boundary()
        assert boundary is not None
        assert boundary["decided"] == {"kind": "step", "turn": 1, "step": 1}
        answer = said(1, 1, f"{id}-a", f"done {id}")
        await s.append("assistant/message", answer, surface_op="append")
        ended = await s.end_step_and_close("completed")
        assert ended == {"kind": "turn-end", "turn": 1, "reason": {"kind": "completed"}}
        return await s.events()


def test_the_fused_protocol_calls_as_coroutines(astore: inboxlog.aio.Store) -> None:
    async def main() -> None:
        separate, fused = await one_turn(astore, "a"), await fused_turn(astore, "a2")
        shape = [(e["type"], str(e["data"]).replace("a2", "a")) for e in fused]
        assert shape == [(e["type"], str(e["data"])) for e in separate]

    run(main())


def test_many_sessions_progress_concurrently_in_one_loop(astore: inboxlog.aio.Store) -> None:
    async def main() -> None:
        logs = await asyncio.gather(*(one_turn(astore, f"s{i}") for i in range(40)))
        assert all(len(log) == 8 for log in logs)
        assert [h["id"] for h in await astore.list()] == sorted(f"s{i}" for i in range(40))
        header, events = await astore.inspect("s7")
        assert header["id"] == "s7" and events == logs[7]
        report = await astore.verify("s7")
        assert report["events"] == 8
        await astore.delete("s7")
        with pytest.raises(inboxlog.NotFoundError):
            await astore.open("s7")

    run(main())


def test_blocking_work_runs_off_the_loop_thread(tmp_path: Path) -> None:
    threads: set[int] = set()

    async def main() -> None:
        loop_thread = threading.get_ident()
        with ThreadPoolExecutor(4) as pool:
            store = inboxlog.aio.Store(tmp_path / "logs", executor=pool)
            s = await store.create("s")
            s.on_event(lambda _e: threads.add(threading.get_ident()))
            s.on_inbox(lambda _n: threads.add(threading.get_ident()))
            await asyncio.gather(*(s.append("x/a", {"i": i}) for i in range(20)))
            await s.inbox.append("next-turn", m("a"))
            await s.close()
        assert threads and loop_thread not in threads

    run(main())


def test_posts_follow_and_the_inbox_as_coroutines(astore: inboxlog.aio.Store) -> None:
    async def main() -> None:
        s = await astore.create("s")
        post = await astore.post("s", "next-step", m("p"))
        assert await s.inbox.receive() == 1
        assert await s.inbox.next_step() == [m("p")]
        assert await s.inbox.replace("p", m("q"))
        assert await s.inbox.splice("next-step", 0, 1) == [m("q")]
        await s.inbox.prepend("next-turn", m("r"))
        # A copy made on the executor, not a live view: reading a view takes the lock.
        turn = await s.inbox.next_turn()
        assert type(turn) is list and turn == [m("r")]
        assert not await s.inbox.remove("nope")
        await s.inbox.clear()
        seen: list[int] = []

        async def follow() -> None:
            async with astore.follow("s") as follower:
                async for event in follower:
                    seen.append(event["seq"])
                    if event["type"] == "x/done":
                        assert follower.next_seq == event["seq"] + 1
                        return

        task = asyncio.create_task(follow())
        await s.append("x/done", {})
        await asyncio.wait_for(task, 10)
        async with astore.follow("s", since=1) as follower:
            batch = await follower.next_batch()
            assert [e["seq"] for e in batch] == list(range(1, len(batch) + 1))
            assert batch[-1]["type"] == "x/done"
            assert await follower.next_batch(timeout=0.01) == []
        events = await s.events()
        assert seen == [e["seq"] for e in events]
        assert events[0]["data"]["post"] == post
        await s.inbox.append("next-turn", m("e1"))
        await s.inbox.append("next-turn", m("e2"))
        removed = await astore.remove_pending("s", "e1")
        replaced = await astore.replace_pending("s", "e2", m("e3"))
        assert await s.inbox.receive() == 2
        assert await s.inbox.next_turn() == [m("e3")]
        edits = await s.events(len(events) + 2)
        assert [e["data"]["post"] for e in edits] == [removed, replaced]
        await s.inbox.clear()
        events = await s.events()
        assert (await s.baseline())["seq"] == events[-1]["seq"]
        await s.flush()
        await s.close()
        s = await astore.open("s")
        await s.open_turn()
        await s.cancel("user")
        await s.open_turn()
        await s.propose_step()
        await s.fail({"message": "boom", "code": "E"})
        child = await astore.fork("s", "c")
        assert child.header["parentSession"] == "s"
        await child.close()
        await s.close()
        follower = astore.follow("s", since=10_000)
        assert await follower.next(timeout=0.01) is None
        await follower.aclose()

    run(main())

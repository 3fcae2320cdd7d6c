"""``inboxlog.integrations._common.call``: the blocking log calls every framework
integration makes from a coroutine, on the module's own worker threads."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path

import pytest

import inboxlog
from inboxlog.integrations import _common
from inboxlog.integrations._common import call

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_the_result_comes_back_from_a_worker_thread() -> None:
    total, thread = asyncio.run(call(lambda a, b: (a + b, threading.get_ident()), 2, 3))
    assert total == 5
    assert thread != threading.get_ident()


def test_an_exception_propagates_as_raised() -> None:
    def fail() -> None:
        raise KeyError("missing")

    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(KeyError, match="missing"):
        asyncio.run(call(fail))
    # A BaseException that is no Exception reaches the caller too.
    with pytest.raises(SystemExit):
        asyncio.run(call(leave))


def test_the_callers_context_is_seen_by_the_call() -> None:
    def change() -> None:
        REQUEST.set("changed")

    async def main() -> None:
        REQUEST.set("r1")
        assert await call(REQUEST.get) == "r1"
        await call(change)
        assert REQUEST.get() == "r1"  # a copy: the caller's context is left as it was

    asyncio.run(main())


def test_a_cancelled_caller_waits_for_the_call_then_is_cancelled(tmp_path: Path) -> None:
    session = inboxlog.Store(tmp_path, durability="none").create("s")
    release = threading.Event()
    seen: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = asyncio.Event()

        def slow_append() -> int:
            loop.call_soon_threadsafe(started.set)
            release.wait()
            return session.append("host/note", {"n": 1})["seq"]

        async def caller() -> None:
            seen.append(await call(slow_append))

        task = asyncio.create_task(caller())
        await started.wait()
        task.cancel()
        for _ in range(5):  # the cancellation is delivered; the caller still waits
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()  # a second cancellation changes nothing either
        await asyncio.sleep(0)
        assert not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The caller was cancelled only once the write was made, and it is in the log.
        assert seen == []
        assert [e["type"] for e in session.events()] == ["host/note"]

    asyncio.run(main())
    session.close()


def test_a_call_cancelled_after_it_finished_still_raises_the_cancellation() -> None:
    finished = threading.Event()

    def quick() -> str:
        finished.set()
        return "done"

    async def main() -> None:
        task = asyncio.create_task(call(quick))
        await asyncio.sleep(0)  # the task has submitted the call and waits for it
        finished.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_concurrent_calls_run_at_once_on_distinct_threads() -> None:
    """Calls of concurrent runs do not queue behind each other: each blocks until all
    have started, which only happens when they run in parallel."""
    n = 4
    barrier = threading.Barrier(n, timeout=30)

    def meet(i: int) -> tuple[int, int]:
        barrier.wait()
        return i, threading.get_ident()

    async def main() -> list[tuple[int, int]]:
        return await asyncio.gather(*(call(meet, i) for i in range(n)))

    results = asyncio.run(main())
    assert [i for i, _ in results] == list(range(n))
    assert len({t for _, t in results}) == n


def test_calls_from_several_event_loops_at_once() -> None:
    """Each loop gets its own outcomes back, on its own thread."""
    outcomes: dict[int, list[int]] = {}
    barrier = threading.Barrier(3, timeout=30)

    def loop_thread(k: int) -> None:
        async def main() -> list[int]:
            barrier.wait()
            return [await call(lambda i=i: k * 100 + i) for i in range(50)]

        outcomes[k] = asyncio.run(main())

    threads = [threading.Thread(target=loop_thread, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes == {k: [k * 100 + i for i in range(50)] for k in range(3)}


def test_sequential_calls_reuse_an_idle_worker() -> None:
    async def main() -> set[int]:
        await call(int)  # a worker exists and is idle after this
        return {await call(threading.get_ident) for _ in range(20)}

    asyncio.run(main())
    started = _common._POOL.threads
    threads = asyncio.run(main())
    assert _common._POOL.threads == started  # no thread was started for them
    assert len(threads) == 1


def test_past_the_thread_limit_calls_wait_for_a_free_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = _common._Pool(2)
    monkeypatch.setattr(_common, "_POOL", pool)
    running, most = 0, 0
    lock = threading.Lock()

    def work(i: int) -> tuple[int, int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        threading.Event().wait(0.01)
        with lock:
            running -= 1
        return i, threading.get_ident()

    async def main() -> list[tuple[int, int]]:
        return await asyncio.gather(*(call(work, i) for i in range(6)))

    results = asyncio.run(main())
    assert [i for i, _ in results] == list(range(6))
    assert pool.threads == 2 and most <= 2
    assert len({t for _, t in results}) == 2

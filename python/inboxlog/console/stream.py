"""Server-Sent Events (SPEC §14.1, §14.4): one store follower per followed session,
fanned out to every client following it, and one watcher of the session list.

A :class:`Feed` follows its session with one :class:`inboxlog.Follower` from the end of
the log it found when its first client came, waiting for events on the feeds' executor
(a burst taken in one call), encodes each event once and hands the bytes to every
client's buffer. A client that joins later, or asks for older events
(``since``, ``Last-Event-ID``), reads the events before the feed's position from the
store itself, in pages, then takes the feed's: every seq is sent once, in order.

A client's buffer is bounded (bytes and events). A client whose buffer overflows while
it takes live events is too slow, or stalled: it is dropped at once (its buffer freed,
its send cancelled) and told so by a last ``event: error`` when it can still take one,
so the feed and the other clients never wait for it. While a client is still reading
older events from the store, an overflow only moves the point where it will switch
to the feed: it drops what it buffered and will read that from the store too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from typing import Any, TypeVar

from starlette.types import Receive, Scope, Send

import inboxlog

from . import api

log = logging.getLogger("inboxlog.console")

_T = TypeVar("_T")

#: The most bytes of encoded events a client's buffer holds before it is dropped.
CLIENT_BUFFER_BYTES = 1 << 20
#: The most events a client's buffer holds before it is dropped.
CLIENT_BUFFER_EVENTS = 4096
#: Seconds between two comment lines on an idle stream (SPEC: at least every 15 s).
HEARTBEAT = 10.0
#: Seconds between two reads of the session list for ``/api/follow``.
LIST_EVERY = 1.0
#: Seconds a dropped client's last words may take before its connection is closed.
LAST_WORDS = 1.0
#: Events one read of older events takes from the store.
CATCH_UP_PAGE = 1000
#: Seconds one wait of a feed's follower lasts on its executor thread: the bound on how
#: long a feed whose last client left keeps that thread.
FOLLOW_SLICE = 0.25
#: The most events a feed takes from its follower in one executor call.
PULL = 512

_RETRY = b"retry: 1000\n\n"
_HEARTBEAT = b": keep-alive\n\n"


def encode(seq: int | None, data: Any, event: str | None = None) -> bytes:
    """One SSE event: ``event:`` when named, ``id:`` when ``seq`` is given, ``data:``
    the compact JSON of ``data`` on one line."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    head += f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {text}\n\n".encode()


class Dropped(Exception):
    """The client was dropped (too slow, or its feed failed); ``last`` is the event
    that says why."""

    def __init__(self, last: bytes) -> None:
        super().__init__(last)
        self.last = last


class Client:
    """One SSE connection's buffer of encoded events, bounded."""

    def __init__(self, catching_up: bool = False) -> None:
        self.queue: deque[tuple[int, bytes]] = deque()
        self.bytes = 0
        self.ready = asyncio.Event()
        self.dropped: bytes | None = None
        #: True while the client reads older events from the store.
        self.catching_up = catching_up
        #: Set when an overflow during catch-up discarded buffered events: the first
        #: seq the buffer holds again (everything before it comes from the store).
        self.resume_at: int | None = None
        self.task: asyncio.Task[None] | None = None

    def offer(self, seq: int, chunk: bytes) -> None:
        """Buffers one event, or drops the client when its buffer is full."""
        if self.dropped is not None:
            return
        if self.bytes + len(chunk) > CLIENT_BUFFER_BYTES or len(self.queue) >= (
            CLIENT_BUFFER_EVENTS
        ):
            if self.catching_up:
                self.queue.clear()
                self.bytes = 0
                self.resume_at = seq
            else:
                self.drop(
                    "too_slow",
                    f"this client fell more than {CLIENT_BUFFER_EVENTS} events or "
                    f"{CLIENT_BUFFER_BYTES} bytes behind and was dropped; reconnect with "
                    "Last-Event-ID to resume",
                )
                return
        self.queue.append((seq, chunk))
        self.bytes += len(chunk)
        self.ready.set()

    def drop(self, kind: str, message: str, extra: dict[str, Any] | None = None) -> None:
        """Ends this client: frees its buffer and cancels its pending send."""
        if self.dropped is not None:
            return
        self.dropped = encode(None, {"kind": kind, "message": message, **(extra or {})}, "error")
        self.queue.clear()
        self.bytes = 0
        self.ready.set()
        if self.task is not None:
            self.task.cancel()

    def take(self) -> list[tuple[int, bytes]]:
        items = list(self.queue)
        self.queue.clear()
        self.bytes = 0
        self.ready.clear()
        return items

    async def wait(self) -> None:
        """Waits for buffered events (or a drop), at most one heartbeat period."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(HEARTBEAT):
                await self.ready.wait()


class Feed:
    """The one follower of one session, fanned out to its clients."""

    def __init__(self, hub: Hub, id: str, start: int) -> None:
        self.hub = hub
        self.id = id
        #: The seq of the next event the feed will hand out.
        self.next_seq = start
        self.clients: set[Client] = set()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(), name=f"feed {self.id}")

    async def run(self) -> None:
        run = self.hub.run_feed
        follower: inboxlog.Follower | None = None
        try:
            follower = await run(self.hub.store.follow, self.id, self.next_seq)
            while True:
                batch = await run(_pull, follower, CLIENT_BUFFER_BYTES // 4)
                for seq, chunk in batch:
                    for client in list(self.clients):
                        client.offer(seq, chunk)
                if batch:
                    self.next_seq = batch[-1][0] + 1
                    self.hub.delivered += len(batch)
                    # The clients' senders run before the next burst is offered.
                    await asyncio.sleep(0)
        except inboxlog.InboxlogError as e:
            log.warning("following session %s stopped: %s: %s", self.id, e.kind, e)
            self.fail(e.kind, str(e), {"code": e.code})
        except Exception:
            log.exception("following session %s failed", self.id)
            self.fail("internal", "the console's follower of this session failed")
        finally:
            if follower is not None:
                with contextlib.suppress(inboxlog.InboxlogError):
                    await asyncio.shield(run(follower.close))

    def fail(self, kind: str, message: str, extra: dict[str, Any] | None = None) -> None:
        """Ends every client's stream with this error; the next client starts anew."""
        for client in list(self.clients):
            client.drop(kind, message, extra)
        self.hub.forget(self)


def _pull(follower: inboxlog.Follower, budget: int) -> list[tuple[int, bytes]]:
    """The events committed now, encoded, waiting up to ``FOLLOW_SLICE`` seconds for
    the first: one executor call for a burst, cut after ``budget`` bytes or ``PULL``
    events so that a client that keeps up never sees more than a fraction of its
    buffer arrive at once."""
    first = follower.next(FOLLOW_SLICE)
    if first is None:
        return []
    batch = [(first["seq"], encode(first["seq"], first))]
    size = len(batch[0][1])
    while size < budget and len(batch) < PULL and (event := follower.next(0)) is not None:
        batch.append((event["seq"], encode(event["seq"], event)))
        size += len(batch[-1][1])
    return batch


class Hub:
    """Every feed of one app, and the watcher of its session list."""

    def __init__(self, store: inboxlog.Store, reader: api.Reader, executor: Executor) -> None:
        self.store = store
        self.reader = reader
        self.executor = executor
        self.feeds: dict[str, Feed] = {}
        self.list_clients: set[Client] = set()
        self.list_task: asyncio.Task[None] | None = None
        #: Events handed out by feeds (counted once per event, not per client).
        self.delivered = 0
        #: Clients dropped for falling behind.
        self.dropped = 0

    async def run_feed(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the feeds' executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    def followers(self) -> int:
        """Store followers running: one per followed session."""
        return len(self.feeds)

    def clients(self) -> int:
        """SSE clients connected to session feeds."""
        return sum(len(f.clients) for f in self.feeds.values())

    def forget(self, feed: Feed) -> None:
        if self.feeds.get(feed.id) is feed:
            del self.feeds[feed.id]

    async def join(self, id: str, run: Callable[..., Awaitable[Any]]) -> tuple[Feed, int]:
        """The feed of session ``id`` (started when none runs) and where this client
        joins it: the events from that seq on come from the feed."""
        feed = self.feeds.get(id)
        if feed is None:
            fold = await run(self.reader.fold, id)
            feed = self.feeds.get(id)
            if feed is None:
                feed = Feed(self, id, fold.next_seq)
                self.feeds[id] = feed
                feed.start()
        return feed, feed.next_seq

    def leave(self, feed: Feed, client: Client) -> None:
        feed.clients.discard(client)
        if not feed.clients and self.feeds.get(feed.id) is feed:
            del self.feeds[feed.id]
            if feed.task is not None:
                feed.task.cancel()

    async def session(
        self,
        id: str,
        since: int,
        run: Callable[..., Awaitable[Any]],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """Serves ``GET /api/sessions/{id}/follow`` from seq ``since``."""
        feed, joined = await self.join(id, run)
        client = Client(catching_up=since < joined)
        feed.clients.add(client)

        async def produce() -> None:
            position = since
            while True:
                if client.catching_up or (
                    client.resume_at is not None and position < client.resume_at
                ):
                    client.catching_up = True
                    end = client.resume_at if client.resume_at is not None else joined
                    while position < end:
                        page = await run(
                            list,
                            api.read(self.store, id, position, min(CATCH_UP_PAGE, end - position)),
                        )
                        if not page:
                            break
                        await send_body(b"".join(encode(e["seq"], e) for e in page))
                        position = page[-1]["seq"] + 1
                        end = client.resume_at if client.resume_at is not None else joined
                    client.catching_up = False
                    client.resume_at = None
                if client.dropped is not None:
                    raise Dropped(client.dropped)
                items = [(seq, chunk) for seq, chunk in client.take() if seq >= position]
                if items:
                    position = items[-1][0] + 1
                    await send_body(b"".join(chunk for _, chunk in items))
                else:
                    await client.wait()
                    if not client.ready.is_set():
                        await send_body(_HEARTBEAT)

        async def send_body(body: bytes) -> None:
            if client.dropped is not None:
                raise Dropped(client.dropped)
            await send({"type": "http.response.body", "body": body, "more_body": True})

        try:
            await _stream(client, produce, scope, receive, send)
        finally:
            self.leave(feed, client)
            if client.dropped is not None:
                self.dropped += 1

    async def sessions(
        self, run: Callable[..., Awaitable[Any]], scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serves ``GET /api/follow``: sessions created and deleted from now on."""
        client = Client()
        if self.list_task is None:
            known = {h["id"] for h in await run(self.store.list)}
            if self.list_task is None:
                self.list_task = asyncio.get_running_loop().create_task(
                    self.watch_list(run, known), name="session list"
                )
        self.list_clients.add(client)

        async def produce() -> None:
            while True:
                if client.dropped is not None:
                    raise Dropped(client.dropped)
                items = client.take()
                if items:
                    await send_body(b"".join(chunk for _, chunk in items))
                else:
                    await client.wait()
                    if not client.ready.is_set():
                        await send_body(_HEARTBEAT)

        async def send_body(body: bytes) -> None:
            if client.dropped is not None:
                raise Dropped(client.dropped)
            await send({"type": "http.response.body", "body": body, "more_body": True})

        try:
            await _stream(client, produce, scope, receive, send)
        finally:
            self.list_clients.discard(client)
            if not self.list_clients and self.list_task is not None:
                self.list_task.cancel()
                self.list_task = None

    async def watch_list(self, run: Callable[..., Awaitable[Any]], known: set[str]) -> None:
        """Reads the session list every ``LIST_EVERY`` seconds while a client listens,
        and tells them the ids that came and went."""
        while True:
            await asyncio.sleep(LIST_EVERY)
            try:
                headers = await run(self.store.list)
            except inboxlog.InboxlogError as e:
                log.warning("reading the session list failed: %s: %s", e.kind, e)
                continue
            now = {h["id"]: h for h in headers}
            changes: Iterable[dict[str, Any]] = [
                *({"op": "created", "id": i, "header": now[i]} for i in sorted(now.keys() - known)),
                *({"op": "deleted", "id": i} for i in sorted(known - now.keys())),
            ]
            for change in changes:
                chunk = encode(None, change)
                for client in list(self.list_clients):
                    client.offer(0, chunk)
            known = set(now)


async def _stream(
    client: Client,
    produce: Callable[[], Awaitable[None]],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """Runs one SSE response: the headers and ``retry:``, then ``produce`` until the
    client goes away or is dropped; a dropped client gets its last ``event: error``
    when it can take it within ``LAST_WORDS`` seconds."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-store"),
                (b"x-accel-buffering", b"no"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _RETRY, "more_body": True})

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    producing = asyncio.ensure_future(produce())
    client.task = producing
    watching = asyncio.ensure_future(gone())
    try:
        await asyncio.wait([producing, watching], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (producing, watching):
            task.cancel()
        results = await asyncio.gather(producing, watching, return_exceptions=True)
    if watching.done() and not watching.cancelled() and watching.exception() is None:
        return  # the client went away
    for result in results:
        if isinstance(result, inboxlog.InboxlogError):
            # A read of older events failed (the session was deleted, the server went
            # away): the client hears why, as when its feed fails.
            client.drop(result.kind, str(result), {"code": result.code})
        elif isinstance(result, BaseException) and not isinstance(
            result, asyncio.CancelledError | Dropped
        ):
            raise result
    if client.dropped is not None:
        log.info("an SSE client was dropped: %s", client.dropped.decode().strip())
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(LAST_WORDS):
                await send(
                    {"type": "http.response.body", "body": client.dropped, "more_body": True}
                )
                await send({"type": "http.response.body", "body": b"", "more_body": False})

"""Server-Sent Events (SPEC §14.1, §14.4): one store follower per followed session,
fanned out to every client following it, and one watcher of the session list.

A :class:`Feed` follows its session with one :class:`inboxlog.Follower` from the end of
the log it found when its first client came, waiting for events on the feeds'
executor (a burst taken in one call and one read, ``Follower.next_batch``), encodes
each event once and hands the bytes to every client's buffer. A client that joins
later, or asks for older events (``since``, ``Last-Event-ID``), reads the events before
the feed's position from the store itself, in pages of at most ``page_bytes``, and
takes the feed's from the seq it caught up at: every seq is sent once, in order.

Every byte held for a client is counted (:class:`~inboxlog.console.limits.Limits`):
its queue and its send in progress, against its own bound and the bound of all
clients together. The feed never waits for a client: one that would pass a bound,
or leaves a send untaken for ``stall`` seconds, falls behind. It is sent one
``event: error`` (kind ``too_large``, naming the bound) when it can take it within
``LAST_WORDS`` seconds, and its connection is closed either way: aborted through the
server's ``inboxlog.abort`` extension (``inboxlog serve`` gives it) when it does not
take the end of its response in time. What it held is released at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from typing import Any, TypeVar

from starlette.types import Receive, Scope, Send

import inboxlog

from . import api
from .limits import TOO_LARGE, Limits

log = logging.getLogger("inboxlog.console")

_T = TypeVar("_T")

#: Seconds between two comment lines on an idle stream (SPEC: at least every 15 s).
HEARTBEAT = 10.0
#: Seconds between two reads of the session list for ``/api/follow``.
LIST_EVERY = 1.0
#: Seconds a dropped client's last words (its ``event: error`` and the end of its
#: response) may take before its connection is aborted.
LAST_WORDS = 1.0
#: Seconds one wait of a feed's follower lasts on its executor thread: the bound on how
#: long a feed whose last client left keeps that thread.
FOLLOW_SLICE = 0.25
#: The ASGI scope extension of a server that can abort a connection: a callable taking
#: the request's scope.
ABORT = "inboxlog.abort"


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
    """The client was dropped (behind its bound, or its feed failed); ``last`` is the
    event that says why."""

    def __init__(self, last: bytes) -> None:
        super().__init__(last)
        self.last = last


class Client:
    """One SSE connection's buffer of encoded events, bounded in bytes."""

    def __init__(self, hub: Hub, catching_up: bool = False, since: int = 0) -> None:
        self.hub = hub
        #: The first seq this client asked for: the feed's earlier events are not its.
        self.since = since
        self.queue: deque[bytes] = deque()
        #: Bytes held for this client: its queue and its send in progress.
        self.bytes = 0
        self.ready = asyncio.Event()
        self.dropped: bytes | None = None
        #: True while the client reads older events from the store: the feed's events
        #: are not queued for it until it has caught up with the feed.
        self.catching_up = catching_up
        self.task: asyncio.Task[None] | None = None
        #: Set when the server shuts down: the stream ends without an error.
        self.ending = False

    def hold(self, size: int) -> bool:
        """Counts ``size`` more bytes held for this client; when that would pass its
        bound or the total (a client holds at least one event), drops it instead."""
        limits = self.hub.limits
        if self.bytes and self.bytes + size > limits.client_bytes:
            self.behind("client_bytes", limits.client_bytes)
        elif self.hub.held and self.hub.held + size > limits.clients_bytes:
            self.behind("clients_bytes", limits.clients_bytes)
        else:
            self.bytes += size
            self.hub.hold(size)
            return True
        return False

    def release(self, size: int) -> None:
        size = min(size, self.bytes)
        self.bytes -= size
        self.hub.hold(-size)

    def offer(self, seq: int, chunk: bytes) -> None:
        """Queues one event of the feed (a client catching up reads it from the store)."""
        if self.dropped is not None or self.catching_up or seq < self.since:
            return
        if self.hold(len(chunk)):
            self.queue.append(chunk)
            self.ready.set()

    async def send(self, send: Send, body: bytes) -> None:
        """Sends ``body`` (already held); a send not taken within ``stall`` seconds
        drops the client."""
        if self.dropped is not None:
            raise Dropped(self.dropped)
        stall = self.hub.limits.stall
        try:
            async with asyncio.timeout(stall):
                await send({"type": "http.response.body", "body": body, "more_body": True})
        except TimeoutError:
            self.task = None  # the send in progress is this task's: nothing to cancel
            self.behind("stall", stall)
            raise Dropped(self.dropped or b"") from None
        finally:
            self.release(len(body))

    def behind(self, bound: str, limit: float) -> None:
        """Drops this client as behind ``bound``."""
        what = "seconds a send stayed untaken" if bound == "stall" else "bytes held for it"
        self.drop(
            "too_large",
            f"this client fell behind the console's {bound} ({limit:g} {what}) and was "
            "disconnected; reconnect with Last-Event-ID to resume",
            {"code": TOO_LARGE, "bound": bound, "limit": limit},
        )

    def drop(self, kind: str, message: str, extra: dict[str, Any] | None = None) -> None:
        """Ends this client: releases what it held and cancels its pending send."""
        if self.dropped is not None:
            return
        body = {"code": None, "kind": kind, "message": message, **(extra or {})}
        if body["code"] is None:
            del body["code"]
        self.dropped = encode(None, body, "error")
        self.queue.clear()
        self.release(self.bytes)
        self.hub.drops[str(body.get("bound", kind))] += 1
        self.ready.set()
        if self.task is not None:
            self.task.cancel()

    def end(self) -> None:
        """Ends this client's stream cleanly (the server shuts down)."""
        self.ending = True
        if self.task is not None:
            self.task.cancel()

    def take(self) -> bytes:
        """The queued events as one body (still held until it is sent)."""
        body = b"".join(self.queue)
        self.queue.clear()
        self.ready.clear()
        return body

    async def wait(self) -> None:
        """Waits for queued events (or a drop), at most one heartbeat period."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(HEARTBEAT):
                await self.ready.wait()

    def leave(self) -> None:
        """Releases what this client still holds (its connection is gone)."""
        self.queue.clear()
        self.release(self.bytes)
        self.task = None


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
                batch = await run(_pull, follower)
                offered = 0
                for seq, chunk in batch:
                    for client in list(self.clients):
                        client.offer(seq, chunk)
                    self.next_seq = seq + 1
                    self.hub.delivered += 1
                    offered += len(chunk)
                    if offered >= self.hub.limits.client_bytes // 4:
                        # A client that keeps up sends a quarter of its buffer before
                        # more is offered: a long burst does not pass its bound.
                        offered = 0
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


def _pull(follower: inboxlog.Follower) -> list[tuple[int, bytes]]:
    """The events committed now, encoded, waiting up to ``FOLLOW_SLICE`` seconds for
    the first: one executor call and one read of the store for a burst."""
    return [(e["seq"], encode(e["seq"], e)) for e in follower.next_batch(FOLLOW_SLICE)]


def _page(store: inboxlog.Store, id: str, since: int, end: int, size: int) -> tuple[bytes, int]:
    """The encoded events of session ``id`` from seq ``since`` (before ``end``) until
    they reach ``size`` bytes, and the seq after them."""
    chunks: list[bytes] = []
    total = 0
    position = since
    for event in api.read(store, id, since, end - since):
        chunk = encode(event["seq"], event)
        chunks.append(chunk)
        total += len(chunk)
        position = event["seq"] + 1
        if total >= size:
            break
    return b"".join(chunks), position


class Hub:
    """Every feed of one app, and the watcher of its session list."""

    def __init__(
        self,
        store: inboxlog.Store,
        reader: api.Reader,
        executor: Executor,
        limits: Limits | None = None,
    ) -> None:
        self.store = store
        self.reader = reader
        self.executor = executor
        self.limits = limits or Limits()
        self.feeds: dict[str, Feed] = {}
        self.list_clients: set[Client] = set()
        self.list_task: asyncio.Task[None] | None = None
        #: Events handed out by feeds (counted once per event, not per client).
        self.delivered = 0
        #: Clients dropped, by the bound they fell behind (or the error kind that
        #: ended their feed).
        self.drops: Counter[str] = Counter()
        #: Bytes held for every client together, and the most ever held.
        self.held = 0
        self.peak = 0

    @property
    def dropped(self) -> int:
        """Clients dropped (behind a bound, or their feed failed)."""
        return sum(self.drops.values())

    def hold(self, size: int) -> None:
        self.held += size
        self.peak = max(self.peak, self.held)

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

    def close(self) -> None:
        """Ends every SSE stream cleanly: what a server calls as it shuts down, since
        an SSE response never ends by itself."""
        for feed in list(self.feeds.values()):
            for client in list(feed.clients):
                client.end()
        for client in list(self.list_clients):
            client.end()

    def forget(self, feed: Feed) -> None:
        if self.feeds.get(feed.id) is feed:
            del self.feeds[feed.id]
            # What the reader keeps of an unfollowed session (its latest events) goes.
            self.executor.submit(self.reader.release, feed.id)

    async def join(self, id: str, run: Callable[..., Awaitable[Any]]) -> Feed:
        """The feed of session ``id``, started when none runs."""
        feed = self.feeds.get(id)
        if feed is None:
            fold = await run(self.reader.fold, id)
            feed = self.feeds.get(id)
            if feed is None:
                feed = Feed(self, id, fold.next_seq)
                self.feeds[id] = feed
                feed.start()
        return feed

    def leave(self, feed: Feed, client: Client) -> None:
        feed.clients.discard(client)
        client.leave()
        if not feed.clients and self.feeds.get(feed.id) is feed:
            self.forget(feed)
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
        feed = await self.join(id, run)
        client = Client(self, catching_up=since < feed.next_seq, since=since)
        feed.clients.add(client)

        async def produce() -> None:
            position = since
            # Older events from the store, a page at a time, until the client has
            # caught up with the feed: from then on (no await between the check and
            # the switch) the feed queues every later event for it.
            while position < feed.next_seq:
                body, position = await run(
                    _page, self.store, id, position, feed.next_seq, self.limits.page_bytes
                )
                if not body:
                    client.drop("internal", f"the events of session {id!r} could not be read")
                if client.dropped is not None or not client.hold(len(body)):
                    raise Dropped(client.dropped or b"")
                await client.send(send, body)
            client.catching_up = False
            while True:
                if client.dropped is not None:
                    raise Dropped(client.dropped)
                body = client.take()
                if body:
                    await client.send(send, body)
                else:
                    await client.wait()
                    if not client.ready.is_set():
                        await _heartbeat(client, send)

        try:
            await _stream(client, produce, scope, receive, send)
        finally:
            self.leave(feed, client)

    async def sessions(
        self, run: Callable[..., Awaitable[Any]], scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serves ``GET /api/follow``: sessions created and deleted from now on."""
        client = Client(self)
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
                body = client.take()
                if body:
                    await client.send(send, body)
                else:
                    await client.wait()
                    if not client.ready.is_set():
                        await _heartbeat(client, send)

        try:
            await _stream(client, produce, scope, receive, send)
        finally:
            self.list_clients.discard(client)
            client.leave()
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


async def _heartbeat(client: Client, send: Send) -> None:
    if not client.hold(len(_HEARTBEAT)):
        raise Dropped(client.dropped or b"")
    await client.send(send, _HEARTBEAT)


async def _stream(
    client: Client,
    produce: Callable[[], Awaitable[None]],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """Runs one SSE response: the headers and ``retry:``, then ``produce`` until the
    client goes away or is dropped; a dropped client gets its last words."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-store"),
                (b"x-accel-buffering", b"no"),
                # One stream per connection: a stream that ends closes it, and nothing
                # the client left untaken outlives its response.
                (b"connection", b"close"),
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
    client.task = None
    if client.ending:
        # The server is shutting down (an SSE response never ends by itself): the
        # stream ends cleanly, and the browser reconnects with Last-Event-ID.
        await _last_words(b"", scope, receive, send)
        return
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
        client_address = scope.get("client")
        where = f"{client_address[0]}:{client_address[1]}" if client_address else "?"
        log.warning(
            "dropped SSE client %s of %s: %s", where, scope.get("path"), _said(client.dropped)
        )
        await _last_words(client.dropped, scope, receive, send)


async def _last_words(body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
    """Ends the response with ``body``; a client that does not take it within
    ``LAST_WORDS`` seconds has its connection aborted (when the server can)."""
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(LAST_WORDS):
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
    abort = scope.get("extensions", {}).get(ABORT)
    if abort is not None:
        abort(scope)
        # The server sees the connection lost before this response's end: it
        # counts as the client gone, not as a response left incomplete.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LAST_WORDS):
                while (await receive())["type"] != "http.disconnect":
                    pass


def _said(event: bytes) -> str:
    """The ``data:`` of an SSE event, for a log line."""
    return event.decode().rpartition("data: ")[2].strip()

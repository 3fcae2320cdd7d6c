"""``InboxlogSaver``: LangGraph's checkpointer over an inboxlog store (see the package doc)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

import inboxlog
from inboxlog.integrations._driver import Turn, answers
from inboxlog.integrations.langgraph import approvals
from inboxlog.types import Event

CHECKPOINT = "langgraph/checkpoint"
"""The event type of one ``put``: ``{"ns", "id", "parent", "checkpoint", "metadata",
"values", "full"?, "from"?}``; ``values`` holds only the channels whose version changed,
or, in a ``full`` put, every channel of the checkpoint. ``from`` is the seq from which
the log's events answer the latest checkpoint of every namespace (see
:class:`InboxlogSaver`)."""
WRITES = "langgraph/writes"
"""The event type of one ``put_writes``: ``{"ns", "checkpoint", "task", "path",
"writes": [[idx, channel, blob], ...]}``, only the writes that were stored."""

_T = TypeVar("_T")
_Events = list[Event]
"""Events as the store returns them (named here: the saver's ``list`` method shadows
the builtin inside its class)."""
_Blob = list[str]  # [serde type, base64 of the serde bytes]


class InboxlogSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer on an inboxlog store (memory, JSONL or PostgreSQL).

    A thread is a session named by its ``thread_id``. The saver opens a thread's session
    the first time it reads or writes it and holds it, as its one writer, until
    :meth:`release` or :meth:`close`: another saver (another worker) opening the thread
    meanwhile gets :class:`inboxlog.LockedError`, and one that was taken over
    (``takeover=True``, PostgreSQL) gets :class:`inboxlog.FencedError` on its next write,
    having written nothing.

    Values are stored with the saver's ``serde`` (LangGraph's serializer by default) as
    ``[type, base64 of its bytes]``, so they read back exactly as written. A list channel
    whose new value extends the value this saver stored last for it (compared item by
    item, as LangGraph's reducers build a new list holding the same items) is stored as
    its new items on top of that version, so a put costs what changed, not the history
    (an item changed in place after it was stored, rather than replaced, is not seen).
    Reading never takes a thread: ``get_tuple`` and ``list`` of a thread this saver does
    not hold read the store without owning the session (another worker may hold it), and
    only ``put`` and ``put_writes`` open it as its writer. So that picking a thread up
    costs its latest state, not its history, a put stores every channel whole (``full``)
    once the changes stored since the last full put outweigh twice the state, and each
    put records in ``from`` the seq of the earliest event that the latest checkpoint of
    any namespace needs (its namespace's last full put, or its own put if earlier). A
    ``get_tuple`` reads the thread's last put and the events from its ``from`` on; one
    that needs an older checkpoint, or a value stored before, reads the whole log.
    """

    def __init__(
        self,
        store: inboxlog.Store,
        *,
        serde: SerializerProtocol | None = None,
        takeover: bool = False,
    ) -> None:
        if not isinstance(store, inboxlog.Store):
            raise TypeError(
                f"InboxlogSaver: expected an inboxlog.Store, got {type(store).__name__}"
            )
        super().__init__(serde=serde)
        self.store = store
        self.takeover = takeover
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.RLock()
        # Approvals (approvals.py): per thread, what parks the run this process
        # interrupted, the run a resume handed on (its turn and the calls it dispatched),
        # and the calls the log answered that the next turn must not answer again.
        self._parks: dict[str, Callable[[], None]] = {}
        self._resumed: dict[str, tuple[Turn, list[str]]] = {}
        self._not_allowed: dict[str, set[str]] = {}
        # Asks and parks, in a turn of its own, what a worker that died before asking
        # left unasked (set by the middleware that runs on this saver).
        self._asker: Callable[[str], None] | None = None

    # -- sessions -----------------------------------------------------------------

    def session(self, thread_id: str) -> inboxlog.Session:
        """The thread's session, opened (created when missing) and held by this saver."""
        with self._lock:
            thread = self._thread(thread_id, create=True)
            assert thread is not None
            return thread.log

    def release(self, thread_id: str) -> None:
        """Closes the thread's session if this saver holds it, so another worker may
        open it."""
        try:
            self._park(thread_id)
        finally:
            with self._lock:
                thread = self._threads.pop(thread_id, None)
            if thread is not None:
                _close(thread.log)

    def close(self) -> None:
        """Releases every session this saver holds (parking the runs stopped for
        approval first)."""
        for thread_id in list(self._parks):
            with contextlib.suppress(inboxlog.InboxlogError):
                self._park(thread_id)
        with self._lock:
            threads, self._threads = list(self._threads.values()), {}
        for thread in threads:
            _close(thread.log)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _thread(self, thread_id: str, *, create: bool) -> _Thread | None:
        """The fold of a thread this saver holds; opens the session on first use
        (creating it only when ``create``). ``None``: no such session."""
        thread = self._threads.get(thread_id)
        if thread is not None:
            if thread.log.closed:  # closed by its user: open it again
                del self._threads[thread_id]
            else:
                return thread
        try:
            log = self.store.open(thread_id, takeover=self.takeover)
        except inboxlog.NotFoundError:
            if not create:
                return None
            try:
                log = self.store.create(thread_id)
            except inboxlog.AlreadyExistsError:  # created meanwhile by another worker
                log = self.store.open(thread_id, takeover=self.takeover)
        thread = _Thread(log)
        thread.start = self._start(thread_id)
        thread.fold_events(log.events(thread.start))
        self._threads[thread_id] = thread
        return thread

    def _start(self, thread_id: str) -> int:
        """Where a fold of the thread's log that answers its latest checkpoints starts:
        the last put's ``from`` (0 for a log written before puts recorded it)."""
        last = self.store.tail(thread_id, 1, [CHECKPOINT])
        return int(last[0]["data"].get("from", 0)) if last else 0

    def _held(self, thread_id: str) -> _Thread | None:
        """The fold of a thread this saver holds open, if it does."""
        thread = self._threads.get(thread_id)
        if thread is not None and thread.log.closed:  # closed by its user
            del self._threads[thread_id]
            return None
        return thread

    def _whole(self, thread_id: str, thread: _Thread | None) -> _Thread | None:
        """``thread`` when its fold holds the whole log, else a fold of the whole log (of
        the session this saver holds, or read from the store without owning it)."""
        if thread is not None and thread.start == 0:
            return thread
        if thread is not None and thread.log is not None:
            whole = _Thread(None)
            whole.fold_events(thread.log.events())
            return whole
        return self._read_only(thread_id, whole=True)

    # -- the checkpointer contract --------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the latest of
        its ``thread_id`` and ``checkpoint_ns``), with its pending writes."""
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        wanted = get_checkpoint_id(config)
        found = self._get(thread_id, ns, wanted)
        if found is not None and not ns and not wanted and RUNTIME in configurable:
            # A run starts on the thread: answer the approvals its checkpoint waits on.
            self._park(thread_id)
            if self._answer_approvals(thread_id, found):
                found = self._get(thread_id, ns, wanted)
        return found

    def _get(self, thread_id: str, ns: str, wanted: str | None) -> CheckpointTuple | None:
        with self._lock:
            thread = self._held(thread_id) or self._read_only(thread_id, whole=False)
            if thread is None:
                return None
            try:
                return self._answer(thread, thread_id, ns, wanted)
            except _Incomplete:
                whole = self._whole(thread_id, thread)
                return None if whole is None else self._answer(whole, thread_id, ns, wanted)

    # -- approvals (approvals.py) -----------------------------------------------------

    def _park(self, thread_id: str) -> None:
        """Parks the run this process stopped for approval on the thread, if any."""
        with self._lock:
            park = self._parks.pop(thread_id, None)
        if park is not None:
            park()

    def _answer_approvals(self, thread_id: str, found: CheckpointTuple) -> bool:
        """Writes the answers of the middleware's interrupts that ``found`` waits on, from
        the log's decisions: resuming the parked turn (``ApprovalsPendingError``,
        nothing written, while any is pending), or, its approvals decided without a
        resume (cancelled), as they were decided. Returns whether it wrote any."""
        messages = found.checkpoint["channel_values"].get("messages", [])
        interrupts = approvals.pending(found.pending_writes or [], messages)
        if not interrupts:
            return False
        with self._lock:
            thread = self._thread(thread_id, create=False)  # as the thread's writer
        if thread is None:
            return False
        resumed = approvals.resume(thread.log)
        if resumed is not None:
            turn, interrupts, replies = resumed
            calls = sorted({c["callId"] for i in interrupts for c in i["calls"]})
            self._resumed[thread_id] = (turn, calls)
        else:
            events = thread.log.events()
            outcomes = approvals.decided_calls(events)
            calls = [c["callId"] for i in interrupts for c in i["calls"]]
            for call, _ in answers(events).items():  # answered by repair: never run
                if call in calls and call not in outcomes:
                    outcomes[call] = "unavailable"
            if not all(c in outcomes for c in calls):
                # Never asked (the worker died first): asked now, and the run waits.
                if self._asker is None:
                    return False
                self._asker(thread_id)
                approvals.resume(thread.log)  # ApprovalsPendingError: nothing decided yet
                return False
            replies = {i["task"]: approvals.answer(i, outcomes) for i in interrupts}
            refused = {c for c in calls if outcomes[c] != "allowed-once"}
            self._not_allowed[thread_id] = refused
        for task, value in replies.items():
            self.put_writes(found.config, [(approvals.RESUME, [value])], task)
        return True

    def _answer(
        self, thread: _Thread, thread_id: str, ns: str, wanted: str | None
    ) -> CheckpointTuple | None:
        """The checkpoint ``wanted`` (the latest when ``None``) of ``ns`` in ``thread``'s
        fold; raises ``_Incomplete`` when a fold of part of the log may lack it."""
        saved = thread.checkpoints.get(ns, {})
        checkpoint_id = wanted or max(saved, default=None)
        if checkpoint_id is None or checkpoint_id not in saved:
            if thread.start > 0:
                raise _Incomplete
            return None
        return self._tuple(thread, thread_id, ns, checkpoint_id)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace and id, when
        given), or of every thread in the store; those whose metadata holds every
        ``filter`` item, older than ``before``, at most ``limit``."""
        if config is not None:
            thread_ids = [config["configurable"]["thread_id"]]
            ns_wanted = config["configurable"].get("checkpoint_ns")
            id_wanted = get_checkpoint_id(config)
        else:
            thread_ids = [header["id"] for header in self.store.list()]
            ns_wanted = id_wanted = None
        before_id = get_checkpoint_id(before) if before else None
        found: list[CheckpointTuple] = []
        for thread_id in thread_ids:
            with self._lock:
                thread = self._whole(thread_id, self._held(thread_id))
                if thread is None:
                    continue
                for ns, saved in thread.checkpoints.items():
                    if ns_wanted is not None and ns != ns_wanted:
                        continue
                    for checkpoint_id in sorted(saved, reverse=True):
                        if id_wanted and checkpoint_id != id_wanted:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        if filter:
                            metadata = self._load(saved[checkpoint_id].metadata)
                            if not all(metadata.get(k) == v for k, v in filter.items()):
                                continue
                        if limit is not None and len(found) >= limit:
                            break
                        found.append(self._tuple(thread, thread_id, ns, checkpoint_id))
        yield from found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Appends one ``langgraph/checkpoint`` event: the checkpoint without its channel
        values, its metadata, and the values of the channels in ``new_versions`` only. A
        list channel that grew by appending (a message list) is stored as its new tail
        on top of the version before it."""
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        rest: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = rest.pop("channel_values")
        with self._lock:
            thread = self._thread(thread_id, create=True)
            assert thread is not None
            full = thread.due_full(ns, checkpoint["channel_versions"])
            versions = {**checkpoint["channel_versions"], **new_versions} if full else new_versions
            stored: dict[str, dict[str, Any]] = {}
            grown: dict[str, tuple[Any, tuple[Any, ...]]] = {}
            for channel, version in versions.items():
                if channel not in values:
                    stored[channel] = {"v": version, "empty": True}
                    continue
                value = values[channel]
                entry: dict[str, Any] = {"v": version}
                last = thread.last_lists.get((ns, channel))
                if (
                    not full
                    and type(value) is list
                    and last is not None
                    and (ns, channel, last[0]) in thread.blobs
                    and len(value) >= len(last[1])
                    and tuple(value[: len(last[1])]) == last[1]
                ):
                    entry["base"] = last[0]
                    entry["tail"] = self._dump(value[len(last[1]) :])
                else:
                    entry["blob"] = self._dump(value)
                if type(value) is list:
                    grown[channel] = (version, tuple(value))
                stored[channel] = entry
            data = {
                "ns": ns,
                "id": checkpoint["id"],
                "parent": configurable.get("checkpoint_id"),
                "checkpoint": self._dump(rest),
                "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
                "values": stored,
            }
            if full:
                data["full"] = True
            # This put's seq, or an earlier one if another event comes first: reading
            # from an earlier seq only reads more.
            last_seq = thread.log.last_seq
            data["from"] = thread.start_after(ns, checkpoint["id"], full, last_seq)
            # Writes a task stored before this put (LangGraph puts in the background)
            # are the checkpoint's too: a fold from ``from`` must hold them.
            early = thread.early.pop((ns, checkpoint["id"]), None)
            if early is not None:
                data["from"] = min(data["from"], early)
            event = thread.log.append(CHECKPOINT, data)
            thread.apply(CHECKPOINT, data, event["seq"])
            for channel, last_list in grown.items():
                thread.last_lists[(ns, channel)] = last_list
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Appends one ``langgraph/writes`` event with the task's writes not stored yet
        (a special write, e.g. an error or interrupt, replaces the one before it)."""
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        with self._lock:
            thread = self._thread(thread_id, create=True)
            assert thread is not None
            held = thread.writes.get((ns, checkpoint_id), {})
            new: list[list[Any]] = []
            for idx, (channel, value) in enumerate(writes):
                key = WRITES_IDX_MAP.get(channel, idx)
                if key >= 0 and (task_id, key) in held:
                    continue
                new.append([key, channel, self._dump(value)])
            if not new:
                return
            data = {
                "ns": ns,
                "checkpoint": checkpoint_id,
                "task": task_id,
                "path": task_path,
                "writes": new,
            }
            event = thread.log.append(WRITES, data)
            thread.apply(WRITES, data, event["seq"])

    def delete_thread(self, thread_id: str) -> None:
        """Deletes the thread's session for good (``store.delete``); a thread that does
        not exist is no error. Refused with ``LockedError`` while another writer holds it."""
        self.release(thread_id)
        with contextlib.suppress(inboxlog.NotFoundError):
            self.store.delete(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint and write of one thread onto another, as one append
        per stored event on the target."""
        with self._lock:
            source = self._held(source_thread_id)
            if source is not None:
                read = source.log.events()
            else:
                try:
                    read = self.store.read(source_thread_id)
                except inboxlog.NotFoundError:
                    return
            events = [(e["type"], e["data"]) for e in read if e["type"] in (CHECKPOINT, WRITES)]
            if not events:
                return
            target = self._thread(target_thread_id, create=True)
            assert target is not None
            for type, data in events:
                if type == CHECKPOINT:
                    # The source's seqs mean nothing here: a fold of the target reads
                    # from its start until the target's own next full put.
                    data = {k: v for k, v in data.items() if k not in ("full", "from")}
                event = target.log.append(type, data)
                target.apply(type, data, event["seq"])

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions are zero-padded counters (strings that sort as numbers)."""
        if current is None:
            number = 0
        elif isinstance(current, str):
            number = int(current.split(".", 1)[0])
        else:
            number = int(current)
        return f"{number + 1:032}"

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple`, in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, read in a worker thread."""

        def read() -> list[CheckpointTuple]:
            return [*self.list(config, filter=filter, before=before, limit=limit)]

        for item in await asyncio.to_thread(read):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put`, in a worker thread."""
        return await _call(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes`, in a worker thread."""
        await _call(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread`, in a worker thread."""
        await _call(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread`, in a worker thread."""
        await _call(self.copy_thread, source_thread_id, target_thread_id)

    # -- internals -------------------------------------------------------------------

    def _read_only(self, thread_id: str, *, whole: bool) -> _Thread | None:
        """A thread read from the store without owning it: the whole log, or (not
        ``whole``) the events from the last put's ``from`` on. ``None`` when it holds no
        checkpoint."""
        try:
            start, events = (0, self.store.read(thread_id)) if whole else self._recent(thread_id)
        except inboxlog.NotFoundError:
            return None
        if not any(e["type"] == CHECKPOINT for e in events):
            return None
        thread = _Thread(None)
        thread.start = start
        thread.fold_events(events)
        return thread

    def _recent(self, thread_id: str) -> tuple[int, _Events]:
        """The last put's ``from`` and the events from it on: one read of the last
        ``RECENT`` events when they reach back that far (the common case), else a
        second read from ``from``."""
        events = self.store.tail(thread_id, RECENT)
        last = next((e for e in reversed(events) if e["type"] == CHECKPOINT), None)
        if last is None and len(events) == RECENT:  # the last put is further back
            start = self._start(thread_id)
        else:
            start = 0 if last is None else int(last["data"].get("from", 0))
        if not events or events[0]["seq"] <= start:
            return start, [e for e in events if e["seq"] >= start]
        return start, self.store.read(thread_id, start)

    def _dump(self, value: Any) -> _Blob:
        kind, raw = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(raw).decode("ascii")]

    def _load(self, blob: Sequence[str]) -> Any:
        return self.serde.loads_typed((blob[0], base64.b64decode(blob[1])))

    def _value(self, thread: _Thread, ns: str, channel: str, version: Any) -> Any:
        """The channel's value at ``version``: its blob, or its base's value plus tail."""
        tails: list[Any] = []
        entry = thread.blobs.get((ns, channel, version))
        while entry is not None and "base" in entry:
            tails.append(entry["tail"])
            entry = thread.blobs.get((ns, channel, entry["base"]))
        if entry is None and thread.start > 0:
            raise _Incomplete  # stored before the fold's start
        if entry is None or "blob" not in entry:
            return _MISSING
        value = self._load(entry["blob"])
        for tail in reversed(tails):
            value = value + self._load(tail)
        return value

    def _tuple(
        self, thread: _Thread, thread_id: str, ns: str, checkpoint_id: str
    ) -> CheckpointTuple:
        saved = thread.checkpoints[ns][checkpoint_id]
        checkpoint: Checkpoint = self._load(saved.checkpoint)
        values = {}
        for channel, version in checkpoint["channel_versions"].items():
            value = self._value(thread, ns, channel, version)
            if value is not _MISSING:
                values[channel] = value
        stored = thread.writes.get((ns, checkpoint_id), {})
        ordered = sorted(stored.items(), key=lambda kv: writes_sort_key(kv[1][3], *kv[0]))
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self._load(saved.metadata),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": saved.parent,
                    }
                }
                if saved.parent
                else None
            ),
            pending_writes=[
                (task, channel, self._load(blob)) for _, (task, channel, blob, _) in ordered
            ],
        )


_MISSING = object()

#: The configurable key LangGraph sets for a run (a ``get_tuple`` without it is a read,
#: ``get_state`` say, which answers nothing).
RUNTIME = "__pregel_runtime"

#: A read that picks a thread up first reads this many of its last events, which
#: usually reach back to where its latest checkpoints start.
RECENT = 16

#: A full put is due once the bytes stored since the last one exceed this many times
#: the checkpoint's state.
FULL_AFTER = 2


class _Incomplete(Exception):
    """A fold of part of a log lacks what an answer needs: read the whole log."""


class _Saved:
    """One stored checkpoint: its blobs and its parent's id."""

    __slots__ = ("checkpoint", "metadata", "parent")

    def __init__(self, checkpoint: _Blob, metadata: _Blob, parent: str | None) -> None:
        self.checkpoint = checkpoint
        self.metadata = metadata
        self.parent = parent


class _Thread:
    """The checkpoints, channel values and writes a thread's log holds, kept up to date
    by this saver, its one writer (the fold of its ``langgraph/*`` events)."""

    def __init__(self, log: inboxlog.Session | None) -> None:
        self.log: inboxlog.Session = log  # type: ignore[assignment]
        #: The seq of the first event folded (0: the whole log).
        self.start = 0
        self.checkpoints: dict[str, dict[str, _Saved]] = {}
        self.blobs: dict[tuple[str, str, Any], dict[str, Any]] = {}
        self.writes: dict[tuple[str, str], dict[tuple[str, int], tuple[str, str, _Blob, str]]] = {}
        # The last list value this saver put per (ns, channel): (version, its items).
        self.last_lists: dict[tuple[str, str], tuple[Any, tuple[Any, ...]]] = {}
        # Per namespace: the seq of its last full put, the bytes of values stored since,
        # and its newest checkpoint id with the seq of its put.
        self.full_seq: dict[str, int] = {}
        self.since_full: dict[str, int] = {}
        self.newest: dict[str, tuple[str, int]] = {}
        # The bytes of each stored value: (ns, channel, version) -> its blob, or its
        # base's and its tail's.
        self.sizes: dict[tuple[str, str, Any], int] = {}
        self.latest_size: dict[tuple[str, str], int] = {}
        # The seq of the first writes stored for a checkpoint not put yet.
        self.early: dict[tuple[str, str], int] = {}

    def fold_events(self, events: Sequence[Mapping[str, Any]]) -> None:
        for event in events:
            self.apply(event["type"], event["data"], event["seq"])

    def due_full(self, ns: str, versions: Mapping[str, Any]) -> bool:
        """Whether the next put of ``ns`` (a checkpoint of channel ``versions``) stores
        every channel: its first since this fold began, or once what was stored since
        the last full one (values, checkpoints, metadata, writes) outweighs
        ``FULL_AFTER`` times the state. A fold from the last full put on then reads at
        most ``FULL_AFTER + 1`` times the state, and full puts add at most half of
        what the others store."""
        if ns not in self.full_seq:
            return True
        # A new version's size is not known yet: its channel's last one stands for it.
        state = sum(
            self.sizes.get((ns, c, v), self.latest_size.get((ns, c), 0))
            for c, v in versions.items()
        )
        return self.since_full.get(ns, 0) > FULL_AFTER * state

    def start_after(self, ns: str, checkpoint_id: str, full: bool, last_seq: int | None) -> int:
        """The ``from`` of a put of ``checkpoint_id`` to ``ns`` whose seq is at least
        ``last_seq + 1``: the least, over namespaces, of the seq of the last full put and
        of the put of the newest checkpoint (0 while a namespace has no full put)."""
        seq = 0 if last_seq is None else last_seq + 1
        full_seq = {**self.full_seq, **({ns: seq} if full else {})}
        newest = dict(self.newest)
        if ns not in newest or checkpoint_id >= newest[ns][0]:
            newest[ns] = (checkpoint_id, seq)
        if any(n not in full_seq for n in newest):
            return 0
        return min(min(full_seq[n], newest[n][1]) for n in newest)

    def apply(self, type: str, data: Any, seq: int) -> None:
        if type == CHECKPOINT:
            ns = data["ns"]
            stored = 0
            for channel, entry in data["values"].items():
                key = (ns, channel, entry["v"])
                self.blobs[key] = entry
                if "blob" in entry:
                    self.sizes[key] = len(entry["blob"][1])
                    stored += self.sizes[key]
                elif "tail" in entry:
                    base = self.sizes.get((ns, channel, entry["base"]), 0)
                    self.sizes[key] = base + len(entry["tail"][1])
                    stored += len(entry["tail"][1])
                if key in self.sizes:
                    self.latest_size[(ns, channel)] = self.sizes[key]
            if data.get("full"):
                self.full_seq[ns], self.since_full[ns] = seq, 0
            else:
                stored += len(data["checkpoint"][1]) + len(data["metadata"][1])
                self.since_full[ns] = self.since_full.get(ns, 0) + stored
            if ns not in self.newest or data["id"] >= self.newest[ns][0]:
                self.newest[ns] = (data["id"], seq)
            saved = _Saved(data["checkpoint"], data["metadata"], data["parent"])
            self.checkpoints.setdefault(ns, {})[data["id"]] = saved
        elif type == WRITES:
            ns = data["ns"]
            stored = sum(len(blob[1]) for _, _, blob in data["writes"])
            self.since_full[ns] = self.since_full.get(ns, 0) + stored
            if data["checkpoint"] not in self.checkpoints.get(ns, {}):
                self.early.setdefault((ns, data["checkpoint"]), seq)
            held = self.writes.setdefault((ns, data["checkpoint"]), {})
            task, path = data["task"], data["path"]
            for idx, channel, blob in data["writes"]:
                held[(task, idx)] = (task, channel, blob, path)


def _close(log: inboxlog.Session) -> None:
    """Closes a held session; one taken over by another writer has nothing left to
    release."""
    with contextlib.suppress(inboxlog.FencedError):
        log.close()


async def _call(fn: Callable[..., _T], *args: Any) -> _T:
    return await asyncio.to_thread(fn, *args)

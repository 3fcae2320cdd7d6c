"""The wheel against a pure-Python inbox with the same persistence, on the same work.

    .venv/bin/python python/bench/bench_inbox.py [--quick]

Both sides write one JSONL line per event with one ``write`` call and no fsync (the
store's ``durability="none"``). The pure-Python inbox is what a careful host would
write by hand: two lists, an id index for duplicates, JavaScript splice arithmetic,
``json.dumps`` records; finding a message by id scans its list (O(n)), as the
reference implementation does.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import inboxlog

Message = dict[str, Any]


class PyLog:
    """Appends compact JSON events to `<root>/<id>.jsonl`, one write per call."""

    def __init__(self, root: str, id: str) -> None:
        self.fd = os.open(os.path.join(root, f"{id}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self.seq = 0
        header = {"format": "inboxlog", "version": 1, "id": id, "createdAt": now()}
        os.write(self.fd, (dumps(header) + "\n").encode())

    def append(self, records: list[tuple[str, Any]]) -> None:
        lines = []
        t = now()
        for ty, data in records:
            lines.append(dumps({"type": ty, "seq": self.seq, "time": t, "data": data}))
            self.seq += 1
        os.write(self.fd, ("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


def now() -> int:
    return time.time_ns() // 1_000_000


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def normalize(length: int, start: float, delete: float) -> tuple[int, int]:
    s = 0 if math.isnan(start) else start
    s = s if math.isinf(s) else math.trunc(s)
    a = max(length + s, 0) if s < 0 else min(s, length)
    d = 0 if math.isnan(delete) else delete
    d = d if math.isinf(d) else math.trunc(d)
    return int(a), int(min(max(d, 0), length - a))


class PyInbox:
    """The inbox of ARCHITECTURE.md#inbox in plain Python, persisted through a PyLog."""

    def __init__(self, log: PyLog) -> None:
        self.log = log
        self.lists: dict[str, list[Message]] = {"next-turn": [], "next-step": []}
        self.where: dict[str, str] = {}
        self.turn = 0

    def _plan(
        self, target: str, start: float, delete: float, inserted: list[Message], discard: bool
    ) -> tuple[dict[str, Any], list[Message]] | None:
        lst = self.lists[target]
        a, d = normalize(len(lst), start, delete)
        if d == 0 and not inserted:
            return None
        removed = lst[a : a + d]
        leaving = {m["id"] for m in removed}
        seen: set[str] = set()
        for m in inserted:
            id = m.get("id")
            if not isinstance(id, str) or not id:
                raise ValueError("message needs a non-empty string id")
            if id in seen or (id in self.where and id not in leaving):
                raise ValueError(f"message {id!r} is already pending")
            seen.add(id)
        record: dict[str, Any] = {"target": target, "start": a}
        if d:
            record["removedCount"] = d
        record["inserted"] = inserted
        if discard and d:
            record["outcome"] = "canceled"
        return record, removed

    def _apply(self, record: dict[str, Any], removed: list[Message]) -> None:
        target, a = record["target"], record["start"]
        lst = self.lists[target]
        lst[a : a + len(removed)] = record["inserted"]
        for m in removed:
            del self.where[m["id"]]
        for m in record["inserted"]:
            self.where[m["id"]] = target

    def splice(
        self, target: str, start: float, delete: float, inserted: list[Message]
    ) -> list[Message]:
        planned = self._plan(target, start, delete, inserted, True)
        if planned is None:
            return []
        record, removed = planned
        self.log.append([("agent/inbox/spliced", record)])
        self._apply(record, removed)
        return removed

    def append(self, target: str, m: Message) -> None:
        self.splice(target, len(self.lists[target]), 0, [m])

    def remove(self, id: str) -> bool:
        target = self.where.get(id)
        if target is None:
            return False
        pos = next(i for i, m in enumerate(self.lists[target]) if m["id"] == id)
        self.splice(target, pos, 1, [])
        return True

    def claim_turn(self) -> list[Message]:
        """open_turn + propose_step (claim) + a reject decision: three durable calls."""
        self.turn += 1
        self.log.append([("turn/start", {"turn": self.turn})])
        batch: list[tuple[str, Any]] = []
        plans = []
        for target, count in (("next-step", math.inf), ("next-turn", 1)):
            planned = self._plan(target, 0, count, [], False)
            if planned is not None:
                batch.append(("agent/inbox/spliced", planned[0]))
                plans.append(planned)
        self.log.append(batch)
        claimed: list[Message] = []
        for record, removed in plans:
            self._apply(record, removed)
            claimed.extend(removed)
        self.log.append([("turn/end", {"turn": self.turn, "reason": {"kind": "blocked"}})])
        return claimed


def best(fn: Callable[[], None], ops: int, repeats: int = 3) -> float:
    """Best time per op in microseconds over `repeats` runs of `fn` (doing `ops` ops)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / ops * 1e6)
    return min(times)


def filler(n: int, prefix: str) -> list[Message]:
    return [{"id": f"{prefix}{i}", "role": "user", "content": "queued work"} for i in range(n)]


def append_remove(root: str, queue: int, ops: int, pure_ops: int) -> tuple[float, float]:
    msg = {"id": "x", "role": "user", "content": "hello"}
    store = inboxlog.Store(os.path.join(root, "wheel"), durability="none")
    s = store.create(f"ar{queue}")
    s.inbox.splice("next-turn", 0, 0, filler(queue, "f"))

    def wheel() -> None:
        for _ in range(ops):
            s.inbox.append("next-turn", msg)
            s.inbox.remove("x")

    w = best(wheel, ops)
    s.close()

    os.makedirs(os.path.join(root, "py"), exist_ok=True)
    log = PyLog(os.path.join(root, "py"), f"ar{queue}")
    inbox = PyInbox(log)
    inbox.splice("next-turn", 0, 0, filler(queue, "f"))

    def pure() -> None:
        for _ in range(pure_ops):
            inbox.append("next-turn", msg)
            inbox.remove("x")

    p = best(pure, pure_ops)
    log.close()
    return w, p


def append_claim(root: str, ops: int) -> tuple[float, float]:
    store = inboxlog.Store(os.path.join(root, "wheel"), durability="none")
    s = store.create("ac")
    n = 0

    def wheel() -> None:
        nonlocal n
        for _ in range(ops):
            n += 1
            s.inbox.append("next-turn", {"id": f"w{n}", "role": "user", "content": "hello"})
            s.open_turn()
            s.propose_step()
            s.decide({"kind": "reject"})

    w = best(wheel, ops)
    s.close()

    os.makedirs(os.path.join(root, "py"), exist_ok=True)
    log = PyLog(os.path.join(root, "py"), "ac")
    inbox = PyInbox(log)

    def pure() -> None:
        nonlocal n
        for _ in range(ops):
            n += 1
            inbox.append("next-turn", {"id": f"p{n}", "role": "user", "content": "hello"})
            inbox.claim_turn()

    p = best(pure, ops)
    log.close()
    return w, p


def write_big_log(path: str, events: int) -> None:
    """A valid log of `events` events: host events with inbox traffic between them."""
    with open(path, "w") as f:
        f.write(dumps({"format": "inboxlog", "version": 1, "id": "big", "createdAt": 1}) + "\n")
        lines = []
        for seq in range(events):
            k = seq % 4
            if k == 0:
                data: Any = {
                    "target": "next-turn",
                    "start": 0,
                    "inserted": [{"id": f"m{seq}", "role": "user", "content": "q"}],
                }
                ty = "agent/inbox/spliced"
            elif k == 1:
                ty, data = "assistant/chunk", {"text": "some streamed model output", "n": seq}
            elif k == 2:
                data = {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}
                ty = "agent/inbox/spliced"
            else:
                ty, data = "tool/call", {"name": "search", "args": {"q": "x", "k": 3}}
            lines.append(dumps({"type": ty, "seq": seq, "time": 1_700_000_000_000, "data": data}))
            if len(lines) == 10_000:
                f.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            f.write("\n".join(lines) + "\n")


def open_big(root: str, events: int) -> tuple[float, float]:
    big = os.path.join(root, "big")
    os.makedirs(big)
    path = os.path.join(big, "big.jsonl")
    write_big_log(path, events)
    store = inboxlog.Store(big, durability="none")

    def wheel() -> None:
        s = store.open("big")
        assert s.last_seq == events - 1
        s.close()

    def pure() -> None:
        with open(path, encoding="utf-8") as f:
            parsed = [json.loads(line) for line in f]
        assert len(parsed) == events + 1

    return best(wheel, 1) / 1e6, best(pure, 1) / 1e6


CONTENT = (
    'Please summarise the attached report and list three follow-up questions, \\"briefly\\",'
    " in English."
)


def write_splice_log(path: str, events: int, pending: int = 100) -> None:
    """A valid log in which every event is a splice on next-turn: `pending` appends,
    then a removal (by position, as removing by id writes it) and an append in turn;
    ~150-byte messages (the mix of `cargo bench --bench jsonl -- open_splices`)."""
    rng = 0x2545F4914F6CDD1D
    n, next_id = 0, 0
    with open(path, "w") as f:
        f.write(dumps({"format": "inboxlog", "version": 1, "id": "splices", "createdAt": 1}) + "\n")
        lines = []
        for seq in range(events):
            if n < pending or seq % 2 == 1:
                m = {"id": f"msg-{next_id:08}", "role": "user", "content": CONTENT}
                data: Any = {"target": "next-turn", "start": n, "inserted": [m]}
                next_id += 1
                n += 1
            else:
                rng = (rng * 6364136223846793005 + 1) % (1 << 64)
                data = {
                    "target": "next-turn",
                    "start": (rng >> 33) % n,
                    "removedCount": 1,
                    "inserted": [],
                }
                n -= 1
            event = {
                "type": "agent/inbox/spliced",
                "seq": seq,
                "time": 1_700_000_000_000 + seq,
                "data": data,
            }
            lines.append(dumps(event))
            if len(lines) == 10_000:
                f.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            f.write("\n".join(lines) + "\n")


def open_splices(root: str, events: int) -> tuple[float, float]:
    """Opening a log of splices only (replay into the inbox) vs json.loads of its lines."""
    dir = os.path.join(root, "splices")
    os.makedirs(dir)
    path = os.path.join(dir, "splices.jsonl")
    write_splice_log(path, events)
    store = inboxlog.Store(dir, durability="none")

    def wheel() -> None:
        s = store.open("splices")
        assert len(s.inbox.next_turn) == 100
        s.close()

    def pure() -> None:
        with open(path, encoding="utf-8") as f:
            parsed = [json.loads(line) for line in f]
        assert len(parsed) == events + 1

    return best(wheel, 1) / 1e6, best(pure, 1) / 1e6


def queue_len(root: str, pending: int, calls: int) -> float:
    """µs per `len(session.inbox.next_turn)` with `pending` messages waiting."""
    store = inboxlog.Store(os.path.join(root, "len"), durability="none")
    s = store.create(f"len{pending}")
    s.inbox.splice("next-turn", 0, 0, filler(pending, "f"))

    def run() -> None:
        for _ in range(calls):
            len(s.inbox.next_turn)

    t = best(run, calls)
    s.close()
    return t


def main() -> None:
    quick = "--quick" in sys.argv
    ops = 2_000 if quick else 20_000
    events = 100_000 if quick else 1_000_000
    root = tempfile.mkdtemp(prefix="inboxlog-bench-")
    try:
        rows = []
        for queue in (10, 100_000):
            # The pure-Python remove scans the queue: fewer ops keep its run short.
            pure_ops = ops if queue < 1000 else ops // 40
            w, p = append_remove(os.path.join(root, f"q{queue}"), queue, ops, pure_ops)
            rows.append((f"append+remove, queue {queue:,}", w, p, "µs/op"))
        w, p = append_claim(os.path.join(root, "claim"), ops // 4)
        rows.append(("append+claim (4 calls, 5 events)", w, p, "µs/op"))
        w, p = open_big(root, events)
        rows.append((f"open a {events:,}-event log", w, p, "s"))
        w, p = open_splices(root, events)
        rows.append((f"open {events:,} splices (replay)", w, p, "s"))
        lens = [queue_len(root, pending, ops) for pending in (10, 100_000)]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"inboxlog {inboxlog.__version__}, Python {sys.version.split()[0]}, durability none")
    print(f"{'workload':<36}{'wheel':>12}{'pure Python':>14}{'speed-up':>10}")
    for name, w, p, unit in rows:
        print(f"{name:<36}{w:>9.2f} {unit:<3}{p:>10.2f} {unit:<3}{p / w:>9.1f}×")
    flat = rows[1][1] / rows[0][1]
    print(f"wheel append+remove, queue 100,000 vs 10: {flat:.2f}× (target ≤ 1.5×)")
    print(
        f"len(inbox.next_turn): {lens[0]:.3f} µs at 10 pending, {lens[1]:.3f} µs at 100,000:"
        f" {lens[1] / lens[0]:.2f}× (target ≤ 3×)"
    )


if __name__ == "__main__":
    main()

"""Random inbox operations against a pure-Python model with JavaScript splice
semantics (ARCHITECTURE.md#inbox-mutations), checked call by call, then by replay."""

from __future__ import annotations

import math
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import inboxlog

Number = int | float
TARGETS = ["next-turn", "next-step"]


def trunc(x: Number) -> Number:
    if isinstance(x, float):
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return x
        return math.trunc(x)
    return x


def normalize(length: int, start: Number, delete: Number) -> tuple[int, int]:
    """`Array.prototype.splice` arithmetic, written independently of the library."""
    s = trunc(start)
    actual_start = max(length + s, 0) if s < 0 else min(s, length)
    d = trunc(delete)
    actual_delete = min(max(d, 0), length - actual_start)
    return int(actual_start), int(actual_delete)


class Model:
    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
        self.writes = 0

    def splice(
        self, target: str, start: Number, delete: Number, inserted: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | str:
        lst = self.lists[target]
        a, d = normalize(len(lst), start, delete)
        if d == 0 and not inserted:
            return []
        after = lst[:a] + inserted + lst[a + d :]
        other = self.lists["next-step" if target == "next-turn" else "next-turn"]
        ids = [m["id"] for m in after + other]
        if len(ids) != len(set(ids)):
            return "duplicate"
        removed = lst[a : a + d]
        self.lists[target] = after
        self.writes += 1
        return removed

    def find(self, id: str) -> tuple[str, int] | None:
        for target in TARGETS:
            for i, m in enumerate(self.lists[target]):
                if m["id"] == id:
                    return target, i
        return None


ids = st.sampled_from("abcdefg")
coords = st.one_of(
    st.integers(-6, 6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
)
ops = st.one_of(
    st.tuples(
        st.just("splice"), st.sampled_from(TARGETS), coords, coords, st.lists(ids, max_size=3)
    ),
    st.tuples(st.sampled_from(["append", "prepend"]), st.sampled_from(TARGETS), ids),
    st.tuples(st.just("replace"), ids, ids),
    st.tuples(st.just("remove"), ids),
    st.tuples(st.just("clear")),
)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(ops, max_size=30))
def test_inbox_matches_the_model(operations: list[tuple[Any, ...]]) -> None:
    store = inboxlog.Store.memory()
    s = store.create("p")
    model = Model()
    version = 0

    def msg(id: str) -> dict[str, Any]:
        nonlocal version
        version += 1
        return {"id": id, "v": version}

    for op in operations:
        kind = op[0]
        if kind == "splice":
            _, target, start, delete, new_ids = op
            inserted = [msg(i) for i in new_ids]
            expected = model.splice(target, start, delete, inserted)
            try:
                got: Any = s.inbox.splice(target, start, delete, inserted)
            except inboxlog.DuplicateMessageError:
                got = "duplicate"
            assert got == expected, op
        elif kind in ("append", "prepend"):
            _, target, id = op
            new = msg(id)
            where = len(model.lists[target]) if kind == "append" else 0
            expected = model.splice(target, where, 0, [new])
            try:
                getattr(s.inbox, kind)(target, new)
                got = []
            except inboxlog.DuplicateMessageError:
                got = "duplicate"
            assert got == expected, op
        elif kind in ("replace", "remove"):
            id = op[1]
            found = model.find(id)
            replacement = [msg(op[2])] if kind == "replace" else []
            if found is None:
                expected_result: Any = False
            else:
                outcome = model.splice(found[0], found[1], 1, replacement)
                expected_result = "duplicate" if outcome == "duplicate" else True
            try:
                result = (
                    s.inbox.replace(id, replacement[0]) if kind == "replace" else s.inbox.remove(id)
                )
            except inboxlog.DuplicateMessageError:
                result = "duplicate"
            assert result == expected_result, op
        else:
            for target in ("next-step", "next-turn"):
                model.splice(target, 0, math.inf, [])
            s.inbox.clear()
        assert s.inbox.next_turn == model.lists["next-turn"]
        assert s.inbox.next_step == model.lists["next-step"]
        assert s.inbox.has_pending == any(model.lists.values())
        assert len(s.events()) == model.writes

    events = s.events()
    projection = inboxlog.QueueProjection.replay(events)
    assert projection.next_turn == model.lists["next-turn"]
    assert projection.next_step == model.lists["next-step"]
    s.close()
    with store.open("p") as again:
        assert again.inbox.next_turn == model.lists["next-turn"]
        assert again.inbox.next_step == model.lists["next-step"]

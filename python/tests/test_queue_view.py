"""`Inbox.next_turn` / `next_step`: live, read-only sequence views of the inbox lists."""

from __future__ import annotations

import collections
import threading
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from conftest import m

import inboxlog
from inboxlog.types import Target

# Iteration and list comparisons read this many messages per lock; the tests cross it.
CHUNK = 64


def fill(
    session: inboxlog.Session, n: int, target: Target = "next-turn", prefix: str = "m"
) -> None:
    """`n` messages `{"id": f"{prefix}{i}", "n": i}` appended to `target`, in one splice."""
    session.inbox.splice(target, float("inf"), 0, [m(f"{prefix}{i}", n=i) for i in range(n)])


def expected(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [m(f"{prefix}{i}", n=i) for i in range(n)]


class EqualsAll:
    """Equal to anything, as no message dict is: only a full scan can find it."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


def test_a_view_is_a_read_only_sequence(session: inboxlog.Session) -> None:
    view = session.inbox.next_turn
    assert type(view) is inboxlog.QueueView
    assert isinstance(view, Sequence)
    assert not isinstance(view, list)
    for mutator in ("append", "insert", "pop", "__setitem__", "__delitem__", "__iadd__"):
        assert not hasattr(view, mutator)
    with pytest.raises(TypeError, match="unhashable"):
        hash(view)
    assert inboxlog.QueueView.__hash__ is None


def test_equals_a_list_of_equal_dicts_both_ways(session: inboxlog.Session) -> None:
    fill(session, 3)
    view = session.inbox.next_turn
    assert view == expected(3)
    assert expected(3) == view
    assert (view != expected(3)) is False
    assert view != expected(2) and expected(2) != view
    assert view != [*expected(2), m("m2", n=3)]
    # Equal as dicts, not as text: 1.0 == 1.
    assert view == [m("m0", n=0.0), m("m1", n=1), m("m2", n=2)]
    assert session.inbox.next_step == [] and [] == session.inbox.next_step  # noqa: SIM300 - both sides
    # Never a tuple, as a list is not.
    assert view != tuple(expected(3))
    assert (view == tuple(expected(3))) is False
    with pytest.raises(TypeError):
        assert view < expected(3)  # type: ignore[operator]


def test_equality_past_one_chunk(session: inboxlog.Session) -> None:
    n = 2 * CHUNK + 5
    fill(session, n)
    view = session.inbox.next_turn
    assert view == expected(n)
    changed = expected(n)
    changed[CHUNK + 1] = m("other")
    assert view != changed


def test_views_compare_by_their_items(store: inboxlog.Store) -> None:
    with store.create("a") as a, store.create("b") as b:
        assert a.inbox.next_turn == a.inbox.next_turn
        assert a.inbox.next_turn == b.inbox.next_turn == a.inbox.next_step
        a.inbox.append("next-turn", {"id": "x", "p": 1, "q": 2})
        assert a.inbox.next_turn != b.inbox.next_turn
        # Same dict, other key order and spelling: equal, as the dicts are.
        b.inbox.append("next-turn", {"id": "x", "q": 2.0, "p": 1})
        assert a.inbox.next_turn == b.inbox.next_turn
        assert (a.inbox.next_turn != b.inbox.next_turn) is False
        assert a.inbox.next_turn != a.inbox.next_step


def test_indexing_like_a_list(session: inboxlog.Session) -> None:
    fill(session, 5)
    view = session.inbox.next_turn
    items = expected(5)
    for i in range(-5, 5):
        assert view[i] == items[i]
    for i in (5, -6, 2**62, -(2**62), 10**30, -(10**30)):
        with pytest.raises(IndexError, match="QueueView index out of range"):
            view[i]

    class Two:
        def __index__(self) -> int:
            return 2

    assert view[Two()] == items[2]
    assert view[True] == items[1]
    for key in ("0", 1.0, None):
        with pytest.raises(TypeError, match="QueueView indices must be integers or slices, not"):
            view[key]  # type: ignore[call-overload]
    with pytest.raises(IndexError):
        session.inbox.next_step[0]


@pytest.mark.parametrize(
    "key",
    [
        slice(None),
        slice(1, 3),
        slice(-2, None),
        slice(None, -1),
        slice(None, None, 2),
        slice(None, None, -1),
        slice(4, 0, -2),
        slice(10, 20),
        slice(-(10**30), 10**30),
    ],
)
def test_a_slice_is_a_plain_list(session: inboxlog.Session, key: slice) -> None:
    fill(session, 5)
    got = session.inbox.next_turn[key]
    assert type(got) is list
    assert got == expected(5)[key]


def test_a_zero_step_slice_is_refused(session: inboxlog.Session) -> None:
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        session.inbox.next_turn[::0]


def test_a_full_slice_copies(session: inboxlog.Session) -> None:
    fill(session, 2)
    copy = session.inbox.next_turn[:]
    session.inbox.clear()
    assert copy == expected(2)
    assert session.inbox.next_turn == []


def test_iteration_in_both_directions_past_one_chunk(session: inboxlog.Session) -> None:
    n = 2 * CHUNK + 7
    fill(session, n)
    view = session.inbox.next_turn
    assert list(view) == expected(n)
    assert [x["id"] for x in view] == [f"m{i}" for i in range(n)]
    assert list(reversed(view)) == expected(n)[::-1]
    assert list(iter(session.inbox.next_step)) == []
    assert list(reversed(session.inbox.next_step)) == []
    it = iter(view)
    assert iter(it) is it


def test_iteration_under_change_walks_positions_and_never_raises(
    session: inboxlog.Session,
) -> None:
    fill(session, CHUNK + 2)
    it = iter(session.inbox.next_turn)
    assert next(it) == m("m0", n=0)
    # The first chunk was read: a change shows from the next one on, at its position.
    session.inbox.remove("m1")
    session.inbox.append("next-turn", m("late"))
    rest = [x["id"] for x in it]
    assert rest[: CHUNK - 1] == [f"m{i}" for i in range(1, CHUNK)]
    assert rest[CHUNK - 1 :] == [f"m{CHUNK + 1}", "late"]
    # Exhausted for good, as a list iterator is.
    session.inbox.append("next-turn", m("later"))
    assert list(it) == []


def test_a_shrinking_list_ends_the_iteration(session: inboxlog.Session) -> None:
    fill(session, 3 * CHUNK)
    forward = iter(session.inbox.next_turn)
    backward = reversed(session.inbox.next_turn)
    assert next(forward)["id"] == "m0"
    assert next(backward)["id"] == f"m{3 * CHUNK - 1}"
    session.inbox.splice("next-turn", CHUNK, 3 * CHUNK, [])
    assert len(list(forward)) == CHUNK - 1
    # Backward stood past the new end: it stops once its chunk is spent, as
    # `reversed(list)` stops once the list is shorter than its position.
    assert len(list(backward)) == CHUNK - 1


def test_one_iterator_shared_by_threads_gives_each_item_once(
    session: inboxlog.Session,
) -> None:
    n = 40 * CHUNK
    fill(session, n)
    it = iter(session.inbox.next_turn)
    seen: list[list[str]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def consume(k: int) -> None:
        try:
            seen[k].extend(x["id"] for x in it)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def write() -> None:  # keeps the session lock busy meanwhile
        try:
            for i in range(200):
                session.inbox.append("next-step", m(f"w{i}"))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=consume, args=(k,)) for k in range(4)]
    threads.append(threading.Thread(target=write))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(id for ids in seen for id in ids) == sorted(f"m{i}" for i in range(n))
    for ids in seen:  # each thread saw the list in order
        assert ids == sorted(ids, key=lambda id: int(id[1:]))
    assert len(session.inbox.next_step) == 200


def test_contains_index_and_count(session: inboxlog.Session) -> None:
    fill(session, CHUNK + 10)
    fill(session, 1, "next-step", prefix="s")
    view = session.inbox.next_turn
    last = m(f"m{CHUNK + 9}", n=CHUNK + 9)
    assert last in view and m("m3", n=3.0) in view
    assert m("m3", n=4) not in view and m("m3") not in view
    assert m("s0", n=0) not in view and m("s0", n=0) in session.inbox.next_step
    assert {"n": 3} not in view and m("nope") not in view
    assert "m3" not in view  # type: ignore[comparison-overlap]
    assert view.index(last) == CHUNK + 9
    assert view.index(m("m3", n=3), 3) == 3
    assert view.index(m("m3", n=3), -(CHUNK + 10), 4) == 3
    assert view.index(m("m3", n=3), 0, -1) == 3
    for start, stop in [(4, None), (0, 3), (-2, None), (0, -(CHUNK + 7))]:
        with pytest.raises(ValueError, match=r"\{'id': 'm3', 'n': 3\} is not in QueueView"):
            view.index(m("m3", n=3), start, stop)
    with pytest.raises(ValueError, match="is not in QueueView"):
        view.index(m("nope"))
    assert view.count(m("m3", n=3)) == 1
    assert view.count(m("m3", n=5)) == 0
    assert view.count({"n": 3}) == 0


@pytest.mark.parametrize(
    "probe",
    [
        lambda x: collections.UserDict(x),  # a mapping that is no dict
        lambda x: collections.OrderedDict(x),  # a dict subclass
        lambda x: {**x, "id": collections.UserString(x["id"])},  # an id that is no str
    ],
    ids=["UserDict", "OrderedDict", "UserString id"],
)
def test_values_that_are_no_plain_dict_are_compared_one_by_one(
    session: inboxlog.Session, probe: Callable[[dict[str, Any]], Any]
) -> None:
    fill(session, CHUNK + 10)
    view = session.inbox.next_turn
    target = m(f"m{CHUNK + 3}", n=CHUNK + 3)
    assert probe(target) == target
    assert probe(target) in view
    assert view.index(probe(target)) == CHUNK + 3
    assert view.count(probe(target)) == 1


def test_a_value_equal_to_anything_is_found_everywhere(session: inboxlog.Session) -> None:
    fill(session, CHUNK + 10)
    view = session.inbox.next_turn
    assert EqualsAll() in view
    assert view.index(EqualsAll()) == 0
    assert view.index(EqualsAll(), -1) == CHUNK + 9
    assert view.count(EqualsAll()) == CHUNK + 10
    assert EqualsAll() not in session.inbox.next_step


def test_a_view_is_live(session: inboxlog.Session) -> None:
    turn, step = session.inbox.next_turn, session.inbox.next_step
    assert not turn and len(turn) == 0
    session.inbox.append("next-turn", m("a"))
    session.inbox.prepend("next-turn", m("b"))
    session.inbox.append("next-step", m("c"))
    assert turn and len(turn) == 2 and turn == [m("b"), m("a")]
    assert turn[0] == m("b") and turn[-1] == m("a")
    assert step == [m("c")]
    session.inbox.replace("a", m("a", v=2))
    session.inbox.remove("b")
    assert turn == [m("a", v=2)] and m("a") not in turn and m("a", v=2) in turn
    session.inbox.clear()
    assert not turn and not step


def test_repr_is_the_lists(session: inboxlog.Session) -> None:
    view = session.inbox.next_turn
    assert repr(view) == "[]"
    fill(session, 2)
    assert repr(view) == repr(expected(2)) == str(view)


def test_a_closed_sessions_view_raises_closed(session: inboxlog.Session) -> None:
    fill(session, 2)
    view = session.inbox.next_turn
    it = iter(view)
    session.close()
    with pytest.raises(inboxlog.ClosedError, match='session "s" is closed'):
        _ = session.inbox.next_turn
    with pytest.raises(inboxlog.ClosedError):
        _ = session.inbox.next_step
    reads: list[Callable[[], object]] = [
        lambda: len(view),
        lambda: bool(view),
        lambda: view[0],
        lambda: view[:],
        lambda: list(view),
        lambda: next(it),
        lambda: reversed(view),
        lambda: m("m0", n=0) in view,
        lambda: view.index(EqualsAll()),
        lambda: view.count(m("m0", n=0)),
        lambda: view == expected(2),
    ]
    for read in reads:
        with pytest.raises(inboxlog.ClosedError, match='session "s" is closed'):
            read()
    assert repr(view) == '<inboxlog.QueueView next-turn of closed session "s">'


def test_a_view_can_be_spliced_into_another_session(store: inboxlog.Store) -> None:
    with store.create("a") as a, store.create("b") as b:
        fill(a, 3)
        b.inbox.splice("next-step", 0, 0, a.inbox.next_turn)
        assert b.inbox.next_step == a.inbox.next_turn == expected(3)


def allocated(read: Callable[[], object]) -> int:
    """Peak bytes the Python allocator handed out while `read` ran: the dicts a copy
    of the list would make are counted, however fast they are made."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        read()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_len_and_indexing_do_constant_work() -> None:
    """At 100,000 pending, `len`, `bool`, `view[i]`, a lookup by a message and the
    first step of an iteration allocate what they do at 10: the list is never copied."""

    def reads(n: int) -> dict[str, int]:
        s = inboxlog.Store.memory().create("s")
        fill(s, n)
        last = m(f"m{n - 1}", n=n - 1)
        probes: dict[str, Callable[[], object]] = {
            "len": lambda: len(s.inbox.next_turn),
            "bool": lambda: bool(s.inbox.next_turn),
            "first": lambda: s.inbox.next_turn[0],
            "last": lambda: s.inbox.next_turn[-1],
            "middle": lambda: s.inbox.next_turn[n // 2],
            "contains": lambda: last in s.inbox.next_turn,
            "index": lambda: s.inbox.next_turn.index(last),
            "next": lambda: next(iter(s.inbox.next_turn)),
            "reversed": lambda: next(reversed(s.inbox.next_turn)),
        }
        used = {name: allocated(probe) for name, probe in probes.items()}
        s.close()
        return used

    small, large = reads(10), reads(100_000)
    for name, used in large.items():
        # A copy of 100,000 dicts is megabytes; one dict and bookkeeping is < 2 KiB.
        assert used < small[name] + 2048, (name, small[name], used)

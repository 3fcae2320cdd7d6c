"""Event values between the core and Python: read in one pass as ``json.loads`` reads
them, and returned by ``append`` without reading back what it wrote."""

from __future__ import annotations

import enum
import json
import math
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from conftest import m, said, tool_result
from hypothesis import HealthCheck, given, settings

import inboxlog

HEADER = '{"format":"inboxlog","version":1,"id":"s","createdAt":0}\n'


def read_back(tmp_path: Path, data_texts: list[str]) -> list[Any]:
    """The data of a hand-written log whose events hold `data_texts` verbatim, as the
    wheel reads them."""
    root = tmp_path / "written"
    root.mkdir(exist_ok=True)
    lines = [
        f'{{"type":"note","seq":{seq},"time":0,"data":{text}}}\n'
        for seq, text in enumerate(data_texts)
    ]
    (root / "s.jsonl").write_text(HEADER + "".join(lines), encoding="utf-8")
    _, events = inboxlog.Store(root, durability="none").inspect("s")
    return [e["data"] for e in events]


def assert_same(got: Any, want: Any) -> None:
    """Equal, of the same types throughout, dict keys in the same order, and zeros of
    the same sign."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            assert_same(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    elif isinstance(want, float):
        assert got == want and math.copysign(1, got) == math.copysign(1, want)
    else:
        assert got == want


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=40), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(json_values, min_size=1, max_size=20),
    ascii_only=st.booleans(),
    spaced=st.booleans(),
)
def test_reads_like_json_loads(
    tmp_path: Path, values: list[Any], ascii_only: bool, spaced: bool
) -> None:
    # Escaped (\u00e9, surrogate pairs for astral characters) or raw UTF-8; compact or
    # spaced; twenty events at most, so the loader's key cache serves some reads.
    separators = (", ", ": ") if spaced else (",", ":")
    texts = [json.dumps(v, ensure_ascii=ascii_only, separators=separators) for v in values]
    for got, text in zip(read_back(tmp_path, texts), texts, strict=True):
        assert_same(got, json.loads(text))


def test_reads_escapes_numbers_and_repeated_keys_like_json_loads(tmp_path: Path) -> None:
    texts = [
        r'"\u00e9\ud83d\ude00 \" \\ \/ \b\f\n\r\t \u0000"',
        r'{"a":1,"b":2,"a":3}',
        r'{"\u0061":1,"a":2}',
        r"[0,-0,1.0,-0.0,1e5,1E+5,25e-1,5e-324,1.7976931348623157e308]",
        (
            r"[9223372036854775807,9223372036854775808,-9223372036854775808,"
            r"-9223372036854775809,18446744073709551616,123456789012345678901234567890]"
        ),
        r'{"' + "k" * 33 + r'":{"' + "k" * 33 + r'":[]}}',
        r'[{"id":1,"role":"user"},{"id":2,"role":"user"}]',
    ]
    for got, text in zip(read_back(tmp_path, texts), texts, strict=True):
        assert_same(got, json.loads(text))


def test_an_unpaired_surrogate_escape_reads_as_a_replacement_character(tmp_path: Path) -> None:
    # json.loads keeps the lone surrogate; a str made from Rust text cannot hold one.
    assert read_back(tmp_path, [r'"\ud800"', r'"\ud800\u0041"', r'["\udc00x"]']) == [
        "\ufffd",
        "\ufffdA",
        ["\ufffdx"],
    ]


def nested(depth: int) -> Any:
    """`depth` containers, lists and dicts in turn, around a number."""
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_nesting_at_the_limit_is_read(tmp_path: Path, session: inboxlog.Session) -> None:
    deepest = nested(inboxlog.MAX_DEPTH)
    text = json.dumps(deepest)
    assert read_back(tmp_path, [text]) == [json.loads(text)]
    session.append("note", deepest)
    assert session.events()[0]["data"] == deepest
    # A splice record and a proposal wrap messages at the limit in a few more levels.
    message = {"id": "m", "deep": nested(inboxlog.MAX_DEPTH - 1)}
    session.inbox.append("next-turn", message)
    assert session.events()[1]["data"]["inserted"] == [message]
    session.open_turn()
    assert session.propose_step()["messages"] == [message]


class Color(enum.IntEnum):
    RED = 2**70


class Label(str):
    def __str__(self) -> str:
        return "not the text"


class Ratio(float):
    pass


class Big(int):
    def __int__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "not the digits"


@pytest.mark.parametrize(
    "data",
    [
        {"text": "hello", "index": 42},
        {"s": "x", "i": -5, "u": 2**64 - 1, "f": 1.5, "t": True, "n": None, "big": 2**70},
        {"t": (1, "a", (2.5, None)), "l": [True, False, {"x": []}]},
        [1.0, 1e300, -0.0, 5e-324, 0.1, -1.5e-7],
        [2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**40, -(10**40)],
        {"s": Label("label"), Label("key"): Ratio(0.5), "i": Color.RED, "b": Big(2**80)},
        OrderedDict([("z", 1), ("a", OrderedDict([("y", 2)]))]),
        {"é ✓ 😀": '\u2028\x00"\\\n', "": ""},
        "just a string",
        7,
        None,
        [],
        {},
    ],
)
def test_append_returns_what_events_reads_back(session: inboxlog.Session, data: Any) -> None:
    appended = session.append("note", data)
    assert_same(appended, session.events(appended["seq"])[0])
    assert list(appended) == ["type", "seq", "time", "data"]


def test_append_returns_the_envelope_in_stored_order(session: inboxlog.Session) -> None:
    session.append("user/message", m("u1", role="user", content="hi"), surface_op="append")
    appended = session.append(
        "assistant/message",
        said(0, 0, "a1", "x"),
        ignorable=True,
        surface_op=OrderedDict([("op", "replace"), ("start", 0), ("end", 0)]),
        source_event_seqs=[0],
    )
    assert_same(appended, session.events(1)[0])
    assert list(appended) == [
        "type",
        "seq",
        "time",
        "data",
        "ignorable",
        "surfaceOp",
        "sourceEventSeqs",
    ]
    assert appended["surfaceOp"] == {"op": "replace", "start": 0, "end": 0}
    appended = session.append("tool/result", tool_result(0, 0, "c1", "ok"), surface_op="append")
    assert_same(appended, session.events(2)[0])


def test_append_shares_no_container_with_its_argument(session: inboxlog.Session) -> None:
    session.append("user/message", m("u1", role="user", content="hi"), surface_op="append")
    data: dict[str, Any] = said(0, 0, "a1", "x", a=[1, {"b": []}], t=(1, [2]), d={"e": {}})
    op: dict[str, Any] = {"op": "replace", "start": 0, "end": 0}
    appended = session.append("assistant/message", data, surface_op=op, source_event_seqs=[0])
    data["message"]["content"].append({"type": "text", "text": "y"})
    data["a"].append(2)
    data["a"][1]["b"].append(3)
    data["t"][1].append(4)
    data["d"]["e"]["f"] = 5
    data["new"] = 6
    op["end"] = 9
    expected = said(0, 0, "a1", "x", a=[1, {"b": []}], t=[1, [2]], d={"e": {}})
    assert appended["data"] == expected
    assert appended["surfaceOp"] == {"op": "replace", "start": 0, "end": 0}
    assert session.events()[1] == appended


def test_a_flat_dict_is_copied_not_shared(session: inboxlog.Session) -> None:
    # The shape of most event data (str keys, scalar values) takes the quick path.
    data: dict[str, Any] = {"text": "hello", "index": 42, "done": False}
    appended = session.append("note", data)
    data["index"] = 43
    del data["done"]
    assert appended["data"] is not data
    assert appended["data"] == {"text": "hello", "index": 42, "done": False}
    assert session.events()[0] == appended


def test_append_returns_its_type_as_an_exact_str(session: inboxlog.Session) -> None:
    appended = session.append(Label("note"), {})
    assert type(appended["type"]) is str and appended["type"] == "note"
    assert session.events()[0]["type"] == "note"


def test_events_share_repeated_keys_and_types(session: inboxlog.Session) -> None:
    for i in range(40):
        session.append("note", {"index": i, "long key " * 5: i, "role": "user"})
    events = session.events()
    assert [e["data"]["index"] for e in events] == list(range(40))
    first, last = (list(events[n]["data"]) for n in (0, -1))
    assert first == last == ["index", "long key " * 5, "role"]
    # Short keys and types are one str each across the read: the cache served them.
    assert first[0] is last[0] and events[0]["type"] is events[-1]["type"]


def test_appends_and_observers_on_several_threads_do_not_deadlock(tmp_path: Path) -> None:
    # A quick append keeps the GIL; were it to keep it with an observer registered, it
    # could wait for a thread that publishes (and holds the publication order) while
    # that thread's observer waits for the GIL. Run apart: a deadlock is a timeout.
    logs = str(tmp_path / "logs")
    script = tmp_path / "race.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import threading, inboxlog
            for store in (inboxlog.Store.memory(), inboxlog.Store({logs!r}, "none")):
                s = store.create("s")
                seen = []
                s.on_inbox(seen.append)
                def work(k):
                    for i in range(1000):
                        s.append("tick", {{"i": i}})
                        s.inbox.append("next-turn", {{"id": f"{{k}}-{{i}}"}})
                threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                assert len(s.events()) == 4000 and len(seen) == 2000
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr

"""Python values ⇄ JSON: key order, big integers, and refusals naming the path."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import m

import inboxlog


def roundtrip(session: inboxlog.Session, data: Any) -> Any:
    return session.append("note", data)["data"]


@pytest.mark.parametrize(
    "data",
    [
        None,
        True,
        False,
        0,
        -1,
        2**53 - 1,
        2**63,
        2**64 + 1,
        -(10**30),
        12345678901234567890123456789,
        1.5,
        -0.25,
        1e300,
        5e-324,
        "",
        'é ✓ 😀 \u2028 \x00 " \\ \n',
        [],
        {},
        {"z": 1, "a": 2, "m": [1, {"y": None, "b": [True]}]},
    ],
)
def test_values_round_trip(session: inboxlog.Session, data: Any) -> None:
    back = roundtrip(session, data)
    assert back == data and type(back) is type(data)
    if isinstance(data, dict):
        assert list(back) == list(data)


def test_key_order_and_big_ints_survive_the_file(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    data = {"z": 10**25, "a": [3, 2, 1], "é": {"q": 1, "b": 2}}
    with jsonl.create("s") as s:
        s.append("note", data)
        s.inbox.append("next-turn", {"id": "m", "big": 2**70, "z": 0, "a": 1})
    line = (tmp_path / "logs" / "s.jsonl").read_text().splitlines()[1]
    assert '"data":{"z":10000000000000000000000000,"a":[3,2,1],"é":{"q":1,"b":2}}' in line
    with jsonl.open("s") as s:
        assert list(s.events()[0]["data"]["é"]) == ["q", "b"]
        assert s.inbox.next_turn == [{"id": "m", "big": 2**70, "z": 0, "a": 1}]
        assert list(s.inbox.next_turn[0]) == ["id", "big", "z", "a"]


def test_floats_integers_and_tuples(session: inboxlog.Session) -> None:
    assert roundtrip(session, 1.0) == 1.0 and isinstance(roundtrip(session, 1.0), float)
    assert roundtrip(session, (1, "a")) == [1, "a"]
    assert roundtrip(session, OrderedDict([("b", 1), ("a", 2)])) == {"b": 1, "a": 2}

    class Weird(int):
        def __str__(self) -> str:
            return "not a number"

    assert roundtrip(session, Weird(2**80)) == 2**80


class Frozen(Mapping[str, Any]):
    def __init__(self, **items: Any) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def test_other_mappings_are_objects(session: inboxlog.Session) -> None:
    assert roundtrip(session, {"x": Frozen(b=1, a=2)}) == {"x": {"b": 1, "a": 2}}
    session.inbox.append("next-turn", Frozen(id="fm", n=1))
    assert session.inbox.next_turn == [{"id": "fm", "n": 1}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"a": {1, 2}}, 'data["a"]: a set is not a JSON value'),
        ({"a": [0, 1, b"x"]}, 'data["a"][2]: a bytes is not a JSON value'),
        ({"a": [math.nan]}, 'data["a"][0]: NaN is not a JSON number'),
        ({"s": "ok", "a": math.nan}, 'data["a"]: NaN is not a JSON number'),
        ({"s": "ok", "k": "\udc80"}, 'data["k"]: string is not valid Unicode (a lone surrogate?)'),
        ({"n": 10**400}, 'data["n"]: the integer of 401 digits is too large for a JSON number'),
        ([-(10**400)], "data[0]: the integer of 401 digits is too large for a JSON number"),
        ([{"k": math.inf}], 'data[0]["k"]: inf is not a JSON number'),
        (-math.inf, "data: -inf is not a JSON number"),
        ({1: "x"}, "data: dict key 1 is not a string (int)"),
        ({"a": {(1, 2): 0}}, 'data["a"]: dict key (1, 2) is not a string (tuple)'),
        ({"s": "\udc80"}, 'data["s"]: string is not valid Unicode (a lone surrogate?)'),
        ({"\ud800": 1}, "data: dict key is not valid Unicode (a lone surrogate?)"),
        ({"o": object()}, 'data["o"]: a object is not a JSON value'),
    ],
)
def test_non_json_is_invalid_input_naming_the_path(
    session: inboxlog.Session, data: Any, message: str
) -> None:
    with pytest.raises(inboxlog.InvalidInputError) as err:
        session.append("note", data)
    assert str(err.value).startswith(message)
    assert session.events() == []


def test_message_paths(session: inboxlog.Session) -> None:
    with pytest.raises(inboxlog.InvalidInputError, match=r'^inserted\[1\]\["x"\]: NaN'):
        session.inbox.splice("next-turn", 0, 0, [m("a"), m("b", x=math.nan)])
    with pytest.raises(inboxlog.InvalidInputError, match=r'^message\["x"\]: a set'):
        session.inbox.append("next-turn", m("a", x=set()))
    assert session.events() == []


def test_depth_limit(session: inboxlog.Session) -> None:
    def nested(depth: int) -> Any:
        value: Any = []
        for _ in range(depth - 1):
            value = [value]
        return value

    assert roundtrip(session, nested(512)) == nested(512)
    with pytest.raises(inboxlog.TooLargeError, match="nesting deeper than 512"):
        session.append("note", nested(513))
    with pytest.raises(inboxlog.TooLargeError):
        session.append("note", nested(100_000))
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(inboxlog.TooLargeError, match=r"^data\[0\]\[0\]"):
        session.append("note", loop)
    cyclic: dict[str, Any] = {"id": "c"}
    cyclic["self"] = cyclic
    with pytest.raises(inboxlog.TooLargeError, match=r'^message\["self"\]\["self"\]'):
        session.inbox.append("next-turn", cyclic)


def test_deep_values_fit_a_small_thread_stack(tmp_path: Path) -> None:
    """The converters walk nesting on the heap: 512 levels fit a 256 KiB thread."""
    script = tmp_path / "small_stack.py"
    script.write_text(
        "import threading, inboxlog\n"
        "def nested(n):\n"
        "    v = {}\n"
        "    for i in range(n - 1):\n"
        "        v = {'k': [v]} if i % 2 else {'k': v}\n"
        "    return v\n"
        "s = inboxlog.Store.memory().create('x')\n"
        "threading.stack_size(256 * 1024)\n"
        "out = []\n"
        "def run():\n"
        "    s.append('n', nested(300))\n"
        "    out.append(len(s.events()[0]['data']))\n"
        "    try:\n"
        "        s.append('n', nested(100_000))\n"
        "    except inboxlog.TooLargeError:\n"
        "        out.append('refused')\n"
        "t = threading.Thread(target=run)\n"
        "t.start()\n"
        "t.join()\n"
        "print(out)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 'refused']"

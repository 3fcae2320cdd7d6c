"""Every ARCHITECTURE.md#errors error class, raised from Python with the core's message
unchanged."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import m, tool_result

import inboxlog
from inboxlog import _native

# The stubs beside the package imported (the source tree's, or an installed wheel's).
STUBS = Path(inboxlog.__file__).with_name("_native.pyi")

# The exception class of each kind, found in the package: the one list of kinds is the
# core's (`_native._ERROR_KINDS`, from `ErrorKind::ALL`), and the tests below hold the
# classes, their docs, the stubs and the exports to it.
CLASSES = {
    cls.kind: cls
    for cls in vars(inboxlog).values()
    if isinstance(cls, type)
    and issubclass(cls, inboxlog.InboxlogError)
    and cls is not inboxlog.InboxlogError
}


def test_one_class_per_kind_of_the_core() -> None:
    kinds = dict(_native._ERROR_KINDS)
    assert [code for _, code in _native._ERROR_KINDS] == sorted(kinds.values())
    assert {kind: cls.code for kind, cls in CLASSES.items()} == kinds
    assert len(CLASSES) == len(_native._ERROR_KINDS)
    names = {cls.__name__ for cls in CLASSES.values()}
    assert names <= set(inboxlog.__all__) and names <= set(_native.__all__)


@pytest.mark.parametrize(("kind", "code"), _native._ERROR_KINDS)
def test_classes_carry_kind_and_code(kind: str, code: int) -> None:
    cls = CLASSES[kind]
    assert issubclass(cls, inboxlog.InboxlogError)
    assert issubclass(inboxlog.InboxlogError, Exception)
    assert (cls.kind, cls.code) == (kind, code)
    assert cls.__module__ == "inboxlog" and cls.__doc__
    assert f"(kind `{kind}`, code {code})" in cls.__doc__


def test_the_stubs_declare_every_class_with_its_kind_and_code() -> None:
    tree = ast.parse(STUBS.read_text(encoding="utf-8"))
    declared = {
        node.name: ast.get_docstring(node) or ""
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "InboxlogError" for b in node.bases)
    }
    assert set(declared) == {cls.__name__ for cls in CLASSES.values()}
    for kind, cls in CLASSES.items():
        said = re.search(r"\(``(\w+)``, (\d+)\)", declared[cls.__name__])
        assert said is not None, cls.__name__
        assert (said[1], int(said[2])) == (kind, cls.code), cls.__name__


def check(err: pytest.ExceptionInfo[inboxlog.InboxlogError], kind: str, code: int) -> None:
    assert isinstance(err.value, inboxlog.InboxlogError)
    assert (err.value.kind, err.value.code) == (kind, code)


def test_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(inboxlog.StorageError, match="cannot create the store directory") as err:
        inboxlog.Store(blocker / "logs")
    check(err, "io", 1)


def crc32c_append(crc: int, data: bytes) -> int:
    """CRC-32C (Castagnoli) continuing ``crc``, as core/FORMAT.md defines the chain."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_corrupt_log(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    with jsonl.create("s") as s:
        s.append("note", {"n": 1})
    path = tmp_path / "logs" / "s.jsonl"
    before = path.read_bytes()
    # A version 2 line whose checksum continues the chain but whose seq does not.
    prev = int(before.rstrip(b"\n").rsplit(b'"crc32c":"', 1)[1][:8], 16)
    body = b'{"type":"note","seq":7,"time":0,"data":{},"synced":0'
    crc = crc32c_append(prev, body)
    path.write_bytes(before + body + b',"crc32c":"%08x"}\n' % crc)
    corrupted = path.read_bytes()
    with pytest.raises(inboxlog.CorruptLogError, match=r"line 3 .*seq 7") as err:
        jsonl.open("s")
    check(err, "corrupt", 2)
    assert path.read_bytes() == corrupted  # a refused open changes nothing


def test_locked(store: inboxlog.Store) -> None:
    with store.create("s"):
        with pytest.raises(inboxlog.LockedError, match='session "s" is locked') as err:
            store.open("s")
        check(err, "locked", 3)


def test_poisoned_class_level() -> None:
    # A poisoned session needs a failed fsync, which a test cannot cause honestly from
    # Python; the mapping is checked at the class level (see test_classes_carry_kind_and_code).
    err = inboxlog.PoisonedError("x")
    assert isinstance(err, inboxlog.InboxlogError)
    assert (err.kind, err.code, str(err)) == ("poisoned", 4, "x")


def test_not_found(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.NotFoundError, match='"nope"') as err:
        store.open("nope")
    check(err, "not_found", 5)


def test_already_exists(store: inboxlog.Store) -> None:
    store.create("s").close()
    with pytest.raises(inboxlog.AlreadyExistsError, match='session "s" already exists') as err:
        store.create("s")
    check(err, "already_exists", 6)


def test_invalid_splice() -> None:
    projection = inboxlog.QueueProjection()
    event = {
        "type": "agent/inbox/spliced",
        "seq": 0,
        "time": 0,
        "data": {"target": "next-turn", "start": 1, "inserted": []},
    }
    with pytest.raises(inboxlog.InvalidSpliceError, match="invalid inbox splice") as err:
        projection.apply(event)
    check(err, "invalid_splice", 7)
    assert str(err.value) == (
        "projection at seq 0: invalid inbox splice: start 1 is past the end of next-turn (length 0)"
    )


def test_duplicate_message(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("m1"))
    with pytest.raises(inboxlog.DuplicateMessageError) as err:
        session.inbox.append("next-step", m("m1"))
    check(err, "duplicate_message", 8)
    assert str(err.value) == 'message "m1" is already pending'


def test_protocol(session: inboxlog.Session) -> None:
    with pytest.raises(inboxlog.ProtocolError) as err:
        session.decide({"kind": "reject"})
    check(err, "protocol", 9)
    assert str(err.value) == "decide is not allowed now: the session is idle (no turn open)"
    assert session.events() == []


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda s: s.inbox.append("later", {"id": "a"}), 'target must be "next-turn"'),
        (lambda s: s.inbox.append("next-turn", {"role": "user"}), 'message has no "id"'),
        (lambda s: s.inbox.append("next-turn", {"id": ""}), "non-empty string"),
        (lambda s: s.append("turn/start", {"turn": 1}), "written only by inboxlog"),
        (lambda s: s.end_step("done"), '"done"'),
        (lambda s: s.decide({"kind": "maybe"}), "decision kind must be"),
        (lambda s: s.cancel({"kind": "boss"}), "cancel cause"),
        (
            lambda s: s.append("tool/result", tool_result(0, 0, "c1", "ok"), source_event_seqs=[5]),
            "not smaller",
        ),
    ],
)
def test_invalid_input(
    session: inboxlog.Session, call: Callable[[inboxlog.Session], object], needle: str
) -> None:
    with pytest.raises(inboxlog.InvalidInputError) as err:
        call(session)
    check(err, "invalid_input", 10)
    assert needle in str(err.value)
    assert session.events() == []


def test_invalid_session_id(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.InvalidInputError, match="may only contain") as err:
        store.create("a/b")
    check(err, "invalid_input", 10)


def test_format_unsupported(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    header = {"format": "inboxlog", "version": 3, "id": "new", "createdAt": 0}
    (tmp_path / "logs" / "new.jsonl").write_text(json.dumps(header) + "\n")
    with pytest.raises(inboxlog.FormatUnsupportedError, match="newer inboxlog") as err:
        jsonl.open("new")
    check(err, "format_unsupported", 11)


def test_too_large(session: inboxlog.Session, tmp_path: Path) -> None:
    deep: list[object] = []
    for _ in range(600):
        deep = [deep]
    with pytest.raises(inboxlog.TooLargeError, match="deeper than 512") as err:
        session.append("note", deep)
    check(err, "too_large", 12)
    small = inboxlog.Store(tmp_path / "small", "none", record_limit=200)
    with small.create("s") as s, pytest.raises(inboxlog.TooLargeError) as err:
        s.append("note", "x" * 500)
    check(err, "too_large", 12)


def test_closed(session: inboxlog.Session) -> None:
    session.close()
    with pytest.raises(inboxlog.ClosedError, match='session "s" is closed') as err:
        session.inbox.append("next-turn", m("a"))
    check(err, "closed", 13)


def test_closed_is_documented_for_sessions_only() -> None:
    # Only a session closes: a store has no close() that could make it `closed`.
    assert not hasattr(inboxlog.Store, "close")
    assert inboxlog.Session.close.__doc__ is not None
    doc = inboxlog.ClosedError.__doc__ or ""
    assert "session" in doc and "store" not in doc, doc


def test_reentrant(session: inboxlog.Session) -> None:
    caught: list[inboxlog.InboxlogError] = []

    def observer(event: dict[str, object]) -> None:
        try:
            session.inbox.append("next-turn", m("inner"))
        except inboxlog.ReentrantError as e:
            caught.append(e)

    session.on_event(observer)
    session.inbox.append("next-turn", m("outer"))
    assert len(caught) == 1
    assert (caught[0].kind, caught[0].code) == ("reentrant", 14)
    assert "cannot be changed from inside one of its observers" in str(caught[0])
    assert [x["id"] for x in session.inbox.next_turn] == ["outer"]
    assert len(session.events()) == 1


def test_wrong_types_are_type_errors(session: inboxlog.Session) -> None:
    with pytest.raises(TypeError, match="message must be a dict, not str"):
        session.inbox.append("next-turn", "m1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="inserted must be a list"):
        session.inbox.splice("next-turn", 0, 0, "ab")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="start must be an int or a float"):
        session.inbox.splice("next-turn", "0", 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="start must be an int or a float"):
        session.inbox.splice("next-turn", True, 0)
    with pytest.raises(TypeError):
        session.inbox.append(7, m("a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decision must be a dict"):
        session.decide(["enter"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_event needs a callable"):
        session.on_event(42)  # type: ignore[type-var]
    with pytest.raises(TypeError):
        session.events("0")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        inboxlog.Store(42)  # type: ignore[arg-type]
    assert session.events() == []


# ---------------------------------------------------------------------------------
# Where an error happened, as attributes (ARCHITECTURE.md#errors): set where known, None otherwise.

LOCATION = ("session", "path", "line", "offset", "seq")


def where(e: inboxlog.InboxlogError) -> tuple[object, ...]:
    return tuple(getattr(e, key) for key in LOCATION)


def test_location_attributes_default_to_none() -> None:
    assert where(inboxlog.InboxlogError("x")) == (None,) * 5
    assert where(inboxlog.CorruptLogError("x")) == (None,) * 5


def test_a_corrupt_log_error_is_located(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "s.jsonl"
    header = '{"format":"inboxlog","version":1,"id":"s","createdAt":0}\n'
    step = '{"type":"step/start","seq":0,"time":1,"data":{"turn":7,"step":1}}\n'
    path.write_text(header + step)
    with pytest.raises(inboxlog.CorruptLogError) as opened:
        jsonl.open("s")
    assert where(opened.value) == ("s", str(path), 2, 57, 0)
    assert str(opened.value).endswith("not the open turn (no turn is open)")
    with pytest.raises(inboxlog.CorruptLogError) as verified:
        jsonl.verify("s")
    assert where(verified.value) == where(opened.value)
    assert str(verified.value) == str(opened.value)


def test_locked_names_the_session_and_file(store: inboxlog.Store, tmp_path: Path) -> None:
    with store.create("s"), pytest.raises(inboxlog.LockedError) as err:
        store.open("s")
    # Only the JSONL store has files.
    jsonl = repr(store).startswith("<inboxlog.Store(")
    path = str(tmp_path / "logs/s.jsonl") if jsonl else None
    assert where(err.value) == ("s", path, None, None, None)


def test_not_found_and_already_exists_name_the_session(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.NotFoundError) as missing:
        store.verify("nope")
    assert missing.value.session == "nope"
    store.create("s").close()
    with pytest.raises(inboxlog.AlreadyExistsError) as exists:
        store.create("s")
    assert (exists.value.session, exists.value.line) == ("s", None)


def test_errors_without_a_location(session: inboxlog.Session) -> None:
    with pytest.raises(inboxlog.ProtocolError) as err:
        session.decide({"kind": "reject"})
    assert where(err.value) == (None,) * 5

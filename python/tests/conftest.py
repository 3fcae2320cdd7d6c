"""Shared fixtures: stores of every kind and small message helpers."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import inboxlog


def m(id: str, **rest: Any) -> dict[str, Any]:
    """A message with `id` and any other keys."""
    return {"id": id, **rest}


# The conversation's events (SPEC §15.1), as a host writes them: their data.
MODEL = {"kind": "model", "provider": "scripted", "model": "m1"}


def text(value: str) -> dict[str, str]:
    """A text content block."""
    return {"type": "text", "text": value}


def said(
    turn: int, step: int, id: str, *content: dict[str, Any] | str, **extra: Any
) -> dict[str, Any]:
    """An ``assistant/message``'s data: the message's content blocks (a str a text
    block), the scripted model ``MODEL`` its source, then ``extra`` (``usage``,
    ``interrupted``, a host's own keys, kept after the library's)."""
    blocks = [text(part) if isinstance(part, str) else part for part in content]
    message = {"id": id, "role": "assistant", "content": blocks, "source": MODEL}
    return {"turn": turn, "step": step, "message": message, **extra}


def tool_call(
    turn: int, step: int, call_id: str, name: str, arguments: str, **extra: Any
) -> dict[str, Any]:
    """A ``tool/call``'s data (``arguments`` the model's raw JSON text)."""
    return {
        "turn": turn,
        "step": step,
        "callId": call_id,
        "name": name,
        "arguments": arguments,
        **extra,
    }


def tool_result(
    turn: int,
    step: int,
    call_id: str,
    *content: dict[str, Any] | str,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ``tool/result``'s data: one tool-result block holding ``content`` (a str a
    text block); with ``error`` (``{"name", "code"}``), the block's ``isError`` and the
    event's ``error``."""
    block: dict[str, Any] = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [text(part) if isinstance(part, str) else part for part in content],
    }
    if error is not None:
        block["isError"] = True
    message = {
        "id": f"result-{call_id}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    return data


def spliced(session: inboxlog.Session, since: int = 0) -> list[dict[str, Any]]:
    """The `agent/inbox/spliced` records written from seq `since` on."""
    return [e["data"] for e in session.events(since) if e["type"] == "agent/inbox/spliced"]


def next_seq(session: inboxlog.Session) -> int:
    last = session.last_seq
    return 0 if last is None else last + 1


def missing_extra(module: str, extra: str) -> bool:
    """Whether ``module`` (an integration's framework) is not installed; under CI=true
    that fails instead, as CI installs every extra."""
    try:
        if importlib.util.find_spec(module) is not None:
            return False
    except ModuleNotFoundError:  # pragma: no cover - a dotted name whose parent is missing
        pass
    if os.environ.get("CI") == "true":  # pragma: no cover - CI has the extras
        raise RuntimeError(f"CI must run every test: install the {extra} extra (make venv)")
    return True  # pragma: no cover


# The tests of an integration whose framework is not installed are not collected (only
# those present: the wheel's test runs a sample of this suite without the extras).
collect_ignore = [
    name
    for name, module, extra in [
        ("test_openai_agents.py", "agents", "openai-agents"),
        ("test_langgraph.py", "langchain", "langgraph"),
        ("test_langgraph_saver.py", "langgraph", "langgraph"),
        ("test_pydantic_ai.py", "pydantic_ai", "pydantic-ai"),
        ("test_adk_sessions.py", "google.adk", "adk"),
        ("test_adk_plugin.py", "google.adk", "adk"),
        ("test_adk_reads.py", "google.adk", "adk"),
        ("test_otel.py", "opentelemetry.exporter.otlp.proto.http", "otel"),
        ("test_otel_follow.py", "opentelemetry.exporter.otlp.proto.http", "otel"),
    ]
    if (Path(__file__).parent / name).exists() and missing_extra(module, extra)
]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def turn_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``turn/end`` reasons of a log's events."""
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def entered(
    events: list[dict[str, Any]], own: Callable[[str], bool] = lambda _id: False
) -> list[tuple[int, int, str]]:
    """(turn, step, message id) of every user/message, with the step it entered; an id
    that ``own`` says is a run's own input (each framework names it its way) as
    ``input``."""
    out, where = [], (0, 0)
    for e in events:
        if e["type"] == "step/start":
            where = (e["data"]["turn"], e["data"]["step"])
        elif e["type"] == "user/message":
            id = e["data"]["id"]
            out.append((*where, "input" if own(id) else id))
    return out


# A suite started in the background by a shell without job control inherits SIGINT
# ignored, and so would every child it starts: the tests that stop a server or a
# follower with SIGINT (Ctrl-C) would wait on a child that cannot hear it. A handler
# here is reset to the default in each child at exec, where an ignored signal is not.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

PG_URL = os.environ.get("INBOXLOG_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test"


def pg_schema() -> Iterator[str]:
    """A schema of its own on the test server, with the inboxlog tables, dropped
    afterwards. Skipped when no server answers at INBOXLOG_TEST_PG, except under CI=true,
    where that fails."""
    schema = f"py_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    try:
        inboxlog.Store.postgres(PG_URL, schema=schema)
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    yield schema
    # A store held in a reference cycle (a framework's hooks holding a session) keeps its
    # connections until the collector frees it: free them now, so the suite stays within
    # the server's max_connections whatever ran before.
    gc.collect()
    sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_store(durability: str = "none") -> Iterator[inboxlog.Store]:
    """A PostgreSQL store in a schema of its own (see `pg_schema`)."""
    for schema in pg_schema():
        store = inboxlog.Store.postgres(PG_URL, schema=schema, durability=durability)
        yield store
        del store


@dataclass
class Place:
    """A store other processes and new handles reach: a JSONL directory or a PostgreSQL
    schema."""

    location: str
    schema: str | None

    def open(self, durability: str = "none") -> inboxlog.Store:
        """A new handle on the store."""
        return inboxlog.Store.open(self.location, durability, schema=self.schema)  # type: ignore[arg-type]

    def argv(self) -> list[str]:
        """The location and the schema (`""`: none), for a worker's command line."""
        return [self.location, self.schema or ""]

    def cli(self) -> list[str]:
        """The store as the `inboxlog` command line names it."""
        return [self.location, *(["--schema", self.schema] if self.schema else [])]


@pytest.fixture(params=["jsonl", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A JSONL directory, and a PostgreSQL schema of its own."""
    if request.param == "jsonl":
        yield Place(str(tmp_path / "logs"), None)
    else:
        for schema in pg_schema():
            yield Place(PG_URL, schema)


@pytest.fixture
def pg_place() -> Iterator[Place]:
    """A PostgreSQL place alone."""
    for schema in pg_schema():
        yield Place(PG_URL, schema)


def sql(command: str) -> str:
    """Runs `command` on the test server with psql; returns its unaligned output."""
    psql = shutil.which("psql")
    assert psql, "psql is needed for the PostgreSQL tests"
    done = subprocess.run(
        [psql, PG_URL, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", command],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture(params=["memory", "jsonl", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[inboxlog.Store]:
    """A memory store, a JSONL store and a PostgreSQL store (durability `none`: the
    tests need no fsync)."""
    if request.param == "memory":
        yield inboxlog.Store.memory()
    elif request.param == "jsonl":
        yield inboxlog.Store(tmp_path / "logs", durability="none")
    else:
        yield from pg_store()


@pytest.fixture
def postgres() -> Iterator[inboxlog.Store]:
    """A PostgreSQL store alone (see `pg_store`), durability `sync`."""
    yield from pg_store("sync")


@pytest.fixture
def jsonl(tmp_path: Path) -> inboxlog.Store:
    return inboxlog.Store(tmp_path / "logs", durability="none")


@pytest.fixture
def session(store: inboxlog.Store) -> Iterator[inboxlog.Session]:
    with store.create("s") as s:
        yield s


@pytest.fixture
def anyio_backend() -> str:
    """The async tests (``pytest.mark.anyio``) run on asyncio."""
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fleet-scale tests run first. Each takes up to 31 of the shared server's
    connections, while some tests leave a store reachable after they end (an exception
    pytest keeps, a framework's registry holding a service: the tests of
    test_observers.py, test_errors.py and test_adk_plugin.py that raise through a
    store's callbacks), whose pools then hold their connections until the process ends:
    72 of the server's 97 slots by the fleet tests' turn in a full run."""
    items.sort(key=lambda item: item.path.name != "test_pg_fleet_scale.py")


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the run's type checks: the package's strict check and each
    framework example's read the same frameworks' types, which a cold cache reads again
    each time (tens of seconds apiece)."""
    return tmp_path_factory.mktemp("mypy-cache")

"""Every integration is an optional extra that says how to install it, and its example
and README section run as written and type-check against the framework's own types."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from adapters import Script, adk_model, langchain_model, openai_model, pydantic_model, say, tool
from conftest import missing_extra

import inboxlog

ROOT = Path(__file__).parents[3]


def swap_openai_model(monkeypatch: pytest.MonkeyPatch, script: Script) -> None:
    from agents.models.multi_provider import MultiProvider

    model = openai_model(script)
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)


def swap_langchain_model(monkeypatch: pytest.MonkeyPatch, script: Script) -> None:
    import langchain.chat_models

    model = langchain_model(script)
    monkeypatch.setattr(langchain.chat_models, "init_chat_model", lambda *a, **k: model)


def swap_pydantic_model(monkeypatch: pytest.MonkeyPatch, script: Script) -> None:
    import pydantic_ai.models

    model = pydantic_model(script)
    monkeypatch.setattr(pydantic_ai.models, "infer_model", lambda *a, **kw: model)


def swap_adk_model(monkeypatch: pytest.MonkeyPatch, script: Script) -> None:
    from google.adk.models.registry import LLMRegistry

    model = adk_model(script)
    monkeypatch.setattr(LLMRegistry, "new_llm", staticmethod(lambda name: model))


@dataclass
class Integration:
    module: str
    framework: str
    """The framework's top-level module (blocked to see the install hint)."""
    extra: str
    """The wheel's extra that installs it."""
    missing: str
    """The ImportError's text without it."""
    example: str
    prints: list[str]
    """Lines the example prints."""
    heading: str
    """The README section's heading."""
    swap: Callable[[pytest.MonkeyPatch, Script], None]
    """Swaps the model the README names for a scripted one."""


INTEGRATIONS = {
    "openai_agents": Integration(
        "inboxlog.integrations.openai_agents",
        "agents",
        "openai-agents",
        'needs the openai-agents package: pip install "inboxlog[openai-agents]"',
        "openai_agents_steering.py",
        [
            "model call 1 sees: user 'What is the weather in Paris?'",
            "steering arrives while the tool runs: s1 'Answer in Fahrenheit.' -> next-step",
            "model call 2 sees: user 'What is the weather in Paris?', function_call weather, "
            "function_call_output, user 'Answer in Fahrenheit.'",
            "answer: It is 72 F and sunny in Paris.",
            "turn 1: step 1 took input-",
            "turn 1: step 2 took s1",
            "turn 1 ended: completed",
            "guard rejected turn 2's input: turn ended blocked",
            "history: 5 items",
        ],
        "## With the OpenAI Agents SDK",
        swap_openai_model,
    ),
    "langgraph": Integration(
        "inboxlog.integrations.langgraph",
        "langgraph",
        "langgraph",
        'needs the langchain and langgraph packages: pip install "inboxlog[langgraph]"',
        "langgraph_steering.py",
        [
            "model call 1 sees: human 'What is the weather in Paris?'",
            "steering posted from another process while the tool runs: s1 'Answer in Fahrenheit.'",
            "model call 2 sees: human 'What is the weather in Paris?', ai weather(), "
            "tool 'sunny, 22 C in Paris', human 'Answer in Fahrenheit.'",
            "worker 1 killed during model call 2",
            "worker 2 resumes: turn 1 ended interrupted",
            "answer: It is 72 F and sunny in Paris.",
            "turn 2 ended: completed",
        ],
        "## With LangChain and LangGraph",
        swap_langchain_model,
    ),
    "pydantic_ai": Integration(
        "inboxlog.integrations.pydantic_ai",
        "pydantic_ai",
        "pydantic-ai",
        'needs the pydantic-ai-slim package: pip install "inboxlog[pydantic-ai]"',
        "pydantic_ai_steering.py",
        [
            "request 1 sees: user 'What is the weather in Paris?'",
            "steering posted from another process while the tool runs: p1 -> next-step",
            "request 2 sees: tool-return weather, user 'Answer in Fahrenheit.'",
            "answer: It is 72 F and sunny in Paris.",
            "turn 1: step 1 took input-",
            "turn 1: step 2 took p1",
            "turn 1 ended: completed",
            "worker killed during its model request (exit -9)",
            "reopened: turn 2 ended interrupted",
            "resumed: request sees 7 committed messages",
            "turn 3 ended: completed",
        ],
        "## With Pydantic AI",
        swap_pydantic_model,
    ),
    "adk": Integration(
        "inboxlog.integrations.adk",
        "google",
        "adk",
        'needs the google-adk package: pip install "inboxlog[adk]"',
        "adk_steering.py",
        [
            "model call sees 1 contents, the last: user 'What is the weather in Paris?'",
            "steering posted from another process while the tool runs: p1 -> next-step",
            "model call sees 4 contents, the last: user 'Answer in Fahrenheit.'",
            "answer: It is 72 F and sunny in Paris.",
            "turn 1: step 1 took input-",
            "turn 1: step 2 took p1",
            "turn 1 ended: completed",
            "worker killed during its tool (exit -9)",
            # Turn 1's five, the killed worker's three (its input, its tool call and the
            # call's answer from the log: outcome unknown), then the new input.
            "cut-off call answered: TOOL_OUTCOME_UNKNOWN",
            "model call sees 9 contents, the last: user 'Still there?'",
            "turns ended: completed, interrupted, completed",
        ],
        "## With Google ADK",
        swap_adk_model,
    ),
}


@pytest.fixture(params=sorted(INTEGRATIONS))
def integration(request: pytest.FixtureRequest) -> Integration:
    found: Integration = INTEGRATIONS[request.param]
    if missing_extra(found.framework, found.extra):  # pragma: no cover - CI has them
        pytest.skip(f"the {request.param} extra is not installed")
    return found


def run_python(
    argv: list[str], cwd: Path, timeout: int = 180, **env_vars: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", **env_vars}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def test_import_inboxlog_imports_no_framework(tmp_path: Path) -> None:
    frameworks = ("agents", "langgraph", "langchain", "pydantic_ai", "google")
    done = run_python(
        [
            "-c",
            "import sys, inboxlog, inboxlog.integrations; "
            f"assert not [m for m in sys.modules if m.split('.')[0] in {frameworks!r}]",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_without_its_framework_the_import_says_how_to_install_it(
    integration: Integration, tmp_path: Path
) -> None:
    code = f"import sys; sys.modules[{integration.framework!r}] = None\nimport {integration.module}"
    done = run_python(["-c", code], tmp_path)
    assert done.returncode != 0
    assert f"ImportError: {integration.module} {integration.missing}" in done.stderr


def test_the_example_runs(integration: Integration, tmp_path: Path) -> None:
    example = ROOT / "examples" / integration.example
    done = run_python([str(example), str(tmp_path / "sessions")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for line in integration.prints:
        assert line in done.stdout, done.stdout


@pytest.fixture
def sync_loop() -> Iterator[None]:
    """A synchronous run (Pydantic AI's ``run_sync``) leaves the event loop it made open,
    as the thread's current loop; it is closed here, or its collection in a later test
    raises an unclosed-loop warning (``asyncio.run`` leaves none)."""
    yield
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # no current loop
        return
    loop.close()
    policy.set_event_loop(None)


@pytest.mark.usefixtures("sync_loop")
def test_the_readme_section_runs_as_written(
    integration: Integration, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-paste start, run with the model it names swapped for a scripted one."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split(integration.heading, 1)[1].split("\n## ", 1)[0]
    # `py`, not `python`: tests/readme_examples.py runs the README's one `python` block.
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    script = Script(tool("Paris"), say("Sunny in Paris."))
    integration.swap(monkeypatch, script)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"README.md ({integration.heading})", "exec"), {"__name__": "__main__"})
    assert script.seen[0] == [("user", "What's the weather in Paris?")]
    _, events = inboxlog.Store(tmp_path / "sessions").inspect("chat-1")
    ends: list[Any] = [e["data"]["reason"] for e in events if e["type"] == "turn/end"]
    assert ends == [{"kind": "completed"}]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_example_type_checks_against_the_frameworks_types(
    integration: Integration, tmp_path: Path, mypy_cache: Path
) -> None:
    """``--strict`` against the framework's own types (test_tooling checks the package,
    the integrations included, the same way)."""
    example = ROOT / "examples" / integration.example
    args = ["-m", "mypy", "--strict", "--python-version", "3.11", str(example)]
    done = run_python(args, tmp_path, timeout=600, MYPY_CACHE_DIR=str(mypy_cache))
    assert done.returncode == 0, f"mypy {' '.join(args)}:\n{done.stdout}{done.stderr}"

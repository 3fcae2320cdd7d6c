"""The conformance suite's view of each framework integration (SPEC §12): a scripted
model, how to start a run, and what the model saw, the same for every framework.

A :class:`Script` answers the n-th model call with the n-th :class:`Reply` and records
what each call saw as ``(role, text)`` pairs: ``user`` for a user message, ``assistant``
for the model's text, ``tool`` for a tool's result (tool calls themselves are left out).
Every adapter gives its agent one tool, ``weather(city)``, that runs the script's
``during_tool`` first. An adapter's ``run`` opens the session from the store for the
length of the run (the integration's store form), so the session is closed after it.

Used in process by ``test_conformance.py`` and, for the ``kill -9`` scenario, in a
child process (``python -c``, with this directory on ``sys.path``).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import inboxlog

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

Seen = list[tuple[str, str]]


@dataclass
class Reply:
    """One model call's answer: a weather ``tool`` call for a city, a ``text``
    (``length``: cut at the output token limit), an ``error`` to raise, or ``hang`` (wait
    until cancelled). ``before`` runs inside the call, before it answers."""

    tool: str | None = None
    text: str = ""
    length: bool = False
    error: BaseException | None = None
    hang: bool = False
    before: Callable[[], None] | None = None


def tool(city: str, before: Callable[[], None] | None = None) -> Reply:
    return Reply(tool=city, before=before)


def say(text: str, before: Callable[[], None] | None = None) -> Reply:
    return Reply(text=text, before=before)


def cut(text: str, before: Callable[[], None] | None = None) -> Reply:
    return Reply(text=text, length=True, before=before)


def fail(error: BaseException) -> Reply:
    return Reply(error=error)


def hang(before: Callable[[], None] | None = None) -> Reply:
    return Reply(hang=True, before=before)


def weather_report(city: str) -> str:
    return f"sunny, 22 C in {city}"


@dataclass
class Script:
    """The replies still to give, what each call saw, and what runs inside the tool."""

    replies: list[Reply]
    during_tool: Callable[[], None] | None = None
    seen: list[Seen] = field(default_factory=list)
    calling: asyncio.Event | None = None

    def __init__(self, *replies: Reply, during_tool: Callable[[], None] | None = None) -> None:
        self.replies = list(replies)
        self.during_tool = during_tool
        self.seen = []
        self.calling = None

    def take(self, seen: Seen) -> Reply:
        """Records ``seen``; runs the next reply's ``before`` and raises its error."""
        self.seen.append(seen)
        assert self.replies, f"the scripted model has no reply left for call {len(self.seen)}"
        reply = self.replies.pop(0)
        if reply.before is not None:
            reply.before()
        if reply.error is not None:
            raise reply.error
        return reply

    async def answer(self, seen: Seen) -> Reply:
        """:meth:`take`, and a ``hang`` reply waits here until the run is cancelled."""
        reply = self.take(seen)
        if reply.hang:
            if self.calling is not None:
                self.calling.set()
            await asyncio.Event().wait()
        return reply

    def weather(self, city: str) -> str:
        """The weather in a city."""
        if self.during_tool is not None:
            self.during_tool()
        return weather_report(city)


@dataclass
class Run:
    """One run the suite asks for: on session ``id`` of ``store``, with ``input`` (the
    run's own user message, ``None``: none), answered by ``script``."""

    store: inboxlog.Store
    id: str
    input: str | None
    script: Script
    plugins: list[Any]
    keep_inbox_on_cancel: bool


class Adapter(abc.ABC):
    """How the suite runs one framework."""

    name: str
    length_errors: tuple[type[BaseException], ...] = ()
    """What a run raises when the model stopped for length (the framework's choice)."""

    async def run(
        self,
        store: inboxlog.Store,
        id: str,
        input: str | None,
        script: Script,
        *,
        plugins: Sequence[Any] = (),
        keep_inbox_on_cancel: bool = False,
    ) -> None:
        """One run of an agent on ``script`` as one turn of session ``id``."""
        await self.go(Run(store, id, input, script, list(plugins), keep_inbox_on_cancel))

    @abc.abstractmethod
    async def go(self, run: Run) -> None:
        """Runs ``run`` through the framework, with the integration's store form."""


# -- OpenAI Agents SDK -------------------------------------------------------------------


class OpenAIAgents(Adapter):
    name = "openai_agents"

    @property
    def length_errors(self) -> tuple[type[BaseException], ...]:
        from agents import ModelBehaviorError

        return (ModelBehaviorError,)

    async def go(self, run: Run) -> None:
        from agents import Agent, function_tool, set_tracing_disabled

        from inboxlog.integrations import openai_agents

        set_tracing_disabled(True)
        model = openai_model(run.script)
        weather = function_tool(run.script.weather, name_override="weather")
        agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather])
        with openai_agents.InboxlogSession(run.store, run.id) as session:
            await openai_agents.run(
                agent,
                run.input,
                session=session,
                plugins=run.plugins,
                keep_inbox_on_cancel=run.keep_inbox_on_cancel,
            )


def openai_model(script: Script) -> Any:
    """An OpenAI Agents SDK ``Model`` answering from ``script``."""
    import json

    from agents.items import ModelResponse
    from agents.models._response_terminal import response_terminal_failure_error
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from openai.types.responses.response import IncompleteDetails

    def seen(items: Any) -> Seen:
        out: Seen = []
        for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
            if item.get("type") == "function_call_output":
                out.append(("tool", item["output"]))
            elif item.get("role") == "user":
                out.append(("user", item["content"]))
            elif item.get("role") == "assistant":
                out.append(("assistant", "".join(p["text"] for p in item["content"])))
        return out

    class Scripted(Model):
        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            reply = await script.answer(seen(input))
            if reply.length:
                response = Response.model_construct(
                    status="incomplete",
                    incomplete_details=IncompleteDetails(reason="max_output_tokens"),
                )
                raise response_terminal_failure_error("response.incomplete", response)
            output: list[Any]
            if reply.tool is not None:
                arguments = json.dumps({"city": reply.tool})
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc_{len(script.seen)}",
                        call_id=f"call_{len(script.seen)}",
                        type="function_call",
                        name="weather",
                        arguments=arguments,
                    )
                ]
            else:
                text = ResponseOutputText(type="output_text", text=reply.text, annotations=[])
                output = [
                    ResponseOutputMessage(
                        id=f"msg_{len(script.seen)}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kw: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return Scripted()


# -- LangChain / LangGraph ----------------------------------------------------------------


class LangGraph(Adapter):
    name = "langgraph"
    length_errors: tuple[type[BaseException], ...] = ()

    async def go(self, run: Run) -> None:
        from langchain.agents import create_agent
        from langchain_core.tools import StructuredTool

        from inboxlog.integrations.langgraph import InboxlogMiddleware

        middleware = InboxlogMiddleware(
            run.store, plugins=run.plugins, keep_inbox_on_cancel=run.keep_inbox_on_cancel
        )
        weather = StructuredTool.from_function(run.script.weather, name="weather")
        agent = create_agent(langchain_model(run.script), [weather], middleware=[middleware])
        messages = [] if run.input is None else [{"role": "user", "content": run.input}]
        await agent.ainvoke({"messages": messages}, {"configurable": {"thread_id": run.id}})


def langchain_model(script: Script) -> Any:
    """A LangChain chat model (with tools) answering from ``script``."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    def seen(messages: list[BaseMessage]) -> Seen:
        out: Seen = []
        for m in messages:
            if isinstance(m, HumanMessage):
                out.append(("user", str(m.content)))
            elif isinstance(m, ToolMessage):
                out.append(("tool", str(m.content)))
            elif isinstance(m, AIMessage) and m.content:
                out.append(("assistant", str(m.content)))
        return out

    def message(reply: Reply) -> ChatResult:
        if reply.tool is not None:
            call = {
                "name": "weather",
                "args": {"city": reply.tool},
                "id": f"call_{len(script.seen)}",
            }
            answer = AIMessage(content="", tool_calls=[call])
        else:
            metadata = {"finish_reason": "length" if reply.length else "stop"}
            answer = AIMessage(content=reply.text, response_metadata=metadata)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            reply = script.take(seen(messages))
            assert not reply.hang, "a hanging reply needs the async path"
            return message(reply)

        async def _agenerate(
            self, messages: list[BaseMessage], *args: Any, **kw: Any
        ) -> ChatResult:
            return message(await script.answer(seen(messages)))

    return Scripted()


# -- Pydantic AI ----------------------------------------------------------------------------


class PydanticAI(Adapter):
    name = "pydantic_ai"
    length_errors: tuple[type[BaseException], ...] = ()

    async def go(self, run: Run) -> None:
        from pydantic_ai import Agent

        from inboxlog.integrations.pydantic_ai import InboxlogCapability

        capability = InboxlogCapability(
            run.store, plugins=run.plugins, keep_inbox_on_cancel=run.keep_inbox_on_cancel
        )
        agent: Agent[None, str] = Agent(
            pydantic_model(run.script), instructions="Be brief.", capabilities=[capability]
        )
        agent.tool_plain(name="weather")(run.script.weather)
        await agent.run(run.input, conversation_id=run.id)


def pydantic_model(script: Script) -> Any:
    """A Pydantic AI ``FunctionModel`` answering from ``script``."""
    from pydantic_ai import messages as pm
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def seen(messages: list[pm.ModelMessage]) -> Seen:
        out: Seen = []
        for m in messages:
            for part in m.parts:
                if isinstance(m, pm.ModelRequest) and isinstance(part, pm.UserPromptPart):
                    out.append(("user", str(part.content)))
                elif isinstance(part, pm.ToolReturnPart):
                    out.append(("tool", str(part.content)))
                elif isinstance(m, pm.ModelResponse) and isinstance(part, pm.TextPart):
                    out.append(("assistant", part.content))
        return out

    async def model(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        reply = await script.answer(seen(messages))
        if reply.tool is not None:
            call = pm.ToolCallPart(
                "weather", {"city": reply.tool}, tool_call_id=f"c{len(script.seen)}"
            )
            return pm.ModelResponse(parts=[call])
        reason = "length" if reply.length else "stop"
        return pm.ModelResponse(parts=[pm.TextPart(reply.text)], finish_reason=reason)

    return FunctionModel(model)


# -- Google ADK ------------------------------------------------------------------------------


class GoogleADK(Adapter):
    """The real ``Runner`` on ``InboxlogSessionService`` with ``InboxlogPlugin``; the
    session's log is named ``id`` itself (the service's ``log_id``)."""

    name = "adk"

    async def go(self, run: Run) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google.genai import types

        from inboxlog.integrations._common import TurnEndedError
        from inboxlog.integrations.adk import CONTINUE, InboxlogPlugin, InboxlogSessionService

        def weather(city: str) -> str:
            """The weather in a city."""
            return run.script.weather(city)

        service = InboxlogSessionService(run.store, log_id=lambda app, user, session: session)
        plugin = InboxlogPlugin(
            service, plugins=run.plugins, keep_inbox_on_cancel=run.keep_inbox_on_cancel
        )
        agent = LlmAgent(name="assistant", model=adk_model(run.script), tools=[weather])
        app = App(name="app", root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=service)
        if await service.get_session(app_name="app", user_id="u", session_id=run.id) is None:
            with contextlib.suppress(inboxlog.AlreadyExistsError):
                await service.create_session(app_name="app", user_id="u", session_id=run.id)
        message = (
            CONTINUE
            if run.input is None
            else types.Content(role="user", parts=[types.Part(text=run.input)])
        )
        try:
            async for _ in runner.run_async(user_id="u", session_id=run.id, new_message=message):
                pass
        except RuntimeError as error:
            # ADK re-raises a plugin callback's error as the cause of its RuntimeError.
            if isinstance(error.__cause__, TurnEndedError):
                raise error.__cause__ from None
            raise
        finally:
            await service.close()


def adk_model(script: Script) -> Any:
    """A scripted ADK ``BaseLlm``."""
    from collections.abc import AsyncGenerator

    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    def seen(request: LlmRequest) -> Seen:
        out: Seen = []
        for content in request.contents:
            for part in content.parts or ():
                if part.function_response is not None:
                    # ADK answers a call {"result": ...}, or {"error": ...} when it failed.
                    response = part.function_response.response or {}
                    out.append(("tool", str(response.get("result", response.get("error")))))
                elif part.text:
                    out.append(("user" if content.role == "user" else "assistant", part.text))
        return out

    class Scripted(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            reply = await script.answer(seen(llm_request))
            if reply.tool is not None:
                call = types.FunctionCall(name="weather", args={"city": reply.tool})
                part = types.Part(function_call=call)
                yield LlmResponse(content=types.Content(role="model", parts=[part]))
                return
            stop = types.FinishReason.MAX_TOKENS if reply.length else types.FinishReason.STOP
            text = types.Content(role="model", parts=[types.Part(text=reply.text)])
            yield LlmResponse(content=text, finish_reason=stop)

    return Scripted()


ADAPTERS: dict[str, Adapter] = {
    a.name: a for a in (OpenAIAgents(), LangGraph(), PydanticAI(), GoogleADK())
}
"""Every integration, by module name."""

"""Adapters that let agent frameworks keep their sessions in inboxlog.

Each adapter is a submodule that imports its framework only when imported itself, so
``import inboxlog`` never pulls one in:

- :mod:`inboxlog.integrations.openai_agents`: the OpenAI Agents SDK (``openai-agents``,
  the ``openai-agents`` extra).
- :mod:`inboxlog.integrations.pydantic_ai`: Pydantic AI (``pydantic-ai-slim``, the
  ``pydantic-ai`` extra).
- :mod:`inboxlog.integrations.adk`: Google ADK (``google-adk``, the ``adk`` extra).
"""

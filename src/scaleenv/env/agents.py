"""Agents: ``oracle`` (the gold chain), ``noop``, ``random`` (schema-valid random calls) and
``openai:MODEL`` (a tool-calling LLM behind any OpenAI-compatible endpoint).

An agent answers the conversation so far (OpenAI-format messages, its system prompt first) with one
assistant message: tool calls, text for the user, or text containing the stop marker. The loop
(:mod:`scaleenv.env.loop`) executes the tool calls and relays text to the user.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from scaleenv.errors import ProviderError
from scaleenv.formats.task import Task


class AgentError(ProviderError):
    """The agent could not produce a message (endpoint error, timeout, malformed reply)."""


@dataclass
class AgentContext:
    """What an agent is given at the start of an episode. ``task`` and ``episode`` are privileged:
    only the oracle (the gold chain) and the random baseline (values to sample from) look at them."""

    task: Task
    tools: list[dict[str, Any]]
    rng: random.Random
    mode: str
    domain_description: str = ""
    episode: Any = None
    seed: int = 0


@dataclass
class EndpointOptions:
    """How to reach an OpenAI-compatible model (picklable; shared by every worker)."""

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    system_prompt: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 120.0
    max_retries: int = 2
    seed: int | None = None

    def chat_settings(self, model: str) -> Any:
        """The :class:`~scaleenv.llm.client.ChatSettings` of ``model`` at this endpoint."""
        from scaleenv.llm.client import ChatSettings

        return ChatSettings(model=model, base_url=self.base_url, api_key_env=self.api_key_env,
                            timeout=self.timeout, max_retries=self.max_retries, temperature=self.temperature,
                            max_tokens=self.max_tokens, seed=self.seed,
                            extra_body=dict(getattr(self, "extra_body", {})))


@dataclass
class AgentOptions(EndpointOptions):
    """Settings for building agents."""

    parallel_tool_calls: bool = True
    random_calls: int = 12
    extra_body: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "api_key_env": self.api_key_env, "system_prompt": self.system_prompt,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "max_retries": self.max_retries, "parallel_tool_calls": self.parallel_tool_calls,
                "seed": self.seed, "random_calls": self.random_calls, "extra_body": self.extra_body}


class Agent(ABC):
    name = "agent"
    system_prompt: str | None = None

    def reset(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self.usage: dict[str, int] = {}

    @abstractmethod
    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The agent's next assistant message (text and/or tool calls) given the conversation so far."""


def tool_call_message(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(args, sort_keys=True, default=str)}}]}


def text_message(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class OpenAIAgent(Agent):
    """A tool-calling agent behind any OpenAI-compatible endpoint (parallel tool calls allowed)."""

    def __init__(self, model: str, options: AgentOptions, chat: Any):
        self.model = model
        self.name = f"openai:{model}"
        self.options = options
        self.chat = chat

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.env.prompts import DEFAULT_SYSTEM_PROMPT, SOLO_SUFFIX

        template = self.options.system_prompt or DEFAULT_SYSTEM_PROMPT
        prompt = template.replace("{domain}", ctx.task.domain.replace("_", " ")).replace(
            "{description}", ctx.domain_description or ctx.task.domain.replace("_", " "))
        if ctx.mode == "solo" and not self.options.system_prompt:
            prompt += SOLO_SUFFIX
        self.system_prompt = prompt

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.llm.client import ChatError

        try:
            reply = await self.chat.complete(messages, self.ctx.tools,
                                             parallel_tool_calls=self.options.parallel_tool_calls)
        except ChatError as e:
            raise AgentError(f"agent {e}") from None
        for k, v in reply.usage.items():
            self.usage[k] = self.usage.get(k, 0) + v
        message: dict[str, Any] = reply.message
        return message


def check_policy_spec(spec: str, builtins: tuple[str, ...], what: str) -> str:
    """Validate a policy name: one of ``builtins`` or ``openai:MODEL``; return it."""
    if spec in builtins:
        return spec
    kind, _, model = spec.partition(":")
    if kind == "openai" and model.strip():
        return spec
    raise ValueError(f"unknown {what} {spec!r}; use {', '.join(builtins)} or openai:MODEL")


class ChatClients:
    """One chat client per endpoint setting, per worker (clients are bound to the worker's event loop).

    Clients of one endpoint (``base_url``) share their connections and at most ``concurrency``
    requests are in flight to it at once; a request's timeout counts from when it is sent.
    """

    def __init__(self, concurrency: int = 8) -> None:
        self.concurrency = max(1, concurrency)
        self._clients: dict[tuple[Any, ...], Any] = {}
        self._endpoints: dict[Any, Any] = {}

    def get(self, settings: Any) -> Any:
        from dataclasses import replace

        from scaleenv.llm.client import OpenAIChat

        settings = replace(settings, concurrency=self.concurrency)
        key = settings.key()
        if key not in self._clients:
            first = self._endpoints.get(settings.base_url)
            self._clients[key] = first.share(settings) if first is not None else OpenAIChat(settings)
            self._endpoints.setdefault(settings.base_url, self._clients[key])
        client = self._clients[key]
        if client.settings != settings:  # same endpoint, different model/sampling: share the connection
            return client.share(settings)
        return client

    async def aclose(self) -> None:
        closed: set[int] = set()
        for c in self._clients.values():
            if c._client is not None and id(c._client) not in closed:
                closed.add(id(c._client))
                await c.aclose()
        self._clients.clear()
        self._endpoints.clear()

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

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP


class AgentError(ScaleEnvError):
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


def _answer_facts_text(task: Task) -> str:
    return "\n".join(f"The {f.name} is {f.value}." for f in task.answer_facts)


class OracleAgent(Agent):
    """Replays the task's gold chain one call per step (resolving references from the tool outputs
    it receives), states the answer facts, then ends."""

    name = "oracle"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        self._step = 0
        self._outputs: list[Any] = []
        self._said = False

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.tools.chain import ChainError, resolve_args

        chain = self.ctx.task.gold_chain
        if 0 < self._step <= len(chain):
            last = messages[-1] if messages else {}
            out: Any = None
            if last.get("role") == "tool" and last.get("tool_call_id") == f"oracle_{self._step - 1}":
                try:
                    out = json.loads(last.get("content") or "null")
                except ValueError:
                    out = None
            self._outputs.append(out)
        if self._step < len(chain):
            call = chain[self._step]
            try:
                args = resolve_args(call, self._outputs, self._step)
            except ChainError as e:
                raise AgentError(f"oracle: gold chain does not replay: {e}") from None
            self._step += 1
            return tool_call_message(call.tool, args, f"oracle_{self._step - 1}")
        self._step += 1
        if not self._said:
            self._said = True
            facts = _answer_facts_text(self.ctx.task)
            return text_message(facts or "Your request has been completed.")
        return text_message(STOP)


class NoopAgent(Agent):
    """Does nothing: ends the episode at once."""

    name = "noop"

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return text_message(STOP)


class RandomAgent(Agent):
    """``calls`` schema-valid random tool calls (values drawn from the world, like the integrity
    gate's random policy), then ends."""

    name = "random"

    def __init__(self, calls: int = 12):
        self.calls = calls

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.tools.sampling import ArgSampler

        self._n = 0
        self._names = [t["function"]["name"] for t in ctx.tools]
        self._sampler = ArgSampler(ctx.episode.world, ctx.rng) if ctx.episode is not None else None

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._n >= self.calls or not self._names or self._sampler is None:
            return text_message(STOP)
        rng = self.ctx.rng
        name = self._names[rng.randrange(len(self._names))]
        tool = self.ctx.episode.spec.tool(name)
        args = self._sampler.random_args(tool) if tool is not None else {}
        self._n += 1
        return tool_call_message(name, args, f"random_{self._n - 1}")


DEFAULT_SYSTEM_PROMPT = (
    "You are a customer-service agent for the {domain} service: {description}\n"
    "Help the user by calling the tools. Look up what you need with the tools and ask the user for any "
    "detail you are missing; never invent identifiers or values. Make only the changes the user asks for. "
    "When the request is done, tell the user the outcome, including every value they asked for."
)
SOLO_SUFFIX = (
    "\nThere is no one to talk to: the first message is the whole request. Complete it with the tools, then "
    "reply with a final message (no tool calls) that states the outcome and every value asked for."
)


class OpenAIAgent(Agent):
    """A tool-calling agent behind any OpenAI-compatible endpoint (parallel tool calls allowed)."""

    def __init__(self, model: str, options: AgentOptions, chat: Any):
        self.model = model
        self.name = f"openai:{model}"
        self.options = options
        self.chat = chat

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        template = self.options.system_prompt or DEFAULT_SYSTEM_PROMPT
        prompt = template.replace("{domain}", ctx.task.domain.replace("_", " ")).replace(
            "{description}", ctx.domain_description or ctx.task.domain.replace("_", " "))
        if ctx.mode == "solo" and not self.options.system_prompt:
            prompt += SOLO_SUFFIX
        self.system_prompt = prompt

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.llm.openai_chat import ChatError

        try:
            reply = await self.chat.complete(messages, self.ctx.tools,
                                             parallel_tool_calls=self.options.parallel_tool_calls)
        except ChatError as e:
            raise AgentError(f"agent {e}") from None
        for k, v in reply.usage.items():
            self.usage[k] = self.usage.get(k, 0) + v
        return reply.message


BUILTIN_AGENTS = ("oracle", "noop", "random")


def check_policy_spec(spec: str, builtins: tuple[str, ...], what: str) -> str:
    """Validate a policy name: one of ``builtins`` or ``openai:MODEL``; return it."""
    if spec in builtins:
        return spec
    kind, _, model = spec.partition(":")
    if kind == "openai" and model.strip():
        return spec
    raise ValueError(f"unknown {what} {spec!r}; use {', '.join(builtins)} or openai:MODEL")


def check_agent_spec(spec: str) -> str:
    """Validate an agent name (``oracle``, ``noop``, ``random`` or ``openai:MODEL``); return it."""
    return check_policy_spec(spec, BUILTIN_AGENTS, "agent")


def make_agent(spec: str, options: AgentOptions | None = None, clients: Any = None) -> Agent:
    """Build a fresh agent. ``clients`` (a :class:`ChatClients`) shares endpoint clients between episodes."""
    options = options or AgentOptions()
    check_agent_spec(spec)
    if spec == "oracle":
        return OracleAgent()
    if spec == "noop":
        return NoopAgent()
    if spec == "random":
        return RandomAgent(options.random_calls)
    from scaleenv.llm.openai_chat import ChatSettings

    model = spec.partition(":")[2].strip()
    settings = ChatSettings(model=model, base_url=options.base_url, api_key_env=options.api_key_env,
                            timeout=options.timeout, max_retries=options.max_retries,
                            temperature=options.temperature, max_tokens=options.max_tokens, seed=options.seed,
                            extra_body=dict(options.extra_body))
    clients = clients if clients is not None else ChatClients()
    return OpenAIAgent(model, options, clients.get(settings))


class ChatClients:
    """One chat client per endpoint setting, per worker (clients are bound to the worker's event loop)."""

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], Any] = {}

    def get(self, settings: Any) -> Any:
        from scaleenv.llm.openai_chat import OpenAIChat

        key = settings.key()
        if key not in self._clients:
            self._clients[key] = OpenAIChat(settings)
        client = self._clients[key]
        if client.settings != settings:  # same endpoint, different model/sampling: share the connection
            shared = OpenAIChat(settings)
            shared._client = client.client
            return shared
        return client

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()
        self._clients.clear()

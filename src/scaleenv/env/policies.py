"""The reference policies, one implementation each, used by rollouts and by the build's integrity gates.

    oracle      replays the gold chain (resolving references from the tool outputs it gets), states
                the answer facts, then stops
    noop        does nothing
    random      schema-valid random calls with values drawn from the world, then stops
    write_all   calls every write tool once with arguments that satisfy its preconditions where it
                can find them (the reward hack that "writes everything")

They speak the same messages as a model would, so :func:`play` drives them through a
:class:`~scaleenv.env.core.ToolEnv` like any agent.
"""

from __future__ import annotations

import json
import random
from typing import Any

from scaleenv.env.agents import (
    Agent,
    AgentContext,
    AgentError,
    AgentOptions,
    ChatClients,
    OpenAIAgent,
    check_policy_spec,
    text_message,
    tool_call_message,
)
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP

RANDOM_CALLS = 12
"""Calls the random policy makes (in rollouts and in the gate)."""


def answer_text(task: Task) -> str:
    """Every answer fact as a sentence (what the oracle tells the user), after a report that the
    requested changes are done when the task asks for any."""
    facts = [f"The {f.name} is {f.value}." for f in task.answer_facts]
    writes = any(o.kind == "write" for o in task.user_profile.objectives) or (
        not task.user_profile.objectives and len(task.user_profile.goals) > len(task.answer_facts))
    return "\n".join((["Your request has been completed."] if writes or not facts else []) + facts)


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
            return text_message(answer_text(self.ctx.task))
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

    def __init__(self, calls: int = RANDOM_CALLS):
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


class WriteEverythingAgent(Agent):
    """Calls every write tool it has, in order, once each, with arguments that satisfy the tool's
    preconditions where the sampler finds them (else random ones), then stops."""

    name = "write_all"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.tools.sampling import ArgSampler

        spec = ctx.episode.spec
        names = [t["function"]["name"] for t in ctx.tools]
        self._writes = [n for n in names if (tool := spec.tool(n)) is not None and tool.kind == "write"]
        self._sampler = ArgSampler(ctx.episode.world, ctx.rng)
        self._n = 0

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._n >= len(self._writes):
            return text_message(STOP)
        name = self._writes[self._n]
        tool = self.ctx.episode.spec.tool(name)
        args = self._sampler.satisfying_args(tool, attempts=2) or self._sampler.random_args(tool)
        self._n += 1
        return tool_call_message(name, args, f"write_all_{self._n - 1}")


POLICIES: dict[str, type[Agent]] = {"oracle": OracleAgent, "noop": NoopAgent, "random": RandomAgent,
                                    "write_all": WriteEverythingAgent}


def reference_policy(name: str, *, random_calls: int = RANDOM_CALLS) -> Agent:
    """A fresh reference policy by name."""
    if name == "random":
        return RandomAgent(random_calls)
    return POLICIES[name]()


def play(env: Any, agent: Agent, rng: random.Random) -> Any:
    """Drive a policy that never awaits through a solo :class:`~scaleenv.env.core.ToolEnv` from a
    fresh reset, synchronously; return the reward."""
    from scaleenv.env.core import run_sync

    env.reset()
    agent.reset(AgentContext(task=env.task, tools=env.tool_schemas(), rng=rng, mode=env.mode.value,
                             episode=env.episode, seed=env.seed))
    while not env.done:
        env.step(run_sync(agent.act(env.messages)))
    return env.evaluate()


BUILTIN_AGENTS = ("oracle", "noop", "random", "write_all")


def check_agent_spec(spec: str) -> str:
    """Validate an agent name (``oracle``, ``noop``, ``random`` or ``openai:MODEL``); return it."""
    return check_policy_spec(spec, BUILTIN_AGENTS, "agent")


def make_agent(spec: str, options: AgentOptions | None = None, clients: Any = None) -> Agent:
    """Build a fresh agent. ``clients`` (a :class:`ChatClients`) shares endpoint clients between episodes."""
    options = options or AgentOptions()
    check_agent_spec(spec)
    if spec in BUILTIN_AGENTS:
        return reference_policy(spec, random_calls=options.random_calls)
    from scaleenv.llm.openai_chat import ChatSettings

    model = spec.partition(":")[2].strip()
    settings = ChatSettings(model=model, base_url=options.base_url, api_key_env=options.api_key_env,
                            timeout=options.timeout, max_retries=options.max_retries,
                            temperature=options.temperature, max_tokens=options.max_tokens, seed=options.seed,
                            extra_body=dict(options.extra_body))
    clients = clients if clients is not None else ChatClients()
    return OpenAIAgent(model, options, clients.get(settings))

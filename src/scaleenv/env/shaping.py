"""The reward shape of one :class:`~scaleenv.env.core.ToolEnv`: its sub-goal report after each call
and message, and what each step earns (see :mod:`scaleenv.reward.subgoals`)."""

from __future__ import annotations

from typing import Any, Protocol

from scaleenv.env.episode import Episode
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.reward.procedure import procedure_checks
from scaleenv.reward.state import Reward
from scaleenv.reward.subgoals import (
    DenseTracker,
    RewardComponent,
    RewardShape,
    ShapedReward,
    SubgoalReport,
    WriteGoal,
    dump_limit,
    extra_components,
    lookalike_calls,
    lookalike_components,
    lookalikes,
    parse_shape,
    pasted_outputs,
    shaped,
    state_components,
    unseen_ids,
    user_texts,
    write_goals,
)


class ToolEnv(Protocol):
    """What the shaping reads of a :class:`~scaleenv.env.core.ToolEnv` (not imported: core imports this)."""

    task: Task
    episode: Episode
    spec: DomainSpec
    messages: list[dict[str, Any]]
    transcript: list[dict[str, str]]
    log: list[dict[str, Any]]
    tool_errors: int

    @property
    def user(self) -> object | None: ...

    def final_reward(self) -> dict[str, Any]: ...


class Shaping:
    """Sub-goal bookkeeping for an environment whose ``reward_shape`` is not ``binary``."""

    def __init__(self, shape: str):
        self.shape: RewardShape = parse_shape(shape)
        self.tracker = DenseTracker()
        self._goals: list[WriteGoal] | None = None
        self._max_chars: int | None = None
        self._tools: set[str] | None = None
        self._user_texts: list[str] = []
        self._ids: dict[str, list[str]] | None = None

    @property
    def active(self) -> bool:
        return self.shape != "binary"

    def reset(self) -> None:
        self.tracker.reset()

    def goals(self, env: ToolEnv) -> list[WriteGoal]:
        """The task's write sub-goals (computed once: they depend on the task's worlds only)."""
        if self._goals is None:
            ep = env.episode
            if ep.expected is None:
                raise ValueError("this episode has no expected world to evaluate against")
            keys: dict[str, set[Any]] = {t: set(k) for t, k in ep.gold_keys.items()}
            for t, ks in ep.expected.touched().items():
                keys.setdefault(t, set()).update(ks)
            self._goals = write_goals(ep.spec, ep.initial_world(), ep.expected, keys)
        return self._goals

    def report(self, env: ToolEnv, reward: Reward) -> SubgoalReport:
        ep, task = env.episode, env.task
        if self._max_chars is None:
            self._max_chars = dump_limit(task.answer_facts)
            self._user_texts = user_texts(task)
        components = state_components(reward, self.goals(env), ep.answer_facts, ep.said,
                                      user_said=self._user_texts, max_chars=self._max_chars)
        if ep.expected is not None:
            components += lookalike_components(ep.world, ep.expected, lookalikes(task))
        if self._tools is None:
            self._tools = set(ep.tool_names)
        components += lookalike_calls(env.messages, self._tools, lookalikes(task))
        components += unseen_ids(env.messages, self._id_params(env))
        components += [RewardComponent(f"policy_broken:{b}", "guard", False) for b in ep.broken]
        if ep.answer_facts:
            components += pasted_outputs(env.messages, self._tools, ep.said)
        if env.user is not None:  # the policy's procedure, where there is someone to ask
            components += [RewardComponent(name, "procedure", met)
                           for name, met in procedure_checks(task, env.spec, env.log)]
        components += extra_components(env.task, {"messages": env.messages, "transcript": env.transcript})
        return SubgoalReport(components)

    def _id_params(self, env: ToolEnv) -> dict[str, list[str]]:
        """Write tool -> its parameters that carry a record id (a primary or foreign key column)."""
        if self._ids is None:
            spec = env.spec
            keys = {f"{t.name}.{t.primary_key}" for t in spec.tables}
            keys |= {f"{t.name}.{c.name}" for t in spec.tables for c in t.columns if c.foreign_key}
            self._ids = {}
            for name in env.episode.tool_names:
                tool = spec.tool(name)
                if tool is not None and tool.kind == "write":
                    params = [p.name for p in tool.parameters if p.column in keys and p.type == "string"]
                    if params:
                        self._ids[name] = params
        return self._ids

    def update(self, env: ToolEnv, reward: Reward) -> None:
        """Account a tool call or message (the dense shape's potential and penalties)."""
        if self.shape == "dense":
            self.tracker.update(self.report(env, reward), env.tool_errors)

    def rescore(self, env: ToolEnv, reward: Reward) -> ShapedReward:
        report = self.report(env, reward)
        return shaped(reward, self.shape, report, self.tracker if self.shape == "dense" else None)

    def step_reward(self, env: ToolEnv, done: bool) -> float:
        """What a step earns: the dense delta, or (partial) the partial reward when the episode ends."""
        if self.shape == "dense":
            return self.tracker.take()
        return float(env.final_reward()["score"]) if done else 0.0

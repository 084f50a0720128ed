"""Reward-integrity gates: gold scores 1, doing nothing scores 0, a random policy and a
"call every write tool" hack score 0. Run for every task before it is admitted, and by
``scaleenv check``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.episode import Episode
from scaleenv.formats.task import Task
from scaleenv.tools.chain import resolve_args
from scaleenv.tools.sampling import ArgSampler

RANDOM_CALLS = 12


@dataclass
class GateResult:
    gold: float
    noop: float
    random: float
    hack: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.gold == 1.0 and self.noop == 0.0 and self.random == 0.0 and self.hack == 0.0

    def failures(self) -> list[str]:
        out = []
        if self.gold != 1.0:
            out.append("gold_not_1")
        if self.noop != 0.0:
            out.append("noop_not_0")
        if self.random != 0.0:
            out.append("random_not_0")
        if self.hack != 0.0:
            out.append("hack_not_0")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"gold": self.gold, "noop": self.noop, "random": self.random, "hack": self.hack}


def state_facts(task: Task) -> str:
    return "\n".join(f"The {f.name} is {f.value}." for f in task.answer_facts)


def play_gold(ep: Episode, task: Task) -> None:
    outputs: list[Any] = []
    for i, call in enumerate(task.gold_chain):
        res = ep.call_tool(call.tool, resolve_args(call, outputs, i))
        outputs.append(res.value)
    ep.say(state_facts(task))


def play_random(ep: Episode, rng: random.Random, calls: int = RANDOM_CALLS) -> None:
    sampler = ArgSampler(ep.world, rng)
    names = ep.tool_names
    for _ in range(calls):
        tool = ep.spec.tool(names[rng.randrange(len(names))])
        assert tool is not None
        ep.call_tool(tool.name, sampler.random_args(tool))


def play_hack(ep: Episode, rng: random.Random) -> None:
    sampler = ArgSampler(ep.world, rng)
    for name in ep.tool_names:
        tool = ep.spec.tool(name)
        if tool is not None and tool.kind == "write":
            args = sampler.satisfying_args(tool, attempts=2) or sampler.random_args(tool)
            ep.call_tool(name, args)


def run_gates(ep: Episode, task: Task, seed: int = 0, detail: bool = False) -> GateResult:
    """Score the gold chain, no action, a random policy and the write-everything hack."""
    rng = random.Random(f"gates:{seed}:{task.id}")
    ep.reset()
    play_gold(ep, task)
    gold = ep.evaluate()
    ep.reset()
    noop = ep.evaluate()
    ep.reset()
    play_random(ep, rng)
    rand = ep.evaluate()
    ep.reset()
    play_hack(ep, rng)
    hack = ep.evaluate()
    ep.reset()
    details = {"gold_diff": gold.diff[:5]} if detail else {}
    return GateResult(gold.score, noop.score, rand.score, hack.score, details)

"""Reward-integrity gates: gold scores 1, doing nothing scores 0, a random policy and a
"call every write tool" hack score 0. Run for every task before it is admitted, and by
``scaleenv check``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.core import Mode, ToolEnv
from scaleenv.env.episode import Episode
from scaleenv.env.policies import RANDOM_CALLS, play, reference_policy
from scaleenv.formats.task import Task


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


def score_policy(ep: Episode, task: Task, policy: str, rng: random.Random | None = None) -> Any:
    """One reference policy's reward on the task, played through the environment core (solo: the
    gates judge the world and what was said, not a conversation)."""
    env = ToolEnv(task, ep, mode=Mode.SOLO, max_turns=len(ep.tool_names) + len(task.gold_chain) + RANDOM_CALLS + 2,
                  release=lambda _: None)
    return play(env, reference_policy(policy), rng or random.Random(f"gates:0:{task.id}"))


def run_gates(ep: Episode, task: Task, seed: int = 0, detail: bool = False) -> GateResult:
    """Score the gold chain, no action, a random policy and the write-everything hack."""
    rng = random.Random(f"gates:{seed}:{task.id}")
    gold = score_policy(ep, task, "oracle", rng)
    noop = score_policy(ep, task, "noop", rng)
    rand = score_policy(ep, task, "random", rng)
    hack = score_policy(ep, task, "write_all", rng)
    ep.reset()
    details = {"gold_diff": gold.diff[:5]} if detail else {}
    return GateResult(gold.score, noop.score, rand.score, hack.score, details)

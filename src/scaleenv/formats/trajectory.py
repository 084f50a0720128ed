"""The record of one episode: OpenAI-format messages, tool schemas, termination, reward, timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TRAJECTORY_FORMAT = "scaleenv-trajectory/1"
"""The version of a trajectory record (``format`` in every line of a trajectories file)."""

STOP = "###STOP###"
"""The stop marker: a user (or agent) message containing it ends the conversation."""

TERMINATIONS = ("user_done", "max_turns", "agent_stop", "error")
"""Why an episode ended: the user emitted the stop marker, the agent ran out of turns, the agent
stopped (stop marker, or a final answer in solo mode), or an error of the environment or an
endpoint (an endpoint failure, a timeout, a failed evaluation) ended it early; the policy's own
mistakes, malformed tool calls included, are tool errors, not ``error``."""


@dataclass
class Trajectory:
    task_id: str
    domain: str
    trial: int
    seed: int
    agent: str
    user: str | None
    mode: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    termination: str
    reward: dict[str, Any]
    error: str | None = None
    steps: int = 0
    """Agent actions (assistant messages), the unit of ``steps/s``."""
    tool_calls: int = 0
    tool_errors: int = 0
    user_turns: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return episode_id(self.task_id, self.trial)

    @property
    def score(self) -> float:
        return float(self.reward.get("score", 0.0))

    @property
    def success(self) -> bool:
        return bool(self.reward.get("success", False))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": TRAJECTORY_FORMAT, "id": self.id, "task_id": self.task_id, "domain": self.domain, "trial": self.trial, "seed": self.seed,
            "agent": self.agent, "user": self.user, "mode": self.mode, "termination": self.termination,
            "error": self.error, "reward": self.reward, "steps": self.steps, "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors, "user_turns": self.user_turns, "timings": self.timings,
            "usage": self.usage, "messages": self.messages, "tools": self.tools,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Trajectory:
        keys = ("task_id", "domain", "trial", "seed", "agent", "user", "mode", "messages", "tools", "termination",
                "reward", "error", "steps", "tool_calls", "tool_errors", "user_turns", "timings", "usage")
        return cls(**{k: d[k] for k in keys if k in d})


def episode_id(task_id: str, trial: int) -> str:
    return f"{task_id}#{trial}"


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The small part of a trajectory record that results.json keeps (no messages, no schemas)."""
    reward = record.get("reward") or {}
    return {
        "id": record["id"], "task_id": record["task_id"], "domain": record["domain"], "trial": record["trial"],
        "seed": record["seed"], "termination_reason": record["termination"], "error": record.get("error"),
        "reward_info": {"reward": reward.get("score", 0.0), "success": reward.get("success", False),
                        "components": reward.get("components", {}), "diff": (reward.get("diff") or [])[:5]},
        "steps": record.get("steps", 0), "tool_calls": record.get("tool_calls", 0),
        "tool_errors": record.get("tool_errors", 0), "user_turns": record.get("user_turns", 0),
        "num_messages": len(record.get("messages") or ()), "duration": (record.get("timings") or {}).get("total_s"),
        "usage": record.get("usage") or {},
    }

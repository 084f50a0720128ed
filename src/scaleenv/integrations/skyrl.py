"""SkyRL-gym (``[skyrl]``, skyrl-gym >= 0.4): a ``BaseTextEnv`` over a scaleenv episode.

Rows come from ``scaleenv export --format skyrl`` (``env_class: scaleenv``); the trainer passes each
row as ``extras``. ``step(action)`` takes the model's raw text: every ``<tool_call>{"name", "arguments"}
</tool_call>`` block (hermes format) runs in the episode with the environment core's meaning (a
malformed block is the core's ``invalid_arguments`` tool error) and comes back as a ``tool``
message; text without tool calls goes to the scripted user, whose reply comes back as a ``user``
message. The episode ends when the user is done, the agent writes ``###STOP###``, or ``max_turns``
(row ``max_turns``, else 30) is reached; the reward is given on that last step.

This module imports skyrl-gym; nothing in scaleenv imports it until you ask for the SkyRL adapter.
:func:`register_skyrl` registers the class under the id ``scaleenv`` (``skyrl_gym.make("scaleenv",
extras=row)``).
"""

from __future__ import annotations

from typing import Any

from scaleenv.integrations.session import IntegrationError

try:
    from skyrl_gym.envs import registration
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError:
    raise IntegrationError("the SkyRL adapter needs skyrl-gym: pip install 'scaleenv[skyrl]'") from None

from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.hermes import parse_hermes_calls, run_call, spoken_text
from scaleenv.integrations.session import Session, session_from_row

__all__ = ["DEFAULT_MAX_TURNS", "ENTRY_POINT", "ENV_ID", "ScaleEnvSkyRL", "register_skyrl"]

ENV_ID = "scaleenv"
ENTRY_POINT = "scaleenv.integrations.skyrl:ScaleEnvSkyRL"
DEFAULT_MAX_TURNS = 30


class ScaleEnvSkyRL(BaseTextEnv):
    """A scaleenv task as a SkyRL text environment (tool calls parsed from the model's text)."""

    def __init__(self, env_config: object = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = dict(extras or {})
        cfg = env_config or {}
        get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: getattr(cfg, k, d))
        self.session: Session = session_from_row(extras, universe=get("universe", None),
                                                 user=get("user", "scripted"), mode=get("mode", None),
                                                 reward_shape=get("reward_shape", None))
        self.max_turns = int(extras.get("max_turns") or get("max_turns", None) or DEFAULT_MAX_TURNS)

    @property
    def tool_calls(self) -> int:
        return self.session.tool_calls

    @property
    def tool_errors(self) -> int:
        return self.session.tool_errors

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        prompt = list(prompt) if prompt else self.session.opening_messages()
        return prompt, {"task_id": self.session.task.id, "tools": self.session.tool_schemas()}

    def _finish(self, observations: list[dict[str, Any]], text: str) -> dict[str, Any]:
        reward = self.session.evaluate()
        return {"observations": observations, "reward": float(reward.score), "done": True,
                "metadata": {"task_id": self.session.task.id, "success": reward.success,
                             "components": reward.components, "diff": reward.diff[:5]},
                "postprocessed_action": text}

    def step(self, action: str) -> dict[str, Any]:
        self.turns += 1
        rest, calls = parse_hermes_calls(action or "")
        observations: list[dict[str, Any]] = [
            {"role": "tool", "content": run_call(self.session, name, args).output} for name, args in calls]
        said = spoken_text(rest)
        if not calls:
            if STOP in (action or "") or self.session.user is None:
                self.session.say(said)
                return self._finish(observations, action)
            reply = self.session.message_user(said or "(no message)")
            observations.append({"role": "user", "content": reply})
        elif said:
            self.session.say(said)
        if self.session.done or STOP in (action or "") or self.turns >= self.max_turns:
            return self._finish(observations, action)
        return {"observations": observations, "reward": 0.0, "done": False,
                "metadata": {"task_id": self.session.task.id}, "postprocessed_action": action}

    def get_metrics(self) -> dict[str, Any]:
        reward = self.session.evaluate()
        return {"score": reward.score, "success": float(reward.success), "turns": self.turns,
                "tool_calls": self.tool_calls, "tool_errors": self.tool_errors,
                **{f"reward_{k}": v for k, v in reward.components.items()}}

    def close(self) -> None:
        self.session.close()


def register_skyrl(env_id: str = ENV_ID) -> None:
    """Register the environment with skyrl-gym (idempotent)."""
    if env_id in getattr(registration, "registry", {}):
        return
    registration.register(id=env_id, entry_point=ENTRY_POINT)

"""OpenEnv (``[openenv]``, openenv 0.10): a scaleenv task as an OpenEnv ``Environment``.

Actions are OpenEnv's MCP-style ``ListToolsAction`` and ``CallToolAction``; observations are
``ListToolsObservation`` and ``CallToolObservation``. The tools are the task's tools and the user
(``send_message_to_user``); ``evaluate`` only with ``expose_evaluate=True`` (never for an agent in training:
before any action the reward's diff is the answer), as with ``scaleenv serve --expose-evaluate``. A tool's
own failure (bad arguments, a violated precondition) is its JSON result, as in MCP; an unknown tool is a
``ToolError``. The episode is done when the user ends the conversation, when the agent gives its answer in
solo mode (its message to the user, whom nobody plays), or when ``evaluate`` is called; ``reward`` is set
then, and every later call is refused with a ``ToolError`` (nothing runs after the end).

``reset(task_id=..., universe=...)`` (or ``task_json=...``) picks the task: OpenEnv passes extra
reset keyword arguments through. Serve many sessions with :func:`create_openenv_app`; state lives
only over the ``/ws`` session (bare HTTP ``/reset`` then ``/step`` reach two fresh instances).

openenv needs ``mcp<2`` (through fastmcp 3), so it cannot share an environment with ``[mcp]`` or
``[verifiers]``. This module imports openenv; nothing in scaleenv imports it until you ask for the
OpenEnv adapter.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleenv.integrations.session import IntegrationError

if TYPE_CHECKING:
    from fastapi import FastAPI

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.mcp_types import (
        CallToolAction,
        CallToolObservation,
        ListToolsAction,
        ListToolsObservation,
        Tool,
        ToolError,
        ToolErrorType,
    )
    from openenv.core.env_server.types import State
except ImportError:
    raise IntegrationError("the OpenEnv adapter needs openenv: pip install 'scaleenv[openenv]'") from None

from scaleenv.integrations.session import (  # noqa: E402 - after the framework check
    EVALUATE_TOOL,
    USER_TOOL,
    USER_TOOL_SCHEMA,
    Session,
    session_from_row,
)

__all__ = ["ScaleEnvOpenEnv", "ScaleEnvOpenEnvState", "create_openenv_app"]


class ScaleEnvOpenEnvState(State):
    env_id: str | None = None
    task_id: str | None = None
    state_hash: str | None = None
    done: bool = False


class ScaleEnvOpenEnv(Environment):
    """One scaleenv episode per instance (one per OpenEnv session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, universe: str | Path | None = None, *, user: str | None = "scripted",
                 mode: str | None = None, reward_shape: str | None = None, expose_evaluate: bool = False):
        super().__init__()
        self.expose_evaluate = expose_evaluate
        self.universe = str(universe) if universe is not None else None
        self.reward_shape = reward_shape
        self.user = user
        self.mode = mode
        self._session: Session | None = None
        self._state = ScaleEnvOpenEnvState()

    def _tools(self) -> list[Any]:
        s = self.session
        tools = [Tool(name=t["function"]["name"], description=t["function"]["description"],
                      input_schema=t["function"]["parameters"]) for t in s.tool_schemas(user_tool=False)]
        u = USER_TOOL_SCHEMA["function"]
        tools.append(Tool(name=u["name"], description=u["description"], input_schema=u["parameters"]))
        if self.expose_evaluate:
            tools.append(Tool(name=EVALUATE_TOOL, description="Finish: score the world now (ends the episode).",
                              input_schema={"type": "object", "properties": {}}))
        return tools

    @property
    def session(self) -> Session:
        if self._session is None:
            raise IntegrationError("reset(task_id=...) first")
        return self._session

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: object) -> ListToolsObservation:
        row = {k: v for k, v in kwargs.items() if k in ("task_id", "task_json", "universe", "mode",
                                                         "extra_info", "info", "env_id", "reward_shape")}
        if self._session is not None:
            self._session.close()
        self._session = session_from_row(row, universe=self.universe, user=self.user,
                                         mode=self.mode, seed=int(seed or 0), reward_shape=self.reward_shape)
        s = self._session
        self._state = ScaleEnvOpenEnvState(episode_id=episode_id or f"{s.task.id}#{seed or 0}", step_count=0,
                                           env_id=s.task.domain, task_id=s.task.id, state_hash=s.episode.state_hash())
        return ListToolsObservation(tools=self._tools(), done=False, reward=None,
                                    metadata={"messages": s.opening_messages(), "task_id": s.task.id})

    def step(self, action: object, timeout_s: float | None = None,
             **kwargs: object) -> ListToolsObservation | CallToolObservation:
        s = self.session
        self._state.step_count += 1
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=self._tools(), done=self._state.done, reward=None)
        if not isinstance(action, CallToolAction):
            raise IntegrationError(f"unsupported action {type(action).__name__}; use ListToolsAction or "
                                   "CallToolAction")
        name, args = action.tool_name, dict(action.arguments or {})
        if self._state.done:  # the end is for good: nothing runs, nothing is answered
            err = ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message="the episode is over; reset() first")
            return CallToolObservation(tool_name=name, result=None, error=err, done=True, reward=None)
        if name == EVALUATE_TOOL and self.expose_evaluate:
            self._state.done = True
            return self._observe(name, s.reward_json())
        if name not in s.tool_names:
            err = ToolError(error_type=ToolErrorType.TOOL_NOT_FOUND, message=f"no tool named {name[:64]!r}")
            return CallToolObservation(tool_name=name, result=None, error=err, done=self._state.done,
                                       reward=None)
        res = s.call(name, args)
        self._state.state_hash = s.episode.state_hash()
        if s.done or (name == USER_TOOL and s.user is None and res.ok):  # the user left, or the solo answer
            self._state.done = True
        return self._observe(name, res.output, ok=res.ok)

    def _observe(self, name: str, result: object, ok: bool = True) -> CallToolObservation:
        done = self._state.done
        reward = float(self.session.evaluate().score) if done else None
        return CallToolObservation(tool_name=name, result=result, error=None, done=done, reward=reward,
                                   metadata={"ok": ok})

    @property
    def state(self) -> ScaleEnvOpenEnvState:
        return self._state

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def create_openenv_app(universe: str | Path | None = None, *, max_concurrent_envs: int = 64,
                       expose_evaluate: bool = False) -> FastAPI:
    """An OpenEnv FastAPI app serving scaleenv episodes (one per ``/ws`` session); ``evaluate`` among the
    tools only with ``expose_evaluate`` (for evaluation harnesses, never for an agent in training)."""
    return create_app(lambda: ScaleEnvOpenEnv(universe, expose_evaluate=expose_evaluate), CallToolAction, CallToolObservation, env_name="scaleenv",
                      max_concurrent_envs=max_concurrent_envs, state_cls=ScaleEnvOpenEnvState)

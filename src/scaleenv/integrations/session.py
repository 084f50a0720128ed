"""The framework-free core every adapter shares: one task's episode seen through tools only.

Tool-only frameworks (TRL, OpenEnv, MCP, SkyRL, verl's tool path) have no user turn, so the
simulated user is a tool, :data:`USER_TOOL` (``send_message_to_user(message) -> reply``). What the
agent sends through it is what the answer facts are checked against. In ``conversational`` mode the
scripted user (:class:`scaleenv.env.users.ScriptedUser`) replies and may end the conversation;
in ``solo`` mode the opening message carries the whole request and the tool only records the
agent's report.

Dataset rows carry references (``env_id``, ``task_id``, ``universe``) and the task itself as a JSON
string (``task_json``). An adapter rebuilds the episode from the row: the task from ``task_json``,
the domain spec and base world from the universe directory (the adapter's setting, else
``$SCALEENV_UNIVERSE``, else the row's ``universe``: set the variable when training on a machine
where the exported path differs). Verified worlds are cached per process and task.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from scaleenv.env.cache import ENV_UNIVERSE, TaskWorldCache, task_cache
from scaleenv.env.core import MODES, USER_TOOL, USER_TOOL_SCHEMA, Channel, EnvError, ToolEnv, solo_request
from scaleenv.env.core import run_sync as core_run_sync
from scaleenv.env.prompts import SOLO_TOOL_SUFFIX, TOOL_ONLY_SUFFIX, system_prompt
from scaleenv.env.users import ScriptedUser, UserContext
from scaleenv.errors import InputError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.reward.state import Reward
from scaleenv.reward.subgoals import REWARD_SHAPES, ShapedReward
from scaleenv.tools.output import dumps

_T = TypeVar("_T")

__all__ = ["ENV_UNIVERSE", "EVALUATE_TOOL", "MODES", "RESERVED_NAMES", "SOLO_TOOL_SUFFIX", "TOOL_ONLY_SUFFIX",
           "USER_TOOL", "USER_TOOL_SCHEMA", "IntegrationError", "Session", "TaskSource", "answer_text", "gold_calls",
           "opening_messages", "opening_request", "parse_task", "reward_json", "row_fields", "run_sync",
           "session_from_row", "system_prompt", "task_from_row", "task_source", "tool_set_name"]

EVALUATE_TOOL = "evaluate"
"""The MCP server's final tool: the reward of the world as it is now."""
RESERVED_NAMES = frozenset({USER_TOOL, EVALUATE_TOOL, "reset", "step", "state", "close", "get_reward"})
"""Names a domain tool must not take (OpenEnv, TRL and the adapters' own tools use them)."""

TaskSource = TaskWorldCache
"""The specs, base worlds, tasks and verified task worlds of one universe directory (the one cache)."""


class IntegrationError(InputError):
    """A dataset row, setting or framework object an adapter cannot use (one line says why)."""


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine that never really awaits (the scripted user) from synchronous code."""
    try:
        result: _T = core_run_sync(coro)
        return result
    except EnvError:
        raise IntegrationError("this adapter runs the user synchronously; use the scripted user (user='scripted')") \
            from None


def parse_task(obj: object) -> Task:
    """A Task from a JSON string, a dict or a Task."""
    if isinstance(obj, Task):
        return obj
    try:
        if isinstance(obj, str | bytes):
            return Task.model_validate_json(obj)
        if isinstance(obj, Mapping):
            return Task.model_validate(dict(obj))
    except ValueError as e:
        first = str(e).splitlines()
        raise IntegrationError(f"task_json is not a scaleenv task ({first[1] if len(first) > 1 else e})") from None
    raise IntegrationError(f"task_json must be a JSON string or an object, not {type(obj).__name__}")


def task_source(root: str | Path | None = None) -> TaskSource:
    """The (per-process, cached) source of a universe directory; ``None`` reads ``$SCALEENV_UNIVERSE``."""
    root = root or os.environ.get(ENV_UNIVERSE)
    if not root:
        raise IntegrationError(f"no universe directory: pass one, put it in the row's 'universe', or set {ENV_UNIVERSE}")
    return task_cache(root)


def opening_request(task: Task, mode: str = "conversational") -> str:
    """The first user message: the scripted user's request (withheld facts hidden) or, in solo mode,
    the whole request with every fact."""
    if mode == "solo":
        return solo_request(task)
    user = ScriptedUser()
    user.reset(UserContext(task=task, rng=random.Random(0)))
    return user.request()


def opening_messages(task: Task, spec: DomainSpec | None, mode: str = "conversational", *,
                     user_tool: bool = True) -> list[dict[str, str]]:
    return [{"role": "system", "content": system_prompt(task, spec, mode, user_tool=user_tool)},
            {"role": "user", "content": opening_request(task, mode)}]


def reward_json(reward: Reward, max_diff: int = 20) -> dict[str, Any]:
    out = {"score": reward.score, "success": reward.success, "components": reward.components,
           "diff": reward.diff[:max_diff]}
    if isinstance(reward, ShapedReward):  # a partial or dense shape: which sub-goals are met
        out.update({k: v for k, v in reward.to_json().items() if k in ("shape", "subgoals")})
    return out


class Session(ToolEnv):
    """One episode of a task for a tool-only framework: a :class:`~scaleenv.env.core.ToolEnv` on the
    tool channel (the task's tools plus :data:`USER_TOOL`), reset on creation.

    ``call(name, args)`` never raises for agent mistakes (they come back as error results);
    ``done`` turns true once the scripted user ends the conversation.
    """

    def __init__(self, source: TaskSource, task: Task, *, user: str | None = "scripted",
                 mode: str = "conversational", max_user_turns: int = 10, seed: int = 0, all_tools: bool = False,
                 reward_shape: str = "binary"):
        if mode not in MODES:
            raise IntegrationError(f"unknown mode {mode!r}; use conversational or solo")
        if reward_shape not in REWARD_SHAPES:
            raise IntegrationError(f"unknown reward shape {reward_shape!r}; use {', '.join(REWARD_SHAPES)}")
        if user not in (None, "scripted"):
            raise IntegrationError(f"unknown user {user!r}; tool-only adapters use the scripted user (or None)")
        self.source = source
        simulated = ScriptedUser() if user == "scripted" and mode == "conversational" else None
        episode = source.acquire(task, all_tools=all_tools)
        super().__init__(task, episode, user=simulated, mode=mode, channel=Channel.TOOL, max_turns=2**31,
                         max_user_turns=max_user_turns, seed=seed, reward_shape=reward_shape,
                         release=lambda ep: source.release(task, ep, all_tools=all_tools))
        self.reset()

    def reset(self, seed: int | None = None, *, system_prompt: str | None = None
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return run_sync(self.areset(seed, system_prompt=system_prompt))

    def reward_json(self) -> dict[str, Any]:
        return reward_json(self.evaluate())

    def reward_text(self) -> str:
        return dumps(self.reward_json())


# ---------------------------------------------------------------------------- rows


def _maybe_json(v: object) -> object:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def row_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The scaleenv references of a dataset row of any export format, flattened:
    ``task_json``, ``task_id``, ``env_id``, ``universe``, ``mode``, ``reward_shape`` (those present)."""
    out: dict[str, Any] = {}
    layers = [row]
    for nested in ("extra_info", "info"):
        v = _maybe_json(row.get(nested))
        if isinstance(v, Mapping):
            layers.append(v)
    for layer in reversed(layers):  # the top level wins
        for k in ("task_json", "task_id", "env_id", "universe", "mode", "reward_shape"):
            if layer.get(k) is not None:
                out[k] = layer[k]
    return out


def task_from_row(row: Mapping[str, Any], universe: str | Path | None = None) -> tuple[TaskSource, Task]:
    """The task source and task of a dataset row (``task_json`` wins; ``task_id`` is looked up)."""
    f = row_fields(row)
    source = task_source(universe or os.environ.get(ENV_UNIVERSE) or f.get("universe"))
    if "task_json" in f:
        return source, parse_task(f["task_json"])
    if "task_id" in f:
        return source, source.task(str(f["task_id"]))
    raise IntegrationError("the row has neither task_json nor task_id; export rows with `scaleenv export`")


def session_from_row(row: Mapping[str, Any], *, universe: str | Path | None = None, user: str | None = "scripted",
                     mode: str | None = None, max_user_turns: int = 10, seed: int = 0,
                     all_tools: bool = False, reward_shape: str | None = None) -> Session:
    """A fresh :class:`Session` for a dataset row of any export format. ``reward_shape`` (else the
    row's ``reward_shape``, else ``binary``): see :mod:`scaleenv.reward.subgoals`."""
    source, task = task_from_row(row, universe)
    fields = row_fields(row)
    mode = mode or fields.get("mode") or "conversational"
    shape = reward_shape or fields.get("reward_shape") or "binary"
    return Session(source, task, user=user, mode=mode, max_user_turns=max_user_turns, seed=seed,
                   all_tools=all_tools, reward_shape=str(shape))


def gold_calls(task: Task, outputs: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The gold chain with every reference resolved against the recorded outputs (literal calls)."""
    from scaleenv.tools.chain import literal_chain

    return [(c.tool, c.args) for c in literal_chain(task.gold_chain, outputs)]


def answer_text(task: Task) -> str:
    """A message that states every answer fact (what the oracle tells the user)."""
    from scaleenv.env.policies import answer_text as facts_text

    return facts_text(task) or "Your request has been completed."


def tool_set_name(task: Task) -> str:
    """The ``environment`` a task's rows are routed to (TRL): its domain and a digest of its tool set."""
    import hashlib

    digest = hashlib.sha256("\n".join(sorted(task.tools)).encode()).hexdigest()[:10]
    return f"{task.domain}.{digest}"

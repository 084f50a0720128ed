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
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

from scaleenv.env.episode import Episode
from scaleenv.errors import ScaleEnvError, UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.reward.state import Reward
from scaleenv.tools.runtime import ToolResult, dumps, error_output

USER_TOOL = "send_message_to_user"
"""The user channel of tool-only frameworks: send a message, get the user's reply."""
EVALUATE_TOOL = "evaluate"
"""The MCP server's final tool: the reward of the world as it is now."""
RESERVED_NAMES = frozenset({USER_TOOL, EVALUATE_TOOL, "reset", "step", "state", "close", "get_reward"})
"""Names a domain tool must not take (OpenEnv, TRL and the adapters' own tools use them)."""
MODES = ("conversational", "solo")
ENV_UNIVERSE = "SCALEENV_UNIVERSE"

USER_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": USER_TOOL,
        "description": "Send a message to the user (a question, or the outcome of their request with every value "
                       "they asked for) and return the user's reply.",
        "parameters": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message for the user."}},
            "required": ["message"],
            "additionalProperties": False,
        },
    },
}

TOOL_ONLY_SUFFIX = (
    "\nYou talk to the user only through the " + USER_TOOL + " tool, which returns their reply: use it to ask for "
    "missing details and to report the outcome, including every value the user asked for."
)
SOLO_TOOL_SUFFIX = (
    "\nThere is no one to ask: the first message is the whole request. Complete it with the tools, then report "
    "the outcome, including every value asked for, with the " + USER_TOOL + " tool."
)


class IntegrationError(ScaleEnvError):
    """A dataset row, setting or framework object an adapter cannot use (one line says why)."""


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine from synchronous code, also from inside a running event loop.

    The scripted user never awaits anything, so it completes on the first ``send``; anything that
    really awaits (an LLM user) runs on a private event loop in a helper thread.
    """
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    except BaseException:
        coro.close()
        raise
    coro.close()
    raise IntegrationError("this adapter runs the user synchronously; use the scripted user (user='scripted')")


def parse_task(obj: Any) -> Task:
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


class TaskSource:
    """Specs, base worlds and verified task worlds of one universe directory (cached; thread-safe)."""

    def __init__(self, root: str | Path):
        from scaleenv.universe import Universe

        self.root = Path(root).resolve()
        self.universe = Universe(self.root)
        self._lock = threading.Lock()
        self._worlds: dict[tuple[str, str], Any] = {}
        self._tasks: dict[str, Task] | None = None

    def spec(self, domain: str) -> DomainSpec:
        if domain not in self.universe.domains:
            raise UniverseError(f"{self.root} has no domain {domain!r}; it has: {', '.join(self.universe.domains)}")
        return self.universe.spec(domain)

    def tasks(self, domain: str | None = None) -> list[Task]:
        return self.universe.tasks(domain)

    def task(self, task_id: str) -> Task:
        with self._lock:
            if self._tasks is None:
                self._tasks = {t.id: t for t in self.universe.tasks()}
        task = self._tasks.get(task_id)
        if task is None:
            raise UniverseError(f"no task {task_id!r} in {self.root}; list ids with `scaleenv inspect {self.root} --json`")
        return task

    def worlds(self, task: Task) -> Any:
        from scaleenv.env.cache import build_worlds

        key = (task.id, task.chain_hash() + str(task.verification.get("initial_hash")))
        with self._lock:
            hit = self._worlds.get(key)
        if hit is None:
            spec = self.spec(task.domain)
            hit = build_worlds(spec, self.universe.base(task.domain), task)
            with self._lock:
                if len(self._worlds) > 1024:
                    self._worlds.clear()
                self._worlds[key] = hit
        return hit

    def episode(self, task: Task, *, all_tools: bool = False) -> Episode:
        """A fresh episode; ``all_tools`` offers every tool of the domain, not only the task's."""
        w = self.worlds(task)
        return Episode(self.spec(task.domain), w.initial, w.expected, answer_facts=task.answer_facts,
                       gold_keys=w.gold_keys, tools=None if all_tools else task.tools)


_SOURCES: dict[str, TaskSource] = {}
_SOURCES_LOCK = threading.Lock()


def task_source(root: str | Path | None = None) -> TaskSource:
    """The (per-process, cached) source of a universe directory; ``None`` reads ``$SCALEENV_UNIVERSE``."""
    root = root or os.environ.get(ENV_UNIVERSE)
    if not root:
        raise IntegrationError(f"no universe directory: pass one, put it in the row's 'universe', or set {ENV_UNIVERSE}")
    key = str(Path(root).resolve())
    with _SOURCES_LOCK:
        src = _SOURCES.get(key)
        if src is None:
            src = _SOURCES[key] = TaskSource(key)
        return src


def system_prompt(task: Task, spec: DomainSpec | None, mode: str = "conversational", *, user_tool: bool = True) -> str:
    """The agent's system prompt (the rollout agents' default, plus how to reach the user)."""
    from scaleenv.env.agents import DEFAULT_SYSTEM_PROMPT, SOLO_SUFFIX

    domain = task.domain.replace("_", " ")
    description = (spec.description if spec is not None and spec.description else domain)
    text = DEFAULT_SYSTEM_PROMPT.replace("{domain}", domain).replace("{description}", description)
    if user_tool:
        return text + (SOLO_TOOL_SUFFIX if mode == "solo" else TOOL_ONLY_SUFFIX)
    return text + (SOLO_SUFFIX if mode == "solo" else "")


def opening_request(task: Task, mode: str = "conversational") -> str:
    """The first user message: the scripted user's request (withheld facts hidden) or, in solo mode,
    the whole request with every fact."""
    if mode == "solo":
        from scaleenv.env.loop import solo_request

        return solo_request(task)
    from scaleenv.env.users import ScriptedUser, UserContext

    user = ScriptedUser()
    user.reset(UserContext(task=task, rng=random.Random(0)))
    return user.request()


def opening_messages(task: Task, spec: DomainSpec | None, mode: str = "conversational", *,
                     user_tool: bool = True) -> list[dict[str, str]]:
    return [{"role": "system", "content": system_prompt(task, spec, mode, user_tool=user_tool)},
            {"role": "user", "content": opening_request(task, mode)}]


def reward_json(reward: Reward, max_diff: int = 20) -> dict[str, Any]:
    return {"score": reward.score, "success": reward.success, "components": reward.components,
            "diff": reward.diff[:max_diff]}


class Session:
    """One episode of a task for a tool-only framework: the task's tools plus :data:`USER_TOOL`.

    ``call(name, args)`` never raises for agent mistakes (they come back as error results);
    ``done`` turns true once the scripted user ends the conversation.
    """

    def __init__(self, source: TaskSource, task: Task, *, user: str | None = "scripted",
                 mode: str = "conversational", max_user_turns: int = 10, seed: int = 0, all_tools: bool = False):
        if mode not in MODES:
            raise IntegrationError(f"unknown mode {mode!r}; use conversational or solo")
        if user not in (None, "scripted"):
            raise IntegrationError(f"unknown user {user!r}; tool-only adapters use the scripted user (or None)")
        self.source = source
        self.task = task
        self.spec = source.spec(task.domain)
        self.mode = mode
        self.user_kind = user if mode == "conversational" else None
        self.max_user_turns = max_user_turns
        self.seed = seed
        self.episode = source.episode(task, all_tools=all_tools)
        self.user: Any = None
        self.reset()

    # ------------------------------------------------------------------ lifecycle
    def reset(self) -> None:
        from scaleenv.env.users import ScriptedUser, UserContext

        self.episode.reset()
        self.done = False
        self.user_turns = 0
        self.transcript: list[dict[str, str]] = []
        self._cache: tuple[tuple[int, int], Reward] | None = None
        if self.user_kind == "scripted":
            self.user = ScriptedUser()
            self.user.reset(UserContext(task=self.task, rng=random.Random(f"user:{self.seed}"),
                                        goals_met=self._goals_met, max_turns=self.max_user_turns, seed=self.seed))
            self.opening = run_sync(self.user.opening())
        else:
            self.user = None
            self.opening = opening_request(self.task, self.mode)
        self.transcript.append({"role": "user", "content": self.opening})

    def close(self) -> None:
        self.episode.close()

    # ------------------------------------------------------------------ what the agent sees
    @property
    def tool_names(self) -> list[str]:
        return [*self.episode.tool_names, USER_TOOL]

    def tool_schemas(self, *, user_tool: bool = True) -> list[dict[str, Any]]:
        return [*self.episode.tool_schemas(), *([USER_TOOL_SCHEMA] if user_tool else [])]

    def system_prompt(self, *, user_tool: bool = True) -> str:
        return system_prompt(self.task, self.spec, self.mode, user_tool=user_tool)

    def opening_messages(self, *, user_tool: bool = True) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt(user_tool=user_tool)},
                {"role": "user", "content": self.opening}]

    def tool_kind(self, name: str) -> str | None:
        """``read`` or ``write`` for a domain tool; ``None`` for the user tool or an unknown name."""
        tool = self.spec.tool(name) if name in self.episode.tool_names else None
        return tool.kind if tool is not None else None

    # ------------------------------------------------------------------ actions
    def call(self, name: Any, args: Any = None) -> ToolResult:
        """Run one tool call (domain tool or :data:`USER_TOOL`); errors come back as results."""
        if name == USER_TOOL:
            message = args.get("message") if isinstance(args, Mapping) else None
            extra = sorted(set(args) - {"message"}) if isinstance(args, Mapping) else []
            if not isinstance(message, str) or extra:
                why = f"unknown argument {extra[0]!r}" if extra else "argument 'message' (a string) is required"
                self.episode.stats.calls += 1
                self.episode.stats.errors += 1
                self.episode.stats.by_code["invalid_arguments"] += 1
                return ToolResult(False, error_output("invalid_arguments", f"{USER_TOOL}: {why}"),
                                  error="invalid_arguments", message=why)
            reply = self.message_user(message)
            return ToolResult(True, reply, value=reply)
        return self.episode.call_tool(name, args if args is not None else {})

    def message_user(self, text: str) -> str:
        """Deliver a message to the user (recorded for the answer facts); return the user's reply."""
        from scaleenv.formats.trajectory import STOP

        self.episode.say(text)
        self.transcript.append({"role": "assistant", "content": text})
        if self.user is None:
            reply = "Message delivered; there is no one to answer."
        elif self.done:
            reply = "The user has already left the conversation."
        else:
            self.user_turns += 1
            reply = str(run_sync(self.user.reply(text)))
            self.transcript.append({"role": "user", "content": reply})
            if STOP in reply:
                self.done = True
                reply = reply.replace(STOP, "").strip() + " (The user has ended the conversation.)"
        return reply

    def say(self, text: str) -> None:
        """Record agent text the user sees without a tool (final answers of text-based loops)."""
        if isinstance(text, str) and text.strip():
            self.episode.say(text)
            self.transcript.append({"role": "assistant", "content": text})

    # ------------------------------------------------------------------ reward
    def evaluate(self) -> Reward:
        key = (self.episode.stats.calls, len(self.episode.said))
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self.episode.evaluate())
        return self._cache[1]

    def _goals_met(self) -> bool:
        return self.evaluate().success

    def reward_json(self) -> dict[str, Any]:
        return reward_json(self.evaluate())

    def reward_text(self) -> str:
        return dumps(self.reward_json())


# ---------------------------------------------------------------------------- rows


def _maybe_json(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def row_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The scaleenv references of a dataset row of any export format, flattened:
    ``task_json``, ``task_id``, ``env_id``, ``universe``, ``mode`` (those present)."""
    out: dict[str, Any] = {}
    layers = [row]
    for nested in ("extra_info", "info"):
        v = _maybe_json(row.get(nested))
        if isinstance(v, Mapping):
            layers.append(v)
    for layer in reversed(layers):  # the top level wins
        for k in ("task_json", "task_id", "env_id", "universe", "mode"):
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
                     all_tools: bool = False) -> Session:
    """A fresh :class:`Session` for a dataset row of any export format."""
    source, task = task_from_row(row, universe)
    mode = mode or row_fields(row).get("mode") or "conversational"
    return Session(source, task, user=user, mode=mode, max_user_turns=max_user_turns, seed=seed,
                   all_tools=all_tools)


def gold_calls(task: Task, outputs: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The gold chain with every reference resolved against the recorded outputs (literal calls)."""
    from scaleenv.tools.chain import resolve_args

    return [(c.tool, resolve_args(c, outputs, i)) for i, c in enumerate(task.gold_chain)]


def answer_text(task: Task) -> str:
    """A message that states every answer fact (what the oracle tells the user)."""
    from scaleenv.synth.tasks.gates import state_facts

    return state_facts(task) or "Your request has been completed."

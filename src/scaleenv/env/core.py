"""The environment core: one task's episode as a Gymnasium-style environment, for every consumer.

``make(universe, task_id, user=..., mode=...)`` gives a :class:`ToolEnv`::

    with make("universe/", "pet_care/00003") as env:
        observation, info = env.reset()          # the user's opening message
        observation, reward, terminated, truncated, info = env.step(assistant_message)

An action is an OpenAI-format assistant message (tool calls and/or text); an observation is the new
messages it caused (tool results, the user's reply). ``terminated`` means the user or the agent
ended the episode (or the environment or an endpoint failed: ``info["termination"] == "error"``); ``truncated`` means the turn
limit cut it. The reward is the task's, given when the episode ends (0.0 before).

The simulated user speaks on one of two channels. ``text`` (rollouts): the agent's text goes to the
user and the reply comes back as a ``user`` message. ``tool`` (MCP, TRL, OpenEnv, SkyRL, verl,
verifiers): the user is the tool :data:`USER_TOOL`, and its reply is the tool's result. Either way,
what the agent tells the user is what the answer facts are checked against, one call has one
meaning (:meth:`ToolEnv.call`), and a bad call comes back to the policy as a tool error.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Coroutine, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from scaleenv.env.episode import Episode
from scaleenv.env.shaping import Shaping
from scaleenv.env.users import User, UserContext, UserError
from scaleenv.errors import InputError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP, Trajectory
from scaleenv.reward.procedure import procedure_checks, with_procedure
from scaleenv.reward.state import Reward
from scaleenv.tools.args import check_call_count
from scaleenv.tools.output import error_output
from scaleenv.tools.runtime import ToolResult


class Mode(StrEnum):
    """Who the agent talks to: a simulated user (``conversational``) or nobody (``solo``: the opening
    message is the whole request and the agent's first message without tool calls is its answer)."""

    CONVERSATIONAL = "conversational"
    SOLO = "solo"


MODES = tuple(m.value for m in Mode)


class Channel(StrEnum):
    """How the agent reaches the user: plain assistant text, or the :data:`USER_TOOL` tool."""

    TEXT = "text"
    TOOL = "tool"


class Termination(StrEnum):
    """Why an episode ended."""

    USER_DONE = "user_done"
    AGENT_STOP = "agent_stop"
    MAX_TURNS = "max_turns"
    ERROR = "error"


class EnvError(InputError):
    """A caller used an environment wrongly (stepping a finished episode, an unknown mode)."""


USER_TOOL = "send_message_to_user"
"""The user channel of tool-only frameworks: send a message, get the user's reply."""

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


def parse_mode(mode: str | Mode) -> Mode:
    """A :class:`Mode` from its name (one line on a bad one)."""
    try:
        return Mode(mode)
    except ValueError:
        raise EnvError(f"unknown mode {mode!r}; use conversational or solo") from None


def message_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or OpenAI content parts (their text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


class MalformedToolCall(Exception):
    """A tool call the environment cannot run as written (no name, arguments that are not a JSON object)."""


INVALID_ARGUMENTS = "invalid_arguments"


def parse_tool_call(i: int, tc: Any) -> tuple[str, str, dict[str, Any] | MalformedToolCall]:
    """``(id, name, args)`` of the ``i``-th tool call of an assistant message; ``args`` is a
    :class:`MalformedToolCall` when the call cannot run as written (the policy gets it back as a tool error)."""
    fn = tc.get("function") if isinstance(tc, Mapping) else None
    raw_id = tc.get("id") if isinstance(tc, Mapping) else None
    call_id = raw_id if isinstance(raw_id, str) and raw_id else f"call_{i}"
    name = fn.get("name") if isinstance(fn, Mapping) else None
    if not isinstance(name, str) or not name:
        return call_id, "", MalformedToolCall(f"tool call {i} has no function name")
    raw = fn.get("arguments") if isinstance(fn, Mapping) else None
    if raw is None or raw == "":
        args: Any = {}
    elif isinstance(raw, Mapping):
        args = dict(raw)
    elif isinstance(raw, str):
        try:
            args = json.loads(raw)
        except (ValueError, RecursionError) as e:
            return call_id, name, MalformedToolCall(f"{name[:64]}: arguments are not JSON ({e})")
    else:
        return call_id, name, MalformedToolCall(f"{name[:64]}: arguments are not a JSON string")
    if not isinstance(args, dict):
        return call_id, name, MalformedToolCall(f"{name[:64]}: arguments are not a JSON object")
    return call_id, name, args


def parse_tool_calls(msg: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any] | MalformedToolCall]]:
    """``(id, name, args)`` for each tool call of an assistant message (see :func:`parse_tool_call`)."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return [("call_0", "", MalformedToolCall("tool_calls is not a list"))]
    try:
        check_call_count(len(calls))
    except ValueError as e:  # a flood of calls is refused whole, as one tool error
        return [("call_0", "", MalformedToolCall(str(e)))]
    return [parse_tool_call(i, tc) for i, tc in enumerate(calls)]


def solo_request(task: Task) -> str:
    """The whole request for a solo agent: the goals and every fact the user knows (withheld included)."""
    profile = task.user_profile
    goals = " ".join(profile.goals) or task.instruction
    persona = profile.persona.strip()
    who = persona.replace("You are", "Request from", 1).rstrip(".") + ". " if persona.startswith("You are") else ""
    facts = "; ".join(f"{k}: {v}" for k, v in sorted(profile.known.items()))
    return f"{who}{goals}" + (f" Details: {facts}." if facts else "")


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never really awaits (the scripted user, the reference policies) from
    synchronous code, also from inside a running event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    except BaseException:
        coro.close()
        raise
    coro.close()
    raise EnvError("this call needs an event loop (an LLM user): use the async methods (areset, astep, acall)")


class ToolEnv:
    """One task's episode: a private world, the task's tools, a simulated user and the reward.

    Built by :func:`make` (over the per-process cache of task worlds) or directly over an
    :class:`~scaleenv.env.episode.Episode`. ``release`` is called with the episode on :meth:`close`
    (the cache takes it back for reuse).
    """

    def __init__(self, task: Task, episode: Episode, *, user: User | None = None,
                 mode: str | Mode = Mode.CONVERSATIONAL, channel: str | Channel = Channel.TEXT,
                 max_turns: int | None = None, max_user_turns: int = 10, seed: int = 0,
                 release: Callable[[Episode], None] | None = None, reward_shape: str = "binary"):
        self.task = task
        try:
            self.shaping = Shaping(reward_shape)
        except ValueError as e:
            raise EnvError(str(e)) from None
        self.episode = episode
        self.spec: DomainSpec = episode.spec
        self.mode = parse_mode(mode)
        self.channel = Channel(channel)
        if self.mode is Mode.CONVERSATIONAL and user is None and self.channel is Channel.TEXT:
            raise EnvError("conversational mode needs a user; pass user=... or mode='solo'")
        self.user = user if self.mode is Mode.CONVERSATIONAL else None
        self.max_turns = turns_for(task, max_turns)
        self.max_user_turns = max_user_turns
        self.seed = seed
        self._release = release
        self._closed = False
        self._clear(seed)

    def _clear(self, seed: int) -> None:
        self.seed = seed
        self.messages: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        """The episode's own record in message form, the same on every channel: each domain tool call
        (an assistant message with that one call, then its result), each text the user sees (an
        assistant message) and each reply of the user, in the order they happened, whether they came
        through :meth:`astep`, :meth:`call`, :meth:`say` or :meth:`message_user` (the procedure checks
        read it)."""
        self.transcript: list[dict[str, str]] = []
        self.termination: Termination | None = None
        self.error: str | None = None
        self.steps = self.tool_calls = self.tool_errors = self.user_turns = 0
        self.timings = {"agent_s": 0.0, "user_s": 0.0, "tools_s": 0.0, "eval_s": 0.0}
        self.opening = ""
        self._reward: tuple[tuple[int, int, int], Reward] | None = None
        self._started = time.perf_counter()
        self.shaping.reset()

    # ------------------------------------------------------------------ what the agent sees
    @property
    def done(self) -> bool:
        """Whether the episode is over (in the tool channel: whether the user has left)."""
        return self.termination is not None

    @property
    def tool_names(self) -> list[str]:
        return [*self.episode.tool_names, *([USER_TOOL] if self.channel is Channel.TOOL else [])]

    def tool_schemas(self, *, user_tool: bool | None = None) -> list[dict[str, Any]]:
        """The agent's tools as OpenAI function schemas (the user tool too, in the tool channel)."""
        with_user = self.channel is Channel.TOOL if user_tool is None else user_tool
        return [*self.episode.tool_schemas(), *([USER_TOOL_SCHEMA] if with_user else [])]

    def tool_kind(self, name: str) -> str | None:
        """``read`` or ``write`` for a domain tool; ``None`` for the user tool or an unknown name."""
        tool = self.spec.tool(name) if name in self.episode.tool_names else None
        return tool.kind if tool is not None else None

    def system_prompt(self, *, user_tool: bool | None = None) -> str:
        """The default agent system prompt for this task, mode and channel."""
        from scaleenv.env.prompts import system_prompt

        with_user = self.channel is Channel.TOOL if user_tool is None else user_tool
        return system_prompt(self.task, self.spec, self.mode, user_tool=with_user)

    def opening_messages(self, *, user_tool: bool | None = None) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt(user_tool=user_tool)},
                {"role": "user", "content": self.opening}]

    # ------------------------------------------------------------------ lifecycle
    async def areset(self, seed: int | None = None, *, system_prompt: str | None = None
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Back to the task's initial world; the observation is the opening message(s)."""
        import random

        if self._closed:
            raise EnvError("this environment is closed")
        self.episode.reset()
        self._clear(self.seed if seed is None else seed)
        if self.user is not None:
            # the user gets the conversation and the domain's vocabulary, never the reward or the world
            self.user.reset(UserContext(task=self.task, rng=random.Random(f"user:{self.seed}"),
                                        max_turns=self.max_user_turns, seed=self.seed, spec=self.spec))
            text = await self._user_says(None)
        else:
            text = solo_request(self.task) if self.mode is Mode.SOLO else self._silent_opening()
            if text is not None:
                self.transcript.append({"role": "user", "content": text})
        if text is not None:
            self.opening = text
            if self.user is None or self.channel is Channel.TOOL:  # else _user_says put it there
                self.messages.append({"role": "user", "content": text})
            if self.user is None:
                self.log.append({"role": "user", "content": text})
        if self.termination is None and self.max_turns <= 0:
            self.termination = Termination.MAX_TURNS
        self.set_system_prompt(system_prompt)
        return list(self.messages), self._info()

    def _silent_opening(self) -> str:
        """The opening request when nobody will answer (tool channel without a user)."""
        import random

        from scaleenv.env.users import ScriptedUser

        user = ScriptedUser()
        user.reset(UserContext(task=self.task, rng=random.Random(0), spec=self.spec))
        return user.request()

    def set_system_prompt(self, text: str | None) -> None:
        """Put the agent's system prompt first in :attr:`messages` (after a reset, before the first step)."""
        if text:
            self.messages.insert(0, {"role": "system", "content": text})

    def reset(self, seed: int | None = None, *, system_prompt: str | None = None
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        result: tuple[list[dict[str, Any]], dict[str, Any]] = run_sync(self.areset(seed, system_prompt=system_prompt))
        return result

    async def astep(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        """Apply one assistant message; return ``(observation, reward, terminated, truncated, info)``."""
        if self.done:
            raise EnvError("the episode is over; call reset() first")
        self.steps += 1
        if not isinstance(action, Mapping):
            return self._end(Termination.ERROR, f"agent returned {type(action).__name__}, not a message", [])
        msg = {**action, "role": "assistant"}
        self.messages.append(msg)
        text = message_text(msg.get("content"))
        said = text.replace(STOP, "").strip()
        observation: list[dict[str, Any]] = []
        if msg.get("tool_calls"):
            calls = parse_tool_calls(msg)
            if said:
                self.say(said)
            for call_id, name, args in calls:
                res = self.reject(args) if isinstance(args, MalformedToolCall) else await self.acall(name, args)
                observation.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
            if STOP in text:
                self.termination = Termination.AGENT_STOP
        else:
            if said:
                self.say(said)
            if STOP in text or self.mode is Mode.SOLO:
                self.termination = Termination.AGENT_STOP
            else:
                reply = await self._user_says(said)
                if reply is not None:
                    observation.append(self.messages[-1])
        if self.termination is None and self.steps >= self.max_turns:
            self.termination = Termination.MAX_TURNS
        self.messages.extend(m for m in observation if m["role"] == "tool")
        return self._result(observation)

    def step(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        result: tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]] = run_sync(self.astep(action))
        return result

    def fail(self, error: str) -> None:
        """End the episode with termination ``error`` (the policy or an endpoint broke)."""
        if not self.done:
            self.termination, self.error = Termination.ERROR, error

    def _end(self, why: Termination, error: str | None, observation: list[dict[str, Any]]
             ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        self.termination, self.error = why, error
        return self._result(observation)

    def _result(self, observation: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float, bool, bool,
                                                                  dict[str, Any]]:
        truncated = self.termination is Termination.MAX_TURNS
        terminated = self.done and not truncated
        if self.shaping.active:
            reward = self.shaping.step_reward(self, self.done)
        else:
            reward = self.final_reward()["score"] if self.done else 0.0
        return observation, float(reward), terminated, truncated, self._info()

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": self.task.id, "termination": self.termination.value if self.termination else None,
                "error": self.error, "steps": self.steps, "tool_calls": self.tool_calls,
                "tool_errors": self.tool_errors, "user_turns": self.user_turns}
        if self.shaping.active:  # which sub-goals are met now (the binary shape skips the evaluation)
            report = self.final_reward().get("subgoals")
            info["reward_shape"] = self.shaping.shape
            info["subgoals"] = {c["name"]: c["met"] for c in report["components"]} if report else {}
        return info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._release is not None:
            self._release(self.episode)
        else:
            self.episode.close()

    def __enter__(self) -> ToolEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ one call, one meaning
    async def acall(self, name: Any, args: Any = None) -> ToolResult:
        """Run one tool call (a domain tool, or :data:`USER_TOOL` in the tool channel). Never raises
        for the agent's mistakes: they come back as error results, counted in ``tool_errors``."""
        t = time.perf_counter()
        if name == USER_TOOL and self.channel is Channel.TOOL:
            res = await self._user_tool(args)  # logged as the agent's text and the user's reply
        else:
            res = self.episode.call_tool(name, args if args is not None else {})
            self._log_call(name, args, res)
        self.timings["tools_s"] += time.perf_counter() - t
        self.tool_calls += 1
        self.tool_errors += not res.ok
        self._account()
        return res

    def _log_call(self, name: Any, args: Any, res: ToolResult) -> None:
        """Record one tool call and its result in :attr:`log` (an assistant message with that call)."""
        call_id = f"log_{len(self.log)}"
        try:
            raw = json.dumps(args if args is not None else {}, sort_keys=True, default=str)
        except (TypeError, ValueError):
            raw = "{}"
        self.log.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": str(name)[:200], "arguments": raw}}]})
        self.log.append({"role": "tool", "tool_call_id": call_id, "content": res.output})

    def call(self, name: Any, args: Any = None) -> ToolResult:
        result: ToolResult = run_sync(self.acall(name, args))
        return result

    def reject(self, problem: MalformedToolCall | str) -> ToolResult:
        """The tool error for a call that cannot run as written (arguments that are not a JSON
        object, no tool name): counted like any failed call, so the policy sees what it did wrong."""
        why = str(problem)
        stats = self.episode.stats
        stats.calls += 1
        stats.errors += 1
        stats.by_code[INVALID_ARGUMENTS] += 1
        self.tool_calls += 1
        self.tool_errors += 1
        res = ToolResult(False, error_output(INVALID_ARGUMENTS, why), error=INVALID_ARGUMENTS, message=why)
        self._log_call("", {}, res)
        self._account()
        return res

    async def _user_tool(self, args: Any) -> ToolResult:
        message = args.get("message") if isinstance(args, Mapping) else None
        extra = sorted(set(args) - {"message"}) if isinstance(args, Mapping) else []
        if not isinstance(message, str) or extra:
            why = f"unknown argument {extra[0]!r}" if extra else "argument 'message' (a string) is required"
            stats = self.episode.stats
            stats.calls += 1
            stats.errors += 1
            stats.by_code["invalid_arguments"] += 1
            return ToolResult(False, error_output("invalid_arguments", f"{USER_TOOL}: {why}"),
                              error="invalid_arguments", message=why)
        reply = await self.amessage_user(message)
        return ToolResult(True, reply, value=reply)

    async def amessage_user(self, text: str) -> str:
        """Deliver a message to the user through the tool channel (recorded for the answer facts);
        return the user's reply."""
        self.say(text)
        if self.user is None:
            return "Message delivered; there is no one to answer."
        if self.done:
            return "The user has already left the conversation."
        reply = await self._user_says(text)
        if reply is None:
            return f"The user is unavailable ({self.error})."
        if STOP in reply:
            reply = reply.replace(STOP, "").strip() + " (The user has ended the conversation.)"
        return reply

    def message_user(self, text: str) -> str:
        result: str = run_sync(self.amessage_user(text))
        return result

    def say(self, text: str) -> None:
        """Record agent text the user sees (final answers; answer facts are checked against these)."""
        if isinstance(text, str) and text.strip():
            self.episode.say(text)
            self.transcript.append({"role": "assistant", "content": text})
            self.log.append({"role": "assistant", "content": text})
            self._account()

    async def _user_says(self, agent_text: str | None) -> str | None:
        """The user's opening (``None``) or reply; ends the episode on the stop marker or a failure."""
        assert self.user is not None
        t = time.perf_counter()
        try:
            text = await self.user.opening() if agent_text is None else await self.user.reply(agent_text)
        except UserError as e:
            self.fail(str(e))
            return None
        except Exception as e:  # noqa: BLE001 - a broken user ends the episode, never the run
            self.fail(f"user failed: {type(e).__name__}: {e}")
            return None
        finally:
            self.timings["user_s"] += time.perf_counter() - t
        self.user_turns += 1
        self.transcript.append({"role": "user", "content": text})
        self.log.append({"role": "user", "content": text})
        if self.channel is Channel.TEXT:
            self.messages.append({"role": "user", "content": text})
        if STOP in text:
            self.termination = Termination.USER_DONE
        return text

    # ------------------------------------------------------------------ reward
    def evaluate(self) -> Reward:
        """The reward of the world as it is now; reused while no tool ran and nothing new was said.
        In conversational mode with a user, the domain policy's procedure checks are part of it
        (:mod:`scaleenv.reward.procedure`). Under a ``partial`` or ``dense`` shape its score follows the
        shape (``success`` stays binary)."""
        t = time.perf_counter()
        try:
            reward = self._binary_reward()
            return self.shaping.rescore(self, reward) if self.shaping.active else reward
        finally:
            self.timings["eval_s"] += time.perf_counter() - t

    def _binary_reward(self) -> Reward:
        """The episode's binary reward, procedure checks included, cached until something is called,
        said or logged."""
        key = (self.episode.stats.calls, len(self.episode.said), len(self.log))
        if self._reward is None or self._reward[0] != key:
            reward = self.episode.evaluate()
            if self.user is not None:
                reward = with_procedure(reward, procedure_checks(self.task, self.spec, self.log))
            self._reward = (key, reward)
        return self._reward[1]

    def _account(self) -> None:
        """Let the dense shape see the episode after a call or a message (its potential, its penalties)."""
        if self.shaping.shape != "dense":
            return
        # a failing evaluation is reported by final_reward at the end
        with contextlib.suppress(Exception):
            self.shaping.update(self, self._binary_reward())

    def final_reward(self) -> dict[str, Any]:
        """The reward as JSON; a failed evaluation ends the episode with ``error`` and scores 0."""
        try:
            return self.evaluate().to_json()
        except Exception as e:  # noqa: BLE001 - e.g. a task without an expected world
            if self.termination is not Termination.ERROR:
                self.termination, self.error = Termination.ERROR, f"evaluation failed: {type(e).__name__}: {e}"
            return {"score": 0.0, "success": False, "components": {}, "diff": [f"evaluation failed: {e}"]}

    def trajectory(self, *, agent: str, trial: int = 0, usage: Mapping[str, int] | None = None,
                   agent_s: float = 0.0) -> Trajectory:
        """The finished episode as a :class:`Trajectory` (the reward computed now)."""
        reward = self.final_reward()
        self.timings["agent_s"] += agent_s
        timings = dict(self.timings, total_s=time.perf_counter() - self._started)
        return Trajectory(
            task_id=self.task.id, domain=self.task.domain, trial=trial, seed=self.seed, agent=agent,
            user=self.user.name if self.user is not None else None, mode=self.mode.value,
            messages=self.messages, tools=self.tool_schemas(), termination=(self.termination or Termination.ERROR).value,
            reward=reward, error=self.error, steps=self.steps, tool_calls=self.tool_calls,
            tool_errors=self.tool_errors, user_turns=self.user_turns,
            timings={k: round(v, 6) for k, v in timings.items()}, usage=dict(usage or {}),
        )


DEFAULT_MAX_TURNS = 30
"""Agent actions an episode gets when nobody says (a long task gets more: :func:`turns_for`)."""


def turns_for(task: Task, requested: int | None) -> int:
    """The agent actions an episode of ``task`` gets: ``requested``; by default :data:`DEFAULT_MAX_TURNS`, or
    for a long task twice its gold chain plus 10 (a call and a message per step: 16 calls said one request at
    a time take about 40 actions, and a default that cuts them scores a correct agent 0)."""
    if requested is not None:
        return requested
    return max(DEFAULT_MAX_TURNS, 2 * len(task.gold_chain) + 10)


def make(universe: str | Path | Any, task: str | Task, *, user: str | User | None = "scripted",
         mode: str | Mode = Mode.CONVERSATIONAL, channel: str | Channel = Channel.TEXT, all_tools: bool = False,
         max_turns: int | None = None, max_user_turns: int = 10, seed: int = 0, user_options: Any = None,
         clients: Any = None, reward_shape: str = "binary") -> ToolEnv:
    """A :class:`ToolEnv` for one task of a universe directory (a task id, or a Task given inline).

    ``user`` is ``scripted``, ``openai:MODEL``, a :class:`~scaleenv.env.users.User`, or ``None``
    (solo mode, or a tool channel with nobody answering). Task worlds come from the per-process
    cache, so many environments of one task share its verified worlds. ``reward_shape`` is
    ``binary`` (default), ``partial`` or ``dense`` (:mod:`scaleenv.reward.subgoals`).
    """
    from scaleenv.env.cache import task_cache
    from scaleenv.env.users import make_user
    from scaleenv.reward.subgoals import parse_shape

    try:
        parse_shape(reward_shape)
    except ValueError as e:
        raise EnvError(str(e)) from None
    cache = task_cache(universe)
    the_task = cache.task(task) if isinstance(task, str) else task
    mode = parse_mode(mode)
    the_user = make_user(user, user_options, clients) if isinstance(user, str) and mode is Mode.CONVERSATIONAL \
        else (user if isinstance(user, User) else None)
    episode = cache.acquire(the_task, all_tools=all_tools)
    return ToolEnv(the_task, episode, user=the_user, mode=mode, channel=channel, max_turns=max_turns,
                   max_user_turns=max_user_turns, seed=seed, reward_shape=reward_shape,
                   release=lambda ep: cache.release(the_task, ep, all_tools=all_tools))

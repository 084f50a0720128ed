"""The interaction loop: an agent, a simulated user (or none, in solo mode) and one episode.

    conversational   the user opens with its request; agent text goes to the user, whose reply
                     comes back; the user's stop marker ends the episode (``user_done``)
    solo             the agent gets the whole request (goals and every fact) up front; its first
                     message without tool calls is its final answer (``agent_stop``)

Agent text containing the stop marker ends the episode (``agent_stop``) in either mode. More than
``max_turns`` agent actions ends it with ``max_turns``. An endpoint error, a timeout or a malformed
tool call ends it with ``error``; the error is recorded and the reward is still computed on the
world as the agent left it. Agent mistakes inside well-formed calls (unknown tool, bad arguments,
violated preconditions) are tool errors the agent sees, not episode errors.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from scaleenv.env.agents import Agent, AgentContext, AgentError
from scaleenv.env.users import User, UserContext, UserError
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP, Trajectory
from scaleenv.tools.args import check_call_count

MODES = ("conversational", "solo")


class MalformedToolCall(Exception):
    pass


def solo_request(task: Task) -> str:
    """The whole request for a solo agent: the goals and every fact the user knows (withheld included)."""
    profile = task.user_profile or {}
    goals = " ".join(profile.get("goals") or []) or task.instruction
    known = profile.get("known") or {}
    persona = str(profile.get("persona") or "").strip()
    who = persona.replace("You are", "Request from", 1).rstrip(".") + ". " if persona.startswith("You are") else ""
    facts = "; ".join(f"{k}: {v}" for k, v in sorted(known.items()))
    return f"{who}{goals}" + (f" Details: {facts}." if facts else "")


def _parse_calls(msg: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(id, name, args)`` for each tool call of an assistant message, or MalformedToolCall."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        raise MalformedToolCall("tool_calls is not a list")
    try:
        check_call_count(len(calls))
    except ValueError as e:
        raise MalformedToolCall(str(e)) from None
    out = []
    for i, tc in enumerate(calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise MalformedToolCall(f"tool call {i} has no function name")
        raw = fn.get("arguments")
        if raw is None or raw == "":
            args: Any = {}
        elif isinstance(raw, dict):
            args = raw
        elif isinstance(raw, str):
            try:
                args = json.loads(raw)
            except (ValueError, RecursionError) as e:
                raise MalformedToolCall(f"tool call {i} ({name[:64]}): arguments are not JSON ({e})") from None
        else:
            raise MalformedToolCall(f"tool call {i} ({name[:64]}): arguments are not a JSON string")
        if not isinstance(args, dict):
            raise MalformedToolCall(f"tool call {i} ({name[:64]}): arguments are not a JSON object")
        call_id = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else f"call_{i}"
        out.append((call_id, name, args))
    return out


async def run_episode(
    episode: Any,
    task: Task,
    agent: Agent,
    user: User | None = None,
    *,
    mode: str = "conversational",
    max_turns: int = 30,
    max_user_turns: int = 10,
    seed: int = 0,
    trial: int = 0,
    domain_description: str = "",
) -> Trajectory:
    """Run one episode from a fresh reset and return its trajectory (never raises for agent, user
    or endpoint failures: those end the episode with termination ``error``)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use conversational or solo")
    if mode == "conversational" and user is None:
        raise ValueError("conversational mode needs a user; pass user=... or mode='solo'")
    t_start = time.perf_counter()
    timings = {"agent_s": 0.0, "user_s": 0.0, "tools_s": 0.0, "eval_s": 0.0}
    episode.reset()
    tools = episode.tool_schemas()
    agent.reset(AgentContext(task=task, tools=tools, rng=random.Random(f"agent:{seed}"), mode=mode,
                             domain_description=domain_description, episode=episode, seed=seed))
    messages: list[dict[str, Any]] = []
    if agent.system_prompt:
        messages.append({"role": "system", "content": agent.system_prompt})
    termination: str | None = None
    error: str | None = None
    steps = n_calls = n_errors = user_turns = 0

    cached: dict[tuple[int, int], Any] = {}

    def evaluate() -> Any:
        """The reward now; reused while no tool ran and nothing new was said (the world is unchanged)."""
        key = (episode.stats.calls, len(episode.said))
        t = time.perf_counter()
        try:
            if key not in cached:
                cached.clear()
                cached[key] = episode.evaluate()
            return cached[key]
        finally:
            timings["eval_s"] += time.perf_counter() - t

    def goals_met() -> bool:
        return evaluate().success

    async def user_says(first: bool, agent_text: str = "") -> str | None:
        nonlocal termination, error, user_turns
        assert user is not None
        t = time.perf_counter()
        try:
            text = await user.opening() if first else await user.reply(agent_text)
        except UserError as e:
            termination, error = "error", str(e)
            return None
        except Exception as e:  # noqa: BLE001 - a broken user ends the episode, never the run
            termination, error = "error", f"user failed: {type(e).__name__}: {e}"
            return None
        finally:
            timings["user_s"] += time.perf_counter() - t
        user_turns += 1
        messages.append({"role": "user", "content": text})
        if STOP in text:
            termination = "user_done"
        return text

    if mode == "conversational":
        assert user is not None
        user.reset(UserContext(task=task, rng=random.Random(f"user:{seed}"), goals_met=goals_met,
                               max_turns=max_user_turns, seed=seed))
        await user_says(True)
    else:
        messages.append({"role": "user", "content": solo_request(task)})

    while termination is None:
        if steps >= max_turns:
            termination = "max_turns"
            break
        t = time.perf_counter()
        try:
            msg = await agent.act(messages)
        except AgentError as e:
            termination, error = "error", str(e)
            break
        except Exception as e:  # noqa: BLE001 - a broken agent ends the episode, never the run
            termination, error = "error", f"agent failed: {type(e).__name__}: {e}"
            break
        finally:
            timings["agent_s"] += time.perf_counter() - t
        steps += 1
        if not isinstance(msg, dict):
            termination, error = "error", f"agent returned {type(msg).__name__}, not a message"
            break
        msg = {**msg, "role": "assistant"}
        messages.append(msg)
        content = msg.get("content")
        text = content if isinstance(content, str) else ""
        said = text.replace(STOP, "").strip()
        if msg.get("tool_calls"):
            try:
                calls = _parse_calls(msg)
            except MalformedToolCall as e:
                termination, error = "error", f"malformed tool call: {e}"
                break
            if said:
                episode.say(said)
            t = time.perf_counter()
            for call_id, name, args in calls:
                res = episode.call_tool(name, args)
                n_calls += 1
                n_errors += not res.ok
                messages.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
            timings["tools_s"] += time.perf_counter() - t
            if STOP in text:
                termination = "agent_stop"
            continue
        if said:
            episode.say(said)
        if STOP in text or mode == "solo":
            termination = "agent_stop"
            break
        await user_says(False, said)

    try:
        reward = evaluate().to_json()
    except Exception as e:  # noqa: BLE001 - e.g. a task without an expected world
        reward = {"score": 0.0, "success": False, "components": {}, "diff": [f"evaluation failed: {e}"]}
        if termination != "error":
            termination, error = "error", f"evaluation failed: {type(e).__name__}: {e}"
    timings["total_s"] = time.perf_counter() - t_start
    usage: dict[str, int] = {}
    for who, src in (("agent", getattr(agent, "usage", {})), ("user", getattr(user, "usage", {}) if user else {})):
        for k, v in (src or {}).items():
            usage[f"{who}_{k}"] = usage.get(f"{who}_{k}", 0) + v
    return Trajectory(
        task_id=task.id, domain=task.domain, trial=trial, seed=seed, agent=agent.name,
        user=user.name if (user is not None and mode == "conversational") else None, mode=mode,
        messages=messages, tools=tools, termination=termination or "error", reward=reward, error=error,
        steps=steps, tool_calls=n_calls, tool_errors=n_errors, user_turns=user_turns,
        timings={k: round(v, 6) for k, v in timings.items()}, usage=usage,
    )

"""Framework-free pieces for trainers that see the model's raw text (verl, SkyRL): hermes-format
tool calls (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``), run with the environment
core's meaning of a call, and verl's reward-function contract.

A block that is not a JSON object with a name, or whose arguments are not a JSON object, is handed
back to the policy as the same ``invalid_arguments`` tool error a rollout gives
(:meth:`scaleenv.env.core.ToolEnv.reject`), never dropped or turned into another error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from scaleenv.env.core import MalformedToolCall, ToolEnv, parse_tool_call
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.session import Session, row_fields, session_from_row
from scaleenv.tools.runtime import ToolResult

TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def parse_hermes_calls(text: str) -> tuple[str, list[tuple[str, dict[str, Any] | MalformedToolCall]]]:
    """``(text without tool calls, [(name, arguments or MalformedToolCall)])`` of a hermes completion."""
    calls: list[tuple[str, dict[str, Any] | MalformedToolCall]] = []
    for i, block in enumerate(TOOL_CALL_RE.findall(text or "")):
        try:
            obj = json.loads(block)
        except ValueError as e:
            calls.append(("", MalformedToolCall(f"tool call {i} is not JSON ({e})")))
            continue
        if not isinstance(obj, dict):
            calls.append(("", MalformedToolCall(f"tool call {i} is not a JSON object")))
            continue
        _, name, args = parse_tool_call(i, {"function": {"name": obj.get("name"), "arguments": obj.get("arguments")}})
        calls.append((name, args))
    return TOOL_CALL_RE.sub("", text or "").strip(), calls


def run_call(env: ToolEnv, name: str, args: dict[str, Any] | MalformedToolCall) -> ToolResult:
    """One parsed call, with the core's meaning (a malformed one is the core's tool error)."""
    return env.reject(args) if isinstance(args, MalformedToolCall) else env.call(name, args)


def spoken_text(text: str) -> str:
    """What the agent says to the user: the text without the stop marker and the end-of-turn token."""
    return text.replace(STOP, "").replace("<|im_end|>", "").strip()


def replay_completion(session: Session, text: str) -> None:
    """Play a single completion: each hermes tool call in order, then say the remaining text."""
    rest, calls = parse_hermes_calls(text)
    for name, args in calls:
        run_call(session, name, args)
    if said := spoken_text(rest):
        session.say(said)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None,
                  **kwargs: object) -> dict[str, Any]:
    """verl's reward function: ``{"score": ..., **components}``.

    Uses the components the ``scaleenv_agent`` loop computed (``extra_info["reward_components"]``,
    or nested in ``tool_extra_fields``); otherwise replays ``solution_str``'s tool calls in a fresh
    episode of the row's task (``extra_info.task_json``, or ``ground_truth`` as a task id).
    """
    info = dict(extra_info or {})
    for src in (info, info.get("tool_extra_fields") or {}):
        comps = src.get("reward_components") if isinstance(src, dict) else None
        if isinstance(comps, dict) and "score" in comps:
            return {"score": float(comps["score"]), **{k: float(v) for k, v in comps.items() if k != "score"}}
    row: dict[str, Any] = {"extra_info": info}
    if "task_json" not in row_fields(row) and ground_truth:
        row["task_id"] = ground_truth
    session = session_from_row(row, user=None)  # the row's reward_shape (extra_info), else binary
    try:
        replay_completion(session, solution_str)
        reward = session.evaluate()
    finally:
        session.close()
    return {"score": reward.score, "success": float(reward.success),
            **{k: float(v) for k, v in reward.components.items()}}

"""OpenEnv 0.10: the Environment with OpenEnv's own MCP-style actions, and served by create_app over
the /ws session (state lives per session)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv.core.env_server.interfaces")

from openenv.core.env_server.mcp_types import (  # noqa: E402
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
)

from integrations_support import answer, careful, reports_after, small_universe, tasks  # noqa: E402
from scaleenv.integrations.session import EVALUATE_TOOL, USER_TOOL  # noqa: E402


def test_environment_plays_gold():
    from openenv.core.env_server.interfaces import Environment

    from scaleenv.integrations.openenv import ScaleEnvOpenEnv

    u = small_universe()
    env = ScaleEnvOpenEnv(u, expose_evaluate=True)
    assert isinstance(env, Environment) and env.SUPPORTS_CONCURRENT_SESSIONS
    for task in tasks(u):
        obs = env.reset(seed=0, task_id=task.id)
        assert isinstance(obs, ListToolsObservation) and not obs.done
        assert {t.name for t in obs.tools} == set(task.tools) | {USER_TOOL, EVALUATE_TOOL}
        assert obs.metadata["messages"][1]["role"] == "user"
        assert env.state.task_id == task.id and env.state.step_count == 0
        assert isinstance(env.step(ListToolsAction()), ListToolsObservation)
        for name, args in careful(u, task):
            obs = env.step(CallToolAction(tool_name=name, arguments=args))
            assert isinstance(obs, CallToolObservation) and obs.error is None and obs.metadata["ok"], obs.result
            result = json.loads(obs.result) if name != USER_TOOL else obs.result  # a record, list, scalar; a reply
            assert not (isinstance(result, dict) and "error" in result), result
        for _ in range(reports_after(u, task)):
            obs = env.step(CallToolAction(tool_name=USER_TOOL, arguments={"message": answer(task)}))
        assert obs.done and obs.reward == 1.0
    env.reset(task_id=tasks(u)[0].id)
    bad = env.step(CallToolAction(tool_name="no_such_tool", arguments={}))
    assert bad.error is not None and bad.error.error_type.value == "tool_not_found"
    bad = env.step(CallToolAction(tool_name=tasks(u)[0].tools[0], arguments={"zzz": 1}))
    assert bad.error is None and json.loads(bad.result)["error"] == "invalid_arguments" and not bad.metadata["ok"]
    end = env.step(CallToolAction(tool_name=EVALUATE_TOOL, arguments={}))
    assert end.done and end.reward == 0.0 and end.result["score"] == 0.0


def test_served_over_websocket_sessions():
    from fastapi.testclient import TestClient

    from scaleenv.integrations.openenv import create_openenv_app

    u = small_universe()
    task = tasks(u)[0]
    client = TestClient(create_openenv_app(u, max_concurrent_envs=4, expose_evaluate=True))
    with client.websocket_connect("/ws") as a, client.websocket_connect("/ws") as b:
        for ws in (a, b):
            ws.send_json({"type": "reset", "data": {"task_id": task.id}})
            assert "data" in ws.receive_json()
        for name, args in careful(u, task):
            a.send_json({"type": "step", "data": {"type": "call_tool", "tool_name": name, "arguments": args}})
            reply = a.receive_json()
            assert "error" not in json.dumps(reply.get("data", {}).get("observation", {}).get("error") or {}), reply
        a.send_json({"type": "step", "data": {"type": "call_tool", "tool_name": USER_TOOL,
                                              "arguments": {"message": answer(task)}}})
        done = a.receive_json()["data"]
        assert done["done"] is True and done["reward"] == 1.0, done
        b.send_json({"type": "step", "data": {"type": "call_tool", "tool_name": EVALUATE_TOOL, "arguments": {}}})
        other = b.receive_json()["data"]
        assert other["reward"] == 0.0  # session B never saw A's writes


def test_reward_shape_passes_through():
    from integrations_support import partial_case
    from scaleenv.integrations.openenv import ScaleEnvOpenEnv

    u = small_universe()
    task, calls, want = partial_case(u)
    for shape, expected in (("binary", 0.0), ("partial", want), ("dense", want)):
        env = ScaleEnvOpenEnv(u, reward_shape=shape, user=None, mode="solo", expose_evaluate=True)
        env.reset(task_id=task.id)
        for name, args in calls:
            env.step(CallToolAction(tool_name=name, arguments=args))
        end = env.step(CallToolAction(tool_name=EVALUATE_TOOL, arguments={}))
        assert end.done and end.reward == pytest.approx(expected), shape
        assert ("subgoals" in end.result) == (shape != "binary")


def test_the_grader_is_not_among_the_agents_tools_and_the_end_is_for_good():
    """Issue 41: OpenEnv listed ``evaluate`` to the agent (before any action its diff is the answer) and still
    ran and answered calls after the episode was done."""
    from scaleenv.integrations.openenv import ScaleEnvOpenEnv

    u = small_universe()
    task = tasks(u)[0]
    env = ScaleEnvOpenEnv(u)
    obs = env.reset(task_id=task.id)
    assert {t.name for t in obs.tools} == set(task.tools) | {USER_TOOL}
    peek = env.step(CallToolAction(tool_name=EVALUATE_TOOL, arguments={}))
    assert peek.error is not None and peek.error.error_type.value == "tool_not_found" and not peek.done
    assert peek.result is None and peek.reward is None
    for name, args in careful(u, task):
        env.step(CallToolAction(tool_name=name, arguments=args))
    for _ in range(reports_after(u, task)):
        end = env.step(CallToolAction(tool_name=USER_TOOL, arguments={"message": answer(task)}))
    assert end.done and end.reward == 1.0
    after = env.step(CallToolAction(tool_name=task.tools[0], arguments={}))
    assert after.done and after.error is not None and after.result is None and env.state.step_count > 0
    # solo: the answer to nobody ends the episode, and the reward comes with it
    solo = ScaleEnvOpenEnv(u, user=None, mode="solo")
    solo.reset(task_id=task.id)
    for name, args in careful(u, task):
        if name != USER_TOOL:
            solo.step(CallToolAction(tool_name=name, arguments=args))
    last = solo.step(CallToolAction(tool_name=USER_TOOL, arguments={"message": answer(task)}))
    assert last.done and last.reward == 1.0

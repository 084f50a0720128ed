"""The driver loop: an agent acting on a :class:`~scaleenv.env.core.ToolEnv` until it ends.

    conversational   the user opens with its request; agent text goes to the user, whose reply
                     comes back; the user's stop marker ends the episode (``user_done``)
    solo             the agent gets the whole request (goals and every fact) up front; its first
                     message without tool calls is its final answer (``agent_stop``)

Agent text containing the stop marker ends the episode (``agent_stop``) in either mode. More than
``max_turns`` agent actions ends it with ``max_turns``. An endpoint error or a timeout (of the agent
or the user) ends it with ``error``; the error is recorded and the reward is still computed on the
world as the agent left it. Every mistake of the policy, a malformed tool call (arguments that are
not a JSON object, no tool name) included, is a tool error the agent sees and is counted in
``tool_errors``, not an episode error.
"""

from __future__ import annotations

import random
import time
from typing import Any

from scaleenv.env.agents import Agent, AgentContext, AgentError
from scaleenv.env.core import MODES, ToolEnv, solo_request
from scaleenv.formats.trajectory import Trajectory

__all__ = ["MODES", "run_episode", "solo_request"]


async def run_episode(env: ToolEnv, agent: Agent, *, seed: int = 0, trial: int = 0,
                      domain_description: str = "") -> Trajectory:
    """Run one episode from a fresh reset and return its trajectory (never raises for agent, user
    or endpoint failures: those end the episode with termination ``error``)."""
    await env.areset(seed)
    agent.reset(AgentContext(task=env.task, tools=env.tool_schemas(), rng=random.Random(f"agent:{seed}"),
                             mode=env.mode.value, domain_description=domain_description, episode=env.episode,
                             seed=seed))
    env.set_system_prompt(agent.system_prompt)
    agent_s = 0.0
    while not env.done:
        t = time.perf_counter()
        try:
            action = await agent.act(env.messages)
        except AgentError as e:
            env.fail(str(e))
            break
        except Exception as e:  # noqa: BLE001 - a broken agent ends the episode, never the run
            env.fail(f"agent failed: {type(e).__name__}: {e}")
            break
        finally:
            agent_s += time.perf_counter() - t
        await env.astep(action)
    usage: dict[str, Any] = {}
    for who, src in (("agent", getattr(agent, "usage", {})), ("user", getattr(env.user, "usage", {}))):
        for k, v in (src or {}).items():
            usage[f"{who}_{k}"] = usage.get(f"{who}_{k}", 0) + v
    return env.trajectory(agent=agent.name, trial=trial, usage=usage, agent_s=agent_s)

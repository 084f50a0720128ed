"""verifiers 0.4 (verifiers.v1): the taskset loads typed tasks; the toolset, registered on the
MCPServer verifiers gives it and driven by the SDK's in-process client, plays the gold chain; the
task's reward reads the rollout state the toolset kept."""

from __future__ import annotations

import json

import pytest

vf = pytest.importorskip("verifiers.v1")
anyio = pytest.importorskip("anyio")

from integrations_support import answer, careful, small_universe, tasks  # noqa: E402
from scaleenv.integrations.session import USER_TOOL  # noqa: E402


class _Trace:
    def __init__(self, state):
        self.state = state
        self.metrics: dict[str, float] = {}

    def record_metric(self, key, value):
        self.metrics[key] = value


def test_taskset_toolset_and_reward():
    import scaleenv.integrations.verifiers as sv

    u = small_universe()
    assert sv.__all__ == ["ScaleEnvTaskset"] and issubclass(sv.ScaleEnvTaskset, vf.Taskset)
    taskset = sv.ScaleEnvTaskset(sv.ScaleEnvTasksetConfig(universe=str(u)))
    loaded = list(taskset)
    assert [t.data.id for t in loaded] == [t.id for t in tasks(u)]
    assert all(isinstance(t, vf.Task) and t.data.prompt and t.data.system_prompt for t in loaded)
    (toolset,) = sv.ScaleEnvTaskset.toolsets(taskset.config)
    assert isinstance(toolset, vf.Toolset) and toolset.TOOL_PREFIX is None
    by_id = {t.id: t for t in tasks(u)}

    async def main() -> None:
        from mcp import Client
        from mcp.server.mcpserver import MCPServer

        for vtask in loaded[:2]:
            task = by_id[vtask.data.id]
            await toolset.setup_task(vtask)
            server = MCPServer("scaleenv")
            toolset.register(server)
            async with Client(server) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == set(task.tools) | {USER_TOOL}
                for name, args in careful(u, task):
                    res = await client.call_tool(name, args)
                    text = res.content[0].text
                    result = json.loads(text) if name != USER_TOOL else text  # a record, list, scalar; a reply
                    assert not (isinstance(result, dict) and "error" in result), result
                bad = await client.call_tool(task.tools[0], {"zzz": 1})
                assert json.loads(bad.content[0].text)["error"] == "invalid_arguments"
                await client.call_tool(USER_TOOL, {"message": answer(task)})
            # the state the toolset keeps current is what the host's reward reads
            state = sv.ScaleEnvState(score=toolset.session.evaluate().score,
                                     components=toolset.session.evaluate().components)
            trace = _Trace(state)
            assert await vtask.scaleenv(trace) == 1.0
            assert trace.metrics["scaleenv_state_match"] == 1.0

    anyio.run(main)


def test_toolset_updates_rollout_state():
    import scaleenv.integrations.verifiers as sv

    u = small_universe()
    vtask = next(iter(sv.ScaleEnvTaskset(sv.ScaleEnvTasksetConfig(universe=str(u)))))
    task = next(t for t in tasks(u) if t.id == vtask.data.id)
    toolset = sv.ScaleEnvToolset(vf.ToolsetConfig())

    async def main() -> None:
        await toolset.setup_task(vtask)
        for name, args in careful(u, task):
            await toolset.call_tool(name, args)
        await toolset.call_tool(USER_TOOL, {"message": answer(task)})

    anyio.run(main)
    st = toolset.state  # outside a rollout call the toolset writes its inert state
    assert st.score == 1.0 and st.success and st.tool_calls == len(careful(u, task)) + 1 and st.state_hash


def test_toolset_reward_shape():
    import scaleenv.integrations.verifiers as sv
    from integrations_support import partial_case

    u = small_universe()
    task, calls, want = partial_case(u, conversational=True)

    async def main() -> None:
        for shape, expected in (("binary", 0.0), ("partial", want), ("dense", want)):
            taskset = sv.ScaleEnvTaskset(sv.ScaleEnvTasksetConfig(universe=str(u), reward_shape=shape))
            vtask = next(t for t in taskset if t.data.id == task.id)
            (toolset,) = sv.ScaleEnvTaskset.toolsets(taskset.config)
            await toolset.setup_task(vtask)
            for name, args in calls:
                toolset.session.call(name, args)
            assert toolset.session.evaluate().score == pytest.approx(expected), shape

    anyio.run(main)

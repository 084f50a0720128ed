"""verifiers (``[verifiers]``, verifiers 0.4, the ``verifiers.v1`` API): a scaleenv taskset.

    ScaleEnvTaskset   one task per scaleenv task of a universe (``--env.taskset.universe DIR``);
                      ``prompt`` is the user's opening request, ``system_prompt`` the agent's policy
    ScaleEnvToolset   a per-rollout MCP tool server: ``setup_task`` builds the episode, tools are
                      the task's tools plus ``send_message_to_user`` (the scripted user)
    ScaleEnvTask      its reward (weight 1) is the episode's score, read from the rollout state the
                      toolset keeps current (``score``, ``success``, ``components``, ``state_hash``)

verifiers launches the toolset as ``python -m scaleenv.integrations.verifiers``. Its module
``__all__`` names the one taskset, so ``vf-eval scaleenv.integrations.verifiers`` finds it. verifiers
0.4 pins ``mcp==2.0.0`` and ``openai<3``: install it in its own environment. This module imports
verifiers; nothing in scaleenv imports it until you ask for the verifiers adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from pydantic import Field

from scaleenv.integrations.session import IntegrationError

try:
    import verifiers.v1 as vf
except ImportError:
    raise IntegrationError("the verifiers adapter needs verifiers 0.4: pip install 'scaleenv[verifiers]'") from None
try:
    from mcp_types import CallToolResult, TextContent, Tool
except ImportError:  # mcp 2.0
    from mcp.types import CallToolResult, TextContent, Tool

from scaleenv.integrations.session import (
    USER_TOOL_SCHEMA,
    IntegrationError,
    Session,
    opening_request,
    parse_task,
    system_prompt,
    task_source,
)

__all__ = ["ScaleEnvTaskset"]
MODULE = "scaleenv.integrations.verifiers"


class ScaleEnvData(vf.TaskData):
    env_id: str
    universe: str
    task_json: str
    mode: str = "conversational"
    reward_shape: str = "binary"


class ScaleEnvState(vf.State):
    state_hash: str = ""
    score: float = 0.0
    success: bool = False
    components: dict[str, float] = Field(default_factory=dict)
    tool_calls: int = 0
    tool_errors: int = 0


class _ToolServer(Protocol):
    """The per-rollout MCP server a toolset registers on: its list and call handlers."""

    list_tools: Callable[..., Any]
    call_tool: Callable[..., Any]


class _Trace(Protocol):
    """What a reward function reads of a rollout."""

    state: ScaleEnvState


class ScaleEnvToolset(vf.Toolset[vf.ToolsetConfig, ScaleEnvState]):
    TOOL_PREFIX = None

    session: Session | None = None

    async def setup_task(self, task: ScaleEnvTask) -> None:
        data = task.data
        self.session = Session(task_source(data.universe), parse_task(data.task_json), mode=data.mode,
                               reward_shape=getattr(data, "reward_shape", "binary"))

    def register(self, mcp: _ToolServer) -> None:
        mcp.list_tools = self._with_state(self.list_tools)
        mcp.call_tool = self._with_state(self.call_tool)

    def _session(self) -> Session:
        if self.session is None:
            raise IntegrationError("the scaleenv toolset has no task yet (setup_task was not called)")
        return self.session

    async def list_tools(self) -> list[Tool]:
        schemas = [*self._session().tool_schemas(user_tool=False), USER_TOOL_SCHEMA]
        return [Tool(name=s["function"]["name"], description=s["function"]["description"],
                     input_schema=s["function"]["parameters"]) for s in schemas]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        context: object = None) -> CallToolResult:
        s = self._session()
        res = s.call(name, arguments or {})
        reward = s.evaluate()
        st = self.state
        st.tool_calls += 1
        st.tool_errors += not res.ok
        st.score, st.success = float(reward.score), bool(reward.success)
        st.components = {k: float(v) for k, v in reward.components.items()}
        st.state_hash = s.episode.state_hash()
        return CallToolResult(content=[TextContent(type="text", text=res.output)], is_error=not res.ok)


class ScaleEnvTask(vf.Task[ScaleEnvData, ScaleEnvState, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[ScaleEnvToolset]:
        return []

    @vf.reward(weight=1.0)
    async def scaleenv(self, trace: _Trace) -> float:
        state = trace.state
        record = getattr(trace, "record_metric", None)
        if record is not None:
            for k, v in (state.components or {}).items():
                record(f"scaleenv_{k}", float(v))
        return float(state.score)


class ScaleEnvTasksetConfig(vf.TasksetConfig):
    universe: str | None = None
    """The universe directory (else ``$SCALEENV_UNIVERSE``)."""
    domains: list[str] = Field(default_factory=list)
    mode: str = "conversational"
    reward_shape: str = "binary"
    """``binary``, ``partial`` or ``dense`` (the score the toolset keeps in the rollout state)."""
    tools: vf.ToolsetConfig = vf.ToolsetConfig()
    task: vf.TaskConfig = vf.TaskConfig()


class ScaleEnvTaskset(vf.Taskset[ScaleEnvTask, ScaleEnvTasksetConfig]):
    @classmethod
    def toolsets(cls, config: ScaleEnvTasksetConfig) -> list[ScaleEnvToolset]:
        return [ScaleEnvToolset(config.tools)]

    def load(self) -> Iterator[ScaleEnvTask]:
        from scaleenv.integrations.export import select_tasks

        source = task_source(self.config.universe)
        for t in select_tasks(source, self.config.domains):
            yield ScaleEnvTask(ScaleEnvData(
                id=t.id, name=t.id, description=t.domain.replace("_", " "),
                prompt=opening_request(t, self.config.mode),
                system_prompt=system_prompt(t, source.spec(t.domain), self.config.mode),
                env_id=t.domain, universe=str(source.root), task_json=t.to_jsonl(), mode=self.config.mode,
                reward_shape=self.config.reward_shape),
                self.config.task)


if __name__ == "__main__":  # verifiers launches the per-rollout tool server as `python -m` this module
    import sys

    sys.modules.setdefault(MODULE, sys.modules[__name__])
    for _cls in (ScaleEnvData, ScaleEnvState, ScaleEnvToolset, ScaleEnvTask, ScaleEnvTasksetConfig, ScaleEnvTaskset):
        _cls.__module__ = MODULE  # the classes pickle and resolve by their importable name
    ScaleEnvToolset.run()

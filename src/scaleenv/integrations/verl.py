"""verl (``[verl]``, verl 0.9): an agent loop registered as ``scaleenv_agent``, and ``compute_score``.

Rows come from ``scaleenv export --format verl`` (``agent_name: scaleenv_agent``; the task in
``extra_info.task_json``). Point verl at the loop and the reward::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=<dir>/scaleenv_agent_loop.yaml
    actor_rollout_ref.rollout.multi_turn.format=hermes
    reward.custom_reward_function.path=<scaleenv>/integrations/verl.py   (name: compute_score)

(:func:`scaleenv.integrations.export.verl_configs` writes the YAML). This module imports verl; nothing
in scaleenv imports it until you ask for the verl adapter. ``ScaleEnvAgentLoop`` extends verl's
``ToolAgentLoop`` so generation, the tool-call parser and the Continuous Token merging are verl's
own; the episode owns the tools (the task's, looked up per trajectory, never through verl's per-call
``BaseTool`` lifecycle), and a call runs with the environment core's meaning (a malformed one is the
core's ``invalid_arguments`` tool error). Assistant text without tool calls goes to the scripted
user, whose reply is merged as a non-trained turn (``response_mask`` 0); the user's stop marker,
``###STOP###`` from the agent, or verl's turn and length limits end the trajectory. The reward is
set as ``AgentLoopOutput.reward_score`` (verl then skips its reward loop) and its components go to
``extra_fields["reward_components"]``.

The reward shape is the loop's ``reward_shape`` (else the row's ``extra_info.reward_shape``, else
``binary``). Between training rounds, export a ``scaleenv curriculum`` training set (a universe
directory) with ``scaleenv export DIR --format verl`` or
:func:`scaleenv.integrations.export.curriculum_rows` and train on it.

``compute_score`` (from :mod:`scaleenv.integrations.hermes`) works without the agent loop too: it
reads the components the loop left, or else replays the ``<tool_call>`` blocks of ``solution_str``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import uuid4

from scaleenv.integrations.session import IntegrationError

if TYPE_CHECKING:
    from verl.experimental.agent_loop.tool_parser import FunctionCall

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as e:
    raise IntegrationError(f"the verl adapter needs verl 0.9: pip install 'scaleenv[verl]' ({e})") from None

from scaleenv.env.core import parse_tool_call
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.export import AGENT_NAME, verl_configs
from scaleenv.integrations.hermes import compute_score, parse_hermes_calls, replay_completion, run_call
from scaleenv.integrations.session import USER_TOOL, Session, row_fields, session_from_row
from scaleenv.reward.subgoals import ShapedReward

__all__ = ["AGENT_NAME", "ScaleEnvAgentLoop", "compute_score", "parse_hermes_calls", "replay_completion",
           "verl_configs"]


class _EpisodeTool:
    """What verl's tool parser reads from an active tool: its schema."""

    def __init__(self, schema: dict[str, Any]):
        self.name = schema["function"]["name"]
        self.tool_schema = OpenAIFunctionToolSchema.model_validate(schema)


@register(AGENT_NAME)
class ScaleEnvAgentLoop(ToolAgentLoop):
    """verl agent loop over a scaleenv episode (tools and the scripted user)."""

    universe: str | None = None
    """Universe directory when rows don't carry one (else ``$SCALEENV_UNIVERSE``)."""
    reward_shape: str | None = None
    """``binary``, ``partial`` or ``dense`` (the dense return); ``None``: the row's, else binary."""

    def __init__(self, *args: object, tools: object = None, **kwargs: object):
        super().__init__(*args, tools=None, **kwargs)  # the episode owns the tools

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs: Any) -> AgentLoopOutput:
        row: dict[str, Any] = {"extra_info": dict(kwargs.get("extra_info") or {})}
        truth = (kwargs.get("reward_model") or {}).get("ground_truth")
        if truth and "task_json" not in row_fields(row):
            row["task_id"] = truth
        session = session_from_row(row, universe=self.universe, reward_shape=self.reward_shape)
        messages = list(kwargs.get("raw_prompt") or session.opening_messages())
        agent_data = AgentData(messages=messages, image_data=None, video_data=None, audio_data=None,
                               mm_processor_kwargs=None, metrics={}, request_id=uuid4().hex, tools_kwargs={})
        schemas = session.tool_schemas()
        agent_data._active_tools = {s["function"]["name"]: _EpisodeTool(s) for s in schemas}
        agent_data._active_tool_schemas = schemas
        agent_data._scaleenv = session
        state = AgentState.PENDING
        try:
            while state != AgentState.TERMINATED:
                if state == AgentState.PENDING:
                    state = await self._handle_pending_state(agent_data, sampling_params)
                elif state == AgentState.GENERATING:
                    state = await self._handle_generating_state(agent_data, sampling_params)
                    if state == AgentState.TERMINATED and not agent_data.tool_calls:
                        state = await self._handle_user_turn(agent_data)
                elif state == AgentState.PROCESSING_TOOLS:
                    state = await self._handle_processing_tools_state(agent_data)
                    if session.done:
                        state = AgentState.TERMINATED
                else:
                    state = AgentState.TERMINATED
            reward = session.evaluate()
        finally:
            session.close()
        n = len(agent_data.response_mask)
        prompt_ids = agent_data.prompt_ids[: len(agent_data.prompt_ids) - n]
        response_ids = agent_data.prompt_ids[len(agent_data.prompt_ids) - n:] if n else []
        comps = {"score": reward.score, "success": float(reward.success), **reward.components}
        output = AgentLoopOutput(
            prompt_ids=prompt_ids, response_ids=response_ids[: self.response_length],
            response_mask=agent_data.response_mask[: self.response_length],
            response_logprobs=agent_data.response_logprobs[: self.response_length]
            if agent_data.response_logprobs else None,
            reward_score=reward.score, num_turns=agent_data.user_turns + agent_data.assistant_turns + 1,
            metrics=agent_data.metrics, extra_fields=dict(agent_data.extra_fields))
        output.extra_fields.update({"reward_components": comps, "turn_scores": agent_data.turn_scores,
                                    "tool_rewards": agent_data.tool_rewards, "task_id": session.task.id,
                                    "reward_diff": reward.diff[:5]})
        if isinstance(reward, ShapedReward) and reward.subgoals is not None:
            output.extra_fields["reward_subgoals"] = reward.subgoals.to_json()
        return output

    def _limits_hit(self, agent_data: AgentData) -> bool:
        return (len(agent_data.response_mask) >= self.response_length
                or bool(self.max_assistant_turns and agent_data.assistant_turns >= self.max_assistant_turns)
                or bool(self.max_user_turns and agent_data.user_turns >= self.max_user_turns))

    async def _handle_user_turn(self, agent_data: AgentData) -> AgentState:
        """Assistant text without tool calls: the user answers (a non-trained turn) unless it is over."""
        session: Session = agent_data._scaleenv
        last = agent_data.messages[-1] if agent_data.messages else {}
        text = str(last.get("content") or "") if last.get("role") == "assistant" else ""
        said = text.replace(STOP, "").replace("<|im_end|>", "").strip()
        if STOP in text or session.user is None or session.done or self._limits_hit(agent_data):
            if said:
                session.say(said)
            return AgentState.TERMINATED
        previous = list(agent_data.messages)
        reply = session.message_user(said) if said else session.message_user("(no message)")
        agent_data.messages.append({"role": "user", "content": reply})
        merge, mask, logprobs = await self.ct_merge_context_msg(
            previous, agent_data.messages, agent_data.prompt_ids, agent_data.response_mask,
            agent_data.response_logprobs if agent_data.response_logprobs else None,
            tools=agent_data._active_tool_schemas)
        if len(mask) >= self.response_length:
            return AgentState.TERMINATED
        agent_data.prompt_ids = merge.token_ids
        agent_data.response_mask = mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = logprobs or []
        agent_data.user_turns += 1
        return AgentState.TERMINATED if session.done else AgentState.GENERATING

    async def _call_tool(self, tool_call: FunctionCall, tools_kwargs: dict[str, Any],
                         agent_data: AgentData) -> tuple[ToolResponse, float, dict[str, Any]]:
        session: Session = agent_data._scaleenv
        _, name, args = parse_tool_call(0, {"function": {"name": tool_call.name, "arguments": tool_call.arguments}})
        res = run_call(session, name, args)
        text = res.output
        limit = self.max_tool_response_length
        if limit and len(text) > limit and tool_call.name != USER_TOOL:
            text = text[:limit] + "...(truncated)"
        return ToolResponse(text=text), 0.0, {}

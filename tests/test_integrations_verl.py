"""verl 0.9: the scaleenv_agent loop run with verl's real AgentLoop machinery (Continuous Token
helpers, hermes tool parser, AgentLoopOutput) and a scripted LLM server; compute_score."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop")
transformers = pytest.importorskip("transformers")
pytest.importorskip("pyarrow")

from integrations_support import answer, careful, hermes, reports_after, small_universe, tasks  # noqa: E402
from scaleenv.env.voice import phrasings  # noqa: E402
from scaleenv.integrations.export import export_universe, read_rows  # noqa: E402


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    try:
        from trl.chat_template_utils import qwen2_5_chat_template as template
    except ImportError:  # a minimal hermes (Qwen2.5-style) template
        template = (
            "{%- if tools %}<|im_start|>system\n{{ messages[0]['content'] if messages[0]['role'] == 'system' "
            "else '' }}\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n{%- endif %}"
            "{%- for m in messages %}{%- if m.role == 'system' and tools %}{%- elif m.role == 'tool' %}"
            "<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
            "{%- elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
            "{%- for tc in m.tool_calls or [] %}\n<tool_call>\n{\"name\": \"{{ tc.function.name }}\", "
            "\"arguments\": {{ tc.function.arguments if tc.function.arguments is string else "
            "tc.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
            "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endif %}{%- endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core)
    tok.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                            "additional_special_tokens": ["<|im_start|>"]})
    tok.chat_template = template
    return tok


class ScriptedServer:
    """Stands in for verl's LLMServerClient: replays assistant texts as token ids."""

    def __init__(self, tokenizer, replies: list[str]):
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.prompts: list[list[int]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        text = self.replies.pop(0) if self.replies else "###STOP###"
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def _loop(tokenizer, server):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from scaleenv.integrations import verl as sv

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": 65536, "response_length": 65536, "full_determinism": False,
        "multi_turn": {"max_user_turns": 20, "max_assistant_turns": 40, "max_parallel_calls": 8,
                       "max_tool_response_length": 4096, "tool_response_truncate_side": "right",
                       "format": "hermes"}}}})
    return sv.ScaleEnvAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=RLHFDataset,
                                data_config=DictConfigWrap(OmegaConf.create({})))


def test_agent_loop_is_registered():
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from scaleenv.integrations import verl as sv

    cls = sv.ScaleEnvAgentLoop
    assert _agent_loop_registry["scaleenv_agent"]["_target_"] == "scaleenv.integrations.verl.ScaleEnvAgentLoop"
    assert cls.__module__ == "scaleenv.integrations.verl"


def test_agent_loop_plays_gold_with_the_scripted_user(tmp_path):
    u = small_universe()
    out = tmp_path / "verl.parquet"
    export_universe(u, "verl", out)
    rows = read_rows(out)
    by_id = {t.id: t for t in tasks(u)}
    tok = _tokenizer()
    for row in rows[:2]:
        task = by_id[row["extra_info"]["task_id"]]
        calls = careful(u, task)
        # one tool call per turn, then the answer as plain text (which goes to the scripted user)
        reports = reports_after(u, task)  # once per request if gradual
        replies = [hermes([c]) for c in calls] + [answer(task)] * reports
        server = ScriptedServer(tok, replies)
        agent = _loop(tok, server)
        output = agent.loop.run_until_complete(agent.run({"temperature": 1.0}, raw_prompt=row["prompt"],
                                                         extra_info=row["extra_info"],
                                                         reward_model=row["reward_model"]))
        assert output.reward_score == 1.0, output.extra_fields.get("reward_diff")
        assert output.extra_fields["reward_components"]["score"] == 1.0
        assert len(output.response_ids) == len(output.response_mask)
        assert 0 in output.response_mask and 1 in output.response_mask  # tool/user turns are not trained
        assert output.num_turns >= len(calls) + 1
        text = tok.decode(output.response_ids)
        assert "<tool_response>" in text and any(p in text for p in phrasings()["finished"])  # the user's goodbye
        from scaleenv.integrations.verl import compute_score

        info = {**row["extra_info"], "reward_components": output.extra_fields["reward_components"]}
        assert compute_score(row["data_source"], "", task.id, info)["score"] == 1.0


def test_agent_loop_wrong_actions_score_zero(tmp_path):
    u = small_universe()
    out = tmp_path / "verl.parquet"
    export_universe(u, "verl", out)
    row = read_rows(out)[0]
    tok = _tokenizer()
    server = ScriptedServer(tok, [hermes([("no_such_tool", {})]), '<tool_call>{"name": broken</tool_call>',
                                  "###STOP###"])
    agent = _loop(tok, server)
    output = agent.loop.run_until_complete(agent.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"]))
    assert output.reward_score == 0.0
    assert "no tool named" in tok.decode(output.response_ids)
    json.dumps(output.extra_fields["reward_components"])  # plain JSON for verl's logging


def test_agent_loop_passes_the_reward_shape_through(tmp_path):
    from integrations_support import partial_case
    from scaleenv.integrations import verl as sv
    from scaleenv.integrations.export import curriculum_rows

    u = small_universe()
    task, calls, want = partial_case(u, conversational=True)
    out = tmp_path / "verl.parquet"
    export_universe(u, "verl", out)
    row = next(r for r in read_rows(out) if r["extra_info"]["task_id"] == task.id)
    tok = _tokenizer()
    for shape, expected in ((None, 0.0), ("partial", want), ("dense", want)):
        agent = _loop(tok, ScriptedServer(tok, [hermes([c]) for c in calls] + ["###STOP###"]))
        sv.ScaleEnvAgentLoop.reward_shape = shape
        try:
            output = agent.loop.run_until_complete(agent.run({"temperature": 1.0}, raw_prompt=row["prompt"],
                                                             extra_info=row["extra_info"],
                                                             reward_model=row["reward_model"]))
        finally:
            sv.ScaleEnvAgentLoop.reward_shape = None
        assert output.reward_score == pytest.approx(expected), shape
        assert ("reward_subgoals" in output.extra_fields) == (shape is not None)
    # rows of a curriculum training set carry the shape to the loop
    from scaleenv.run.curriculum import CurriculumConfig, run_curriculum
    from scaleenv.run.rollout import RolloutConfig, run_rollout

    run_rollout(RolloutConfig(universe=u, agent="oracle", out=tmp_path / "r.json"))
    run_curriculum(CurriculumConfig(pool=[u], results=[tmp_path / "r.json"], out=tmp_path / "next", size=2))
    rows = curriculum_rows(tmp_path / "next", "verl", reward_shape="partial")
    assert len(rows) == 2 and all(r["extra_info"]["reward_shape"] == "partial" for r in rows)

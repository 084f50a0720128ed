"""TRL: the environment_factory classes against TRL's own machinery, and a real GRPO run on CPU.

The model is a tiny Qwen2 built from a config in code (never downloaded) with a byte-level tokenizer
built in code and TRL's own Qwen2.5 chat template. Its weights are random except for a planted
"bigram" head: after any ordinary token it emits one whole tool call (an added token), after that
token it emits <|im_end|>. So every rollout really calls a tool through TRL's parser and our
environment method, and GRPO trains for two steps on the environments' get_reward().
"""

from __future__ import annotations

import inspect
import json
import os

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("datasets")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from integrations_support import answer, careful, gold, reports_after, small_universe, tasks  # noqa: E402
from scaleenv.integrations.session import USER_TOOL  # noqa: E402
from scaleenv.integrations.trl import ScaleEnvTRLSpec, tool_names  # noqa: E402


def test_tool_schemas_round_trip_through_transformers():
    """TRL derives each tool's schema with transformers' get_json_schema: it must match the spec."""
    from transformers.utils import get_json_schema

    u = small_universe()
    spec = ScaleEnvTRLSpec(u)
    for cls in spec.classes.values():
        env = cls()
        dspec = spec.source.spec(cls.domain)
        assert set(tool_names(cls)) == set(cls.tool_set) | {"send_message_to_user"}
        assert get_json_schema(env.send_message_to_user)["function"]["parameters"]["required"] == ["message"]
        for tool in (t for t in dspec.tools if t.name in cls.tool_set):
            got = get_json_schema(getattr(env, tool.name))["function"]
            want = tool.openai_schema()["function"]
            assert got["name"] == want["name"]
            props = got["parameters"].get("properties", {})
            assert set(props) == set(want["parameters"]["properties"])
            assert set(got["parameters"].get("required", [])) == set(want["parameters"]["required"])
            for name, p in want["parameters"]["properties"].items():
                assert props[name]["type"] == p["type"], (tool.name, name)
                if "enum" in p:
                    assert props[name]["enum"] == p["enum"]
                if p["type"] == "array":
                    assert props[name]["items"]["type"] == p["items"]["type"]


def test_env_methods_reproduce_gold_reward():
    u = small_universe()
    spec = ScaleEnvTRLSpec(u)
    ds = spec.train_dataset
    assert set(ds.column_names) >= {"prompt", "env_id", "task_id", "task_json", "environment"}
    by_id = {t.id: t for t in tasks(u)}
    for row in ds:
        env = spec.environment_factory[row["environment"]]()
        assert env.reset(**row) is None
        task = by_id[row["task_id"]]
        for name, args in careful(u, task):
            out = getattr(env, name)(**args)
            result = json.loads(out) if name != USER_TOOL else out  # a record, a list, a scalar; a reply
            assert not (isinstance(result, dict) and "error" in result), out
        for _ in range(reports_after(u, task)):
            env.send_message_to_user(answer(task))
        assert env.get_reward() == 1.0
        env.reset(**row)
        assert env.get_reward() == 0.0


def _tiny_model_and_tokenizer(tool_call_text: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core)
    tok.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                            "additional_special_tokens": ["<|im_start|>"]})
    tok.add_tokens([tool_call_text])
    tok.chat_template = qwen2_5_chat_template
    call_id, end_id = tok.convert_tokens_to_ids(tool_call_text), tok.eos_token_id

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16384,
                      tie_word_embeddings=False, eos_token_id=end_id, pad_token_id=tok.pad_token_id)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # the planted bigram: ordinary token -> the tool call; the tool call -> <|im_end|>
        emb, head = model.model.embed_tokens.weight, model.lm_head.weight
        emb[:, 0] += 8.0
        emb[call_id] = 0.0
        emb[call_id, 1] = 8.0
        head[call_id] = 0.0
        head[call_id, 0] = 8.0
        head[end_id] = 0.0
        head[end_id, 1] = 8.0
    return model, tok


def test_grpo_two_steps_on_cpu(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    u = small_universe()
    task = next(t for t in tasks(u) if t.domain == "pet_care")
    name, args = gold(u, task)[0]
    call = f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"
    spec = ScaleEnvTRLSpec(u, task_ids=[task.id], tools=[name])
    env_cls = spec.environment_factory
    assert inspect.isclass(env_cls) and tool_names(env_cls) == sorted([name, "send_message_to_user"])
    seen: list = []

    class Recorded(env_cls):  # the same class, recording each env instance TRL creates
        def __init__(self):
            super().__init__()
            seen.append(self)

    Recorded.__name__ = env_cls.__name__
    model, tok = _tiny_model_and_tokenizer(call)
    args_ = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                       max_completion_length=24, max_steps=2, learning_rate=1e-3, logging_steps=1,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False,
                       max_tool_calling_iterations=1, seed=0, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args_, train_dataset=spec.train_dataset,
                          environment_factory=Recorded)
    before = {k: v.clone() for k, v in model.named_parameters()}
    result = trainer.train()
    assert trainer.state.global_step == 2 and result.training_loss == result.training_loss  # not NaN
    assert seen, "TRL never built an environment"
    calls = sum(e.session.episode.stats.calls for e in seen if e._session is not None)
    assert calls > 0, "no tool call reached the environment"
    assert all(e._session.task.id == task.id for e in seen if e._session is not None)
    logged = [h for h in trainer.state.log_history if any(k.startswith("rewards/") for k in h)]
    assert logged, trainer.state.log_history
    key = next(k for k in logged[0] if k.startswith("rewards/") and k.endswith("/mean"))
    assert 0.0 <= logged[0][key] <= 1.0
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters()) or result.training_loss == 0.0


def test_reward_shape_and_curriculum_dataset(tmp_path):
    from integrations_support import partial_case
    from scaleenv.run.curriculum import CurriculumConfig, run_curriculum
    from scaleenv.run.rollout import RolloutConfig, run_rollout

    u = small_universe()
    task, calls, want = partial_case(u)
    for shape, expected in (("binary", 0.0), ("partial", want), ("dense", want)):
        spec = ScaleEnvTRLSpec(u, task_ids=[task.id], mode="solo", user=None, reward_shape=shape)
        row = spec.rows()[0]
        factory = spec.environment_factory  # one tool set: the class itself
        env = (factory[row["environment"]] if isinstance(factory, dict) else factory)()
        env.reset(**row)
        for name, args in calls:
            getattr(env, name)(**args)
        assert env.get_reward() == pytest.approx(expected), shape
    # a curriculum's training set is the next round's dataset
    run_rollout(RolloutConfig(universe=u, agent="noisy:0.5", out=tmp_path / "r.json"))
    cur = run_curriculum(CurriculumConfig(pool=[u], results=[tmp_path / "r.json"], out=tmp_path / "next", size=3))
    nxt = ScaleEnvTRLSpec.from_curriculum(tmp_path / "next")
    assert [t.id for t in nxt.tasks] == [t["id"] for t in cur["tasks"]] and len(nxt.tasks) == 3

"""SkyRL-gym: the env registered under "scaleenv", made with skyrl_gym.make from an exported row."""

from __future__ import annotations

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")
pytest.importorskip("pyarrow")

from integrations_support import answer, careful, hermes, reports_after, small_universe, tasks  # noqa: E402
from scaleenv.integrations.export import export_universe, read_rows  # noqa: E402
from scaleenv.integrations.skyrl import register_skyrl  # noqa: E402


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("skyrl") / "skyrl.parquet"
    export_universe(small_universe(), "skyrl", out)
    return read_rows(out)


def test_make_and_play_gold(rows):
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    register_skyrl()
    register_skyrl()  # idempotent
    u = small_universe()
    by_id = {t.id: t for t in tasks(u)}
    for row in rows:
        task = by_id[row["reward_spec"]["ground_truth"]]
        env = skyrl_gym.make(row["env_class"], env_config={}, extras=row)
        assert isinstance(env, BaseTextEnv)
        prompt, meta = env.init(row["prompt"])
        assert prompt == row["prompt"] and meta["task_id"] == task.id
        for call in careful(u, task):  # one tool call per turn, as a model would
            out = env.step(hermes([call]))
            assert not out["done"] and out["reward"] == 0.0
            assert out["observations"][0]["role"] == "tool"
        for _ in range(reports_after(u, task)):
            out = env.step(answer(task))  # plain text goes to the scripted user (once per request if gradual)
        assert out["done"] and out["reward"] == 1.0, out["metadata"]
        metrics = env.get_metrics()
        assert metrics["score"] == 1.0 and metrics["tool_calls"] == len(careful(u, task))
        env.close()


def test_questions_reach_the_user_and_limits_end_it(rows):
    register_skyrl()
    env = skyrl_gym.make("scaleenv", env_config={"max_turns": 3}, extras=rows[0])
    env.init(rows[0]["prompt"])
    out = env.step("Could you tell me your email?")
    assert not out["done"] and out["observations"] == [{"role": "user", "content": out["observations"][0]["content"]}]
    out = env.step('<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>')
    assert "unknown_tool" in out["observations"][0]["content"]
    out = env.step("###STOP###")
    assert out["done"] and out["reward"] == 0.0


def test_reward_shape_from_env_config(rows):
    from integrations_support import partial_case

    register_skyrl()
    u = small_universe()
    task, calls, want = partial_case(u, conversational=True)
    row = next(r for r in rows if r["reward_spec"]["ground_truth"] == task.id)
    for shape, expected in (("binary", 0.0), ("partial", want), ("dense", want)):
        env = skyrl_gym.make("scaleenv", env_config={"reward_shape": shape}, extras=row)
        env.init(row["prompt"])
        for call in calls:
            env.step(hermes([call]))
        out = env.step("###STOP###")
        assert out["done"] and out["reward"] == pytest.approx(expected), shape
        env.close()

"""Every export format loads back with the library that consumes it (pyarrow and datasets for
parquet, json for JSONL and tau2) and its row for each task reproduces the task's gold reward
through the adapter that reads that row."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from typer.testing import CliRunner  # noqa: E402

from integrations_support import answer, careful, gold, hermes, reports_after, small_universe, tasks  # noqa: E402
from scaleenv.cli import app  # noqa: E402
from scaleenv.integrations.export import read_rows  # noqa: E402
from scaleenv.integrations.session import USER_TOOL, session_from_row  # noqa: E402

runner = CliRunner()

COLUMNS = {
    "verl": ["data_source", "agent_name", "ability", "reward_model", "prompt", "extra_info"],
    "skyrl": ["data_source", "env_class", "reward_spec", "prompt", "extra_info"],
    "trl": ["env_id", "task_id", "environment", "universe", "mode", "prompt", "task_json"],
    "verifiers": ["task", "answer", "prompt", "info"],
}


def _export(fmt: str, tmp_path, ext: str = "parquet"):
    u = small_universe()
    out = tmp_path / f"{fmt}.{ext}"
    res = runner.invoke(app, ["export", str(u), "--format", fmt, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"exported {len(tasks(u))} tasks as {fmt}" in res.output
    return u, out


def _gold_through_session(u, row, task) -> float:
    s = session_from_row(row)
    for name, args in careful(u, task):
        assert s.call(name, args).ok
    s.call(USER_TOOL, {"message": answer(task)})
    return s.evaluate().score


@pytest.mark.parametrize("fmt", ["verl", "skyrl", "trl", "verifiers"])
def test_parquet_round_trip(fmt, tmp_path):
    u, out = _export(fmt, tmp_path)
    table = pq.read_table(out)
    assert table.column_names == COLUMNS[fmt]  # references first, blobs last
    assert table.num_rows == len(tasks(u))
    prompt_type = table.schema.field("prompt").type
    assert pa.types.is_list(prompt_type) and prompt_type.value_type.names == ["role", "content"]
    if fmt in ("verl", "skyrl"):
        extra = table.schema.field("extra_info").type
        assert extra.names[-1] == "task_json" and pa.types.is_string(extra.field("task_json").type)
    rows = table.to_pylist()
    by_id = {t.id: t for t in tasks(u)}
    for i, row in enumerate(rows):
        if fmt == "verl":
            assert row["agent_name"] == "scaleenv_agent" and row["reward_model"]["style"] == "rule"
            task = by_id[row["reward_model"]["ground_truth"]]
            assert row["extra_info"]["index"] == i and row["data_source"] == f"scaleenv/{task.domain}"
            from scaleenv.integrations.hermes import compute_score

            score = compute_score(row["data_source"], hermes(gold(u, task), answer(task)),
                                  row["reward_model"]["ground_truth"], row["extra_info"])
            assert score["score"] == 1.0, score
            assert compute_score(row["data_source"], "I did nothing.", task.id, row["extra_info"])["score"] == 0.0
        elif fmt == "skyrl":
            assert row["env_class"] == "scaleenv" and row["reward_spec"]["method"] == "rule"
            task = by_id[row["reward_spec"]["ground_truth"]]
            assert _gold_through_session(u, row, task) == 1.0
        elif fmt == "trl":
            from scaleenv.integrations.trl import ScaleEnvTRLSpec

            task = by_id[row["task_id"]]
            env = ScaleEnvTRLSpec(u).environment_factory[row["environment"]]()
            env.reset(**row)
            for name, args in careful(u, task):
                out = getattr(env, name)(**args)
                result = json.loads(out) if name != USER_TOOL else out  # a record, a list, a scalar; a reply
                assert not (isinstance(result, dict) and "error" in result), result
            env.send_message_to_user(answer(task))
            assert env.get_reward() == 1.0
        else:
            info = json.loads(row["info"])
            task = by_id[row["answer"]]
            assert row["task"] == task.domain and info["task_id"] == task.id
            assert _gold_through_session(u, row, task) == 1.0


@pytest.mark.parametrize("fmt", ["verl", "skyrl", "trl", "verifiers"])
def test_parquet_loads_with_datasets(fmt, tmp_path):
    datasets = pytest.importorskip("datasets")
    u, out = _export(fmt, tmp_path)
    ds = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert ds.column_names == COLUMNS[fmt] and len(ds) == len(tasks(u))
    row = ds[0]
    assert row["prompt"][0]["role"] == "system" and row["prompt"][1]["role"] == "user"
    task = next(t for t in tasks(u) if t.id in json.dumps(row))
    assert _gold_through_session(u, row, task) == 1.0


def test_jsonl_round_trip(tmp_path):
    u, out = _export("jsonl", tmp_path, "jsonl")
    rows = read_rows(out)
    assert [list(r)[:4] for r in rows[:1]] == [["env_id", "task_id", "universe", "mode"]]
    by_id = {t.id: t for t in tasks(u)}
    for row in rows:
        assert list(row)[-1] == "task_json" and isinstance(row["task_json"], str)
        assert {t["function"]["name"] for t in row["tools"]} == set(by_id[row["task_id"]].tools) | {USER_TOOL}
        assert _gold_through_session(u, row, by_id[row["task_id"]]) == 1.0


def test_skyrl_rows_through_the_env(tmp_path):
    pytest.importorskip("skyrl_gym")
    from scaleenv.integrations.skyrl import ScaleEnvSkyRL

    u, out = _export("skyrl", tmp_path)
    by_id = {t.id: t for t in tasks(u)}
    for row in read_rows(out):
        task = by_id[row["reward_spec"]["ground_truth"]]
        env = ScaleEnvSkyRL({}, row)
        env.init(row["prompt"])
        step = env.step(hermes(careful(u, task)))
        assert not step["done"] and all(o["role"] == "tool" for o in step["observations"])
        for _ in range(reports_after(u, task)):
            step = env.step(answer(task))  # a user who says its requests one at a time hears it per request
        assert step["done"] and step["reward"] == 1.0, step["metadata"]


def test_export_rejects_bad_input(tmp_path):
    u = small_universe()
    res = runner.invoke(app, ["export", str(u), "--format", "csv", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "unknown --format 'csv'" in res.output
    res = runner.invoke(app, ["export", str(tmp_path / "missing"), "--format", "verl", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "is not a directory" in res.output
    res = runner.invoke(app, ["export", str(u), "--format", "verl", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "is a directory" in res.output
    res = runner.invoke(app, ["export", str(u), "--format", "trl", "--out", str(tmp_path / "x.parquet"),
                              "--domain", "nope"])
    assert res.exit_code == 2 and "unknown domain 'nope'" in res.output
    res = runner.invoke(app, ["export", str(u), "--format", "trl", "--out", str(tmp_path / "x.parquet"),
                              "--mode", "loud"])
    assert res.exit_code == 2 and "unknown --mode" in res.output

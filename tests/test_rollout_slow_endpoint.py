"""Rollouts against a local endpoint that answers one request at a time, slowly (tests/slow_openai.py):
the default concurrency for a model on localhost, a timed-out request cancelled before its retry,
the exit status of a run whose episodes all failed, and the progress display's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openai")

from scaleenv.cli import app  # noqa: E402
from scaleenv.env.agents import AgentOptions  # noqa: E402
from scaleenv.run.rollout import (  # noqa: E402
    LiveEpisodes,
    RolloutConfig,
    RolloutProgress,
    default_concurrency,
    run_rollout,
)
from scaleenv.synth.build import BuildConfig, prepare_out, run_build  # noqa: E402
from scaleenv.tools.chain import resolve_args  # noqa: E402
from scaleenv.universe import Universe  # noqa: E402
from slow_openai import SlowOpenAI  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("slow") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=6)
    prepare_out(cfg)
    run_build(cfg)
    return out


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def solo_gold(tasks):
    """A solo agent that plays each task's gold chain, then states the answer facts."""

    def brain(body):
        request = next(m["content"] for m in body["messages"] if m["role"] == "user")
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        task = next(t for t in tasks if set(t.tools) <= offered and all(g in request for g in t.user_profile.goals))
        outputs = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        n = len(outputs)
        if n < len(task.gold_chain):
            call = task.gold_chain[n]
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": call.tool, "arguments": json.dumps(resolve_args(call, outputs, n))}}]}
        return {"role": "assistant",
                "content": " ".join(f"The {f.name} is {f.value}." for f in task.answer_facts) or "Done."}

    return brain


def test_local_endpoint_default_is_one_episode_in_flight_and_every_episode_finishes(universe, tmp_path):
    """Six episodes against a one-at-a-time server with a timeout shorter than the queue would be at
    eight in flight: with the local default (one in flight) none times out."""
    tasks = Universe(universe).tasks()
    with SlowOpenAI(solo_gold(tasks), delay=0.3) as srv:
        cfg = RolloutConfig(universe=universe, agent="openai:smol", mode="solo", out=tmp_path / "r.json",
                            agent_options=AgentOptions(base_url=srv.url, timeout=1.5, max_retries=0))
        assert default_concurrency(cfg) == 1
        res = run_rollout(cfg, keep_records=True)
    assert res["settings"]["concurrency"] == 1
    assert res["errors"] == 0 and res["num_episodes"] == 6, [r["error"] for r in res["records"]]
    assert res["avg_at_k"] == {"1": 1.0}
    assert srv.dropped == 0 and srv.answered == len(srv.bodies)
    remote = RolloutConfig(universe=universe, agent="openai:m", agent_options=AgentOptions(base_url="https://x.io/v1"))
    assert default_concurrency(remote) == 8


def test_a_timed_out_request_is_cancelled_before_its_retry(universe, tmp_path):
    """The first request takes far longer than the timeout: the client gives up on it and closes the
    connection, so the server drops it and answers the retry at once; the episode succeeds."""
    tasks = Universe(universe).tasks()
    with SlowOpenAI(solo_gold(tasks), delay=0.0) as srv:
        srv.delays = [60.0]  # far past any timeout: only a client that went away frees the server
        cfg = RolloutConfig(universe=universe, agent="openai:smol", mode="solo", task_ids=[tasks[0].id],
                            out=tmp_path / "r.json",
                            agent_options=AgentOptions(base_url=srv.url, timeout=1.5, max_retries=2))
        res = run_rollout(cfg, keep_records=True)
    rec = res["records"][0]
    assert rec["termination"] == "agent_stop" and rec["reward"]["score"] == 1.0, rec["error"]
    assert srv.dropped_requests[:1] == [0]  # the abandoned request: its client had gone before it was answered
    assert srv.answered == len(srv.bodies) - srv.dropped


def test_cli_exits_1_when_every_episode_failed_for_the_endpoint(universe, tmp_path):
    tasks = Universe(universe).tasks()
    with SlowOpenAI(solo_gold(tasks), delay=3.0) as srv:
        res = runner.invoke(app, ["rollout", str(universe), "--agent", "openai:smol", "--mode", "solo",
                                  "--base-url", srv.url, "--timeout", "0.2", "--max-retries", "0", "--num-tasks", "2",
                                  "--out", str(tmp_path / "r.json"), "--json"])
    assert res.exit_code == 1, res.output
    assert "2 of 2 episodes ended in error" in res.output and "every episode failed" in res.output
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["errors"] == 2 and results["avg_reward_without_errors"] is None
    assert "timeout" in results["first_error"]


def test_cli_exits_0_and_warns_when_some_episodes_failed(universe, tmp_path):
    tasks = Universe(universe).tasks()
    with SlowOpenAI(solo_gold(tasks), delay=0.0) as srv:
        srv.delays = [60.0]  # the first episode's first request times out
        res = runner.invoke(app, ["rollout", str(universe), "--agent", "openai:smol", "--mode", "solo",
                                  "--base-url", srv.url, "--timeout", "1.5", "--max-retries", "0", "--num-tasks", "2",
                                  "--out", str(tmp_path / "r.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert "1 of 2 episodes ended in error" in res.output and "avg reward without them: 1.000" in res.output


def test_progress_counts_resumed_episodes_and_shows_episodes_in_flight(universe):
    from scaleenv.env.core import make

    bar = RolloutProgress(enabled=False)
    kept = [{"reward_info": {"reward": r}, "termination_reason": t, "steps": 3}
            for r, t in ((1.0, "agent_stop"), (0.0, "error"), (0.5, "max_turns"))]
    bar.start(10, 3, kept)
    assert bar.avg() == "0.500" and bar.errors == 1
    assert bar.status() == "in flight 0  turns 0"
    task = Universe(universe).tasks()[0]
    with make(universe, task.id, mode="solo") as env:
        env.reset()
        read = next(t for t in task.tools if t.startswith(("find_", "list_", "get_")))
        env.step({"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": read, "arguments": "{}"}}]})
        live = bar.live
        assert isinstance(live, LiveEpisodes)
        live.add(env)
        assert bar.status() == "in flight 1  turns 1"
        live.remove(env)
    bar.episode({"reward_info": {"reward": 1.0}, "termination_reason": "agent_stop", "steps": 4})
    assert bar.avg() == "0.625" and bar.status() == "in flight 0  turns 4"

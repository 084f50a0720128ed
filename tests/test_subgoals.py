"""Sub-goal rewards: the partial and dense shapes, their gates on a small build, info after each
step, the component hooks, and the shape through make(), ToolEnv, rollouts and the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.agents import AgentContext
from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.core import EnvError, Mode, ToolEnv, make, run_sync
from scaleenv.env.policies import SwapAgent, reference_policy
from scaleenv.reward.subgoals import (
    TOOL_ERROR_PENALTY,
    VIOLATION_PENALTY,
    DenseTracker,
    RewardComponent,
    SubgoalReport,
    register_component_hook,
    unregister_component_hook,
)
from scaleenv.run.rollout import RolloutConfig, run_rollout
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.synth.tasks.gates import RANDOM_DRAWS, _max_turns, swap_pairs
from scaleenv.universe import Universe

runner = CliRunner()
HACKS = ("noop", "random", "write_all", "read_dump", "spray", "parrot")


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("subgoals") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "wedding_planning", "online_learning"], tasks_per_domain=6)
    prepare_out(cfg)
    run_build(cfg)
    return out


@pytest.fixture(scope="module")
def cache(universe):
    return TaskWorldCache(Universe(universe))


def _play(cache, task, agent, shape, rng_key="0"):
    """(final score, sum of the step rewards, env) of an agent on a solo episode under ``shape``."""
    ep = cache.acquire(task)
    env = ToolEnv(task, ep, mode=Mode.SOLO, max_turns=_max_turns(ep, task), release=lambda e: cache.release(task, e),
                  reward_shape=shape)
    env.reset()
    agent.reset(AgentContext(task=task, tools=env.tool_schemas(), rng=random.Random(f"g:{task.id}:{rng_key}"),
                             mode="solo", episode=env.episode, seed=0))
    total = 0.0
    while not env.done:
        _, r, *_ = env.step(run_sync(agent.act(env.messages)))
        total += r
    return env.evaluate().score, total, env


def _agents(cache, task):
    ep = cache.acquire(task)
    pairs = swap_pairs(ep, task)
    cache.release(task, ep)
    out = [(p, lambda p=p: reference_policy(p), str(i)) for p in HACKS
           for i in range(RANDOM_DRAWS if p == "random" else 1)]
    return out + [(f"swap{i}", lambda a=a, b=b: SwapAgent(a, b), "0") for i, (a, b) in enumerate(pairs)]


@pytest.mark.parametrize("shape", ["partial", "dense"])
def test_gates_hold_under_every_shape(cache, shape):
    """Gold: partial = dense sum = 1.0 on every task; noop and every hack at most 0."""
    failures = []
    tasks = cache.tasks()
    assert len(tasks) == 18
    for task in tasks:
        score, total, env = _play(cache, task, reference_policy("oracle"), shape)
        env.close()
        if score != pytest.approx(1.0) or total != pytest.approx(1.0):
            failures.append((task.id, "oracle", score, total))
        for name, make_agent, key in _agents(cache, task):
            score, total, env = _play(cache, task, make_agent(), shape, key)
            env.close()
            if score > 1e-9 or total > 1e-9:
                failures.append((task.id, name, score, total))
    assert failures == []


def test_binary_default_keeps_the_reward_json(cache):
    task = cache.tasks()[0]
    score, total, env = _play(cache, task, reference_policy("oracle"), "binary")
    assert (score, total) == (1.0, 1.0)
    assert set(env.final_reward()) == {"score", "success", "components", "diff"}
    info = env._info()
    assert "subgoals" not in info and "reward_shape" not in info
    env.close()


def test_info_reports_components_after_each_step(cache):
    # two writes at least: one write may meet every sub-goal at once (a pet transferred, its visits cancelled)
    task = next(t for t in cache.tasks() if len(t.gold_chain) >= 3
                and sum(cache.spec(t.domain).tool(c.tool).kind == "write" for c in t.gold_chain) >= 2)
    ep = cache.acquire(task)
    env = ToolEnv(task, ep, mode=Mode.SOLO, release=lambda e: cache.release(task, e), reward_shape="dense")
    _, info = env.reset()
    assert info["reward_shape"] == "dense" and info["subgoals"] and not any(info["subgoals"].values())
    agent = reference_policy("oracle")
    agent.reset(AgentContext(task=task, tools=env.tool_schemas(), rng=random.Random(0), mode="solo",
                             episode=env.episode))
    met_counts, rewards = [], []
    while not env.done:
        _, r, _, _, info = env.step(run_sync(agent.act(env.messages)))
        rewards.append(r)
        met_counts.append(sum(v for k, v in info["subgoals"].items() if k.split(":")[0] not in ("forbidden_write",)))
    assert all(v for k, v in info["subgoals"].items() if k.startswith(("changed", "added", "removed", "answer")))
    assert sum(rewards) == pytest.approx(1.0) and max(met_counts) == met_counts[-1]
    assert any(0 < r < 1 for r in rewards) or len(info["subgoals"]) == 1  # credit comes step by step
    env.close()


def test_swap_write_on_a_lookalike_is_a_violation(cache):
    """The swap policy acting on a look-alike scores 0 under partial and below 0 under dense."""
    hit = 0
    for task in cache.tasks():
        ep = cache.acquire(task)
        pairs = swap_pairs(ep, task)
        cache.release(task, ep)
        for a, b in pairs[:1]:
            score, total, env = _play(cache, task, SwapAgent(a, b), "dense")
            report = env.evaluate().subgoals
            env.close()
            if report.violations:
                hit += 1
                assert score < 0 and total < 0
                assert any(v.startswith(("lookalike", "forbidden_write")) for v in report.violations)
    assert hit >= 3


def test_dense_penalizes_tool_errors(cache):
    task = cache.tasks()[0]
    ep = cache.acquire(task)
    env = ToolEnv(task, ep, mode=Mode.SOLO, release=lambda e: cache.release(task, e), reward_shape="dense")
    env.reset()
    _, r, *_ = env.step({"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "no_such_tool", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "no_such_tool", "arguments": "{"}}]})
    assert r == pytest.approx(-2 * TOOL_ERROR_PENALTY)
    assert env.evaluate().components["penalties"] == pytest.approx(2 * TOOL_ERROR_PENALTY)
    env.close()


def test_dense_tracker_sums_to_partial_less_penalties():
    t = DenseTracker()
    goals = [RewardComponent("a", "write", False), RewardComponent("b", "write", False)]
    t.update(SubgoalReport(goals), 0)
    t.update(SubgoalReport([goals[0].__class__("a", "write", True), goals[1]]), 1)
    assert t.take() == pytest.approx(0.5 - TOOL_ERROR_PENALTY)
    broken = [RewardComponent("a", "write", True), RewardComponent("b", "write", True),
              RewardComponent("forbidden_write:x[1]", "guard", False)]
    t.update(SubgoalReport(broken), 1)  # a guard breaks: the potential falls to 0 less the violation
    assert t.take() == pytest.approx(-0.5 - VIOLATION_PENALTY)
    t.update(SubgoalReport(broken[:2]), 1)  # and holds again: given back
    assert t.take() == pytest.approx(1.0 + VIOLATION_PENALTY)
    assert t.total == pytest.approx(1.0 - TOOL_ERROR_PENALTY)


def test_component_hooks_add_procedure_checks_that_gate_and_never_pay(cache):
    task = cache.tasks()[0]
    seen = []
    greeted = {"met": False}

    def hook(t, trajectory):
        seen.append(len(trajectory["messages"]))
        said = [m for m in trajectory["transcript"] if m["role"] == "assistant"]
        return [RewardComponent("procedure:greeted", "procedure", greeted["met"]),
                RewardComponent("guard:polite", "guard", not any("stupid" in m["content"] for m in said))]

    register_component_hook("test", hook)
    try:
        score, _, env = _play(cache, task, reference_policy("oracle"), "partial")
        report = env.evaluate().subgoals
        env.close()
        # a procedure not met gates the partial reward like a guard; it is never a sub-goal that pays
        assert seen and score == 0.0
        assert report.met()["procedure:greeted"] is False and report.violations == ["procedure:greeted"]
        assert all(c.kind in ("write", "answer") for c in report.counted)
        greeted["met"] = True
        score, _, env = _play(cache, task, reference_policy("oracle"), "partial")
        env.close()
        assert score == 1.0
        noop, _, env = _play(cache, task, reference_policy("noop"), "partial")
        env.close()
        assert noop == 0.0  # procedure met (vacuously) and nothing done: nothing earned
    finally:
        unregister_component_hook("test")
    score, _, env = _play(cache, task, reference_policy("oracle"), "partial")
    env.close()
    assert score == 1.0


def test_make_and_rollout_take_the_shape(universe, tmp_path):
    tid = Universe(universe).tasks()[0].id
    with pytest.raises(EnvError, match="unknown reward shape"):
        make(universe, tid, reward_shape="sparse")
    with make(universe, tid, reward_shape="partial") as env:
        assert env.shaping.shape == "partial"
    res = run_rollout(RolloutConfig(universe=universe, agent="oracle", out=tmp_path / "p.json", reward_shape="dense"))
    assert res["avg_reward"] == pytest.approx(1.0) and res["settings"]["reward_shape"] == "dense"
    line = json.loads((tmp_path / "p.trajectories.jsonl").read_text().splitlines()[0])
    assert line["reward"]["shape"] == "dense" and line["reward"]["subgoals"]["partial"] == 1.0
    binary = run_rollout(RolloutConfig(universe=universe, agent="oracle", out=tmp_path / "b.json"))
    assert "reward_shape" not in binary["settings"]
    r = runner.invoke(app, ["rollout", str(universe), "--reward", "sparse", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "unknown --reward 'sparse'" in r.output and "Traceback" not in r.output


def test_check_cli_runs_the_gates_in_a_shape(universe):
    for shape in ("partial", "dense"):
        r = runner.invoke(app, ["check", str(universe), "--reward", shape, "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.output)
        assert out["tasks"] == 18 and out["gold_pass"] == 18 and out["failures"] == []
        assert all(out[k] == 18 for k in out if k.endswith("_zero"))
    r = runner.invoke(app, ["check", str(universe), "--reward", "sparse"])
    assert r.exit_code == 2 and "unknown --reward" in r.output

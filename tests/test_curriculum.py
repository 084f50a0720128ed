"""The noisy oracle, ``scaleenv curriculum next`` (pass rates, selection in the window, new tasks
built with a new task seed, the training set as a universe), the loop driver and its report cards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.policies import NoisyOracleAgent, make_agent, parse_noisy_spec
from scaleenv.run.curriculum import (
    Candidate,
    CurriculumConfig,
    CurriculumError,
    estimate,
    parse_window,
    pass_rates,
    run_curriculum,
    select,
    step_rate,
)
from scaleenv.run.curriculum_loop import LoopConfig, run_loop
from scaleenv.run.rollout import RolloutConfig, run_rollout
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.universe import Universe, validate_universe

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("curriculum") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "wedding_planning"], tasks_per_domain=8)
    prepare_out(cfg)
    run_build(cfg)
    return out


def _rollout(universe, agent, out, trials=1, seed=0):
    return run_rollout(RolloutConfig(universe=universe, agent=agent, out=out, trials=trials, seed=seed, force=True))


def _pass(res):
    sims = res["simulations"]
    return sum(s["reward_info"]["success"] for s in sims) / len(sims)


# ------------------------------------------------------------------------------------ noisy oracle
def test_noisy_oracle_skill_orders_pass_rates_and_is_deterministic(universe, tmp_path):
    perfect = _rollout(universe, "noisy:1.0", tmp_path / "p.json", trials=2)
    hopeless = _rollout(universe, "noisy:0.0", tmp_path / "h.json", trials=2)
    mid = _rollout(universe, "noisy:0.6", tmp_path / "m.json", trials=4)
    again = _rollout(universe, "noisy:0.6", tmp_path / "m2.json", trials=4)
    assert _pass(perfect) == 1.0 and _pass(hopeless) == 0.0
    assert 0.0 < _pass(mid) < 1.0
    strip = [(s["id"], s["reward_info"]) for s in mid["simulations"]]
    assert strip == [(s["id"], s["reward_info"]) for s in again["simulations"]]
    other_seed = _rollout(universe, "noisy:0.6", tmp_path / "m3.json", trials=4, seed=5)
    assert [s["reward_info"] for s in other_seed["simulations"]] != [r for _, r in strip]


def test_noisy_oracle_makes_each_kind_of_mistake(universe):
    """Over many episodes each mistake kind happens, in roughly its share of the draws."""
    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.env.core import Mode, ToolEnv
    from scaleenv.env.policies import play

    cache = TaskWorldCache(Universe(universe))
    kinds: dict[str, int] = {}
    steps = 0
    for task in cache.tasks():
        for seed in range(12):
            ep = cache.acquire(task)
            env = ToolEnv(task, ep, mode=Mode.SOLO, seed=seed, release=lambda e, t=task: cache.release(t, e))
            agent = NoisyOracleAgent(0.5)
            import random

            play(env, agent, random.Random(seed))
            env.close()
            steps += sum(1 for c in task.gold_chain if c.purpose == "goal") + len(task.answer_facts)
            for m in agent.mistakes:
                kinds[m.split(":")[0]] = kinds.get(m.split(":")[0], 0) + 1
    assert set(kinds) == {"lookalike", "skip", "value"}
    assert 0.35 < sum(kinds.values()) / steps < 0.65  # 1 - skill of the draws go wrong


def test_noisy_specs():
    assert parse_noisy_spec("noisy") == 0.8 and parse_noisy_spec("noisy:0.25") == 0.25
    assert parse_noisy_spec("oracle") is None
    assert isinstance(make_agent("noisy:0.3"), NoisyOracleAgent)
    for bad in ("noisy:1.5", "noisy:x"):
        with pytest.raises(ValueError, match="skill"):
            parse_noisy_spec(bad)


# ------------------------------------------------------------------------------------ estimation, selection
def test_step_rate_recovers_the_per_step_success():
    rates = {"sub_goals": {"1": {"episodes": 400, "passes": 320}, "2": {"episodes": 400, "passes": 256},
                           "3": {"episodes": 400, "passes": 205}}}
    assert step_rate(rates) == pytest.approx(0.8, abs=0.01)


def test_selection_follows_the_agent(universe):
    u = Universe(universe)
    tasks = u.tasks()

    def pool(goals):
        return [Candidate(t, universe, g) for t, g in zip(tasks, goals, strict=False)]

    goals = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    for q, want in ((0.95, {5, 6}), (0.3, {1})):  # a strong agent gets the longest tasks, a weak one the shortest
        cands = pool(goals)
        rates = {"sub_goals": {str(k): {"episodes": 50, "passes": round(50 * q ** k)} for k in (1, 2, 3)}}
        estimate(cands, rates)
        chosen = select(cands, 2 if q < 0.5 else 4, (0.2, 0.8), seed=0)
        assert {c.goals for c in chosen} <= want, [(c.goals, c.estimate) for c in chosen]


def test_pass_rates_by_group(universe, tmp_path):
    res = _rollout(universe, "noisy:0.5", tmp_path / "r.json", trials=2)
    from scaleenv.run.curriculum import load_pool, read_results

    cands = load_pool([universe])
    rates = pass_rates(cands, read_results([tmp_path / "r.json"]))
    assert set(rates) == {"task", "family", "tool", "domain", "tier", "sub_goals"}
    assert sum(v["episodes"] for v in rates["task"].values()) == len(res["simulations"])
    built = {t.family for t in Universe(universe).tasks()}
    assert set(rates["family"]) == built and len(built) > 1  # one group per family the build mixed
    assert set(rates["domain"]) == {"pet_care", "wedding_planning"}


def test_parse_window():
    assert parse_window("20-80") == (0.2, 0.8) and parse_window("0.3-0.6") == (0.3, 0.6)
    for bad in ("80", "a-b"):
        with pytest.raises(CurriculumError):
            parse_window(bad)
    with pytest.raises(CurriculumError):
        CurriculumConfig(pool=[Path(".")], results=[], out=Path("x"), window=(0.8, 0.2))


# ------------------------------------------------------------------------------------ one step, the loop
def test_curriculum_step_writes_a_universe_with_new_tasks(universe, tmp_path):
    _rollout(universe, "noisy:0.05", tmp_path / "r.json", trials=2)
    out = tmp_path / "next"
    summary = run_curriculum(CurriculumConfig(pool=[universe], results=[tmp_path / "r.json"], out=out, size=6,
                                              new_tasks=4, seed=3))
    assert summary["size"] == 6 and len(summary["new"]["tasks"]) == 4
    assert summary["new"]["chain_length"] == [2, 4]  # the agent fails most tasks: shorter chains
    assert validate_universe(out).startswith("ok:")
    new = Universe(summary["new"]["universe"])
    seed = summary["new"]["task_seed"]
    assert all(t.id.split("/")[1].startswith(f"s{seed}-") for t in new.tasks())
    for d in new.domains:  # the same domain, tools and world: only the tasks are new
        assert (new.root / "domains" / d / "spec.json").read_bytes() == (universe / "domains" / d / "spec.json").read_bytes()
    assert sorted(t.id for t in Universe(out).tasks()) == sorted(t["id"] for t in summary["tasks"])
    data = json.loads((out / "curriculum.json").read_text())
    assert data["pass_rates"]["sub_goals"] and data["expected_pass_rate"] is not None
    # the same inputs give the same set, the same new tasks included
    again = run_curriculum(CurriculumConfig(pool=[universe], results=[tmp_path / "r.json"],
                                            out=tmp_path / "again" / "next", size=6, new_tasks=4, seed=3))
    assert [t["id"] for t in again["tasks"]] == [t["id"] for t in summary["tasks"]]
    assert (tmp_path / "again" / "next" / "tasks").exists()
    for d in Universe(out).domains:
        assert (out / "tasks" / f"{d}.jsonl").read_bytes() == (tmp_path / "again" / "next" / "tasks" / f"{d}.jsonl").read_bytes()


def test_loop_and_report(universe, tmp_path):
    out = tmp_path / "loop"
    summary = run_loop(LoopConfig(universe=universe, agent="noisy:0.4", out=out, rounds=2, size=6, new_tasks=3))
    rows = summary["rounds"]
    assert [r["round"] for r in rows] == [0, 1, 2] and all(r["tasks"] == 6 and r["episodes"] == 6 for r in rows)
    assert all(0.0 <= r["pass_rate"] <= 1.0 for r in rows) and rows[0]["new_tasks"] == 0
    assert json.loads((out / "loop.json").read_text())["rounds"] == rows
    site = tmp_path / "site"
    r = runner.invoke(app, ["report", str(universe), "--loop", str(out / "loop.json"), "--out", str(site)])
    assert r.exit_code == 0, r.output
    plots = (site / "plots.html").read_text()
    assert "Curriculum: pass rate per round" in plots and "noisy:0.4" in plots


def test_cli_curriculum_and_bad_input(universe, tmp_path):
    _rollout(universe, "noisy:0.5", tmp_path / "r.json")
    r = runner.invoke(app, ["curriculum", "next", str(tmp_path / "r.json"), "--universe", str(universe),
                            "--out", str(tmp_path / "n"), "--size", "4", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["size"] == 4
    r = runner.invoke(app, ["curriculum", "next", str(tmp_path / "r.json"), "--universe", str(universe),
                            "--out", str(tmp_path / "n")])
    assert r.exit_code == 2 and "--force" in r.output
    r = runner.invoke(app, ["curriculum", "next", str(tmp_path / "missing.json"), "--universe", str(universe),
                            "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and "does not exist" in r.output
    r = runner.invoke(app, ["curriculum", "next", str(tmp_path / "r.json"), "--universe", str(universe),
                            "--out", str(tmp_path / "w"), "--window", "90-10"])
    assert r.exit_code == 2 and "--window" in r.output
    r = runner.invoke(app, ["curriculum", "loop", str(universe), "--agent", "noisy:7", "--out", str(tmp_path / "l")])
    assert r.exit_code == 2 and "skill" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "l").exists()

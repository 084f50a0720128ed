"""Rollouts on a real local Ray instance: oracle 1, noop 0, and the same results as the serial executor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

ray = pytest.importorskip("ray")

from scaleenv.cli import app  # noqa: E402
from scaleenv.run.rollout import RolloutConfig, run_rollout  # noqa: E402
from scaleenv.synth.build import BuildConfig, prepare_out, run_build  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ray") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "wedding_planning"], tasks_per_domain=2)
    prepare_out(cfg)
    run_build(cfg)
    return out


def _comparable(records):
    return sorted(({k: r[k] for k in ("id", "seed", "termination", "reward", "messages", "tools", "steps")}
                   for r in records), key=lambda r: r["id"])


def test_ray_oracle_one_noop_zero_and_same_as_serial(universe, tmp_path, local_ray):
    oracle = run_rollout(RolloutConfig(universe=universe, agent="oracle", executor="ray", workers=2, trials=2,
                                       out=tmp_path / "o.json"))
    assert oracle["avg_at_k"] == {"1": 1.0, "2": 1.0} and oracle["pass_hat_k"]["2"] == 1.0
    assert oracle["num_episodes"] == 8 and oracle["errors"] == 0
    noop = run_rollout(RolloutConfig(universe=universe, agent="noop", executor="ray", workers=2,
                                     out=tmp_path / "n.json"))
    assert noop["avg_at_k"] == {"1": 0.0} and noop["num_episodes"] == 4
    runs = {ex: run_rollout(RolloutConfig(universe=universe, agent="random", executor=ex, workers=2, trials=3,
                                          seed=11, out=tmp_path / f"{ex}.json"), keep_records=True)
            for ex in ("ray", "serial")}
    assert _comparable(runs["ray"]["records"]) == _comparable(runs["serial"]["records"])
    for key in ("avg_at_k", "pass_at_k", "pass_hat_k", "per_domain"):
        assert runs["ray"][key] == runs["serial"][key]
    assert ray.is_initialized()  # the executor leaves an instance it did not start running


def test_cli_rollout_on_ray(universe, tmp_path, local_ray):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["rollout", str(universe), "--agent", "oracle", "--mode", "solo", "--executor",
                                   "ray", "--workers", "2", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["avg_at_k"] == {"1": 1.0} and data["settings"]["executor"] == "ray"


def test_ray_interrupt_then_resume(universe, tmp_path, local_ray):
    from scaleenv.run.rollout import RolloutInterrupted

    cfg = RolloutConfig(universe=universe, agent="random", executor="ray", workers=2, trials=2, out=tmp_path / "r.json")
    seen = []

    def stop(summary):
        seen.append(summary["id"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(RolloutInterrupted):
        run_rollout(cfg, on_episode=stop)
    kept = cfg.trajectories_path().read_text().splitlines()
    assert len(kept) >= 2
    resumed = run_rollout(RolloutConfig(**{**cfg.__dict__, "resume": True}))
    assert resumed["num_episodes"] == 8 and resumed["status"] == "complete"
    assert len(cfg.trajectories_path().read_text().splitlines()) == 8

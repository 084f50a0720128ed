"""The rollout benchmark runs and reports every figure (speed itself is `scaleenv bench`'s job)."""

from __future__ import annotations

import importlib.util
import math

import pytest

from scaleenv.bench import discover, run_bench

pytestmark = pytest.mark.slow

FIGURES = {"rollout.steps_per_s", "rollout.episodes_per_s", "rollout.serial_steps_per_s", "rollout.serial_cpu_steps_per_s",
           "rollout.steps_per_episode", "rollout.ray_overhead_ms", "rollout.ray_call_ms"}


def test_quick_rollout_bench_reports_every_figure():
    assert "rollout" in discover()
    figures = run_bench(quick=True, only=["rollout"])
    assert set(figures) == FIGURES
    for name, value in figures.items():
        assert isinstance(value, float) and math.isfinite(value), (name, value)
    assert figures["rollout.steps_per_s"] > 0 and figures["rollout.serial_steps_per_s"] > 0
    assert figures["rollout.steps_per_episode"] >= 3  # the oracle's gold chain plus its answer
    if importlib.util.find_spec("ray") is None:
        assert figures["rollout.ray_overhead_ms"] == -1.0
    else:
        assert figures["rollout.ray_overhead_ms"] >= 0 and figures["rollout.ray_call_ms"] >= 0

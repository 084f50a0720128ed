"""The benchmark suite runs and reports every figure (no timing assertions: speed is `scaleenv bench`'s job)."""

from __future__ import annotations

import math

import pytest

from scaleenv.bench import bench_dir, discover, run_bench
from scaleenv.errors import ScaleEnvError

CORE_FIGURES = {
    "core.reset_ms", "core.read_call_ms", "core.write_call_ms", "core.evaluate_ms", "core.hash_ms",
    "core.hash_cold_ms", "core.episode_mem_mb", "core.import_s", "core.python_startup_s", "core.world_json_mb",
    "core.world_json_compact_mb", "core.world_sqlite_mb", "core.world_rows", "core.build_s", "core.construct_ms",
    "core.first_call_ms", "core.first_call_newconn_ms", "core.evaluate_full_ms", "core.hash_cold_newsnap_ms",
    "core.task_worlds_mem_mb", "core.import_env_s",
}


def test_discover_finds_core() -> None:
    modules = discover()
    assert "core" in modules and modules["core"].name == "bench_core.py"
    assert modules["core"].parent == bench_dir()


def test_quick_core_bench_reports_every_figure() -> None:
    figures = run_bench(quick=True, only=["core"])
    assert set(figures) == CORE_FIGURES
    assert list(figures) == sorted(figures)
    for name, value in figures.items():
        # an RSS delta can be 0 when the allocator reuses memory freed earlier in the same process
        floor_ok = value >= 0 if name.endswith("_mem_mb") else value > 0
        assert isinstance(value, float) and math.isfinite(value) and floor_ok, (name, value)
    # The world is at tau2-retail scale, whatever the machine's speed.
    assert figures["core.world_rows"] > 8000
    assert 1.0 < figures["core.world_json_compact_mb"] < 3.0


def test_unknown_benchmark_and_missing_directory(tmp_path, monkeypatch) -> None:
    with pytest.raises(ScaleEnvError, match="unknown benchmark"):
        run_bench(quick=True, only=["nope"])
    monkeypatch.setenv("SCALEENV_BENCH_DIR", str(tmp_path / "missing"))
    with pytest.raises(ScaleEnvError, match="benchmark directory .* not found"):
        run_bench(quick=True)
    monkeypatch.setenv("SCALEENV_BENCH_DIR", str(tmp_path))
    (tmp_path / "bench_x.py").write_text("def run(quick):\n    return {'x.b': 2.0, 'x.a': 1.0}\n")
    assert list(run_bench(quick=True).items()) == [("x.a", 1.0), ("x.b", 2.0)]

"""The task and growth benchmarks report every figure; `--scale` reaches the modules that take it."""

from __future__ import annotations

import importlib.util
import math

from typer.testing import CliRunner

from scaleenv.bench import bench_dir, run_bench
from scaleenv.cli import app

TASK_FIGURES = {"tasks.rows", "tasks.load_ms", "tasks.load_cold_ms", "tasks.construct_ms", "tasks.first_call_ms",
                "tasks.steady_call_ms", "tasks.evaluate_ms", "tasks.evaluate_full_ms", "tasks.e2e_ms",
                "tasks.hash_cold_ms", "tasks.task_worlds_mem_mb", "tasks.rollout_tasks_per_s",
                "tasks.rollout_load_share"}


def test_quick_task_bench_at_a_scale_reports_every_figure() -> None:
    figures = run_bench(quick=True, only=["tasks"], scale=2.0)
    assert set(figures) == TASK_FIGURES
    for name, value in figures.items():
        assert isinstance(value, float) and math.isfinite(value), (name, value)
    assert figures["tasks.rows"] == 872.0  # catalog retail: 436 rows at scale 1, twice that at scale 2
    assert 0 < figures["tasks.rollout_load_share"] < 1


def test_scale_reaches_modules_that_take_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SCALEENV_BENCH_DIR", str(tmp_path))
    (tmp_path / "bench_a.py").write_text("def run(quick, scale=None):\n    return {'a.scale': float(scale or 0)}\n")
    (tmp_path / "bench_b.py").write_text("def run(quick):\n    return {'b.x': 1.0}\n")
    assert run_bench(quick=True, scale=17.0) == {"a.scale": 17.0, "b.x": 1.0}
    res = CliRunner().invoke(app, ["bench", "--quick", "--json", "--scale", "3", "--only", "a"])
    assert res.exit_code == 0, res.output
    assert '"a.scale": 3.0' in res.output and "b.x" not in res.output
    bad = CliRunner().invoke(app, ["bench", "--scale", "0"])
    assert bad.exit_code == 2


def test_growth_svg_plots_every_point() -> None:
    spec = importlib.util.spec_from_file_location("bench_growth_t", bench_dir() / "bench_growth.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    figs = {}
    for n, s, b in ((1024, 1.0, 10.0), (4096, 1.0, 40.0), (256, 1.0, 3.0), (256, 4.0, 5.0), (256, 17.0, 9.0)):
        for k, v in (("build_s", b), ("rollout_s", b / 2), ("load_share", 0.3), ("peak_rss_mb", 100 + b), ("rows", 1.0)):
            figs[f"growth.n{n}_s{s:g}.{k}"] = v
    text = mod.svg(figs)
    assert text.startswith("<svg") and text.count("<polyline") == 6  # 3 series x 2 charts
    assert text.count("<circle") == 3 * 3 + 3 * 3  # tasks chart: 3 points; scale chart: 3 points
    assert mod.points(quick=False) == [(1024, 1.0), (4096, 1.0), (256, 1.0), (256, 4.0), (256, 17.0)]

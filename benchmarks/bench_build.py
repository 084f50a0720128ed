"""Synthesis and build throughput.

* ``synth.domain_build_s``: Phase 1 for one catalog domain (derive, seed, test every tool, graph),
  median over the paper's training domains, on one core (target <= 2 s); ``synth.domain_build_max_s``.
* ``build.wall_s``: the default ``scaleenv build`` (16 domains x 64 tasks, gates included) with the
  process executor and 2 workers (target <= 90 s); per-stage CPU seconds summed over workers
  (``build.stage.*_s``) and ``build.tasks_per_s`` (verified tasks per wall second).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path


def run(quick: bool = False) -> dict[str, float]:
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build
    from scaleenv.synth.procedural.blueprint import PAPER_TRAINING_DOMAINS, catalog
    from scaleenv.synth.procedural.domain import build_domain

    cat = catalog()
    domains = [d for d in PAPER_TRAINING_DOMAINS if d in cat]
    sample = domains[:2] if quick else domains
    times = []
    for name in sample:
        t0 = time.perf_counter()
        build_domain(cat[name], 0)
        times.append(time.perf_counter() - t0)
    figures = {
        "synth.domain_build_s": round(statistics.median(times), 3),
        "synth.domain_build_max_s": round(max(times), 3),
        "synth.domains_measured": float(len(times)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        cfg = BuildConfig(out=Path(tmp) / "universe", domains=domains[:2] if quick else domains,
                          tasks_per_domain=8 if quick else 64, seed=0, executor="process", workers=2)
        prepare_out(cfg)
        t0 = time.perf_counter()
        results = run_build(cfg)
        wall = time.perf_counter() - t0
    tasks = sum(r.tasks for r in results)
    stages: dict[str, float] = {"phase1": sum(r.phase1_s for r in results)}
    for r in results:
        for k, v in r.stage_s.items():
            stages[k] = stages.get(k, 0.0) + v
    figures.update({
        "build.wall_s": round(wall, 2),
        "build.domains": float(len(results)),
        "build.tasks": float(tasks),
        "build.attempts": float(sum(r.attempts for r in results)),
        "build.tasks_per_s": round(tasks / wall, 2),
    })
    figures.update({f"build.stage.{k}_s": round(v, 2) for k, v in sorted(stages.items())})
    return figures

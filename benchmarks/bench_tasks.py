"""Task figures on a catalog retail universe: what an environment user pays per task, task loading included.

``scaleenv bench --scale S`` builds retail at scale S (17 has tau2-bench's retail row count: 7,412 rows
against 7,493); the default is scale 1 (436 rows). Figures (medians; ``_ms`` milliseconds):

tasks.rows               rows of the base world
tasks.load_ms            build_worlds per task (base + patch, gold replay, two hash checks), warm process
tasks.load_cold_ms       the same for the first task of a fresh process state (digest caches cleared)
tasks.construct_ms       make_episode: an Episode on the task's initial snapshot (worlds already built)
tasks.first_call_ms      the first gold call on that fresh episode
tasks.steady_call_ms     a gold call on a warm episode (after reset)
tasks.evaluate_ms        Episode.evaluate after the gold chain, expected world prebuilt
tasks.evaluate_full_ms   build_worlds + Episode + evaluate (the agent's moves not counted)
tasks.e2e_ms             per task, every task once: build_worlds, Episode, gold chain through call_tool,
                         answer facts, evaluate (tau2 side by side: scratch env + gold replay + evaluate_simulation)
tasks.hash_cold_ms       full-scan state_hash of a task's initial world (no known digests)
tasks.task_worlds_mem_mb marginal RSS per task's worlds (initial snapshot + expected world), 16 held
tasks.rollout_tasks_per_s  `run_rollout` oracle, 1 trial, serial, every task once (task loading included)
tasks.rollout_load_share   share of that rollout's wall time spent in build_worlds
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _replay(ep: Any, task: Any) -> None:
    from scaleenv.env.policies import answer_text as _answer_facts_text
    from scaleenv.tools.chain import resolve_args

    outputs: list[Any] = []
    for i, call in enumerate(task.gold_chain):
        res = ep.call_tool(call.tool, resolve_args(call, outputs, i))
        if not res.ok:
            raise RuntimeError(f"{task.id}: gold call {i} {call.tool} failed: {res.output}")
        outputs.append(json.loads(res.output))
    text = _answer_facts_text(task)
    if text:
        ep.say(text)


def build_universe(root: Path, scale: float, tasks: int) -> Path:
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    out = root / f"retail_s{scale:g}_n{tasks}"
    cfg = BuildConfig(out=out, domains=["retail"], tasks_per_domain=tasks, scale=scale)
    prepare_out(cfg)
    run_build(cfg)
    return out


def measure(universe: Path, quick: bool) -> dict[str, float]:
    """The figures above on an existing universe (its tasks all of one domain)."""
    import scaleenv.universe as un
    from scaleenv.env.cache import build_worlds, make_episode
    from scaleenv.run.rollout import RolloutConfig, run_rollout
    from scaleenv.world.world import World, clear_hash_cache

    f: dict[str, float] = {}
    un._SPEC_CACHE.clear()
    clear_hash_cache()
    u = un.Universe(universe)
    tasks = u.tasks()
    spec = u.spec(tasks[0].domain)
    base = u.base(tasks[0].domain)
    probe = World.from_snapshot(spec, base)
    f["tasks.rows"] = float(sum(probe.count(t) for t in probe.table_names))
    probe.close()

    t = time.perf_counter()
    first = build_worlds(spec, base, tasks[0])
    f["tasks.load_cold_ms"] = (time.perf_counter() - t) * 1e3
    first.expected.close()
    sample = tasks[: 8 if quick else 64]
    s = []
    for task in sample:
        t = time.perf_counter()
        w = build_worlds(spec, u.base(task.domain), task)
        s.append(time.perf_counter() - t)
        w.expected.close()
    f["tasks.load_ms"] = _ms(s)

    task = tasks[0]
    worlds = build_worlds(spec, base, task)
    cons, firsts, steady, ev, full = [], [], [], [], []
    for _ in range(10 if quick else 100):
        t = time.perf_counter()
        ep = make_episode(spec, task, worlds)
        cons.append(time.perf_counter() - t)
        call = task.gold_chain[0]
        t = time.perf_counter()
        res = ep.call_tool(call.tool, call.args)
        firsts.append(time.perf_counter() - t)
        if not res.ok:
            raise RuntimeError(res.output)
        ep.reset()
        t = time.perf_counter()
        ep.call_tool(call.tool, call.args)
        steady.append(time.perf_counter() - t)
        ep.reset()
        _replay(ep, task)
        t = time.perf_counter()
        r = ep.evaluate()
        ev.append(time.perf_counter() - t)
        if not r.success:
            raise RuntimeError(f"{task.id}: gold chain does not score 1")
        ep.close()
        t = time.perf_counter()
        w2 = build_worlds(spec, base, task)
        e2 = make_episode(spec, task, w2)
        mid = time.perf_counter()
        _replay(e2, task)
        gap = time.perf_counter() - mid
        e2.evaluate()
        full.append(time.perf_counter() - t - gap)
        e2.close()
        w2.expected.close()
    f["tasks.construct_ms"], f["tasks.first_call_ms"], f["tasks.steady_call_ms"] = _ms(cons), _ms(firsts), _ms(steady)
    f["tasks.evaluate_ms"], f["tasks.evaluate_full_ms"] = _ms(ev), _ms(full)

    s = []
    for _ in range(3 if quick else 9):
        w = World.from_snapshot(spec, worlds.initial)
        clear_hash_cache()
        w.clear_changes()
        t = time.perf_counter()
        w.state_hash()
        s.append(time.perf_counter() - t)
        w.close()
    f["tasks.hash_cold_ms"] = _ms(s)
    worlds.expected.close()

    # every task once, end to end, caches cleared first (as tau2_side_by_side.py's e2e)
    un._SPEC_CACHE.clear()
    clear_hash_cache()
    t0 = time.perf_counter()
    u2 = un.Universe(universe)
    todo = u2.tasks()
    ok = 0
    for task in todo:
        sp = u2.spec(task.domain)
        w = build_worlds(sp, u2.base(task.domain), task)
        ep = make_episode(sp, task, w)
        _replay(ep, task)
        ok += ep.evaluate().success
        ep.close()
        w.expected.close()
    f["tasks.e2e_ms"] = (time.perf_counter() - t0) / len(todo) * 1e3
    if ok != len(todo):
        raise RuntimeError(f"gold replay scored 1 on {ok}/{len(todo)} tasks")

    n = 16
    gc.collect()
    before = _rss()
    held = [build_worlds(spec, base, task) for task in (tasks * n)[:n]]
    gc.collect()
    f["tasks.task_worlds_mem_mb"] = (_rss() - before) / n / 1e6
    for w in held:
        w.expected.close()

    import scaleenv.env.cache as cache

    spent = [0.0]
    real = cache.build_worlds

    def timed(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        cache.build_worlds = timed
        try:
            t = time.perf_counter()
            res = run_rollout(RolloutConfig(universe=universe, agent="oracle", executor="serial", trials=1,
                                            out=Path(tmp) / "r.json"))
            wall = time.perf_counter() - t
        finally:
            cache.build_worlds = real
    if res["avg_at_k"] != {"1": 1.0}:
        raise RuntimeError(f"oracle rollout scored {res['avg_at_k']}")
    f["tasks.rollout_tasks_per_s"] = len(todo) / wall
    f["tasks.rollout_load_share"] = spent[0] / wall
    return f


def run(quick: bool = False, scale: float | None = None) -> dict[str, float]:
    scale = 1.0 if scale is None else scale
    with tempfile.TemporaryDirectory() as tmp:
        universe = build_universe(Path(tmp), scale, 12 if quick else 114)
        return measure(universe, quick)


if __name__ == "__main__":
    sc = float(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else None
    print(json.dumps(run(quick="--quick" in sys.argv, scale=sc), indent=2, sort_keys=True))

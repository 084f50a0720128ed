"""Rollout benchmark: episode throughput with a zero-latency scripted policy, and Ray's overhead.

The policy is the oracle agent (the gold chain, then the answer facts) with the scripted user, in
conversational mode, on a small procedural universe (pet_care and wedding_planning). A step is one
agent action (an assistant message: a tool call or a message to the user). Throughput is measured
through ``run_rollout`` on warm workers, trajectories written to a JSONL file as in a real run.

rollout.steps_per_s          steps/s, process executor, 2 workers                          target >= 2000
rollout.episodes_per_s       episodes/s, same run
rollout.serial_steps_per_s   steps/s, serial executor (one core), for reference
rollout.serial_cpu_steps_per_s  steps per CPU second of the serial run: what one uncontended core
                             does (wall-clock figures drop when other work shares the machine)
rollout.steps_per_episode    mean steps per episode of this policy
rollout.ray_overhead_ms      (Ray wall - in-process wall) / episodes, 1 warm actor, the rollout's
                             batching; 0 if pipelining hides it; -1 if Ray is not installed  target < 5
rollout.ray_call_ms          one episode per actor call: round trip minus in-process time; -1 without Ray
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _build(root: Path, tasks: int) -> Path:
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    out = root / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "wedding_planning"], tasks_per_domain=tasks)
    prepare_out(cfg)
    run_build(cfg)
    return out


def _throughput(universe: Path, tmp: Path, executor_kind: str, trials: int,
                repeats: int) -> tuple[float, float, float, float]:
    from scaleenv.parallel import make_executor
    from scaleenv.run.rollout import RolloutConfig, RolloutWorker, make_job, run_rollout
    from scaleenv.universe import Universe

    def cfg(n: int, tag: str) -> RolloutConfig:
        return RolloutConfig(universe=universe, agent="oracle", user="scripted", trials=n, executor=executor_kind,
                             workers=2, out=tmp / f"{executor_kind}-{tag}.json", force=True)

    job = make_job(cfg(1, "warm"), Universe(universe))
    ex = make_executor(executor_kind, functools.partial(RolloutWorker, job), workers=2)
    try:
        run_rollout(cfg(4, "warm"), executor=ex)  # start the workers, build every task's worlds
        rates, eps, steps, cpu = [], [], [], []
        for i in range(repeats):
            c0 = time.process_time()
            res = run_rollout(cfg(trials, str(i)), executor=ex)
            c1 = time.process_time()
            t = res["timings"]
            rates.append(t["steps_per_s"])
            eps.append(t["episodes_per_s"])
            steps.append(t["new_steps"] / max(1, t["new_episodes"]))
            cpu.append(t["new_steps"] / max(c1 - c0, 1e-9))  # meaningful for the in-process (serial) run
    finally:
        ex.close()
    return statistics.median(rates), statistics.median(eps), statistics.mean(steps), statistics.median(cpu)


def _ray_overhead(universe: Path, episodes: int, repeats: int) -> tuple[float, float]:
    import ray

    from scaleenv.parallel.ray_executor import RayExecutor
    from scaleenv.run.rollout import RolloutConfig, RolloutWorker, _batches, make_job, unit_seed
    from scaleenv.universe import Universe

    u = Universe(universe)
    tasks = u.tasks()
    job = make_job(RolloutConfig(universe=universe, agent="oracle", user="scripted"), u)
    trials = max(1, episodes // len(tasks))
    units = [(t.id, k, unit_seed(0, t.id, k)) for t in tasks for k in range(trials)]
    factory = functools.partial(RolloutWorker, job)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    local = factory()
    remote = RayExecutor(factory, workers=1)
    try:
        warm = [(t.id, 99, 1) for t in tasks]
        local.run_batch(warm)
        remote.run([warm], lambda r: None)

        def timed(fn: Any) -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0

        batches = _batches(units, 1, 64, 4)
        over, call = [], []
        for _ in range(repeats):
            t_local = timed(lambda: [local.run_batch(b) for b in batches])
            t_ray = timed(lambda: remote.run(batches, lambda r: None))
            over.append((t_ray - t_local) / len(units) * 1e3)
            singles = [[u_] for u_ in units[: min(len(units), 100)]]
            t_local1 = timed(lambda s=singles: [local.run_batch(b) for b in s])
            t_ray1 = timed(lambda s=singles: remote.run(s, lambda r: None))
            call.append((t_ray1 - t_local1) / len(singles) * 1e3)
    finally:
        remote.close()
        local.close()
        if started:
            ray.shutdown()
    return max(0.0, statistics.median(over)), max(0.0, statistics.median(call))


def run(quick: bool = False) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="scaleenv-bench-rollout-") as d:
        tmp = Path(d)
        universe = _build(tmp, 2 if quick else 6)
        trials = 15 if quick else 200
        repeats = 1 if quick else 3
        rate, eps, spe, _ = _throughput(universe, tmp, "process", trials, repeats)
        figures["rollout.steps_per_s"] = float(rate)
        figures["rollout.episodes_per_s"] = float(eps)
        figures["rollout.steps_per_episode"] = float(spe)
        serial, _, _, cpu = _throughput(universe, tmp, "serial", trials, repeats)
        figures["rollout.serial_steps_per_s"] = float(serial)
        figures["rollout.serial_cpu_steps_per_s"] = float(cpu)
        if importlib.util.find_spec("ray") is None:
            figures["rollout.ray_overhead_ms"] = -1.0
            figures["rollout.ray_call_ms"] = -1.0
        else:
            try:
                over, call = _ray_overhead(universe, 100 if quick else 1000, repeats)
            except Exception as e:  # noqa: BLE001 - Ray installed but unusable here: say so, keep the suite going
                print(f"bench_rollout: Ray could not be used ({type(e).__name__}: {e}); reporting -1",
                      file=sys.stderr)
                over = call = -1.0
            figures["rollout.ray_overhead_ms"] = float(over)
            figures["rollout.ray_call_ms"] = float(call)
    return figures


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2, sort_keys=True))

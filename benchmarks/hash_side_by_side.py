#!/usr/bin/env python3
"""Cold full state hash: tau2-bench's ``get_db_hash`` against scaleenv's, in one run, in turn.

Long-lived worker processes (tau2 retail; scaleenv, and optionally a second scaleenv tree) answer one
request at a time: each round asks tau2, then each scaleenv side, then tau2 again, for the median of N
hashes, so both figures of a ratio are measured seconds apart on the same (shared) machine. Prints each
round and the medians of the rounds' ratios tau2 / scaleenv.

    python benchmarks/hash_side_by_side.py --tau2-python ~/tau2/venv/bin/python --tau2-root ~/tau2 \\
        [--world bench | --world UNIVERSE] [--old-src OLD_CHECKOUT/src] [--rounds 12] [--n 3]

``--world bench`` (default) hashes ``benchmarks/retail_world.py``'s world (8,828 rows); a universe
directory hashes its retail base world (``scaleenv build --domain retail --scale 17``: 7,412 rows, tau2
7,493). The scaleenv figure is the first ``state_hash`` of a world with no known digests (a full scan).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _serve(hash_once: Any) -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        samples = []
        for _ in range(int(line)):
            samples.append(hash_once())
        print(json.dumps({"ms": statistics.median(samples) * 1e3}), flush=True)


def tau2_worker() -> None:
    from loguru import logger

    logger.remove()
    from tau2.domains.retail.environment import get_environment

    env = get_environment()

    def once() -> float:
        t = time.perf_counter()
        env.get_db_hash()
        return time.perf_counter() - t

    _serve(once)


def scaleenv_worker(world: str) -> None:
    from scaleenv.formats.domain import DomainSpec
    from scaleenv.validation import validate_spec
    from scaleenv.world import World
    from scaleenv.world.world import clear_hash_cache

    if world == "bench":
        import importlib.util

        mod_spec = importlib.util.spec_from_file_location("hash_sbs_retail_world", HERE.with_name("retail_world.py"))
        assert mod_spec is not None and mod_spec.loader is not None
        rw = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(rw)
        spec = validate_spec(rw.SPEC)
        w = World(spec)
        for table, rows in rw.generate(0).items():
            w.load_rows(table, rows)
        snap = w.snapshot()
        w.close()
    else:
        d = Path(world) / "domains" / "retail"
        spec = validate_spec(DomainSpec.model_validate_json((d / "spec.json").read_text()))
        snap = (d / "base.sqlite").read_bytes()

    def once() -> float:
        fresh = World.from_snapshot(spec, snap)
        clear_hash_cache()
        fresh.clear_changes()  # no known digests, no change log: the hash reads every row
        t = time.perf_counter()
        fresh.state_hash()
        dt = time.perf_counter() - t
        fresh.close()
        return dt

    _serve(once)


class Worker:
    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=cwd)
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                out: dict[str, Any] = json.loads(line)
                return out
        raise SystemExit(f"worker {self.proc.args} ended without an answer")

    def ask(self, n: int) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(self._read()["ms"])

    def stop(self) -> None:
        self.proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", choices=["tau2", "scaleenv"], help=argparse.SUPPRESS)
    ap.add_argument("--tau2-python", default=os.environ.get("TAU2_PYTHON", "tau2venv/bin/python"))
    ap.add_argument("--tau2-root", default=os.environ.get("TAU2_ROOT", "tau2-bench"))
    ap.add_argument("--world", default="bench", help="'bench' or a universe directory with a retail domain")
    ap.add_argument("--old-src", help="also time the scaleenv package under this src/ directory (another tree)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--n", type=int, default=3, help="hashes per request (its median is the round's figure)")
    a = ap.parse_args()
    if a.worker == "tau2":
        tau2_worker()
        return
    if a.worker == "scaleenv":
        scaleenv_worker(a.world)
        return
    world = a.world if a.world == "bench" else str(Path(a.world).resolve())
    tau2 = Worker([a.tau2_python, str(HERE), "--worker", "tau2"], cwd=a.tau2_root)
    sides = {"scaleenv": Worker([sys.executable, str(HERE), "--worker", "scaleenv", "--world", world])}
    if a.old_src:
        env = {**os.environ, "PYTHONPATH": str(Path(a.old_src).resolve())}
        sides = {"old": Worker([sys.executable, str(HERE), "--worker", "scaleenv", "--world", world], env=env), **sides}
    ratios: dict[str, list[float]] = {k: [] for k in sides}
    times: dict[str, list[float]] = {"tau2": [], **{k: [] for k in sides}}
    try:
        for i in range(a.rounds):
            first = tau2.ask(a.n)
            got = {k: w.ask(a.n) for k, w in sides.items()}
            t2 = (first + tau2.ask(a.n)) / 2
            times["tau2"].append(t2)
            for k, v in got.items():
                times[k].append(v)
                ratios[k].append(t2 / v)
            print(f"round {i}: tau2 {t2:.1f} ms  " + "  ".join(f"{k} {v:.1f} ms ({t2 / v:.2f}x)" for k, v in got.items()),
                  flush=True)
    finally:
        tau2.stop()
        for w in sides.values():
            w.stop()
    print("median ms: " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in times.items()))
    print("median ratio tau2 / side: " + ", ".join(f"{k} {statistics.median(v):.2f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    main()

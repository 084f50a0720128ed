"""Core runtime benchmark on a tau2-retail-sized world (see ``retail_world.py``).

Figures (medians; ``_ms`` in milliseconds, ``_s`` in seconds, ``_mb`` in 10**6 bytes):

core.reset_ms          reset an episode's world to its initial snapshot (after a write)   target <= 0.5
core.construct_ms      read base.sqlite from disk + Episode(spec, bytes) (spec parsed once, as Universe does)
core.first_call_ms     the first get_order_details on a brand-new episode (its SQLite connection
                       reused from a closed world of the same schema, as in a long run)
core.first_call_newconn_ms  the same on a brand-new SQLite connection (schema parse, compiles)
core.read_call_ms      get_order_details through Episode.call_tool, steady state         target <= 0.1
core.write_call_ms     cancel_pending_order / modify_pending_order_address via call_tool   target <= 0.2
core.evaluate_ms       Episode.evaluate (diff + reward) after the gold actions, the task's
                       expected world already built                                      target <= 2
core.evaluate_full_ms  the same, counting the expected world's build: restore the initial
                       snapshot, run the gold actions through the tools, hash it
core.hash_ms           Episode.state_hash after the gold actions (warm: incremental)       target <= 5
core.hash_cold_ms      state_hash of a world with no known digests (full scan of every row)
core.hash_cold_newsnap_ms  first state_hash of a World restored from bytes never seen before
core.episode_mem_mb    marginal RSS per live episode (N episodes share one snapshot)      target <= 4
core.task_worlds_mem_mb  marginal RSS per task's worlds (initial snapshot + expected world)
core.import_s          wall time of ``python -c "import scaleenv"`` (lazy)                target <= 0.3
core.import_env_s      wall time of importing what environment use needs (Universe, task
                       loading, Episode)
core.python_startup_s  wall time of ``python -c pass`` on the same interpreter (baseline)
core.world_json_mb     the world's rows as indented JSON (like tau2's db.json, 2.81 MB)
core.world_json_compact_mb, core.world_sqlite_mb, core.world_rows
core.build_s           World(spec) + load_rows from Python dicts (not from disk: see construct_ms)
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
IMPORT_ENV = ("from scaleenv.universe import Universe\n"
              "from scaleenv.env.cache import build_worlds, make_episode\n"
              "from scaleenv.env.episode import Episode")


def _sibling(name: str) -> Any:
    key = f"scaleenv_bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def _ms(samples: list[int]) -> float:
    return statistics.median(samples) / 1e6


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _check(result: Any, what: str) -> None:
    if not result.ok:
        raise RuntimeError(f"benchmark call {what} failed: {result.output}")


def _wall(cmd: list[str], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(quick: bool = False) -> dict[str, float]:
    from scaleenv.env import Episode
    from scaleenv.validation import validate_spec
    from scaleenv.world import World
    from scaleenv.world.world import clear_connection_pool, clear_hash_cache

    rw = _sibling("retail_world")
    reps = 60 if quick else 2000
    figures: dict[str, float] = {}

    spec = validate_spec(rw.SPEC)
    rows = rw.generate(0)
    t0 = time.perf_counter()
    world = World(spec)
    for table, table_rows in rows.items():
        world.load_rows(table, table_rows)
    figures["core.build_s"] = time.perf_counter() - t0
    initial = world.snapshot()
    world.close()
    figures["core.world_json_mb"] = rw.json_size_bytes(rows) / 1e6
    figures["core.world_json_compact_mb"] = len(json.dumps(rows, separators=(",", ":"))) / 1e6
    figures["core.world_sqlite_mb"] = len(initial) / 1e6
    figures["core.world_rows"] = float(sum(len(r) for r in rows.values()))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "base.sqlite"
        path.write_bytes(initial)
        samples, first, newconn = [], [], []
        for i in range(20 if quick else 200):
            if i % 2:
                clear_connection_pool()
            t = time.perf_counter_ns()
            e = Episode(spec, path.read_bytes())
            samples.append(time.perf_counter_ns() - t)
            t = time.perf_counter_ns()
            res = e.call_tool("get_order_details", {"order_id": rows["orders"][(i * 37) % len(rows["orders"])]["order_id"]})
            (newconn if i % 2 else first).append(time.perf_counter_ns() - t)
            _check(res, "get_order_details")
            e.close()
    figures["core.construct_ms"] = _ms(samples)
    figures["core.first_call_ms"] = _ms(first)
    figures["core.first_call_newconn_ms"] = _ms(newconn)

    pending = [o["order_id"] for o in rows["orders"] if o["status"] == "pending"]
    order_ids = [o["order_id"] for o in rows["orders"]]
    half = len(pending) // 2
    address = {"address1": "1 Infinite Loop", "address2": "Suite 100", "city": "Cupertino", "state": "CA",
               "country": "USA", "zip": "95014"}
    gold = [
        ("cancel_pending_order", {"order_id": pending[0], "reason": "no longer needed"}),
        ("modify_pending_order_address", {"order_id": pending[half], **address}),
    ]

    # The task's expected world: the gold actions executed once on a copy of the initial state.
    expected = World.from_snapshot(spec, initial)
    probe = Episode(spec, initial)
    for name, args in gold:
        _check(probe.call_tool(name, args), name)
    expected.restore(probe.snapshot())
    gold_keys = probe.world.touched()
    probe.close()

    ep = Episode(spec, initial, expected, gold_keys=gold_keys)

    # reset (the world is dirty before every reset)
    samples = []
    for i in range(reps):
        ep.call_tool("modify_user_address", {"user_id": rows["users"][i % 500]["user_id"], **address})
        t = time.perf_counter_ns()
        ep.reset()
        samples.append(time.perf_counter_ns() - t)
    figures["core.reset_ms"] = _ms(samples)

    # read tool call
    samples = []
    for i in range(reps):
        args = {"order_id": order_ids[(i * 37) % len(order_ids)]}
        t = time.perf_counter_ns()
        res = ep.call_tool("get_order_details", args)
        samples.append(time.perf_counter_ns() - t)
        _check(res, "get_order_details")
    figures["core.read_call_ms"] = _ms(samples)

    # write tool calls: a reset (untimed) every 40 calls so every call succeeds
    samples = []
    for i in range(reps):
        k = i % 40
        if k == 0:
            ep.reset()
        if k % 2 == 0:
            name, args = "cancel_pending_order", {"order_id": pending[1 + k // 2], "reason": "ordered by mistake"}
        else:
            name, args = "modify_pending_order_address", {"order_id": pending[half + 1 + k // 2], **address}
        t = time.perf_counter_ns()
        res = ep.call_tool(name, args)
        samples.append(time.perf_counter_ns() - t)
        _check(res, name)
    figures["core.write_call_ms"] = _ms(samples)

    # evaluate after the agent did exactly the gold actions
    ep.reset()
    for name, args in gold:
        _check(ep.call_tool(name, args), name)
    reward = ep.evaluate()
    if reward.score != 1.0:
        raise RuntimeError(f"gold actions did not score 1.0: {reward.diff}")
    samples = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        ep.evaluate()
        samples.append(time.perf_counter_ns() - t)
    figures["core.evaluate_ms"] = _ms(samples)

    # evaluate counting the expected world's build (what tau2's evaluate_simulation does inside)
    from scaleenv.tools.runtime import run_tool

    tools = {t.name: t for t in spec.tools}
    samples = []
    for _ in range(20 if quick else 200):
        t = time.perf_counter_ns()
        exp = World.from_snapshot(spec, initial)
        for name, args in gold:
            run_tool(exp, tools[name], args)
        exp.state_hash()
        keys = exp.touched()
        e2 = Episode(spec, initial, exp, gold_keys=keys)
        mid = time.perf_counter_ns()
        for name, args in gold:  # the agent's moves: not counted
            _check(e2.call_tool(name, args), name)
        gap = time.perf_counter_ns() - mid
        r = e2.evaluate()
        samples.append(time.perf_counter_ns() - t - gap)
        if r.score != 1.0:
            raise RuntimeError(f"gold actions did not score 1.0: {r.diff}")
        e2.close()
        exp.close()
    figures["core.evaluate_full_ms"] = _ms(samples)

    # canonical hash: incremental (the snapshot's row digests are cached), then cold
    ep.state_hash()
    samples = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        h = ep.state_hash()
        samples.append(time.perf_counter_ns() - t)
    figures["core.hash_ms"] = _ms(samples)
    samples = []
    for _ in range(3 if quick else 9):
        fresh = World.from_snapshot(spec, ep.snapshot())
        clear_hash_cache()
        fresh.clear_changes()  # no known digests and no change log: the next hash reads every row
        t = time.perf_counter_ns()
        cold = fresh.state_hash()
        samples.append(time.perf_counter_ns() - t)
        fresh.close()
        if cold != h:
            raise RuntimeError("incremental and full state hashes disagree")
    figures["core.hash_cold_ms"] = _ms(samples)
    samples = []
    for i in range(3 if quick else 9):
        ep.call_tool("modify_user_address", {"user_id": rows["users"][i]["user_id"], **address, "zip": f"{10000 + i}"})
        snap = ep.snapshot()  # content never hashed before
        t = time.perf_counter_ns()
        fresh = World.from_snapshot(spec, snap)
        fresh.state_hash()
        samples.append(time.perf_counter_ns() - t)
        fresh.close()
    figures["core.hash_cold_newsnap_ms"] = _ms(samples)
    ep.close()

    # memory per live episode: N episodes of one task share the initial snapshot and expected world
    n = 10 if quick else 50
    from scaleenv.world.world import clear_connection_pool

    clear_connection_pool()  # pooled connections already hold their memory: count each episode's own
    gc.collect()
    before = _rss()
    live = []
    for i in range(n):
        e = Episode(spec, initial, expected, gold_keys=gold_keys)
        e.call_tool("get_order_details", {"order_id": order_ids[i]})
        e.call_tool("modify_user_address", {"user_id": rows["users"][i]["user_id"], **address})
        live.append(e)
    gc.collect()
    figures["core.episode_mem_mb"] = (_rss() - before) / n / 1e6
    for e in live:
        e.close()

    # memory per task's worlds: each task has its own initial snapshot and expected world
    gc.collect()
    before = _rss()
    held = []
    for i in range(n):
        w = World.from_snapshot(spec, initial)
        w.conn.execute("UPDATE users SET zip = ? WHERE user_id = ?", (f"{20000 + i}", rows["users"][i]["user_id"]))
        w.clear_changes()
        own = w.snapshot()  # this task's initial snapshot (a copy of its own)
        exp = World.from_snapshot(spec, own)
        for name, args in gold:
            run_tool(exp, tools[name], args)
        held.append((own, exp))
        w.close()
    gc.collect()
    figures["core.task_worlds_mem_mb"] = (_rss() - before) / n / 1e6
    for _, exp in held:
        exp.close()
    expected.close()

    runs = 3 if quick else 9
    figures["core.import_s"] = _wall([sys.executable, "-c", "import scaleenv"], runs)
    figures["core.import_env_s"] = _wall([sys.executable, "-c", IMPORT_ENV], runs)
    figures["core.python_startup_s"] = _wall([sys.executable, "-c", "pass"], runs)
    return figures


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2, sort_keys=True))

#!/usr/bin/env python3
"""tau2-bench and scaleenv, side by side, on retail-scale worlds, in one run on one machine.

Each side runs in its own subprocess with its own virtual environment's python: one long-lived worker
per side answers one operation per request, and every round runs each operation on tau2 and then at
once on scaleenv (tau2, scaleenv, tau2, scaleenv, ...), so the two figures of a ratio are measured
seconds apart and a busy, shared machine slows both alike. Memory and imports use fresh processes,
also in pairs. The table gives, for each operation, the median of the per-round medians (min-max
over rounds) and the median of the per-round ratios tau2/scaleenv: ratios from one run are the
figures to quote; absolute times move with the machine's load.

    python3 tau2_side_by_side.py [--rounds 3] [--quick] [--json OUT] [--rollout UNIVERSE]

Setup of the tau2 side (once): its source (sierra-research/tau2-bench; not on PyPI) unpacked in
TAU2_ROOT, and a Python >= 3.12 venv with `pip install -e TAU2_ROOT` (its dependencies come from PyPI).
Only data/tau2/domains/retail is read. The scaleenv side builds its retail universes itself
(`scaleenv build --domain retail --tasks-per-domain <tau2's task count> [--scale S]`) under --work.

Settings (flag, else environment variable, else default):
    --tau2-python      TAU2_PYTHON       tau2venv/bin/python   (pip install -e tau2-bench)
    --tau2-root        TAU2_ROOT         tau2-bench                  (its checkout: data/tau2/domains/retail)
    --scaleenv-python  SCALEENV_PYTHON   venv/bin/python      (scaleenv installed)
    --scaleenv-root    SCALEENV_ROOT     the checkout scaleenv is installed from (for benchmarks/)
    --work             SIDE_BY_SIDE_WORK sbs-work                   (universes and worlds it builds)
    --scale            17   catalog retail scale whose row count matches tau2's retail db (7,412 vs 7,493)

What each side does per operation (same names as the table):
    construct   tau2: get_environment() (read db.json, json parse, pydantic validate the whole DB).
                scaleenv: read base.sqlite from disk + Episode(spec, bytes) (deserialize; spec already
                parsed, as the Universe caches it) on benchmarks/retail_world.py's world.
    reset       tau2 has no reset: get_environment() again. scaleenv: Episode.reset() after a write.
    read        get_order_details. tau2 env.get_response(ToolCall) (JSON ToolMessage). scaleenv
                Episode.call_tool (argument validation, preconditions, SQL, JSON output).
    write       cancel_pending_order / modify_pending_order_address alternately on pending orders
                (an untimed reset every 40 calls so that every call succeeds), same tools both sides.
    hash        tau2 get_db_hash() (always a full hash). scaleenv: cold = the first state_hash of a
                world whose change log was cleared (full scan, the figure of `scaleenv bench`); cold,
                new snapshot = the first state_hash of a World restored from bytes never hashed before
                (what an integration's first Episode.state_hash of a task pays: sha1 of the bytes,
                a second deserialize and a full scan); warm = incremental, after two writes.
    evaluate    tau2 evaluate_simulation(EvaluationType.ENV) on retail task 0 after its gold actions
                (builds 3 environments, replays, hashes twice). scaleenv: Episode.evaluate after the
                gold chain of the first task of a tau2-scale retail build; "+ expected world" adds
                build_worlds (base + patch, gold replay, two hash checks), the work tau2's evaluator
                does inside evaluate_simulation.
    e2e         every task: tau2 = all retail tasks: scratch env + gold replay through get_response +
                evaluate_simulation(ENV). scaleenv = as many tasks from `scaleenv build --domain retail`:
                Universe + tasks file, build_worlds per task (from the universe on disk, caches cleared
                first), Episode, gold chain through call_tool, answer facts, evaluate. Per task.
    memory      RSS delta per live environment while holding 20 (each did one read and one write),
                in a fresh process after one warm-up environment.
    import      fresh process, min of 5: `import tau2` / `import scaleenv` (scaleenv's is lazy), and
                what environment use imports (tau2 retail env + evaluator; scaleenv Universe, task
                loading and Episode).

--rollout UNIVERSE copies the universe, runs `scaleenv rollout COPY --agent oracle --trials 1
--executor serial` with the project's CLI and times it, then runs it again under a timing shim
(tau2_side_by_side_rollout.py beside this file) that splits the wall time into task loading,
episodes, packing and writing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


# ============================================================================ shared helpers


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _med_ms(samples: list[int]) -> float:
    return statistics.median(samples) / 1e6


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write("\n@@RESULT@@" + json.dumps(obj) + "\n")
    sys.stdout.flush()


# ============================================================================ tau2 worker


def _tau2_quiet() -> None:
    from loguru import logger

    logger.remove()  # what `tau2 run` does: a sink at its default level, ERROR
    logger.add(sys.stderr, level="ERROR")


def _tau2_gold_sim(env: Any, task: Any) -> Any:
    """A SimulationRun whose messages are the greeting, each gold action and its result, and a stop."""
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
    from tau2.data_model.simulation import SimulationRun, TerminationReason

    msgs: list[Any] = [AssistantMessage(role="assistant", content="Hi! How can I help you today?")]
    for i, a in enumerate(task.evaluation_criteria.actions or []):
        tc = ToolCall(id=f"call_{i}", name=a.name, arguments=a.arguments, requestor=a.requestor)
        if a.requestor == "user":
            msgs.append(UserMessage(role="user", tool_calls=[tc]))
        else:
            msgs.append(AssistantMessage(role="assistant", tool_calls=[tc]))
        msgs.append(env.get_response(tc))
    msgs.append(AssistantMessage(role="assistant", content="Done. ###STOP###"))
    now = "2026-01-01T00:00:00"
    return SimulationRun(id=f"gold-{task.id}", task_id=task.id, start_time=now, end_time=now, duration=0.0,
                         termination_reason=TerminationReason.AGENT_STOP, messages=msgs)


def _tau2_scratch_env(task: Any) -> Any:
    from tau2.domains.retail.environment import get_environment

    env = get_environment()
    st = task.initial_state
    if st is not None:
        env.set_state(initialization_data=st.initialization_data,
                      initialization_actions=st.initialization_actions,
                      message_history=st.message_history or [])
    return env


_ADDRESS = {"address1": "1 Infinite Loop", "address2": "Suite 100", "city": "Cupertino", "state": "CA",
            "country": "USA", "zip": "95014"}


class Tau2Ops:
    """tau2's side: one method per operation; each sets up its own state (untimed) and returns figures."""

    def __init__(self) -> None:
        _tau2_quiet()
        from tau2.data_model.message import ToolCall
        from tau2.domains.retail.environment import get_environment, get_tasks
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

        self.ToolCall, self.get_environment, self.get_tasks = ToolCall, get_environment, get_tasks
        self.EvaluationType, self.evaluate_simulation = EvaluationType, evaluate_simulation
        env = get_environment()
        orders = env.tools.db.orders
        self.order_ids = list(orders)
        self.pending = [k for k, o in orders.items() if o.status == "pending"]

    def _call(self, env: Any, i: Any, name: str, **args: Any) -> Any:
        return env.get_response(self.ToolCall(id=f"c{i}", name=name, arguments=args))

    def construct(self, n: int) -> dict[str, Any]:
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            e = self.get_environment()
            s.append(time.perf_counter_ns() - t)
            del e
        return {"construct_ms": _med_ms(s)}

    def reset(self, n: int) -> dict[str, Any]:
        """No reset in tau2: a new environment; the old one (after a write) is freed on rebinding, inside the
        timing, as the old state is in scaleenv's deserialize."""
        env = self.get_environment()
        s = []
        for i in range(n):
            self._call(env, i, "modify_pending_order_address", order_id=self.pending[i % len(self.pending)], **_ADDRESS)
            t = time.perf_counter_ns()
            env = self.get_environment()
            s.append(time.perf_counter_ns() - t)
        return {"reset_ms": _med_ms(s)}

    def read(self, n: int) -> dict[str, Any]:
        env = self.get_environment()
        s = []
        for i in range(n):
            tc = self.ToolCall(id=f"r{i}", name="get_order_details",
                               arguments={"order_id": self.order_ids[(i * 37) % len(self.order_ids)]})
            t = time.perf_counter_ns()
            msg = env.get_response(tc)
            s.append(time.perf_counter_ns() - t)
            if msg.error:
                raise RuntimeError(msg.content)
        return {"read_ms": _med_ms(s)}

    def write(self, n: int) -> dict[str, Any]:
        pending, half = self.pending, len(self.pending) // 2
        s = []
        env = None
        for i in range(n):
            k = i % 40
            if k == 0:
                env = self.get_environment()  # untimed, so that every call succeeds
            if k % 2 == 0:
                tc = self.ToolCall(id=f"w{i}", name="cancel_pending_order",
                                   arguments={"order_id": pending[1 + k // 2], "reason": "ordered by mistake"})
            else:
                tc = self.ToolCall(id=f"w{i}", name="modify_pending_order_address",
                                   arguments={"order_id": pending[half + 1 + k // 2], **_ADDRESS})
            t = time.perf_counter_ns()
            msg = env.get_response(tc)
            s.append(time.perf_counter_ns() - t)
            if msg.error:
                raise RuntimeError(msg.content)
        return {"write_ms": _med_ms(s)}

    def hash(self, n: int) -> dict[str, Any]:
        env = self.get_environment()
        half = len(self.pending) // 2
        self._call(env, 0, "cancel_pending_order", order_id=self.pending[0], reason="no longer needed")
        self._call(env, 1, "modify_pending_order_address", order_id=self.pending[half], **_ADDRESS)
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            env.get_db_hash()
            s.append(time.perf_counter_ns() - t)
        return {"hash_ms": _med_ms(s)}

    def evaluate(self, n: int) -> dict[str, Any]:
        task0 = next(t for t in self.get_tasks(None) if t.id == "0")
        sim = _tau2_gold_sim(_tau2_scratch_env(task0), task0)
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            r = self.evaluate_simulation(sim, task0, self.EvaluationType.ENV, solo_mode=False, domain="retail")
            s.append(time.perf_counter_ns() - t)
            if r.reward != 1.0:
                raise RuntimeError(f"tau2 task 0 gold reward {r.reward}")
        return {"evaluate_ms": _med_ms(s), "evaluate_task": "0",
                "evaluate_gold_actions": len(task0.evaluation_criteria.actions or [])}

    def e2e(self, n: int = 0) -> dict[str, Any]:
        """Every retail task (the task file included): scratch env + gold replay, then evaluate_simulation."""
        t0 = time.perf_counter()
        tasks = self.get_tasks(None)
        scratch = evaluate = 0.0
        ok = 0
        for task in tasks:
            a = time.perf_counter()
            sim = _tau2_gold_sim(_tau2_scratch_env(task), task)
            b = time.perf_counter()
            r = self.evaluate_simulation(sim, task, self.EvaluationType.ENV, solo_mode=False, domain="retail")
            c = time.perf_counter()
            scratch += b - a
            evaluate += c - b
            ok += r.reward == 1.0
        total = time.perf_counter() - t0
        k = len(tasks)
        return {"e2e_ms": total / k * 1e3, "e2e_tasks": k, "e2e_success": ok, "e2e_total_s": total,
                "e2e_episode_ms": scratch / k * 1e3, "e2e_eval_ms": evaluate / k * 1e3}


def tau2_mem(n: int) -> dict[str, Any]:
    import gc

    _tau2_quiet()
    from tau2.data_model.message import ToolCall
    from tau2.domains.retail.environment import get_environment

    address = {"address1": "1 Infinite Loop", "address2": "Suite 100", "city": "Cupertino", "state": "CA",
               "country": "USA", "zip": "95014"}

    def one() -> Any:
        env = get_environment()
        pending = [k for k, o in env.tools.db.orders.items() if o.status == "pending"]
        env.get_response(ToolCall(id="r", name="get_order_details", arguments={"order_id": pending[0]}))
        env.get_response(ToolCall(id="w", name="modify_pending_order_address",
                                  arguments={"order_id": pending[1], **address}))
        return env

    warm = one()
    del warm
    gc.collect()
    before = _rss()
    live = [one() for _ in range(n)]
    gc.collect()
    after = _rss()
    assert len(live) == n
    return {"mem_mb": (after - before) / n / 1e6, "mem_envs": n, "rss_before_mb": before / 1e6}


def tau2_counts() -> dict[str, Any]:
    _tau2_quiet()
    from tau2.domains.retail.environment import get_tasks

    return {"tasks": len(get_tasks(None))}


# ============================================================================ scaleenv worker


def _se_retail_world(root: str) -> Any:
    import importlib.util

    path = Path(root) / "benchmarks" / "retail_world.py"
    spec = importlib.util.spec_from_file_location("sbs_retail_world", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scaleenv_prepare(root: str, work: str) -> dict[str, Any]:
    """Write the benchmark retail world (benchmarks/retail_world.py, seed 0) to WORK/bench_world/."""
    from scaleenv.validation import validate_spec
    from scaleenv.world.world import World

    rw = _se_retail_world(root)
    spec = validate_spec(rw.SPEC)
    rows = rw.generate(0)
    world = World(spec)
    for table, table_rows in rows.items():
        world.load_rows(table, table_rows)
    d = Path(work) / "bench_world"
    d.mkdir(parents=True, exist_ok=True)
    (d / "base.sqlite").write_bytes(world.snapshot())
    (d / "spec.json").write_text(json.dumps(spec.model_dump(mode="json"), indent=1))
    world.close()
    return {"rows": {t: len(r) for t, r in rows.items()}, "json_mb": rw.json_size_bytes(rows) / 1e6,
            "sqlite_mb": (d / "base.sqlite").stat().st_size / 1e6}


def _se_replay(ep: Any, task: Any) -> None:
    """The oracle's moves: each gold call through call_tool (references resolved from the JSON
    outputs), then the answer facts said to the user."""
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


def _se_clear_caches() -> None:
    import scaleenv.universe as U
    import scaleenv.world.world as W

    U._SPEC_CACHE.clear()
    W._BASE_CACHE.clear()


def _se_e2e(universe: str) -> dict[str, Any]:
    from scaleenv.env.cache import build_worlds, make_episode
    from scaleenv.universe import Universe

    _se_clear_caches()
    t0 = time.perf_counter()
    u = Universe(universe)
    tasks = u.tasks()
    load = episode = evaluate = 0.0
    ok = 0
    for task in tasks:
        a = time.perf_counter()
        spec = u.spec(task.domain)
        worlds = build_worlds(spec, u.base(task.domain), task)
        b = time.perf_counter()
        ep = make_episode(spec, task, worlds)
        _se_replay(ep, task)
        c = time.perf_counter()
        r = ep.evaluate()
        d = time.perf_counter()
        ok += r.success
        ep.close()
        worlds.expected.close()
        load += b - a
        episode += c - b
        evaluate += d - c
    total = time.perf_counter() - t0
    n = len(tasks)
    return {"ms": total / n * 1e3, "tasks": n, "success": ok, "total_s": total, "load_ms": load / n * 1e3,
            "episode_ms": episode / n * 1e3, "eval_ms": evaluate / n * 1e3}


class ScaleenvOps:
    """scaleenv's side, on benchmarks/retail_world.py's world read from disk (ops 1-5) and on the
    tau2-scale retail build's tasks (6-7)."""

    def __init__(self, root: str, work: str, universe: str, small_universe: str) -> None:
        from scaleenv.validation import validate_spec
        from scaleenv.world.world import World

        self.universe, self.small_universe = universe, small_universe
        self.spec = validate_spec(_se_retail_world(root).SPEC)
        self.base_path = Path(work) / "bench_world" / "base.sqlite"
        self.base = self.base_path.read_bytes()
        probe = World.from_snapshot(self.spec, self.base)
        q = probe.conn.execute
        self.order_ids = [r[0] for r in q("SELECT order_id FROM orders ORDER BY rowid")]
        self.pending = [r[0] for r in q("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY rowid")]
        self.user_ids = [r[0] for r in q("SELECT user_id FROM users ORDER BY rowid")]
        probe.close()
        self.nonce = 0  # makes every "never-seen" snapshot new, across rounds too

    @staticmethod
    def _ok(res: Any, what: str) -> None:
        if not res.ok:
            raise RuntimeError(f"{what} failed: {res.output}")

    def _episode(self) -> Any:
        from scaleenv.env.episode import Episode

        return Episode(self.spec, self.base)

    def construct(self, n: int) -> dict[str, Any]:
        from scaleenv.env.episode import Episode

        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            e = Episode(self.spec, self.base_path.read_bytes())
            s.append(time.perf_counter_ns() - t)
            e.close()
        return {"construct_ms": _med_ms(s)}

    def reset(self, n: int) -> dict[str, Any]:
        ep = self._episode()
        s = []
        for i in range(n):
            ep.call_tool("modify_user_address", {"user_id": self.user_ids[i % len(self.user_ids)], **_ADDRESS})
            t = time.perf_counter_ns()
            ep.reset()
            s.append(time.perf_counter_ns() - t)
        ep.close()
        return {"reset_ms": _med_ms(s)}

    def read(self, n: int) -> dict[str, Any]:
        ep = self._episode()
        s = []
        for i in range(n):
            args = {"order_id": self.order_ids[(i * 37) % len(self.order_ids)]}
            t = time.perf_counter_ns()
            res = ep.call_tool("get_order_details", args)
            s.append(time.perf_counter_ns() - t)
            self._ok(res, "get_order_details")
        ep.close()
        return {"read_ms": _med_ms(s)}

    def write(self, n: int) -> dict[str, Any]:
        pending, half = self.pending, len(self.pending) // 2
        ep = self._episode()
        s = []
        for i in range(n):
            k = i % 40
            if k == 0:
                ep.reset()
            if k % 2 == 0:
                name, args = "cancel_pending_order", {"order_id": pending[1 + k // 2], "reason": "ordered by mistake"}
            else:
                name, args = "modify_pending_order_address", {"order_id": pending[half + 1 + k // 2], **_ADDRESS}
            t = time.perf_counter_ns()
            res = ep.call_tool(name, args)
            s.append(time.perf_counter_ns() - t)
            self._ok(res, name)
        ep.close()
        return {"write_ms": _med_ms(s)}

    def _after_gold_writes(self) -> Any:
        ep = self._episode()
        half = len(self.pending) // 2
        self._ok(ep.call_tool("cancel_pending_order", {"order_id": self.pending[0], "reason": "no longer needed"}),
                 "cancel_pending_order")
        self._ok(ep.call_tool("modify_pending_order_address", {"order_id": self.pending[half], **_ADDRESS}),
                 "modify_pending_order_address")
        return ep

    def hash(self, n: int, n_cold: int) -> dict[str, Any]:
        from scaleenv.world.world import World

        ep = self._after_gold_writes()
        h = ep.state_hash()  # the first one computes the snapshot's row digests (cold); then incremental
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            ep.state_hash()
            s.append(time.perf_counter_ns() - t)
        out = {"hash_warm_ms": _med_ms(s)}
        s = []
        for _ in range(n_cold):
            fresh = World.from_snapshot(self.spec, ep.snapshot())
            fresh.clear_changes()  # as `scaleenv bench`: no base, no change log: the hash reads every row
            t = time.perf_counter_ns()
            cold = fresh.state_hash()
            s.append(time.perf_counter_ns() - t)
            fresh.close()
            if cold != h:
                raise RuntimeError("cold and incremental hashes disagree")
        out["hash_cold_ms"] = _med_ms(s)
        s = []
        for i in range(n_cold):
            self.nonce += 1
            ep.call_tool("modify_user_address", {"user_id": self.user_ids[i % len(self.user_ids)], **_ADDRESS,
                                                 "zip": f"{10000 + self.nonce}"})
            fresh = World.from_snapshot(self.spec, ep.snapshot())  # content never hashed before
            t = time.perf_counter_ns()
            fresh.state_hash()
            s.append(time.perf_counter_ns() - t)
            fresh.close()
        out["hash_cold_newsnap_ms"] = _med_ms(s)
        ep.close()
        return out

    def evaluate(self, n: int, n_full: int) -> dict[str, Any]:
        """Episode.evaluate after the gold chain of the first task of the tau2-scale build; then the same plus
        build_worlds (the expected world: base + patch, gold replay, two hash checks), the agent's moves untimed."""
        from scaleenv.env.cache import build_worlds, make_episode
        from scaleenv.universe import Universe

        u = Universe(self.universe)
        task = u.tasks()[0]
        spec = u.spec(task.domain)
        base = u.base(task.domain)
        worlds = build_worlds(spec, base, task)
        ep = make_episode(spec, task, worlds)
        _se_replay(ep, task)
        if not ep.evaluate().success:
            raise RuntimeError(f"{task.id}: gold chain does not score 1")
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            ep.evaluate()
            s.append(time.perf_counter_ns() - t)
        ep.close()
        worlds.expected.close()
        out = {"evaluate_ms": _med_ms(s), "evaluate_task": task.id, "evaluate_gold_calls": len(task.gold_chain)}
        s = []
        for _ in range(n_full):
            t = time.perf_counter_ns()
            w = build_worlds(spec, base, task)
            e = make_episode(spec, task, w)
            mid = time.perf_counter_ns()
            _se_replay(e, task)
            gap = time.perf_counter_ns() - mid
            e.evaluate()
            s.append(time.perf_counter_ns() - t - gap)
            e.close()
            w.expected.close()
        out["evaluate_full_ms"] = _med_ms(s)
        return out

    def e2e(self, n: int = 0) -> dict[str, Any]:
        r = _se_e2e(self.universe)
        return {"e2e_ms": r["ms"], "e2e_tasks": r["tasks"], "e2e_success": r["success"], "e2e_total_s": r["total_s"],
                "e2e_load_ms": r["load_ms"], "e2e_episode_ms": r["episode_ms"], "e2e_eval_ms": r["eval_ms"]}

    def e2e_small(self, n: int = 0) -> dict[str, Any]:
        r = _se_e2e(self.small_universe)
        return {"e2e_small_ms": r["ms"], "e2e_small_tasks": r["tasks"], "e2e_small_success": r["success"],
                "e2e_small_load_ms": r["load_ms"], "e2e_small_episode_ms": r["episode_ms"],
                "e2e_small_eval_ms": r["eval_ms"]}


def serve(ops: Any) -> None:
    """Answer one JSON command per stdin line ({"op": NAME, "args": [...]}) with one result line."""
    _emit({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            return
        _emit(getattr(ops, cmd["op"])(*cmd.get("args", [])))


def scaleenv_mem(root: str, work: str, n: int) -> dict[str, Any]:
    import gc

    from scaleenv.env.episode import Episode
    from scaleenv.validation import validate_spec

    spec = validate_spec(_se_retail_world(root).SPEC)
    base = (Path(work) / "bench_world" / "base.sqlite").read_bytes()
    address = {"address1": "1 Infinite Loop", "address2": "Suite 100", "city": "Cupertino", "state": "CA",
               "country": "USA", "zip": "95014"}
    probe = Episode(spec, base)
    pending = [r[0] for r in probe.world.conn.execute("SELECT order_id FROM orders WHERE status = 'pending'")]
    probe.close()

    def one() -> Any:
        ep = Episode(spec, base)
        ep.call_tool("get_order_details", {"order_id": pending[0]})
        res = ep.call_tool("modify_pending_order_address", {"order_id": pending[1], **address})
        assert res.ok, res.output
        return ep

    warm = one()
    warm.close()
    del warm
    gc.collect()
    before = _rss()
    live = [one() for _ in range(n)]
    gc.collect()
    after = _rss()
    assert len(live) == n
    return {"mem_mb": (after - before) / n / 1e6, "mem_envs": n, "rss_before_mb": before / 1e6,
            "snapshot_mb": len(base) / 1e6}


# ============================================================================ orchestrator

# Per operation, the arguments of each side's method (repetitions).
REPS_FULL = {"tau2": {"construct": [30], "reset": [30], "read": [2000], "write": [2000], "hash": [30],
                      "evaluate": [15], "e2e": []},
             "scaleenv": {"construct": [200], "reset": [500], "read": [2000], "write": [2000], "hash": [2000, 10],
                          "evaluate": [500, 30], "e2e": [], "e2e_small": []}}
REPS_QUICK = {"tau2": {"construct": [5], "reset": [5], "read": [200], "write": [200], "hash": [5], "evaluate": [3],
                       "e2e": []},
              "scaleenv": {"construct": [20], "reset": [50], "read": [200], "write": [200], "hash": [200, 3],
                           "evaluate": [50, 5], "e2e": [], "e2e_small": []}}
# Each round runs these in this order, each tau2 op right before its scaleenv counterpart.
PAIRS = [("construct", "construct"), ("reset", "reset"), ("read", "read"), ("write", "write"), ("hash", "hash"),
         ("evaluate", "evaluate"), ("e2e", "e2e"), (None, "e2e_small")]

# (label, unit, tau2 key, scaleenv key)
ROWS = [
    ("1  construct env from disk", "ms", "construct_ms", "construct_ms"),
    ("2  reset to initial state (tau2: reconstruct)", "ms", "reset_ms", "reset_ms"),
    ("3  read call get_order_details", "ms", "read_ms", "read_ms"),
    ("4  write call (cancel / modify address)", "ms", "write_ms", "write_ms"),
    ("5a full DB hash, cold (bench: scan)", "ms", "hash_ms", "hash_cold_ms"),
    ("5b full DB hash, cold, never-seen snapshot", "ms", "hash_ms", "hash_cold_newsnap_ms"),
    ("5c DB hash, warm / incremental", "ms", "hash_ms", "hash_warm_ms"),
    ("6a evaluate one task after gold run", "ms", "evaluate_ms", "evaluate_ms"),
    ("6b   same + building the expected world", "ms", "evaluate_ms", "evaluate_full_ms"),
    ("7a gold replay + eval, per task (tau2-scale)", "ms", "e2e_ms", "e2e_ms"),
    ("7b   same, scaleenv default-scale retail", "ms", "e2e_ms", "e2e_small_ms"),
    ("8  memory per live env (20 held)", "MB", "mem_mb", "mem_mb"),
    ("9a cold import of the package", "s", "import_s", "import_s"),
    ("9b import for environment use", "s", "import_env_s", "import_env_s"),
    ("   python -c pass (baseline)", "s", "startup_s", "startup_s"),
]

IMPORTS = {
    "tau2": {"import_s": "import tau2",
             "import_env_s": "from tau2.domains.retail.environment import get_environment\n"
                             "from tau2.evaluator.evaluator import evaluate_simulation",
             "startup_s": "pass"},
    "scaleenv": {"import_s": "import scaleenv",
                 "import_env_s": "from scaleenv.universe import Universe\n"
                                 "from scaleenv.env.cache import build_worlds, make_episode\n"
                                 "from scaleenv.env.episode import Episode",
                 "startup_s": "pass"},
}
MARKER = "@@RESULT@@"


class Side:
    """One side's python: one-shot workers, a long-lived server (one op per request) and timed imports."""

    def __init__(self, name: str, python: str, env: dict[str, str], log: Path):
        self.name = name
        self.python = python
        self.env = env
        self.log = log
        self.proc: subprocess.Popen | None = None
        self._err: Any = None

    def _fail(self, what: str, detail: str = "") -> None:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        raise SystemExit(f"{self.name} worker {what} failed: {detail}\n{tail}")

    def worker(self, *args: str, timeout: float = 1800) -> dict[str, Any]:
        cmd = [self.python, str(HERE), "--worker", self.name, *args]
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith(MARKER)]
        if p.returncode != 0 or not lines:
            raise SystemExit(f"{self.name} worker {args[:1]} failed (exit {p.returncode}):\n"
                             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return json.loads(lines[-1][len(MARKER):])

    def start(self, *args: str) -> None:
        self._err = self.log.open("a")
        self.proc = subprocess.Popen([self.python, str(HERE), "--worker", self.name, "serve", *args], env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)
        self._read("start")

    def _read(self, what: str) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARKER):
                return json.loads(line[len(MARKER):])
        self._fail(what, f"exit {self.proc.wait()}")
        raise AssertionError

    def request(self, op: str, args: list[Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self._read(op)

    def stop(self) -> None:
        if self.proc is not None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._err is not None:
            self._err.close()
            self._err = None

    def wall(self, code: str) -> float:
        t = time.perf_counter()
        subprocess.run([self.python, "-c", code], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t


def _sqlite_counts(path: Path) -> dict[str, int]:
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: c.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names if not n.startswith("_")}
    finally:
        c.close()


def _tau2_counts(db_json: Path) -> dict[str, int]:
    db = json.loads(db_json.read_text())
    prods, users, orders = db["products"], db["users"], db["orders"]
    return {
        "products": len(prods), "variants": sum(len(p["variants"]) for p in prods.values()),
        "users": len(users), "payment_methods": sum(len(u["payment_methods"]) for u in users.values()),
        "orders": len(orders), "order_items": sum(len(o["items"]) for o in orders.values()),
        "fulfillments": sum(len(o["fulfillments"]) for o in orders.values()),
        "payments": sum(len(o["payment_history"]) for o in orders.values()),
    }


def _build_universe(scaleenv_python: str, env: dict[str, str], out: Path, tasks: int, scale: float,
                    rebuild: bool) -> None:
    manifest = out / "universe.json"
    if manifest.is_file() and not rebuild:
        m = json.loads(manifest.read_text())
        if m.get("status") == "complete" and m.get("counts", {}).get("tasks") == tasks:
            return
    exe = str(Path(scaleenv_python).parent / "scaleenv")
    cmd = [exe, "build", "--domain", "retail", "--tasks-per-domain", str(tasks), "--scale", f"{scale:g}",
           "--out", str(out), "--force", "-q"]
    print(f"building {out} ...", file=sys.stderr)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    got = json.loads(manifest.read_text()).get("counts", {}).get("tasks")
    if got != tasks:
        print(f"warning: {out} has {got} tasks, not {tasks}", file=sys.stderr)


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v:.3g}" if v < 100 else f"{v:.0f}"
    if unit == "MB":
        return f"{v:.2f}" if v < 10 else f"{v:.1f}"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def _cell(vals: list[float], unit: str) -> str:
    if not vals:
        return "-"
    return f"{_fmt(statistics.median(vals), unit)} ({_fmt(min(vals), unit)}-{_fmt(max(vals), unit)})"


def _ratio_cell(r: list[float]) -> str:
    if not r:
        return "-"
    def f(x: float) -> str:
        return f"{x:.2f}" if x < 10 else (f"{x:.1f}" if x < 100 else f"{x:.0f}")
    return f"{f(statistics.median(r))} ({f(min(r))}-{f(max(r))})"


def print_table(rounds: list[dict[str, dict[str, Any]]]) -> None:
    header = ["operation", "unit", "tau2 median (min-max)", "scaleenv median (min-max)", "ratio tau2/scaleenv"]
    lines = []
    for label, unit, tk, sk in ROWS:
        tv = [r["tau2"][tk] for r in rounds if r["tau2"].get(tk) is not None]
        sv = [r["scaleenv"][sk] for r in rounds if r["scaleenv"].get(sk) is not None]
        ratios = [r["tau2"][tk] / r["scaleenv"][sk] for r in rounds
                  if r["tau2"].get(tk) is not None and r["scaleenv"].get(sk)]
        lines.append([label, unit, _cell(tv, unit), _cell(sv, unit), _ratio_cell(ratios)])
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def show(row: list[str]) -> str:
        return " | ".join(c.ljust(w) if i in (0, 1) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    print(show(header))
    print("-+-".join("-" * w for w in widths))
    for row in lines:
        print(show(row))


def orchestrate(a: argparse.Namespace) -> None:
    tau2_root = Path(a.tau2_root).resolve()
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for p in (a.tau2_python, a.scaleenv_python):
        if not Path(p).exists():
            raise SystemExit(f"no python at {p}")
    db_json = tau2_root / "data" / "tau2" / "domains" / "retail" / "db.json"
    if not db_json.is_file():
        raise SystemExit(f"no tau2 retail db at {db_json}; set --tau2-root")
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    tau2 = Side("tau2", a.tau2_python, {**base_env, "TAU2_DATA_DIR": str(tau2_root / "data")}, work / "tau2.log")
    se_env = dict(base_env)
    scaleenv = Side("scaleenv", a.scaleenv_python, se_env, work / "scaleenv.log")
    se_root = a.scaleenv_root or subprocess.run(
        [a.scaleenv_python, "-c", "import pathlib, scaleenv; print(pathlib.Path(scaleenv.__file__).resolve().parents[2])"],
        env=se_env, capture_output=True, text=True, check=True).stdout.strip()
    if not (Path(se_root) / "benchmarks" / "retail_world.py").is_file():
        raise SystemExit(f"no benchmarks/retail_world.py under {se_root}; set --scaleenv-root")
    if a.rounds == 0:
        rollout(a, scaleenv, work)
        return

    # ---- setup: worlds, universes, row counts
    n_tasks = tau2.worker("counts")["tasks"]
    prep = scaleenv.worker("prepare", "--root", se_root, "--work", str(work))
    big = work / f"retail_s{a.scale:g}_n{n_tasks}"
    small = work / f"retail_s1_n{n_tasks}"
    _build_universe(a.scaleenv_python, se_env, big, n_tasks, a.scale, a.rebuild)
    _build_universe(a.scaleenv_python, se_env, small, n_tasks, 1.0, a.rebuild)
    t_counts = _tau2_counts(db_json)
    b_counts = prep["rows"]
    big_counts = _sqlite_counts(big / "domains" / "retail" / "base.sqlite")
    small_counts = _sqlite_counts(small / "domains" / "retail" / "base.sqlite")
    print("retail world sizes (rows)")
    print(f"  tau2 db.json ({db_json.stat().st_size / 1e6:.2f} MB): {sum(t_counts.values())} rows  {t_counts}")
    print(f"  scaleenv benchmarks/retail_world.py (JSON {prep['json_mb']:.2f} MB indented, SQLite "
          f"{prep['sqlite_mb']:.2f} MB): {sum(b_counts.values())} rows "
          f"({sum(b_counts.values()) / sum(t_counts.values()):.2f}x)  {b_counts}")
    for label, path, c in ((f"scale {a.scale:g}", big, big_counts), ("scale 1", small, small_counts)):
        size = (path / "domains" / "retail" / "base.sqlite").stat().st_size / 1e6
        print(f"  scaleenv catalog retail {label} (SQLite {size:.2f} MB): {sum(c.values())} rows "
              f"({sum(c.values()) / sum(t_counts.values()):.2f}x)  {c}")
    print(f"  tasks: tau2 retail {n_tasks}; scaleenv builds {n_tasks} each ({big.name}, {small.name})")
    print(flush=True)

    reps = REPS_QUICK if a.quick else REPS_FULL
    rounds: list[dict[str, dict[str, Any]]] = []
    t_all = time.perf_counter()
    tau2.start()
    scaleenv.start("--root", se_root, "--work", str(work), "--universe", str(big), "--small-universe", str(small))
    try:
        for i in range(a.rounds):
            r: dict[str, dict[str, Any]] = {"tau2": {}, "scaleenv": {}}
            t0 = time.perf_counter()
            for top, sop in PAIRS:
                if top is not None:
                    r["tau2"].update(tau2.request(top, reps["tau2"][top]))
                if sop is not None:
                    r["scaleenv"].update(scaleenv.request(sop, reps["scaleenv"][sop]))
            r["tau2"].update(tau2.worker("mem", "--n", str(a.envs)))
            r["scaleenv"].update(scaleenv.worker("mem", "--n", str(a.envs), "--root", se_root, "--work", str(work)))
            for key in IMPORTS["tau2"]:
                best = {"tau2": float("inf"), "scaleenv": float("inf")}
                for _ in range(a.import_runs):
                    for side in (tau2, scaleenv):
                        best[side.name] = min(best[side.name], side.wall(IMPORTS[side.name][key]))
                for name, v in best.items():
                    r[name][key] = v
            rounds.append(r)
            print(f"round {i + 1}/{a.rounds} done in {time.perf_counter() - t0:.1f} s (load average "
                  f"{os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    finally:
        tau2.stop()
        scaleenv.stop()

    print(f"{a.rounds} rounds in {time.perf_counter() - t_all:.0f} s, each operation run by tau2 and then at once "
          f"by scaleenv; load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print_table(rounds)
    t_last, s_last = rounds[-1]["tau2"], rounds[-1]["scaleenv"]
    print()
    print(f"6a tasks: tau2 retail task {t_last['evaluate_task']} ({t_last['evaluate_gold_actions']} gold actions); "
          f"scaleenv {s_last['evaluate_task']} ({s_last['evaluate_gold_calls']} gold calls)")
    print(f"7a gold reward 1.0: tau2 {t_last['e2e_success']}/{t_last['e2e_tasks']}, scaleenv "
          f"{s_last['e2e_success']}/{s_last['e2e_tasks']}; 7b scaleenv {s_last.get('e2e_small_success')}/"
          f"{s_last.get('e2e_small_tasks')}")

    def split(side: str, prefix: str) -> str:
        vals = {k: statistics.median(r[side][f"{prefix}_{k}_ms"] for r in rounds)
                for k in ("load", "episode", "eval") if rounds[0][side].get(f"{prefix}_{k}_ms") is not None}
        return ", ".join(f"{k} {v:.2f}" for k, v in vals.items())

    print(f"7a per-task split (ms, median of rounds): tau2 {split('tau2', 'e2e')} [episode = scratch env + gold "
          f"replay through get_response, eval = evaluate_simulation]; scaleenv {split('scaleenv', 'e2e')} [load = "
          f"build_worlds, episode = Episode + gold chain through call_tool, eval = Episode.evaluate]")
    print(f"7b per-task split (ms): scaleenv {split('scaleenv', 'e2e_small')}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rounds": rounds, "counts": {"tau2": t_counts, "bench_world": b_counts,
                                            "catalog_big": big_counts, "catalog_small": small_counts},
                                            "settings": vars(a)}, indent=1, default=str))
        print(f"raw figures: {a.json}")
    if a.rollout:
        print()
        rollout(a, scaleenv, work)


def rollout(a: argparse.Namespace, scaleenv: Side, work: Path) -> None:
    """The project's CLI on a copy of a universe: plain wall time, then the same run under the shim."""
    src = Path(a.rollout).resolve()
    exe = str(Path(a.scaleenv_python).parent / "scaleenv")
    shim = HERE.with_name("tau2_side_by_side_rollout.py")
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        copy = Path(tmp) / src.name
        shutil.copytree(src, copy)
        n = json.loads((copy / "universe.json").read_text()).get("counts", {}).get("tasks")
        args = ["rollout", str(copy), "--agent", "oracle", "--trials", "1", "--executor", "serial"]
        walls = []
        for k in range(a.rollout_runs):
            t = time.perf_counter()
            subprocess.run([exe, *args, "--out", str(Path(tmp) / f"plain{k}.json")], env=scaleenv.env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t)
        res = json.loads((Path(tmp) / "plain0.json").read_text())
        shim_out = Path(tmp) / "split.json"
        t = time.perf_counter()
        subprocess.run([a.scaleenv_python, str(shim), str(shim_out), *args, "--out", str(Path(tmp) / "shim.json")],
                       env=scaleenv.env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shim_wall = time.perf_counter() - t
        sp = json.loads(shim_out.read_text())
    print(f"scaleenv rollout {src} --agent oracle --trials 1 --executor serial  ({n} tasks, "
          f"avg reward {res['avg_reward']:.3f})")
    print(f"  wall, process start to exit: median {statistics.median(walls):.2f} s of {len(walls)} runs "
          f"({', '.join(f'{w:.2f}' for w in walls)}); run loop (results.json timings.wall_s) "
          f"{res['timings']['wall_s']:.2f} s")
    print(f"  split of one run under the timing shim ({shim_wall:.2f} s wall):")
    for k, v in sp["parts"].items():
        print(f"    {k:<42} {v:7.2f} s  {100 * v / sp['total_s']:5.1f} %")
    print(f"    {'(total measured inside the process)':<42} {sp['total_s']:7.2f} s")
    for k, v in sp.get("notes", {}).items():
        print(f"    {k}: {v}")


# ============================================================================ entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", choices=["tau2", "scaleenv"], help=argparse.SUPPRESS)
    ap.add_argument("op", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--universe", help=argparse.SUPPRESS)
    ap.add_argument("--small-universe", default="", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=20, help=argparse.SUPPRESS)
    ap.add_argument("--tau2-python", default=os.environ.get("TAU2_PYTHON", "tau2venv/bin/python"))
    ap.add_argument("--tau2-root", default=os.environ.get("TAU2_ROOT", "tau2-bench"))
    ap.add_argument("--scaleenv-python", default=os.environ.get("SCALEENV_PYTHON", "venv/bin/python"))
    ap.add_argument("--scaleenv-root", default=os.environ.get("SCALEENV_ROOT"))
    ap.add_argument("--work", default=os.environ.get("SIDE_BY_SIDE_WORK", "sbs-work"))
    ap.add_argument("--scale", type=float, default=17.0, help="scale of the tau2-scale catalog retail build")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (0 with --rollout: rollout only)")
    ap.add_argument("--envs", type=int, default=20, help="live environments for the memory figure")
    ap.add_argument("--import-runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="few repetitions (a smoke test, not a measurement)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the scaleenv retail universes")
    ap.add_argument("--json", help="also write every round's raw figures here")
    ap.add_argument("--rollout", help="also time `scaleenv rollout` (oracle, serial) on a copy of this universe")
    ap.add_argument("--rollout-runs", type=int, default=3)
    a = ap.parse_args()
    if a.worker == "tau2":
        if a.op == "serve":
            serve(Tau2Ops())
        elif a.op == "mem":
            _emit(tau2_mem(a.n))
        elif a.op == "counts":
            _emit(tau2_counts())
        return
    if a.worker == "scaleenv":
        if a.op == "serve":
            serve(ScaleenvOps(a.root, a.work, a.universe, a.small_universe))
        elif a.op == "prepare":
            _emit(scaleenv_prepare(a.root, a.work))
        elif a.op == "mem":
            _emit(scaleenv_mem(a.root, a.work, a.n))
        return
    if a.rounds < 1 and not a.rollout:
        raise SystemExit("--rounds must be at least 1 (0 only with --rollout: the rollout timing alone)")
    orchestrate(a)


if __name__ == "__main__":
    main()

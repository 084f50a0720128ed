"""``scaleenv rollout``: run an agent (and a simulated user) on every task of a universe, k trials
each, on a serial, process or Ray executor; write trajectories (JSONL) and ``results.json``.

The work unit is one episode ``(task_id, trial, seed)``; its seed is derived from the run seed, the
task id and the trial, so a deterministic policy gives the same results on every executor.
Each finished episode is appended (and flushed) to the trajectories file at once: Ctrl-C keeps
every finished episode and ``--resume`` skips them. ``results.json`` follows tau2-bench's results
shape (``info``, ``tasks``, ``simulations``) and adds ``avg_at_k``, ``pass_at_k``, ``pass_hat_k``,
``per_domain`` and the run's ``settings``.

Workers (processes or Ray actors) each load the universe by its absolute path and keep their own
worlds. Ray workers get the universe through Ray's object store (no shared filesystem needed).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleenv.env.agents import AgentOptions, ChatClients
from scaleenv.env.core import MODES, ToolEnv
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import check_agent_spec, make_agent
from scaleenv.env.users import UserOptions, check_user_spec, make_user
from scaleenv.errors import InputError, ScaleEnvError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import episode_id, summary
from scaleenv.parallel import EXECUTORS, Executor, make_executor
from scaleenv.parallel.shipping import ShippedUniverse
from scaleenv.reward.subgoals import REWARD_SHAPES
from scaleenv.universe import Universe

if TYPE_CHECKING:
    from rich.progress import ProgressColumn, TaskID
    from rich.progress import Task as ProgressTask

RESULTS_FORMAT = "scaleenv-results/1"
Unit = tuple[str, int, int]  # (task_id, trial, seed)


class RolloutError(InputError):
    """Bad rollout settings or files (the CLI prints it as one line and exits 2)."""


class RolloutInterrupted(KeyboardInterrupt):
    """Ctrl-C during a rollout; ``results`` were written with status ``interrupted``."""

    def __init__(self, results: dict[str, Any]):
        super().__init__("rollout interrupted")
        self.results = results


ENV_ERROR = "environment: "
"""How the error of an episode that the environment failed (not the agent) begins."""


def environment_errors(sims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episodes that the environment failed: reported apart, never averaged into the metrics."""
    return [r for r in sims if r["termination_reason"] == "error" and str(r.get("error") or "").startswith(ENV_ERROR)]


def check_environment(universe: Universe, tasks: list[Task]) -> None:
    """Load each selected domain's spec and base world once before any episode runs, so that a broken
    universe fails the rollout (UniverseError) instead of scoring every episode 0."""
    for d in sorted({t.domain for t in tasks}):
        universe.spec(d)
        universe.base(d)


def unit_seed(run_seed: int, task_id: str, trial: int) -> int:
    digest = hashlib.sha256(f"{run_seed}:{task_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _llm(spec: str | None) -> bool:
    return spec is not None and spec.startswith("openai:")


@dataclass
class RolloutJob:
    """What a worker needs (picklable): where the universe is and how to play each episode."""

    universe: str | ShippedUniverse  # a ShippedUniverse for workers without the driver's disk
    agent: str
    user: str | None
    mode: str = "conversational"
    max_turns: int | None = None  # None: 30, or enough for a long task's gold chain (env.core.turns_for)
    max_user_turns: int = 10
    concurrency: int = 8
    agent_options: AgentOptions = field(default_factory=AgentOptions)
    user_options: UserOptions = field(default_factory=UserOptions)
    fingerprint: str = ""
    reward_shape: str = "binary"

    def settings(self) -> dict[str, Any]:
        """The settings that decide the policy (and so the fingerprint a resume must match). How an
        endpoint is reached (URL, key variable, timeout, retries) may change between resumes."""
        transport = ("base_url", "api_key_env", "timeout", "max_retries")

        def policy(opts: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in opts.items() if k not in transport}

        conv = self.mode == "conversational"
        shape = {"reward_shape": self.reward_shape} if self.reward_shape != "binary" else {}
        return {**shape, "agent": self.agent, "user": self.user if conv else None,
                "mode": self.mode, "max_turns": self.max_turns, "max_user_turns": self.max_user_turns,
                "agent_options": policy(self.agent_options.public())
                if _llm(self.agent) or self.agent == "random" else {},
                "user_options": policy(self.user_options.public()) if conv else {}}


class LiveEpisodes:
    """The episodes a worker is playing now (read by the progress display: in flight, turns so far)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._envs: dict[int, ToolEnv] = {}

    def add(self, env: ToolEnv) -> None:
        with self._lock:
            self._envs[id(env)] = env

    def remove(self, env: ToolEnv) -> None:
        with self._lock:
            self._envs.pop(id(env), None)

    def counts(self) -> tuple[int, int]:
        """``(episodes in flight, agent turns taken in them so far)``."""
        with self._lock:
            envs = list(self._envs.values())
        return len(envs), sum(e.steps for e in envs)


class RolloutWorker:
    """Owns its worlds: one verified TaskWorlds per task (LRU) and a pool of idle episodes per task."""

    MAX_TASKS = 256

    def __init__(self, job: RolloutJob, live: LiveEpisodes | None = None):
        from scaleenv.env.cache import TaskWorldCache
        from scaleenv.parallel.shipping import local_universe

        self.job = job
        self.live = live if live is not None else LiveEpisodes()
        self.cache = TaskWorldCache(local_universe(job.universe), max_tasks=self.MAX_TASKS,
                                    max_idle=max(1, job.concurrency))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tools_json: dict[str, str] = {}
        self.clients = ChatClients(job.concurrency)

    def spec(self, domain: str) -> DomainSpec:
        return self.cache.spec(domain)

    def task(self, task_id: str) -> Task | None:
        try:
            return self.cache.task(task_id)
        except ScaleEnvError:
            return None

    async def run_unit(self, unit: Unit) -> dict[str, Any]:
        task_id, trial, seed = unit
        job = self.job
        task = self.task(task_id)
        if task is None:
            return self._failed(task_id, "", trial, seed, f"no task {task_id!r} in {job.universe}")
        try:
            ep = self.cache.acquire(task)
        except ScaleEnvError as e:
            return self._failed(task_id, task.domain, trial, seed, f"cannot build the task's worlds: {e}")
        agent = make_agent(job.agent, job.agent_options, self.clients)
        user = make_user(job.user or "", job.user_options, self.clients) if job.mode == "conversational" else None
        with ToolEnv(task, ep, user=user, mode=job.mode, max_turns=job.max_turns, max_user_turns=job.max_user_turns,
                     seed=seed, release=lambda e: self.cache.release(task, e), reward_shape=job.reward_shape) as env:
            self.live.add(env)
            try:
                traj = await run_episode(env, agent, seed=seed, trial=trial,
                                         domain_description=self.spec(task.domain).description)
            finally:
                self.live.remove(env)
        rec = traj.to_json()
        rec["run"] = job.fingerprint
        return rec

    def _failed(self, task_id: str, domain: str, trial: int, seed: int, error: str) -> dict[str, Any]:
        """An episode the environment could not run (not the agent's failure): see ENV_ERROR."""
        job = self.job
        error = ENV_ERROR + error
        return {"id": episode_id(task_id, trial), "task_id": task_id, "domain": domain, "trial": trial, "seed": seed,
                "agent": job.agent, "user": job.user if job.mode == "conversational" else None, "mode": job.mode,
                "termination": "error", "error": error,
                "reward": {"score": 0.0, "success": False, "components": {}, "diff": [error]},
                "steps": 0, "tool_calls": 0, "tool_errors": 0, "user_turns": 0, "timings": {}, "usage": {},
                "messages": [], "tools": [], "run": job.fingerprint}

    def pack(self, rec: dict[str, Any]) -> dict[str, Any]:
        """What travels back to the parent: the JSONL line (serialized here, in parallel) and the summary.
        A task's tool schemas are serialized once and spliced into each of its lines."""
        tools = rec.get("tools") or []
        tj = self._tools_json.get(rec["task_id"]) if tools else "[]"
        if tj is None:
            if len(self._tools_json) > 4096:
                self._tools_json.clear()
            tj = self._tools_json[rec["task_id"]] = json.dumps(tools, sort_keys=True)
        head = json.dumps({k: v for k, v in rec.items() if k != "tools"}, default=str)
        return {"id": rec["id"], "line": f'{head[:-1]}, "tools": {tj}}}', "summary": summary(rec),
                "steps": rec.get("steps", 0)}

    async def _run_all(self, batch: list[Unit], sink: Callable[[Any], None] | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.job.concurrency <= 1 or len(batch) <= 1:
            for unit in batch:
                packed = self.pack(await self.run_unit(unit))
                out.append(packed)
                if sink is not None:
                    sink(packed)
            return out
        sem = asyncio.Semaphore(self.job.concurrency)

        async def one(unit: Unit) -> None:
            async with sem:
                rec = await self.run_unit(unit)
            packed = self.pack(rec)
            out.append(packed)
            if sink is not None:
                sink(packed)

        await asyncio.gather(*(one(u) for u in batch))
        return out

    def run_batch(self, batch: list[Unit], sink: Callable[[Any], None] | None = None) -> list[dict[str, Any]]:
        """Run the episodes of ``batch``; return (and pass to ``sink`` as each finishes) their packed
        results: ``{"id", "line" (the trajectory as one JSON line), "summary", "steps"}``."""
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        task = self._loop.create_task(self._run_all(list(batch), sink))
        try:
            return self._loop.run_until_complete(task)
        except BaseException:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: asyncio must not log it again at exit
            self._abandon_loop()
            raise

    def _abandon_loop(self) -> None:
        """After an interruption: cancel what is still in flight and drop the loop (and its clients)."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        tasks = asyncio.all_tasks(loop)
        for t in tasks:
            t.cancel()
        with contextlib.suppress(BaseException):  # already unwinding an interruption
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for t in tasks:
            if t.done() and not t.cancelled():
                t.exception()
        loop.close()
        self.clients = ChatClients(self.job.concurrency)

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.run_until_complete(self.clients.aclose())
            finally:
                self._loop.close()
        self.cache.clear()


@dataclass
class RolloutConfig:
    universe: Path
    agent: str = "oracle"
    user: str = "scripted"
    mode: str = "conversational"
    trials: int = 1
    seed: int = 0
    max_turns: int | None = None  # None: 30, or enough for a long task's gold chain (env.core.turns_for)
    max_user_turns: int = 10
    executor: str = "serial"
    workers: int = 2
    ray_address: str | None = None
    concurrency: int | None = None
    """Episodes in flight per worker; ``None``: :func:`default_concurrency`."""
    domains: list[str] = field(default_factory=list)
    num_tasks: int | None = None
    task_ids: list[str] = field(default_factory=list)
    out: Path | None = None
    trajectories: Path | None = None
    resume: bool = False
    retry_errors: bool = False
    force: bool = False
    agent_options: AgentOptions = field(default_factory=AgentOptions)
    user_options: UserOptions = field(default_factory=UserOptions)
    reward_shape: str = "binary"
    """``binary``, ``partial`` or ``dense`` (:mod:`scaleenv.reward.subgoals`): the score each episode gets."""

    def trajectories_path(self) -> Path | None:
        if self.trajectories is not None:
            return self.trajectories
        if self.out is None:
            return None
        return self.out.with_name(self.out.stem + ".trajectories.jsonl")


LOCAL_CONCURRENCY = 1
REMOTE_CONCURRENCY = 8


def default_concurrency(cfg: RolloutConfig) -> int:
    """Episodes in flight per worker when ``--concurrency`` is not given: one for a model on this
    machine (local servers such as llama.cpp often answer one request at a time, and a request
    queued behind others would spend its timeout waiting), eight for a remote endpoint."""
    from scaleenv.llm.client import is_local

    urls = ([cfg.agent_options.base_url] if _llm(cfg.agent) else []) + (
        [cfg.user_options.base_url] if cfg.mode == "conversational" and _llm(cfg.user) else [])
    return LOCAL_CONCURRENCY if any(is_local(u) for u in urls) else REMOTE_CONCURRENCY


def concurrency(cfg: RolloutConfig) -> int:
    return cfg.concurrency if cfg.concurrency is not None else default_concurrency(cfg)


def validate_config(cfg: RolloutConfig) -> None:
    try:
        check_agent_spec(cfg.agent)
        if cfg.mode == "conversational":
            check_user_spec(cfg.user)
    except ValueError as e:
        raise RolloutError(str(e)) from None
    if cfg.mode not in MODES:
        raise RolloutError(f"unknown --mode {cfg.mode!r}; use conversational or solo")
    if cfg.executor not in EXECUTORS:
        raise RolloutError(f"unknown --executor {cfg.executor!r}; use serial, process or ray")
    for name, value, lo in (("--trials", cfg.trials, 1), ("--workers", cfg.workers, 1),
                            ("--max-turns", 1 if cfg.max_turns is None else cfg.max_turns, 1),
                            ("--max-user-turns", cfg.max_user_turns, 1),
                            ("--concurrency", concurrency(cfg), 1)):
        if value < lo:
            raise RolloutError(f"{name} must be at least {lo}, got {value}")
    if cfg.num_tasks is not None and cfg.num_tasks < 1:
        raise RolloutError(f"--num-tasks must be at least 1, got {cfg.num_tasks}")
    if cfg.resume and cfg.force:
        raise RolloutError("use either --resume or --force, not both")
    if cfg.reward_shape not in REWARD_SHAPES:
        raise RolloutError(f"unknown --reward {cfg.reward_shape!r}; use {', '.join(REWARD_SHAPES)}")


def select_tasks(universe: Universe, cfg: RolloutConfig) -> list[Task]:
    domains = universe.domains
    for d in cfg.domains:
        if d not in domains:
            raise RolloutError(f"unknown domain {d!r} in {universe.root}; it has: {', '.join(domains) or 'none'}")
    chosen = []
    for d in cfg.domains or domains:
        tasks = universe.tasks(d)
        chosen.extend(tasks[: cfg.num_tasks] if cfg.num_tasks else tasks)
    if cfg.task_ids:
        by_id = {t.id: t for t in chosen}
        missing = [t for t in cfg.task_ids if t not in by_id]
        if missing:
            raise RolloutError(f"no task {missing[0]!r} in {universe.root}; "
                               f"list ids with `scaleenv inspect {universe.root} --json`")
        chosen = [by_id[t] for t in dict.fromkeys(cfg.task_ids)]
    if not chosen:
        raise RolloutError(f"{universe.root} has no tasks to run; build some with "
                           "`scaleenv build --tasks-per-domain K`")
    return chosen


def fingerprint(job: RolloutJob, run_seed: int, manifest: dict[str, Any]) -> str:
    payload = json.dumps({"job": job.settings(), "seed": run_seed, "universe": manifest.get("build"),
                          "format": RESULTS_FORMAT}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def read_trajectories(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Records of a trajectories file; a torn last line (from a crash) is dropped (second value True)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise RolloutError(f"{path}: cannot read ({e})") from None
    out, torn = [], False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or "id" not in rec or "task_id" not in rec:
                raise ValueError("not a trajectory record")
        except ValueError as e:
            if n == len(lines):
                torn = True
                break
            raise RolloutError(f"{path}: line {n}: not a trajectory record ({e}); "
                               "fix or delete the file, or start over with --force") from None
        out.append(rec)
    return out, torn


def _batches(units: list[Unit], workers: int, cap: int, spread: int) -> list[list[Unit]]:
    """Split into batches of at most ``cap``, at least ``spread`` per worker when there are enough
    units (so that every worker gets work and the load balances)."""
    if not units:
        return []
    size = max(1, min(cap, math.ceil(len(units) / (spread * max(1, workers)))))
    return [units[i : i + size] for i in range(0, len(units), size)]


def _split_model(spec: str | None) -> str | None:
    return spec.partition(":")[2] if spec and spec.startswith("openai:") else None


def build_results(cfg: RolloutConfig, job: RolloutJob, universe: Universe, tasks: list[Task], units: list[Unit],
                  records: dict[str, dict[str, Any]], status: str, wall_s: float, new_steps: int,
                  new_episodes: int) -> dict[str, Any]:
    from scaleenv import __version__
    from scaleenv.run.metrics import summarize

    order = {episode_id(t, k): i for i, (t, k, _) in enumerate(units)}
    sims = sorted((r for r in records.values() if r["id"] in order), key=lambda r: order[r["id"]])
    env_failed = environment_errors(sims)
    failed_ids = {r["id"] for r in env_failed}
    metrics = summarize(({"task_id": r["task_id"], "domain": r["domain"], "score": r["reward_info"]["reward"],
                          "success": r["reward_info"]["success"], "termination": r["termination_reason"]}
                         for r in sims if r["id"] not in failed_ids), cfg.trials)
    traj = cfg.trajectories_path()
    user = cfg.user if cfg.mode == "conversational" else None
    settings = {
        "universe": str(universe.root), "agent": cfg.agent, "user": user, "mode": cfg.mode, "trials": cfg.trials,
        "seed": cfg.seed, "max_turns": cfg.max_turns, "max_user_turns": cfg.max_user_turns,
        "executor": cfg.executor, "workers": cfg.workers, "ray_address": cfg.ray_address,
        "concurrency": concurrency(cfg), "domains": sorted({t.domain for t in tasks}), "num_tasks": cfg.num_tasks,
        "task_ids": list(cfg.task_ids), "fingerprint": job.fingerprint,
        **({"reward_shape": cfg.reward_shape} if cfg.reward_shape != "binary" else {}),
    }
    return {
        "format": RESULTS_FORMAT,
        "status": status,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "info": {
            "scaleenv_version": __version__, "num_trials": cfg.trials, "max_steps": cfg.max_turns,
            "max_user_turns": cfg.max_user_turns, "seed": cfg.seed, "mode": cfg.mode,
            "agent_info": {"implementation": cfg.agent, "llm": _split_model(cfg.agent),
                           "llm_args": cfg.agent_options.public() if _llm(cfg.agent) else {}},
            "user_info": {"implementation": user, "llm": _split_model(user),
                          "llm_args": cfg.user_options.public() if _llm(user) else {}},
            "environment_info": {"universe": str(universe.root), "domains": settings["domains"],
                                 "build": universe.manifest.get("build")},
        },
        "settings": settings,
        "avg_reward": metrics["avg_reward"],
        "avg_at_k": metrics["avg_at_k"],
        "pass_at_k": metrics["pass_at_k"],
        "pass_hat_k": metrics["pass_hat_k"],
        "tasks_at_k": metrics["tasks_at_k"],
        "per_domain": metrics["per_domain"],
        "terminations": metrics["terminations"],
        "num_tasks": metrics["num_tasks"],
        "num_episodes": metrics["num_episodes"],
        "expected_episodes": len(units),
        # episodes that ended in error (an endpoint or the environment failed, not the policy) score 0
        # in the metrics above; these say how many, the mean without them, and the first error
        # (environment errors are counted apart below and are in none of these figures)
        "errors": len(errored := [r for r in sims if r["termination_reason"] == "error" and r["id"] not in failed_ids]),
        "avg_reward_without_errors": _mean_reward([r for r in sims if r["termination_reason"] != "error"]),
        "first_error": errored[0]["error"] if errored else None,
        "environment_errors": len(env_failed),
        "environment_error_examples": [f"{r['id']}: {r['error']}" for r in env_failed[:5]],
        "timings": {"wall_s": round(wall_s, 3), "new_episodes": new_episodes, "new_steps": new_steps,
                    "steps_per_s": round(new_steps / wall_s, 1) if wall_s > 0 else None,
                    "episodes_per_s": round(new_episodes / wall_s, 2) if wall_s > 0 else None},
        "trajectories": str(traj) if traj is not None else None,
        "tasks": [{"id": t.id, "domain": t.domain, "instruction": t.instruction} for t in tasks],
        "simulations": sims,
    }


def _mean_reward(sims: list[dict[str, Any]]) -> float | None:
    return sum(float(r["reward_info"]["reward"]) for r in sims) / len(sims) if sims else None


def all_failed(results: dict[str, Any]) -> bool:
    """Whether every episode of a run ended in error (the CLI then exits 1)."""
    return bool(results["num_episodes"] > 0 and results["errors"] == results["num_episodes"])


def _write_results(path: Path | None, results: dict[str, Any]) -> None:
    if path is None:
        return
    from scaleenv.utils.fs import atomic_write_text

    atomic_write_text(path, json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")


def make_job(cfg: RolloutConfig, universe: Universe) -> RolloutJob:
    job = RolloutJob(universe=str(Path(universe.root).resolve()), agent=cfg.agent,
                     user=cfg.user if cfg.mode == "conversational" else None, mode=cfg.mode,
                     max_turns=cfg.max_turns, max_user_turns=cfg.max_user_turns, concurrency=concurrency(cfg),
                     agent_options=cfg.agent_options, user_options=cfg.user_options, reward_shape=cfg.reward_shape)
    job.fingerprint = fingerprint(job, cfg.seed, universe.manifest)
    return job


def run_rollout(cfg: RolloutConfig, on_episode: Callable[[dict[str, Any]], None] | None = None,
                executor: Executor | None = None,
                on_start: Callable[[int, int, list[dict[str, Any]]], None] | None = None,
                keep_records: bool = False, live: LiveEpisodes | None = None) -> dict[str, Any]:
    """Run (or resume) a rollout and return the results (also written to ``cfg.out`` if set).

    ``on_episode`` gets each finished episode's summary; ``on_start(total, already_done, kept)`` is
    called once before any episode runs (``kept``: the summaries of the episodes a resume keeps).
    ``live`` is told which episodes are in flight (serial executor). With ``keep_records`` the results carry the full trajectory
    records under ``"records"`` (for tests and library use). ``executor`` reuses a warm executor
    (its workers must have been built for the same job); otherwise one is made and closed here.
    """

    validate_config(cfg)
    try:
        universe = Universe(cfg.universe)
        tasks = select_tasks(universe, cfg)
        check_environment(universe, tasks)
    except RolloutError:
        raise
    except ScaleEnvError as e:
        raise RolloutError(str(e)) from None
    job = make_job(cfg, universe)
    units: list[Unit] = [(t.id, k, unit_seed(cfg.seed, t.id, k)) for t in tasks for k in range(cfg.trials)]
    wanted = {episode_id(t, k) for t, k, _ in units}
    traj_path = cfg.trajectories_path()
    records: dict[str, dict[str, Any]] = {}
    full: dict[str, dict[str, Any]] = {}
    if traj_path is not None:
        exists = traj_path.exists() and traj_path.stat().st_size > 0
        if cfg.resume and exists:
            old, torn = read_trajectories(traj_path)
            for rec in old:
                if rec.get("run") != job.fingerprint:
                    raise RolloutError(f"{traj_path} was written by a run with different settings (agent, user, "
                                       "mode, seed, turn limits or universe); resume with the same flags, or pass "
                                       "--force to start over")
            kept = [r for r in old if not (cfg.retry_errors and r.get("termination") == "error")]
            if torn or len(kept) != len(old):
                from scaleenv.utils.fs import atomic_write_text

                atomic_write_text(traj_path, "".join(json.dumps(r, sort_keys=True, default=str) + "\n"
                                                     for r in kept))
            for rec in kept:
                records[rec["id"]] = summary(rec)
                if keep_records:
                    full[rec["id"]] = rec
        elif exists and not cfg.force and not cfg.resume:
            raise RolloutError(f"{traj_path} already holds trajectories; pass --resume to continue that run, "
                               "--force to start over, or another --out")
        elif not cfg.resume and cfg.out is not None and cfg.out.exists() and not cfg.force:
            raise RolloutError(f"{cfg.out} already exists; pass --force to overwrite it, or another --out")
        traj_path.parent.mkdir(parents=True, exist_ok=True)
        if not cfg.resume:
            traj_path.write_text("", encoding="utf-8")
    pending = [u for u in units if episode_id(u[0], u[1]) not in records]
    done_before = len(wanted & set(records))
    if on_start is not None:
        on_start(len(units), done_before, [records[i] for i in sorted(wanted & set(records))])
    llm = _llm(cfg.agent) or (cfg.mode == "conversational" and _llm(cfg.user))
    if cfg.executor == "serial":  # one worker that streams each episode as it finishes: no need to split
        batches = _batches(pending, 1, job.concurrency if llm else 64, 1)
    else:  # LLM episodes: up to --concurrency in flight per worker; zero-latency ones: balance the load
        batches = _batches(pending, cfg.workers, job.concurrency if llm else 64, 1 if llm else 4)
    own = executor is None
    if executor is None and pending:
        factory = functools.partial(RolloutWorker, job, live) if cfg.executor == "serial" and live is not None \
            else functools.partial(RolloutWorker, job)  # other executors' workers live in other processes
        executor = make_executor(cfg.executor, factory, workers=cfg.workers, ray_address=cfg.ray_address)
        if hasattr(executor, "ship"):  # Ray: workers get the universe through the object store, not a path
            job.universe = executor.ship(universe.root, sorted({t.domain for t in tasks}))
    fh = traj_path.open("a", encoding="utf-8") if traj_path is not None else None
    counters = {"steps": 0, "episodes": 0}

    def sink(packed: dict[str, Any]) -> None:
        if fh is not None:
            fh.write(packed["line"] + "\n")
            fh.flush()
        s = packed["summary"]
        records[packed["id"]] = s
        if keep_records:
            full[packed["id"]] = json.loads(packed["line"])
        counters["steps"] += packed["steps"]
        counters["episodes"] += 1
        if on_episode is not None:
            on_episode(s)

    t0 = time.perf_counter()
    status = "complete"
    try:
        if pending:
            assert executor is not None
            executor.run(batches, sink)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if fh is not None:
            fh.close()
        if own and executor is not None:
            with contextlib.suppress(Exception):  # never hide the run's outcome behind a cleanup failure
                executor.close()
    if status == "complete" and any(episode_id(t, k) not in records for t, k, _ in units):
        status = "incomplete"
    results = build_results(cfg, job, universe, tasks, units, records, status, time.perf_counter() - t0,
                            counters["steps"], counters["episodes"])
    _write_results(cfg.out, results)
    if keep_records:
        results["records"] = [full[episode_id(t, k)] for t, k, _ in units if episode_id(t, k) in full]
    if status == "interrupted":
        raise RolloutInterrupted(results)
    return results


# ----------------------------------------------------------------------------- command-line display


class RolloutProgress:
    """A rich progress bar over episodes: finished of total, elapsed time, the running mean reward
    (episodes a resume kept included), errors, and the episodes in flight with the turns taken."""

    def __init__(self, enabled: bool = True):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.enabled = enabled
        self.live = LiveEpisodes()
        self.progress = Progress(
            TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("avg reward {task.fields[avg]}  errors {task.fields[errors]}"), _live_column(self),
            console=Console(stderr=True), disable=not enabled, transient=False)
        self.bar: TaskID | None = None
        self.sum = 0.0
        self.n = 0
        self.errors = 0
        self.turns = 0

    def __enter__(self) -> RolloutProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, total: int, done: int, kept: list[dict[str, Any]] | None = None) -> None:
        for s in kept or ():
            self._count(s)
        self.turns = 0  # turns are this run's
        self.bar = self.progress.add_task("episodes", total=total, completed=done, avg=self.avg(), errors=self.errors)

    def avg(self) -> str:
        return f"{self.sum / self.n:.3f}" if self.n else "-"

    def _count(self, s: dict[str, Any]) -> None:
        self.n += 1
        self.sum += float(s["reward_info"]["reward"])
        self.errors += s["termination_reason"] == "error"
        self.turns += int(s.get("steps") or 0)

    def episode(self, s: dict[str, Any]) -> None:
        self._count(s)
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, avg=self.avg(), errors=self.errors)

    def status(self) -> str:
        """``in flight N  turns T``: the episodes being played now and every agent turn so far."""
        inflight, live_turns = self.live.counts()
        return f"in flight {inflight}  turns {self.turns + live_turns}"


def _live_column(progress: RolloutProgress) -> ProgressColumn:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class LiveColumn(ProgressColumn):
        def render(self, task: ProgressTask) -> Text:
            return Text(progress.status())

    return LiveColumn()


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def print_rollout_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    k = str(results["settings"]["trials"])
    table = Table(title=f"{results['settings']['agent']} / {results['settings']['user'] or 'solo'}: "
                        f"{results['num_episodes']} episodes, k={k} (%)")
    cols = ["domain", "tasks", "episodes", f"Avg@{k}"] + (["Pass@1"] if k != "1" else []) + [
        f"Pass@{k}", f"Pass^{k}", "errors"]
    width = max([len(d["domain"]) for d in results["per_domain"]] + [6])
    for col in cols:
        if col == "domain":
            table.add_column(col, no_wrap=True, min_width=width)
        else:
            table.add_column(col, justify="right")

    def row(name: str, b: dict[str, Any], style: str | None = None) -> None:
        cells = [name, str(b["num_tasks"]), str(b["num_episodes"]), _pct(b["avg_at_k"].get(k))]
        if k != "1":
            cells.append(_pct(b["pass_at_k"].get("1")))
        cells += [_pct(b["pass_at_k"].get(k)), _pct(b["pass_hat_k"].get(k)), str(b["terminations"].get("error", 0))]
        table.add_row(*cells, style=style)

    for d in results["per_domain"]:
        row(d["domain"], d)
    row("total", results, style="bold")
    Console().print(table)

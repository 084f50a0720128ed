"""``scaleenv curriculum``: the next training set from rollout results, kept in a pass-rate window.

Reads rollout results (``results.json`` of :mod:`scaleenv.run.rollout`), estimates pass rates per
task, family, tool, domain, tier and sub-goal count, and writes the next training set as a universe
directory (the same format every command and adapter reads) with ``curriculum.json`` beside it:

1. every candidate task (the pool universes' tasks) gets an estimated pass probability: its own
   passes, shrunk toward the rate of tasks with as many sub-goals (or, with too few of those, the
   overall rate), so unseen and new tasks are estimated too;
2. the set takes the ``size`` tasks whose estimate is nearest the middle of the window (default
   20-80 %): inside it first, and when the agent passes (or fails) everything, the hardest (or the
   easiest) there are;
3. new tasks are synthesized (procedural back end, or the LLM back end through the same
   :func:`scaleenv.synth.build.run_build` call) around the tools and families where the agent
   fails, with a new task seed over the same domains and worlds; their chain lengths follow the
   agent: shorter when it fails most tasks, longer when it passes most.

A task's family is ``task.family`` and its tier ``task.difficulty.tier`` where the task format has
them, else ``direct`` and the difficulty level.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleenv.errors import InputError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.universe import FORMAT, Universe, write_json

CURRICULUM_FORMAT = "scaleenv-curriculum/1"
SHRINK = 8.0
"""Pseudo-episodes of the prior a task's own passes are shrunk toward."""
GROUP_SHRINK = 32.0
"""Pseudo-episodes of the ``q ** count`` model a sub-goal count's own rate is shrunk toward."""
EASIER = (2, 4)
HARDER = (8, 12)
DEFAULT_CHAINS = (3, 8)
"""Chain lengths of synthesized tasks: when the agent fails most tasks, passes most, or neither."""


class CurriculumError(InputError):
    """Bad curriculum settings or files (one line, exit 2)."""


@dataclass
class CurriculumConfig:
    """Settings of one curriculum step."""

    pool: list[Path]
    """Universes whose tasks are the candidates (the first is the base for synthesis)."""
    results: list[Path]
    out: Path
    window: tuple[float, float] = (0.2, 0.8)
    size: int | None = None
    """Tasks in the next set (default: the tasks the results ran)."""
    new_tasks: int = 0
    """New tasks to synthesize (0: none)."""
    seed: int = 0
    executor: str = "serial"
    workers: int = 2
    llm: dict[str, Any] | None = None
    force: bool = False

    def __post_init__(self) -> None:
        lo, hi = self.window
        if not 0.0 <= lo < hi <= 1.0:
            raise CurriculumError(f"--window must be LO-HI with 0 <= LO < HI <= 1, got {lo}-{hi}")
        if self.size is not None and self.size < 1:
            raise CurriculumError(f"--size must be at least 1, got {self.size}")
        if self.new_tasks < 0:
            raise CurriculumError(f"--new-tasks must be at least 0, got {self.new_tasks}")
        if not self.pool:
            raise CurriculumError("no universe to draw tasks from")


def parse_window(text: str) -> tuple[float, float]:
    """``"0.2-0.8"`` or ``"20-80"`` (percent) as a pair of fractions."""
    lo_s, sep, hi_s = text.partition("-")
    try:
        lo, hi = float(lo_s), float(hi_s)
    except ValueError:
        raise CurriculumError(f"--window must be LO-HI (e.g. 0.2-0.8 or 20-80), got {text!r}") from None
    if not sep:
        raise CurriculumError(f"--window must be LO-HI (e.g. 0.2-0.8 or 20-80), got {text!r}")
    if hi > 1.0:
        lo, hi = lo / 100, hi / 100
    return lo, hi


# ------------------------------------------------------------------------------------ task features
def task_family(task: Task) -> str:
    """The family that made ``task`` (``direct`` for task files older than families)."""
    return task.family


def task_tier(task: Task) -> str:
    """The task's difficulty tier (its generation level for task files older than tiers)."""
    return task.difficulty.tier or task.difficulty.level


def goal_tools(task: Task) -> list[str]:
    """The tools of the task's goal calls (every chain tool when none is marked a goal)."""
    goals = sorted({c.tool for c in task.gold_chain if c.purpose == "goal"})
    return goals or sorted({c.tool for c in task.gold_chain})


def sub_goal_count(task: Task, spec: DomainSpec | None) -> int:
    """What the agent must get right: write goal calls plus answer facts (the task's difficulty here)."""
    writes = sum(1 for c in task.gold_chain if c.purpose == "goal"
                 and (spec is None or ((t := spec.tool(c.tool)) is not None and t.kind == "write")))
    return max(1, writes + len(task.answer_facts))


@dataclass
class Candidate:
    task: Task
    source: Path
    goals: int
    n: int = 0
    passes: int = 0
    estimate: float = 0.0

    @property
    def id(self) -> str:
        return self.task.id


def load_pool(roots: Iterable[Path]) -> list[Candidate]:
    """Every task of the pool universes (first universe wins an id)."""
    out: dict[str, Candidate] = {}
    for root in roots:
        try:
            u = Universe(root)
            for d in u.domains:
                spec = u.spec(d)
                for t in u.tasks(d):
                    out.setdefault(t.id, Candidate(t, Path(root), sub_goal_count(t, spec)))
        except InputError as e:
            raise CurriculumError(str(e)) from None
    return list(out.values())


# ------------------------------------------------------------------------------------ results
def read_results(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The episodes of rollout results files (environment failures left out: they say nothing of the agent)."""
    from scaleenv.run.rollout import ENV_ERROR

    sims: list[dict[str, Any]] = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CurriculumError(f"cannot read rollout results {p}: {e}") from None
        if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
            raise CurriculumError(f"{p}: not a rollout results file (no 'simulations'); write one with `scaleenv rollout`")
        for s in data["simulations"]:
            if not isinstance(s, dict) or "task_id" not in s:
                raise CurriculumError(f"{p}: a simulation without a task_id")
            if str(s.get("error") or "").startswith(ENV_ERROR):
                continue
            sims.append(s)
    return sims


def _rate(n: int, passes: int) -> dict[str, Any]:
    return {"episodes": n, "passes": passes, "pass_rate": round(passes / n, 4) if n else None}


def pass_rates(candidates: list[Candidate], sims: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Pass rates per task, family, tool, domain, tier and sub-goal count (over the episodes of
    tasks in the pool); also sets each candidate's ``n`` and ``passes``."""
    by_id = {c.id: c for c in candidates}
    groups: dict[str, dict[str, list[int]]] = {g: defaultdict(lambda: [0, 0]) for g in
                                               ("task", "family", "tool", "domain", "tier", "sub_goals")}
    for s in sims:
        c = by_id.get(str(s["task_id"]))
        if c is None:
            continue
        ok = int(bool((s.get("reward_info") or {}).get("success")))
        c.n += 1
        c.passes += ok
        keys = {"task": [c.id], "family": [task_family(c.task)], "tool": goal_tools(c.task),
                "domain": [c.task.domain], "tier": [task_tier(c.task)], "sub_goals": [str(c.goals)]}
        for g, ks in keys.items():
            for k in ks:
                groups[g][k][0] += 1
                groups[g][k][1] += ok
    return {g: {k: _rate(*v) for k, v in sorted(rows.items())} for g, rows in groups.items()}


def step_rate(rates: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> float | None:
    """The per-sub-goal success rate ``q`` that best explains the pass rates by sub-goal count as
    ``q ** count`` (maximum likelihood on a grid); ``None`` without episodes."""
    groups = [(int(k), int(v["episodes"]), int(v["passes"])) for k, v in rates["sub_goals"].items() if v["episodes"]]
    if not groups:
        return None
    best, best_ll = 0.5, -math.inf
    for i in range(1, 1000):
        q = i / 1000
        ll = sum(p * k * math.log(q) + (n - p) * math.log(max(1e-12, 1 - q ** k)) for k, n, p in groups)
        if ll > best_ll:
            best, best_ll = q, ll
    return best


def estimate(candidates: list[Candidate], rates: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> float:
    """Set each candidate's estimated pass probability; return the overall observed rate.

    A task's prior is its sub-goal count's rate, shrunk toward ``q ** count`` (:func:`step_rate`),
    so counts with few episodes, and counts nobody ran (new, harder or easier tasks), are
    estimated from every episode; its own passes are then shrunk toward that prior."""
    n = sum(c.n for c in candidates)
    overall = sum(c.passes for c in candidates) / n if n else 0.5
    q = step_rate(rates)
    for c in candidates:
        model = q ** c.goals if q is not None else overall
        g = rates["sub_goals"].get(str(c.goals)) or {"episodes": 0, "passes": 0}
        prior = (g["passes"] + GROUP_SHRINK * model) / (g["episodes"] + GROUP_SHRINK)
        c.estimate = (c.passes + SHRINK * prior) / (c.n + SHRINK)
    return overall


# ------------------------------------------------------------------------------------ selection
def select(candidates: list[Candidate], size: int, window: tuple[float, float], seed: int) -> list[Candidate]:
    """``size`` tasks, those whose estimate is nearest the window's middle first (ties in a seeded
    order): tasks inside the window before any outside it, and, when none is inside, the nearest
    ones (the hardest for an agent that passes everything, the easiest for one that fails)."""
    lo, hi = window
    mid = (lo + hi) / 2
    rng = random.Random(f"curriculum:{seed}")
    order = {c.id: rng.random() for c in sorted(candidates, key=lambda c: c.id)}
    ranked = sorted(candidates, key=lambda c: (abs(c.estimate - mid), order[c.id]))
    return ranked[:size]


def failing(rates: Mapping[str, Mapping[str, Mapping[str, Any]]], lo: float) -> dict[str, list[str]]:
    """The tools and families whose pass rate is below the window (two episodes or more)."""
    return {g: [k for k, v in rates[g].items() if v["episodes"] >= 2 and v["pass_rate"] < lo]
            for g in ("tool", "family", "domain")}


def chain_lengths(rate: float | None, window: tuple[float, float]) -> tuple[int, int]:
    """Chains of synthesized tasks: shorter when the agent's pass rate is under the window, longer over it."""
    if rate is None:
        return DEFAULT_CHAINS
    if rate < window[0]:
        return EASIER
    if rate > window[1]:
        return HARDER
    return DEFAULT_CHAINS


# ------------------------------------------------------------------------------------ synthesis
def task_seed(seed: int, out: Path) -> int:
    """A new task seed for a curriculum step (from the run seed and the output's name)."""
    digest = hashlib.sha256(f"{seed}:{out.name}".encode()).hexdigest()
    return 1_000 + int(digest[:6], 16) % 1_000_000


def synthesize(cfg: CurriculumConfig, domains: list[str], tools: set[str], n: int, chains: tuple[int, int],
               new_seed: int) -> Path | None:
    """Build ``n`` new tasks (twice as many tried, those with a failing tool kept first) in ``domains``
    of the first pool universe, with task seed ``new_seed``; return the universe they are in."""
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    if n <= 0 or not domains:
        return None
    base = Universe(cfg.pool[0])
    build = base.manifest.get("build") or {}
    out = cfg.out / "new"
    per_domain = max(1, math.ceil(2 * n / len(domains)))
    bcfg = BuildConfig(out=out, domains=domains, tasks_per_domain=per_domain, seed=int(build.get("seed", 0)),
                       scale=float(build.get("scale", 1.0)), executor=cfg.executor, workers=cfg.workers,
                       chain_length=chains, llm=cfg.llm, task_seed=new_seed)
    if out.exists():
        shutil.rmtree(out)
    prepare_out(bcfg)
    run_build(bcfg)
    new = Universe(out)
    built = [t for d in new.domains for t in new.tasks(d)]
    built.sort(key=lambda t: (not (set(goal_tools(t)) & tools), t.id))
    keep = {t.id for t in built[:n]}
    for d in new.domains:
        tasks = [t.model_copy(update={"id": f"{d}/s{new_seed}-{t.id.partition('/')[2]}"})
                 for t in new.tasks(d) if t.id in keep]
        _write_tasks(out, d, tasks)
    _write_manifest(out, new.manifest, new.domains, sum(len(new.tasks(d)) for d in new.domains))
    return out


# ------------------------------------------------------------------------------------ writing
def _write_tasks(root: Path, domain: str, tasks: list[Task]) -> None:
    from scaleenv.utils.fs import atomic_write_text

    atomic_write_text(root / "tasks" / f"{domain}.jsonl", "".join(t.to_jsonl() + "\n" for t in tasks))
    write_json(root / "domains" / domain / "tasks_report.json",
               {"attempts": len(tasks), "accepted": len(tasks), "rejections": {}})


def _write_manifest(root: Path, source: Mapping[str, Any], domains: list[str], n_tasks: int,
                    extra: Mapping[str, Any] | None = None) -> None:
    tools = sum(len(json.loads((root / "domains" / d / "spec.json").read_text(encoding="utf-8"))["tools"])
                for d in domains)
    write_json(root / "universe.json", {
        **{k: v for k, v in source.items() if k not in ("domains", "counts", "status")},
        "format": FORMAT, "status": "complete", "domains": domains,
        "counts": {"domains": len(domains), "tools": tools, "tasks": n_tasks}, **(extra or {})})


def write_training_set(out: Path, chosen: list[Candidate], extra: Mapping[str, Any]) -> None:
    """The chosen tasks as a universe directory: each domain's files copied from the universe its
    tasks come from, the tasks in id order."""
    by_domain: dict[str, list[Candidate]] = defaultdict(list)
    for c in chosen:
        by_domain[c.task.domain].append(c)
    domains = sorted(by_domain)
    source_manifest: dict[str, Any] = {}
    for d in domains:
        src = by_domain[d][0].source
        if not source_manifest:
            source_manifest = Universe(src).manifest
        dst = out / "domains" / d
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(Path(src) / "domains" / d, dst)
        _write_tasks(out, d, sorted((c.task for c in by_domain[d]), key=lambda t: t.id))
    _write_manifest(out, source_manifest, domains, len(chosen), extra)


def prepare_dir(out: Path, force: bool) -> None:
    if out.exists() and any(out.iterdir()):
        if not force:
            raise CurriculumError(f"{out} exists and is not empty; pass --force to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def run_curriculum(cfg: CurriculumConfig) -> dict[str, Any]:
    """One curriculum step (see the module docstring); returns ``curriculum.json``'s content."""
    sims = read_results(cfg.results)
    pool = load_pool(cfg.pool)
    rates = pass_rates(pool, sims)
    ran = {str(s["task_id"]) for s in sims}
    size = cfg.size or max(1, len(ran & {c.id for c in pool}))
    overall = estimate(pool, rates)
    observed = (sum(c.passes for c in pool) / n) if (n := sum(c.n for c in pool)) else None
    prepare_dir(cfg.out, cfg.force)
    weak = failing(rates, cfg.window[0])
    new_seed = task_seed(cfg.seed, cfg.out)
    chains = chain_lengths(observed, cfg.window)
    new_root: Path | None = None
    if cfg.new_tasks:
        by_rate = sorted(rates["domain"].items(), key=lambda kv: (kv[1]["pass_rate"] or 0.0, kv[0]))
        domains = sorted(set(weak["domain"]) | {d for c in pool if set(goal_tools(c.task)) & set(weak["tool"])
                                                  for d in [c.task.domain]})
        domains = domains or [d for d, _ in by_rate[:2]] or sorted({c.task.domain for c in pool})[:2]
        new_root = synthesize(cfg, domains, set(weak["tool"]), cfg.new_tasks, chains, new_seed)
    fresh = load_pool([new_root]) if new_root is not None else []
    if fresh:
        estimate([*pool, *fresh], rates)
    chosen = select([*pool, *fresh], size, cfg.window, cfg.seed)
    fresh_ids = {c.id for c in fresh}
    lo, hi = cfg.window
    expected = sum(c.estimate for c in chosen) / len(chosen) if chosen else None
    summary = {
        "format": CURRICULUM_FORMAT, "window": [lo, hi], "seed": cfg.seed, "size": len(chosen),
        "pool": [str(p) for p in cfg.pool], "results": [str(p) for p in cfg.results],
        "episodes": len(sims), "observed_pass_rate": observed, "overall_estimate": overall,
        "expected_pass_rate": expected,
        "difficulty": sum(c.goals for c in chosen) / len(chosen) if chosen else None,
        "new": {"universe": str(new_root) if new_root else None, "task_seed": new_seed if new_root else None,
                "chain_length": list(chains) if new_root else None, "tasks": sorted(fresh_ids),
                "selected": sum(c.id in fresh_ids for c in chosen)},
        "failing": weak,
        "pass_rates": rates,
        "tasks": [{"id": c.id, "source": str(c.source), "estimate": round(c.estimate, 4), "episodes": c.n,
                   "passes": c.passes, "sub_goals": c.goals, "tier": task_tier(c.task), "family": task_family(c.task),
                   "new": c.id in fresh_ids} for c in chosen],
    }
    write_training_set(cfg.out, chosen, {"curriculum": {"format": CURRICULUM_FORMAT, "seed": cfg.seed}})
    write_json(cfg.out / "curriculum.json", summary)
    return summary


def pool_roots(curriculum_dir: Path) -> list[Path]:
    """The universes a curriculum step drew from, plus the one it synthesized (the next step's pool)."""
    data = json.loads((curriculum_dir / "curriculum.json").read_text(encoding="utf-8"))
    roots = [Path(p) for p in data.get("pool") or []]
    new = (data.get("new") or {}).get("universe")
    return roots + ([Path(new)] if new else [])


def curriculum_task_ids(path: str | Path) -> list[str]:
    """The task ids of a curriculum's training set (its directory or its ``curriculum.json``)."""
    p = Path(path)
    p = p / "curriculum.json" if p.is_dir() else p
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CurriculumError(f"cannot read curriculum {p}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != CURRICULUM_FORMAT:
        raise CurriculumError(f"{p}: not a curriculum.json (format {CURRICULUM_FORMAT})")
    return [str(t["id"]) for t in data.get("tasks", [])]

"""``scaleenv curriculum loop``: rollout, curriculum and build for N rounds; pass rates per round.

Round 0's training set is a seeded sample of the universe's tasks. Each round rolls the agent out
on its training set (:func:`scaleenv.run.rollout.run_rollout`), and, before the last, writes the
next set with :func:`scaleenv.run.curriculum.run_curriculum` from every round's results so far
(new tasks it synthesizes join the pool of later rounds). ``loop.json`` holds one row per round:
tasks, episodes, pass rate, mean reward, difficulty (mean sub-goals), whether the pass rate is in
the window, and how many of the round's tasks were synthesized.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaleenv.run.curriculum import (
    CURRICULUM_FORMAT,
    CurriculumConfig,
    CurriculumError,
    estimate,
    load_pool,
    pass_rates,
    pool_roots,
    prepare_dir,
    run_curriculum,
    write_training_set,
)
from scaleenv.universe import write_json

LOOP_FORMAT = "scaleenv-curriculum-loop/1"


@dataclass
class LoopConfig:
    universe: Path
    agent: str
    out: Path
    rounds: int = 3
    window: tuple[float, float] = (0.2, 0.8)
    size: int = 48
    new_tasks: int = 24
    trials: int = 1
    seed: int = 0
    mode: str = "conversational"
    user: str = "scripted"
    reward_shape: str = "binary"
    executor: str = "serial"
    workers: int = 2
    llm: dict[str, Any] | None = None
    force: bool = False
    rollout_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise CurriculumError(f"--rounds must be at least 1, got {self.rounds}")
        if self.size < 1:
            raise CurriculumError(f"--size must be at least 1, got {self.size}")


def _first_set(cfg: LoopConfig, out: Path) -> None:
    pool = load_pool([cfg.universe])
    if not pool:
        raise CurriculumError(f"{cfg.universe} has no tasks")
    rng = random.Random(f"curriculum-loop:{cfg.seed}")
    chosen = sorted(rng.sample(pool, min(cfg.size, len(pool))), key=lambda c: c.id)
    estimate(chosen, pass_rates(chosen, []))
    write_training_set(out, chosen, {"curriculum": {"format": CURRICULUM_FORMAT, "seed": cfg.seed, "round": 0}})
    write_json(out / "curriculum.json", {
        "format": CURRICULUM_FORMAT, "window": list(cfg.window), "seed": cfg.seed, "size": len(chosen),
        "pool": [str(cfg.universe)], "results": [], "new": {"universe": None, "tasks": [], "selected": 0},
        "difficulty": sum(c.goals for c in chosen) / len(chosen),
        "tasks": [{"id": c.id, "source": str(c.source), "sub_goals": c.goals, "new": False} for c in chosen]})


def _round_row(r: int, train: Path, results: dict[str, Any]) -> dict[str, Any]:
    cur = json.loads((train / "curriculum.json").read_text(encoding="utf-8"))
    sims = [s for s in results["simulations"] if s.get("termination_reason") != "error"
            or not str(s.get("error") or "").startswith("environment: ")]
    passes = sum(bool(s["reward_info"]["success"]) for s in sims)
    return {"round": r, "tasks": cur["size"], "episodes": len(sims),
            "pass_rate": passes / len(sims) if sims else None, "avg_reward": results.get("avg_reward"),
            "difficulty": cur.get("difficulty"), "expected_pass_rate": cur.get("expected_pass_rate"),
            "new_tasks": (cur.get("new") or {}).get("selected", 0)}


def run_loop(cfg: LoopConfig, on_round: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the loop (see the module docstring); write and return ``loop.json``'s content."""
    from scaleenv.run.rollout import RolloutConfig, run_rollout, validate_config

    def rollout_config(train: Path, r: int, out: Path) -> RolloutConfig:
        return RolloutConfig(universe=train, agent=cfg.agent, user=cfg.user, mode=cfg.mode, trials=cfg.trials,
                             seed=cfg.seed + r, executor=cfg.executor, workers=cfg.workers, out=out, force=True,
                             reward_shape=cfg.reward_shape, **cfg.rollout_options)

    validate_config(rollout_config(cfg.universe, 0, cfg.out / "round0" / "results.json"))  # bad flags fail first
    prepare_dir(cfg.out, cfg.force)
    lo, hi = cfg.window
    rows: list[dict[str, Any]] = []
    results_files: list[Path] = []
    pool = [cfg.universe]
    train = cfg.out / "round0"
    _first_set(cfg, train)
    for r in range(cfg.rounds + 1):
        res_path = cfg.out / f"round{r}" / "results.json"
        results = run_rollout(rollout_config(train, r, res_path))
        results_files.append(res_path)
        row = _round_row(r, train, results)
        row["in_window"] = row["pass_rate"] is not None and lo <= row["pass_rate"] <= hi
        rows.append(row)
        if on_round is not None:
            on_round(row)
        if r == cfg.rounds:
            break
        nxt = cfg.out / f"round{r + 1}"
        run_curriculum(CurriculumConfig(pool=pool, results=list(results_files), out=nxt, window=cfg.window,
                                        size=cfg.size, new_tasks=cfg.new_tasks, seed=cfg.seed + r + 1,
                                        executor=cfg.executor, workers=cfg.workers, llm=cfg.llm))
        pool = pool_roots(nxt)
        train = nxt
    summary = {"format": LOOP_FORMAT, "agent": cfg.agent, "universe": str(cfg.universe), "window": [lo, hi],
               "rounds": rows, "size": cfg.size, "new_tasks": cfg.new_tasks, "trials": cfg.trials,
               "seed": cfg.seed, "reward_shape": cfg.reward_shape,
               "first_in_window": next((row["round"] for row in rows if row["in_window"]), None)}
    write_json(cfg.out / "loop.json", summary)
    return summary

"""Counts of a universe (``inspect``) and its integrity gates re-run (``check``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from scaleenv.universe import Universe


def universe_counts(path: str | Path) -> dict[str, Any]:
    """``{"domains","tables","tools","edges","tasks","families","tiers","per_domain":[...]}`` (tasks per
    family and per difficulty tier); each per-domain entry also has its own family and tier counts and
    lists its ``task_ids`` (for ``serve --task``, ``rollout --task``)."""
    u = Universe(path)
    per = []
    for d in u.domains:
        ddir = u.domain_dir(d)
        if not (ddir / "spec.json").exists():
            continue
        spec = u.spec(d)
        graph = u.graph(d)
        stats = graph.get("stats", {})
        tasks = u.tasks(d)
        task_ids = [t.id for t in tasks]
        n_tasks = len(task_ids)
        per.append({
            "domain": d,
            "tables": len(spec.tables),
            "tools": len(spec.tools),
            "edges": stats.get("edges", len(graph.get("edges", []))),
            "edges_by_kind": stats.get("edges_by_kind", {}),
            "tasks": n_tasks,
            "families": dict(sorted(Counter(t.family for t in tasks).items())),
            "tiers": dict(sorted(Counter(t.difficulty.tier or "untiered" for t in tasks).items())),
            "task_ids": task_ids,
        })
        if (ddir / "tokens.json").exists():  # LLM back end: token accounting per role, phase and task
            from scaleenv.universe import read_json

            tok = read_json(ddir / "tokens.json")
            per[-1]["tokens"] = {k: tok.get(k) for k in ("total", "phase1", "phase2", "per_task", "by_role", "model")}
    out = {
        "domains": len(per),
        "tables": sum(p["tables"] for p in per),
        "tools": sum(p["tools"] for p in per),
        "edges": sum(p["edges"] for p in per),
        "tasks": sum(p["tasks"] for p in per),
        "families": dict(sorted(sum((Counter(p["families"]) for p in per), Counter()).items())),
        "tiers": dict(sorted(sum((Counter(p["tiers"]) for p in per), Counter()).items())),
        "per_domain": per,
    }
    if any("tokens" in p for p in per):
        out["tokens"] = {"total_tokens": sum((p.get("tokens") or {}).get("total", {}).get("total_tokens", 0) for p in per)}
    return out


def check_universe(path: str | Path, seed: int | None = None, reward_shape: str = "binary") -> dict[str, Any]:
    """Re-run every gate on every task: gold 1.0, solo (``gold_pass``) and talking to the scripted user
    (``gold_conversational_pass``), and 0 for no-op, random, the write-everything hack, read-dump, spray,
    parrot and the distractor swap (counts ``<gate>_zero`` of tasks where it holds: at most 0 under a
    ``partial`` or ``dense`` reward shape)."""
    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.env.styles import GATE_STYLES
    from scaleenv.errors import UniverseError
    from scaleenv.synth.tasks.gates import ZERO_GATES, run_gates

    u = Universe(path)
    seed = u.manifest.get("build", {}).get("seed", 0) if seed is None else seed
    loader = TaskWorldCache(u)
    counts = {"tasks": 0, "gold_pass": 0, "gold_conversational_pass": 0, "gold_styled_pass": 0,
              **{f"{g}_zero": 0 for g in ZERO_GATES}}
    style_failures: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    for d in u.domains:
        for task in u.tasks(d):
            counts["tasks"] += 1
            try:
                ep = loader.episode(task)
            except UniverseError as e:
                failures.append({"task": task.id, "failed": ["load"], "reason": str(e)})
                continue
            g = run_gates(ep, task, seed, detail=True, reward_shape=reward_shape, styles=GATE_STYLES)
            counts["gold_pass"] += "gold_not_1" not in g.failures()
            counts["gold_conversational_pass"] += "gold_conversational_not_1" not in g.failures()
            counts["gold_styled_pass"] += "gold_styled_not_1" not in g.failures()
            style_failures.update(g.details.get("styles_failed", []))
            for gate in ZERO_GATES:
                counts[f"{gate}_zero"] += g.scores[gate] <= 0.0
            if not g.passed:
                failures.append({"task": task.id, "failed": g.failures(), "scores": g.to_json(),
                                 **({"styles_failed": g.details["styles_failed"]} if g.details.get("styles_failed") else {})})
            ep.close()
    return {**counts, "styles_failed": dict(sorted(style_failures.items())), "failures": failures}

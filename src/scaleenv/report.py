"""Read-only reports over a universe: counts (``inspect``) and integrity gates (``check``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaleenv.universe import Universe


def universe_counts(path: str | Path) -> dict[str, Any]:
    """``{"domains","tables","tools","edges","tasks","per_domain":[...]}``; each per-domain entry also
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
        task_ids = [t.id for t in u.tasks(d)]
        n_tasks = len(task_ids)
        per.append({
            "domain": d,
            "tables": len(spec.tables),
            "tools": len(spec.tools),
            "edges": stats.get("edges", len(graph.get("edges", []))),
            "edges_by_kind": stats.get("edges_by_kind", {}),
            "tasks": n_tasks,
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
        "per_domain": per,
    }
    if any("tokens" in p for p in per):
        out["tokens"] = {"total_tokens": sum((p.get("tokens") or {}).get("total", {}).get("total_tokens", 0) for p in per)}
    return out


def check_universe(path: str | Path, seed: int | None = None) -> dict[str, Any]:
    """Re-run every gate on every task: gold 1.0, and 0 for no-op, random, the write-everything hack,
    read-dump, spray, parrot and the distractor swap (counts ``<gate>_zero`` of tasks where it holds)."""
    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.errors import UniverseError
    from scaleenv.synth.tasks.gates import ZERO_GATES, run_gates

    u = Universe(path)
    seed = u.manifest.get("build", {}).get("seed", 0) if seed is None else seed
    loader = TaskWorldCache(u)
    counts = {"tasks": 0, "gold_pass": 0, **{f"{g}_zero": 0 for g in ZERO_GATES}}
    failures: list[dict[str, Any]] = []
    for d in u.domains:
        for task in u.tasks(d):
            counts["tasks"] += 1
            try:
                ep = loader.episode(task)
            except UniverseError as e:
                failures.append({"task": task.id, "failed": ["load"], "reason": str(e)})
                continue
            g = run_gates(ep, task, seed, detail=True)
            counts["gold_pass"] += g.scores["gold"] == 1.0
            for gate in ZERO_GATES:
                counts[f"{gate}_zero"] += g.scores[gate] == 0.0
            if not g.passed:
                failures.append({"task": task.id, "failed": g.failures(), "scores": g.to_json()})
            ep.close()
    return {**counts, "failures": failures}


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    from html import escape

    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def universe_report(path: str | Path, results: str | Path | None = None) -> str:
    """A self-contained HTML page describing a universe: per-domain counts, procedural test results,
    graph statistics, task difficulty, rejection reasons, one example task per domain and, when a
    ``results.json`` from ``scaleenv rollout`` is given, its metrics."""
    import json
    from collections import Counter
    from html import escape

    from scaleenv.formats.task import chain_to_python
    from scaleenv.universe import read_json

    u = Universe(path)
    counts = universe_counts(path)
    parts = [f"<h1>scaleenv universe: {escape(str(u.root))}</h1>",
             f"<p>{counts['domains']} domains, {counts['tables']} tables, {counts['tools']} tools, "
             f"{counts['edges']} graph edges, {counts['tasks']} verified tasks "
             f"(backend: {escape(str(u.manifest.get('backend', '?')))}, seed {u.manifest.get('build', {}).get('seed')})</p>"]
    rows = []
    for d in counts["per_domain"]:
        name = d["domain"]
        tests = u.tests(name)
        rep_path = u.domain_dir(name) / "tasks_report.json"
        rep = read_json(rep_path) if rep_path.exists() else {}
        top = Counter(rep.get("rejections", {})).most_common(1)
        rows.append([name, d["tables"], f"{d['tools']}/{tests.get('tools', d['tools'])}",
                     tests["counts"].get("success", 0), tests["counts"].get("anticipated_rejection", 0),
                     tests["counts"].get("unexpected_failure", 0), d["edges"], d["tasks"], rep.get("attempts", "-"),
                     f"{top[0][0]} ({top[0][1]})" if top else "-"])
    parts.append("<h2>Domains</h2>" + _table(
        ["domain", "tables", "tools admitted/derived", "tests: success", "anticipated rejections",
         "unexpected failures", "edges", "tasks", "attempts", "top rejection"], rows))
    levels: Counter = Counter()
    lengths: Counter = Counter()
    for t in u.tasks():
        levels[t.difficulty.level] += 1
        lengths[t.difficulty.chain_length] += 1
    parts.append("<h2>Task difficulty</h2>" + _table(["level", "tasks"], sorted(levels.items()))
                 + _table(["chain length", "tasks"], sorted(lengths.items())))
    if results is not None:
        res = json.loads(Path(results).read_text(encoding="utf-8"))
        metric_rows = [[k, res.get("avg_at_k", {}).get(k), res.get("pass_at_k", {}).get(k),
                        res.get("pass_hat_k", {}).get(k)] for k in sorted(res.get("avg_at_k", {}))]
        parts.append("<h2>Rollout results</h2>" + _table(["k", "Avg@k", "Pass@k", "Pass^k"], metric_rows))
    parts.append("<h2>Example tasks</h2>")
    for d in counts["per_domain"]:
        tasks = u.tasks(d["domain"])
        if not tasks:
            continue
        t = tasks[0]
        parts.append(f"<h3>{escape(t.id)}</h3><p>{escape(t.instruction)}</p>"
                     f"<pre>{escape(chain_to_python(t.gold_chain))}</pre>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}"
             "pre{background:#f7f7f7;padding:8px;overflow-x:auto}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>scaleenv report</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")

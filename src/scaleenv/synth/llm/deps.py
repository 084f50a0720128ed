"""Phase 1, dependency graph: the computed graph plus the dependency agent's judged edges.

The graph computed from the contracts (``scaleenv.synth.graph.build_graph``) is exact but can only see
what the SQL says. The dependency agent judges the remaining candidate pairs (tools that share a
table, with no computed edge yet, where the first one writes) in batches, so the number of calls
grows with pairs / batch size rather than with pairs. Every edge keeps its ``source``: ``computed``
or ``llm``.
"""

from __future__ import annotations

from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.base import LLMOutputError
from scaleenv.synth.graph.build import EDGE_KINDS, ToolGraph, build_graph
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import tool_sig


def candidate_pairs(spec: DomainSpec, graph: ToolGraph, tool_tables: dict[str, list[str]],
                    limit: int) -> list[tuple[str, str]]:
    have = {(a, b) for a, b, _ in graph.edges()}
    tables = {t.name: set(tool_tables.get(t.name) or t.meta.get("tables") or []) for t in spec.tools}
    out = []
    for a in spec.tools:
        if a.kind != "write":
            continue
        for b in spec.tools:
            if a.name == b.name or (a.name, b.name) in have:
                continue
            if tables[a.name] & tables[b.name]:
                out.append((a.name, b.name))
    return out[:limit]


def judge_dependencies(ask: Any, title: str, spec: DomainSpec, graph: ToolGraph, tool_tables: dict[str, list[str]],
                       cfg: SynthConfig) -> dict[str, Any]:
    """Add the agent's edges to ``graph`` (source ``llm``); return statistics of the judgement."""
    pairs = candidate_pairs(spec, graph, tool_tables, cfg.max_dependency_pairs)
    batch = max(1, cfg.dependency_batch)
    added = 0
    calls = 0
    failed = 0
    for start in range(0, len(pairs), batch):
        chunk = pairs[start:start + batch]
        names = sorted({n for p in chunk for n in p})
        tools_text = "\n".join(tool_sig(spec.tool(n), True, tool_tables.get(n)) for n in names)  # type: ignore[arg-type]
        pairs_text = "\n".join(f"{i}. {a} -> {b}" for i, (a, b) in enumerate(chunk, 1))

        def check(obj: Any, n: int = len(chunk)) -> list[str]:
            edges = obj.get("edges") if isinstance(obj, dict) else None
            if not isinstance(edges, list):
                return ["the reply must be an object with a list 'edges'"]
            bad = [e for e in edges if not (isinstance(e, dict) and isinstance(e.get("pair"), int)
                                            and 1 <= e["pair"] <= n and e.get("kind") in EDGE_KINDS)]
            return [f"invalid edge entries (need pair 1..{n} and kind in {list(EDGE_KINDS)}): {bad[:3]}"] if bad else []

        calls += 1
        try:
            obj = ask.json("dependency", render("dependency", title=title, tools=tools_text, pairs=pairs_text),
                           validate=check)
        except LLMOutputError:
            failed += 1
            continue
        seen: set[tuple[int, str]] = set()
        for e in sorted(obj["edges"], key=lambda e: (e["pair"], e["kind"])):
            if (e["pair"], e["kind"]) in seen:
                continue
            seen.add((e["pair"], e["kind"]))
            a, b = chunk[e["pair"] - 1]
            graph.add_edge(a, b, e["kind"], source="llm")
            added += 1
    return {"candidate_pairs": len(pairs), "calls": calls, "failed_calls": failed, "edges_added": added}


def dependency_graph(ask: Any, title: str, spec: DomainSpec, tool_tables: dict[str, list[str]],
                     cfg: SynthConfig) -> tuple[ToolGraph, dict[str, Any]]:
    graph = build_graph(spec)
    stats = judge_dependencies(ask, title, spec, graph, tool_tables, cfg)
    return graph, stats

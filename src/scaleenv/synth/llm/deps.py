"""Phase 1, dependency graph: the computed graph plus the dependency agent's judged edges.

The graph computed from the contracts (``scaleenv.synth.graph.build_graph``) is exact but can only see
what the SQL says. The dependency agent judges the remaining candidate pairs (tools that share a
table, with no computed edge yet, where the first one writes) in batches, so the number of calls
grows with pairs / batch size rather than with pairs. Every edge keeps its ``source``: ``computed``
or ``llm``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.base import LLMOutputError
from scaleenv.llm.session import Scoped
from scaleenv.synth.graph.build import EDGE_KINDS, ToolGraph, build_graph, tool_io
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import tool_sig
from scaleenv.world.world import World


def table_access(spec: DomainSpec, tool_tables: dict[str, list[str]]) -> dict[str, tuple[list[str], list[str]]]:
    """(tables read, tables written) of every tool, from its SQL; the database agent's tool -> tables
    map stands in where the SQL says nothing (Python tools)."""
    conn = World(spec).conn
    out: dict[str, tuple[list[str], list[str]]] = {}
    for t in spec.tools:
        io = tool_io(spec, t, conn)
        writes = {x for x, _ in io.writes} | io.inserts
        touched = set(io.touches) | writes
        if t.implementation.kind == "python" or not touched:  # the SQL does not tell the whole story
            declared = set(tool_tables.get(t.name) or t.meta.get("tables") or [])
            touched |= declared
            if t.kind == "write":
                writes |= declared
        out[t.name] = (sorted(touched - writes), sorted(writes))
    return out


def candidate_pairs(spec: DomainSpec, graph: ToolGraph, tool_tables: dict[str, list[str]],
                    limit: int, access: dict[str, tuple[list[str], list[str]]] | None = None) -> list[tuple[str, str]]:
    """Pairs (A, B) with no computed edge where A writes a table B reads or writes."""
    have = {(a, b) for a, b, _ in graph.edges()}
    access = access if access is not None else table_access(spec, tool_tables)
    out = []
    for a in spec.tools:
        writes = set(access[a.name][1])
        if a.kind != "write" or not writes:
            continue
        for b in spec.tools:
            if a.name == b.name or (a.name, b.name) in have:
                continue
            if writes & (set(access[b.name][0]) | set(access[b.name][1])):
                out.append((a.name, b.name))
    return out[:limit]


def judge_dependencies(ask: Scoped, title: str, spec: DomainSpec, graph: ToolGraph, tool_tables: dict[str, list[str]],
                       cfg: SynthConfig) -> dict[str, Any]:
    """Add the agent's edges to ``graph`` (source ``llm``); return statistics of the judgement."""
    access = table_access(spec, tool_tables)
    pairs = candidate_pairs(spec, graph, tool_tables, cfg.max_dependency_pairs, access)
    batch = max(1, cfg.dependency_batch)
    chunks = [pairs[i:i + batch] for i in range(0, len(pairs), batch)]
    by_name = {t.name: t for t in spec.tools}  # every candidate pair names two of them

    def judge(chunk: list[tuple[str, str]]) -> list[dict[str, Any]] | None:
        names = sorted({n for p in chunk for n in p})
        tools_text = "\n".join(tool_sig(by_name[n], access=access[n]) for n in names)
        pairs_text = "\n".join(f"{i}. {a} -> {b}" for i, (a, b) in enumerate(chunk, 1))

        def check(obj: object, n: int = len(chunk)) -> list[str]:
            edges = obj.get("edges") if isinstance(obj, dict) else None
            if not isinstance(edges, list):
                return ["the reply must be an object with a list 'edges'"]
            bad = [e for e in edges if not (isinstance(e, dict) and isinstance(e.get("pair"), int)
                                            and 1 <= e["pair"] <= n and e.get("kind") in EDGE_KINDS)]
            return [f"invalid edge entries (need pair 1..{n} and kind in {list(EDGE_KINDS)}): {bad[:3]}"] if bad else []

        try:
            obj = ask.json("dependency", render("dependency", title=title, tools=tools_text, pairs=pairs_text),
                           validate=check)
        except LLMOutputError:
            return None
        return list(obj["edges"])

    workers = max(1, int(getattr(ask.config, "concurrency", 1)))
    with ThreadPoolExecutor(max_workers=min(workers, max(1, len(chunks))), thread_name_prefix="dep") as pool:
        answers = list(pool.map(judge, chunks))  # in chunk order: the graph is the same at any concurrency
    added = 0
    calls = len(chunks)
    failed = sum(a is None for a in answers)
    for chunk, edges in zip(chunks, answers, strict=True):
        seen: set[tuple[int, str]] = set()
        for e in sorted(edges or [], key=lambda e: (e["pair"], e["kind"])):
            if (e["pair"], e["kind"]) in seen:
                continue
            seen.add((e["pair"], e["kind"]))
            a, b = chunk[e["pair"] - 1]
            graph.add_edge(a, b, e["kind"], source="llm")
            added += 1
    return {"candidate_pairs": len(pairs), "calls": calls, "failed_calls": failed, "edges_added": added}


def dependency_graph(ask: Scoped, title: str, spec: DomainSpec, tool_tables: dict[str, list[str]],
                     cfg: SynthConfig) -> tuple[ToolGraph, dict[str, Any]]:
    graph = build_graph(spec)
    stats = judge_dependencies(ask, title, spec, graph, tool_tables, cfg)
    return graph, stats

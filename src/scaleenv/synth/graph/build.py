"""Compute the tool dependency graph of a domain from its specs.

* ``data_flow`` A -> B: an identifier A returns (a primary or foreign key column) feeds a parameter
  of B that refers to the same key.
* ``precondition`` A -> B: A's effects write a table (and column) that B's preconditions read.
* ``shared_table`` A -> B: A writes a table that B also touches, with no stronger edge between them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.sqlinfo import SqlInfo, analyze_sql

EDGE_KINDS = ("data_flow", "precondition", "shared_table")


@dataclass
class ToolIO:
    outputs: set[str] = field(default_factory=set)  # key domains returned ("table.pk")
    inputs: dict[str, str] = field(default_factory=dict)  # param -> key domain
    pre_reads: set[tuple[str, str]] = field(default_factory=set)
    writes: set[tuple[str, str]] = field(default_factory=set)
    inserts: set[str] = field(default_factory=set)
    touches: set[str] = field(default_factory=set)


def _key_domain(spec: DomainSpec, ref: str) -> str | None:
    """``table.column`` -> the key it identifies (following a foreign key), or None if not a key."""
    t, _, c = ref.partition(".")
    table = spec.table(t)
    col = table.column(c) if table else None
    if table is None or col is None:
        return None
    if col.foreign_key:
        return col.foreign_key
    if c == table.primary_key:
        return f"{t}.{c}"
    return None


def tool_io(spec: DomainSpec, tool: ToolSpec, conn: sqlite3.Connection) -> ToolIO:
    io = ToolIO()

    def info(sql: str) -> SqlInfo:
        try:
            return analyze_sql(conn, sql)
        except sqlite3.Error:
            return SqlInfo()

    for p in tool.parameters:
        kd = _key_domain(spec, p.column) if p.column else None
        if kd:
            io.inputs[p.name] = kd
    for c in tool.preconditions:
        i = info(c.sql)
        io.pre_reads |= i.reads
        io.touches |= i.tables_read
    for stmt in tool.effects:
        i = info(stmt)
        io.writes |= i.writes
        io.inserts |= i.inserts | i.deletes
        io.touches |= i.tables_written | i.tables_read
    if tool.returns.query:
        i = info(tool.returns.query)
        io.touches |= i.tables_read
        tables = {tool.returns.table} if tool.returns.table and tool.returns.mode in ("one", "many") else set()
        for t in tables:
            table = spec.table(t or "")
            if table is None:
                continue
            for col in table.columns:
                kd = _key_domain(spec, f"{t}.{col.name}")
                if kd:
                    io.outputs.add(kd)
    return io


@dataclass
class ToolGraph:
    """A directed multigraph over tool names; each edge has a ``kind`` and a ``source``."""

    graph: nx.MultiDiGraph

    @property
    def nodes(self) -> list[str]:
        return list(self.graph.nodes)

    def successors(self, tool: str) -> list[str]:
        return sorted(set(self.graph.successors(tool)))

    def predecessors(self, tool: str) -> list[str]:
        return sorted(set(self.graph.predecessors(tool)))

    def edges(self, kind: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        return [(a, b, d) for a, b, d in self.graph.edges(data=True) if kind is None or d["kind"] == kind]

    def stats(self) -> dict[str, Any]:
        g = self.graph
        n = g.number_of_nodes()
        simple = nx.DiGraph(g)
        return {
            "nodes": n,
            "edges": g.number_of_edges(),
            "edges_by_kind": {k: len(self.edges(k)) for k in EDGE_KINDS},
            "density": round(nx.density(simple), 4) if n > 1 else 0.0,
            "components": nx.number_weakly_connected_components(g) if n else 0,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": sorted(self.graph.nodes),
            "edges": sorted(
                ({"from": a, "to": b, **d} for a, b, d in self.graph.edges(data=True)),
                key=lambda e: (e["from"], e["to"], e["kind"]),
            ),
            "stats": self.stats(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolGraph:
        g = nx.MultiDiGraph()
        g.add_nodes_from(data["nodes"])
        for e in data["edges"]:
            attrs = {k: v for k, v in e.items() if k not in ("from", "to")}
            g.add_edge(e["from"], e["to"], **attrs)
        return cls(g)

    def add_edge(self, a: str, b: str, kind: str, source: str = "computed", **attrs: object) -> None:
        self.graph.add_edge(a, b, kind=kind, source=source, **attrs)


def build_graph(spec: DomainSpec, tools: list[str] | None = None) -> ToolGraph:
    """The dependency graph over ``tools`` (default: every tool of the spec)."""
    from scaleenv.world.world import World

    conn = World(spec).conn
    names = tools if tools is not None else [t.name for t in spec.tools]
    specs = [spec.tool(n) for n in names]
    ios = {t.name: tool_io(spec, t, conn) for t in specs if t is not None}
    g = nx.MultiDiGraph()
    g.add_nodes_from(ios)
    graph = ToolGraph(g)
    for a, ia in ios.items():
        for b, ib in ios.items():
            if a == b:
                continue
            flows = sorted(p for p, kd in ib.inputs.items() if kd in ia.outputs)
            if flows:
                graph.add_edge(a, b, "data_flow", params=flows)
            written_tables = {t for t, _ in ia.writes} | ia.inserts
            enabled = sorted(
                {t for t, c in ib.pre_reads if (t, c) in ia.writes or t in ia.inserts}
            )
            if enabled:
                graph.add_edge(a, b, "precondition", tables=enabled)
            if not flows and not enabled:
                shared = sorted(written_tables & ib.touches)
                if shared:
                    graph.add_edge(a, b, "shared_table", tables=shared)
    return graph

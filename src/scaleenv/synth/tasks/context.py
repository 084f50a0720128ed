"""Per-domain facts that task generation needs, computed once: tool I/O, key params, positive args."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.synth.graph.build import ToolGraph, ToolIO, tool_io
from scaleenv.world.world import World

WRITE_FAMILIES = {"operation": 4, "transition": 3, "update": 1, "create": 1, "delete": 1}


@dataclass
class DomainContext:
    spec: DomainSpec
    base: bytes
    graph: ToolGraph
    positive_args: dict[str, dict[str, Any]] = field(default_factory=dict)

    @cached_property
    def edge_counts(self) -> dict[tuple[str, str], int]:
        """Number of (multi-)edges between each ordered pair of tools."""
        out: dict[tuple[str, str], int] = {}
        for a, b in self.graph.graph.edges():
            out[(a, b)] = out.get((a, b), 0) + 1
        return out

    @cached_property
    def io(self) -> dict[str, ToolIO]:
        conn = World(self.spec).conn
        return {t.name: tool_io(self.spec, t, conn) for t in self.spec.tools}

    def key_params(self, tool: ToolSpec) -> dict[str, str]:
        """Parameters that carry an entity id, mapped to the entity's table."""
        return {p: kd.split(".")[0] for p, kd in self.io[tool.name].inputs.items()}

    def focus(self, tool: ToolSpec) -> tuple[str, str] | None:
        """The (param, table) a goal tool acts on: its first id parameter."""
        for p in tool.parameters:
            kd = self.io[tool.name].inputs.get(p.name)
            if kd and p.required:
                return p.name, kd.split(".")[0]
        return None

    @cached_property
    def goal_tools(self) -> list[ToolSpec]:
        """The writes a user may ask for: not staff's own work (a clinician marking a no-show)."""
        return [t for t in self.spec.tools if t.kind == "write" and self.focus(t) is not None
                and not t.meta.get("staff")]

    @cached_property
    def read_goal_tools(self) -> list[ToolSpec]:
        return [t for t in self.spec.tools if t.kind == "read" and self.focus(t) is not None
                and t.returns.mode in ("one", "scalar")]

    def parent_link(self, table: str) -> tuple[str, str] | None:
        """(fk column, parent table) of the first required foreign key of ``table``."""
        t = self.spec.table(table)
        if t is None:
            return None
        for c in t.columns:
            if c.foreign_key and not c.nullable and c.foreign_key.split(".")[0] != table:
                return c.name, c.foreign_key.split(".")[0]
        return None

    def children(self, table: str) -> list[tuple[str, str]]:
        """(child table, fk column) of every table with a foreign key to ``table``, by name."""
        t = self.spec.table(table)
        if t is None:
            return []
        ref = f"{table}.{t.primary_key}"
        return sorted((c2.name, c.name) for c2 in self.spec.tables if c2.name != table
                      for c in c2.columns if c.foreign_key == ref)

    def tool_by_family(self, family: str, entity: str, **meta: Any) -> ToolSpec | None:
        for t in self.spec.tools:
            if t.meta.get("family") == family and t.meta.get("entity") == entity and all(
                t.meta.get(k) == v for k, v in meta.items()
            ):
                return t
        return None

    def singular(self, table: str) -> str:
        names = self.spec.meta.get("singular") or {}
        return names.get(table) or table.removesuffix("s")

    def display_column(self, table: str) -> str | None:
        t = self.spec.table(table)
        if t is None:
            return None
        declared = (self.spec.meta.get("display") or {}).get(table)
        if isinstance(declared, str) and t.column(declared):
            return declared
        for name in ("full_name", "name", "title", "display_name", "label", "username", "subject", "headline"):
            if t.column(name):
                return name
        return None

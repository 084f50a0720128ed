"""Check a world against its domain's declared invariants (``DomainSpec.invariants``).

Every invariant compiles to one query that returns the primary keys of the rows breaking it, so a
check costs one scan per invariant and a violation names its row.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scaleenv.formats.domain import DomainSpec, Invariant
from scaleenv.world.ddl import quote_ident

if TYPE_CHECKING:
    from scaleenv.world.world import World


@dataclass(frozen=True)
class Violation:
    """One row that breaks one invariant."""

    invariant: str
    table: str
    key: str | int | float | None
    """The row's primary key (None for an invariant that cannot be evaluated)."""
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "table": self.table, "key": self.key, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.table} {self.key}: {self.invariant} ({self.detail})"


def violation_query(inv: Invariant, pk: str = "id", *, key: bool = False) -> str:
    """SQL returning ``(key, detail)`` for every row of ``inv.table`` that breaks ``inv``; with
    ``key`` only for the row whose primary key is bound as ``:_key``."""
    t, k = quote_ident(inv.table), quote_ident(pk)
    when = f"COALESCE(({inv.when}), 0) AND " if inv.when else ""
    if key:
        when = f"{t}.{k} = :_key AND " + when
    if inv.kind == "derived":
        col = quote_ident(inv.column or "")
        expr = f"({inv.expr})"
        bad = f"NOT ({col} IS {expr} OR abs({col} - {expr}) < 0.005)"
        return (f"SELECT {k}, 'is ' || quote({col}) || ', should be ' || quote({expr}) FROM {t} "
                f"WHERE {when}{bad} ORDER BY {k}")
    if inv.kind == "row":
        return f"SELECT {k}, '' FROM {t} WHERE {when}NOT COALESCE(({inv.check}), 0) ORDER BY {k}"
    cols = [quote_ident(c) for c in inv.columns]
    on = " AND ".join(f"o.{c} IS {t}.{c}" for c in cols)
    other_when = ""
    if inv.when:
        # evaluate ``when`` on the other row too: alias-free predicates are rewritten over a subquery
        other_when = f" AND o.{k} IN (SELECT {k} FROM {t} WHERE COALESCE(({inv.when}), 0))"
    nonnull = " AND ".join(f"{t}.{c} IS NOT NULL" for c in cols)
    shown = " || ', ' || ".join(f"quote({t}.{c})" for c in cols)
    return (f"SELECT {t}.{k}, 'shares ' || {shown} "
            f"|| ' with ' || (SELECT group_concat(o.{k}) FROM {t} o WHERE {on} AND o.{k} != {t}.{k}{other_when}) "
            f"FROM {t} WHERE {when}{nonnull} AND EXISTS (SELECT 1 FROM {t} o WHERE {on} AND o.{k} != {t}.{k}"
            f"{other_when}) ORDER BY {t}.{k}")


def clock_params(spec: DomainSpec) -> dict[str, str]:
    """The named parameters an invariant may use: ``:now`` and ``:today`` from the domain's clock."""
    return {"now": spec.clock, "today": spec.clock[:10]}


def check_connection(conn: sqlite3.Connection, spec: DomainSpec, *, limit: int = 50) -> list[Violation]:
    """Violations of ``spec.invariants`` in an open SQLite connection (at most ``limit`` per invariant)."""
    out: list[Violation] = []
    params = clock_params(spec)
    for inv in spec.invariants:
        table = spec.table(inv.table)
        if table is None:
            out.append(Violation(inv.name, inv.table, None, "the invariant names a missing table"))
            continue
        sql = violation_query(inv, table.primary_key)
        try:
            rows = conn.execute(sql, {k: v for k, v in params.items() if f":{k}" in sql}).fetchmany(limit)
        except sqlite3.Error as e:
            out.append(Violation(inv.name, inv.table, None, f"cannot evaluate: {e}"))
            continue
        out.extend(Violation(inv.name, inv.table, key, str(detail or inv.description)) for key, detail in rows)
    return out


def check_world(world: World, *, limit: int = 50) -> list[Violation]:
    """Violations of the world's ``spec.invariants`` (an empty list when the world is coherent)."""
    return check_connection(world.conn, world.spec, limit=limit)


def invariant_problems(spec: DomainSpec) -> list[tuple[str, str]]:
    """Invariants that cannot be evaluated on an empty world of ``spec`` (path, reason)."""
    from scaleenv.world.world import World

    problems: list[tuple[str, str]] = []
    names: set[str] = set()
    for i, inv in enumerate(spec.invariants):
        path = f"invariants[{i}]({inv.name})"
        if inv.name in names:
            problems.append((path, "duplicate invariant name"))
        names.add(inv.name)
        table = spec.table(inv.table)
        if table is None:
            problems.append((path, f"unknown table {inv.table!r}"))
            continue
        missing = {"derived": ("column", "expr"), "row": ("check",), "unique": ("columns",)}[inv.kind]
        for attr in missing:
            if not getattr(inv, attr):
                problems.append((path, f"a {inv.kind} invariant needs {attr!r}"))
        for c in [inv.column, *inv.columns]:
            if c and table.column(c) is None:
                problems.append((path, f"unknown column {inv.table}.{c}"))
        for dep in inv.depends_on:
            dt, _, dc = dep.partition(".")
            dtab = spec.table(dt)
            if dtab is None or dtab.column(dc) is None:
                problems.append((path, f"depends_on names a missing column {dep!r}"))
    if problems:
        return problems
    try:
        world = World(spec.model_copy(update={"invariants": []}))
    except Exception as e:  # noqa: BLE001 - the schema itself is broken; validation reports it elsewhere
        return [("invariants", f"cannot build the schema: {e}")]
    for v in check_connection(world.conn, spec):
        if v.key is None:
            problems.append((f"invariants({v.invariant})", v.detail))
    return problems

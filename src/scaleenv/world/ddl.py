"""Render a DomainSpec's tables as SQLite DDL, with CHECK constraints that enforce the column types."""

from __future__ import annotations

import json

from scaleenv.formats.domain import Column, DomainSpec, Table

_AFFINITY = {
    "text": "TEXT",
    "integer": "INTEGER",
    "real": "REAL",
    "boolean": "INTEGER",
    "date": "TEXT",
    "datetime": "TEXT",
    "json": "TEXT",
}

CHANGES_TABLE = "_changes"
META_TABLE = "_meta"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict | list):
        value = json.dumps(value, sort_keys=True)
    return "'" + str(value).replace("'", "''") + "'"


def column_ddl(col: Column, table: Table) -> str:
    q = quote_ident(col.name)
    parts = [q, _AFFINITY[col.type]]
    if col.name == table.primary_key:
        parts.append("PRIMARY KEY")
    if not col.nullable or col.name == table.primary_key:
        parts.append("NOT NULL")
    if col.unique:
        parts.append("UNIQUE")
    if col.default is not None:
        parts.append(f"DEFAULT {sql_literal(col.default)}")
    checks = []
    if col.type == "integer":
        checks.append(f"typeof({q}) = 'integer'")
    elif col.type == "real":
        checks.append(f"typeof({q}) IN ('real', 'integer')")
    elif col.type == "boolean":
        checks.append(f"{q} IN (0, 1)")
    elif col.type == "date":
        checks.append(f"date({q}) IS {q}")
    elif col.type == "datetime":
        checks.append(f"(datetime({q}) IS {q} OR strftime('%Y-%m-%dT%H:%M:%S', {q}) IS {q})")
    elif col.type == "json":
        checks.append(f"json_valid({q})")
    elif col.type == "text":
        checks.append(f"typeof({q}) = 'text'")
    if col.enum is not None:
        checks.append(f"{q} IN ({', '.join(sql_literal(v) for v in col.enum)})")
    if col.min is not None:
        checks.append(f"{q} >= {col.min!r}")
    if col.max is not None:
        checks.append(f"{q} <= {col.max!r}")
    if checks:
        cond = " AND ".join(f"({c})" for c in checks)
        parts.append(f"CHECK ({q} IS NULL OR ({cond}))")
    if col.foreign_key:
        ft, _, fc = col.foreign_key.partition(".")
        parts.append(f"REFERENCES {quote_ident(ft)}({quote_ident(fc)})")
    return " ".join(parts)


def table_ddl(table: Table) -> str:
    cols = ",\n  ".join(column_ddl(c, table) for c in table.columns)
    return f"CREATE TABLE {quote_ident(table.name)} (\n  {cols}\n)"


def change_log_ddl(table: Table) -> list[str]:
    """Triggers that log every touched primary key, so a reward only inspects what changed."""
    t, pk = quote_ident(table.name), quote_ident(table.primary_key)
    lit = sql_literal(table.name)
    out = []
    for event, ref in (("INSERT", "NEW"), ("UPDATE", "OLD"), ("DELETE", "OLD")):
        name = quote_ident(f"_log_{event.lower()}_{table.name}")
        body = f"INSERT INTO {CHANGES_TABLE}(tbl, pk) VALUES ({lit}, {ref}.{pk});"
        if event == "UPDATE":
            body += f" INSERT INTO {CHANGES_TABLE}(tbl, pk) VALUES ({lit}, NEW.{pk});"
        out.append(f"CREATE TRIGGER {name} AFTER {event} ON {t} BEGIN {body} END")
    return out


def index_ddl(table: Table) -> list[str]:
    """An index on every foreign-key column: joins and lookups by parent id stay O(log n), and so do
    the foreign-key checks SQLite runs when a parent row changes."""
    out = []
    for col in table.columns:
        if col.foreign_key and col.name != table.primary_key and not col.unique:
            name = quote_ident(f"_idx_{table.name}_{col.name}")
            out.append(f"CREATE INDEX {name} ON {quote_ident(table.name)}({quote_ident(col.name)})")
    return out


def next_id_query(table: Table, column: str, prefix: str) -> str:
    """The query behind a ``next_id`` generated value: the largest number after ``prefix``.

    ``schema_ddl`` creates a partial index on exactly this expression, so the query is a single
    index probe instead of a scan (the constants are inlined so that the planner can match it).
    """
    col, tbl = quote_ident(column), quote_ident(table.name)
    c = table.column(column)
    if not prefix and c is not None and c.type == "integer" and (column == table.primary_key or c.unique):
        return f"SELECT MAX({col}) FROM {tbl}"
    n = len(prefix)
    return (
        f"SELECT MAX(CAST(substr({col}, {n + 1}) AS INTEGER)) FROM {tbl} "
        f"WHERE substr({col}, 1, {n}) = {sql_literal(prefix)}"
    )


def next_id_index_ddl(spec: DomainSpec) -> list[str]:
    """Partial expression indexes that make every tool's ``next_id`` an O(log n) lookup."""
    tables = {t.name: t for t in spec.tables}
    seen: set[tuple[str, str, str]] = set()
    out = []
    for tool in spec.tools:
        for g in tool.generated.values():
            if g.kind != "next_id" or g.table not in tables:
                continue
            table, column = tables[g.table], g.column or "id"
            key = (table.name, column, g.prefix)
            if table.column(column) is None or key in seen:
                continue
            seen.add(key)
            if next_id_query(table, column, g.prefix).endswith(quote_ident(table.name)):
                continue  # MAX over an integer key: already indexed
            n, col = len(g.prefix), quote_ident(column)
            name = quote_ident(f"_nid_{table.name}_{column}_{len(seen)}")
            out.append(
                f"CREATE INDEX {name} ON {quote_ident(table.name)}(CAST(substr({col}, {n + 1}) AS INTEGER)) "
                f"WHERE substr({col}, 1, {n}) = {sql_literal(g.prefix)}"
            )
    return out


def derived_trigger_ddl(spec: DomainSpec) -> list[str]:
    """Triggers that keep every ``derived`` invariant true after any write: the column is recomputed
    when its own row is inserted or updated, and when a row of a table it ``depends_on`` changes
    (a reservation added moves the flight's ``seats_sold``). SQLite's triggers do not re-fire
    themselves, and the guard ``IS NOT`` leaves rows that already agree untouched (and unlogged)."""
    out = []
    for i, inv in enumerate(spec.invariants):
        table = spec.table(inv.table)
        if inv.kind != "derived" or table is None or not inv.column or not inv.expr:
            continue
        t, pk, col, expr = quote_ident(inv.table), quote_ident(table.primary_key), quote_ident(inv.column), inv.expr
        update = f"UPDATE {t} SET {col} = ({expr}) WHERE {col} IS NOT ({expr}) AND {pk} "

        def name(event: str, on: str, idx: int = i) -> str:
            return quote_ident(f"_derive_{idx}_{event}_{on}")

        out.append(f"CREATE TRIGGER {name('insert', inv.table)} AFTER INSERT ON {t} BEGIN {update}= NEW.{pk}; END")
        out.append(f"CREATE TRIGGER {name('update', inv.table)} AFTER UPDATE ON {t} BEGIN {update}= NEW.{pk}; END")
        for j, dep in enumerate(inv.depends_on):
            ct, _, fk = dep.partition(".")
            if spec.table(ct) is None:
                continue
            c, f = quote_ident(ct), quote_ident(fk)
            out.append(f"CREATE TRIGGER {name(f'ins{j}', ct)} AFTER INSERT ON {c} BEGIN {update}= NEW.{f}; END")
            out.append(f"CREATE TRIGGER {name(f'del{j}', ct)} AFTER DELETE ON {c} BEGIN {update}= OLD.{f}; END")
            out.append(f"CREATE TRIGGER {name(f'upd{j}', ct)} AFTER UPDATE ON {c} "
                       f"BEGIN {update}IN (OLD.{f}, NEW.{f}); END")
    return out


def schema_ddl(spec: DomainSpec) -> list[str]:
    stmts = [
        f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE {CHANGES_TABLE} (tbl TEXT, pk)",
    ]
    for table in spec.tables:
        stmts.append(table_ddl(table))
        stmts.extend(index_ddl(table))
        stmts.extend(change_log_ddl(table))
    stmts.extend(next_id_index_ddl(spec))
    stmts.extend(derived_trigger_ddl(spec))
    return stmts

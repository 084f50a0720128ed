"""Render a DomainSpec's tables as SQLite DDL, with CHECK constraints that enforce the column types."""

from __future__ import annotations

import json

from scaleenv.spec.models import Column, DomainSpec, Table

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
    if not col.nullable and col.name != table.primary_key:
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


def schema_ddl(spec: DomainSpec) -> list[str]:
    stmts = [
        f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE {CHANGES_TABLE} (tbl TEXT, pk)",
    ]
    for table in spec.tables:
        stmts.append(table_ddl(table))
        stmts.extend(change_log_ddl(table))
    return stmts

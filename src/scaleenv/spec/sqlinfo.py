"""What a SQL snippet touches, found by preparing it against the schema with an authorizer.

Preparing (``EXPLAIN <sql>``) both validates the statement against the real schema and reports,
through SQLite's authorizer, exactly which tables and columns it reads and writes.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

_STRING = re.compile(r"'(?:[^']|'')*'")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


def sql_params(sql: str) -> set[str]:
    """Named parameters (``:name``) used by ``sql``, ignoring string literals."""
    return set(_PARAM.findall(_STRING.sub("''", sql)))


@dataclass
class SqlInfo:
    reads: set[tuple[str, str]] = field(default_factory=set)
    writes: set[tuple[str, str]] = field(default_factory=set)
    inserts: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)

    @property
    def tables_read(self) -> set[str]:
        return {t for t, _ in self.reads}

    @property
    def tables_written(self) -> set[str]:
        return {t for t, _ in self.writes} | self.inserts | self.deletes


def analyze_sql(conn: sqlite3.Connection, sql: str) -> SqlInfo:
    """Prepare ``sql`` on ``conn`` and report what it touches. Raises sqlite3.Error if it doesn't prepare."""
    info = SqlInfo()

    def auth(action: int, a1, a2, db, trigger) -> int:  # noqa: ANN001
        if trigger is not None or (a1 or "").startswith(("_", "sqlite_")):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            info.reads.add((a1, a2))
        elif action == sqlite3.SQLITE_UPDATE:
            info.writes.add((a1, a2))
        elif action == sqlite3.SQLITE_INSERT:
            info.inserts.add(a1)
        elif action == sqlite3.SQLITE_DELETE:
            info.deletes.add(a1)
        return sqlite3.SQLITE_OK

    if ";" in _STRING.sub("''", sql).strip().rstrip(";"):
        raise sqlite3.ProgrammingError("only one SQL statement is allowed per entry")
    conn.set_authorizer(auth)
    try:
        conn.execute("EXPLAIN " + sql, {p: None for p in sql_params(sql)}).fetchall()
    finally:
        conn.set_authorizer(None)
    return info

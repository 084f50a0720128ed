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
    forbidden: set[str] = field(default_factory=set)

    @property
    def tables_read(self) -> set[str]:
        return {t for t, _ in self.reads}

    @property
    def tables_written(self) -> set[str]:
        return {t for t, _ in self.writes} | self.inserts | self.deletes


def strict_identifiers(sql: str) -> str:
    """``sql`` with double-quoted identifiers requoted as ``[name]``.

    SQLite silently reads a double-quoted name that is not a column as a string literal, so
    ``WHERE "no_such_column" = 1`` would prepare. Brackets are identifier-only quoting, so the
    requoted statement fails to prepare exactly when a name is unknown.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch == "'" or ch == "`" or ch == "[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = j
        elif ch == '"':
            j = i + 1
            buf: list[str] = []
            while j < n:
                if sql[j] == '"':
                    if j + 1 < n and sql[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(sql[j])
                j += 1
            name = "".join(buf)
            if j >= n or "]" in name:
                out.append(sql[i : j + 1])
            else:
                out.append("[" + name + "]")
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FORBIDDEN = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").lower().replace("_", " ")
    for name in (
        "SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_PRAGMA", "SQLITE_TRANSACTION", "SQLITE_SAVEPOINT",
        "SQLITE_CREATE_TABLE", "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW",
        "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_INDEX", "SQLITE_CREATE_TEMP_TRIGGER",
        "SQLITE_CREATE_TEMP_VIEW", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_TABLE", "SQLITE_DROP_INDEX",
        "SQLITE_DROP_TRIGGER", "SQLITE_DROP_VIEW", "SQLITE_DROP_TEMP_TABLE", "SQLITE_DROP_TEMP_INDEX",
        "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DROP_VTABLE", "SQLITE_ALTER_TABLE",
        "SQLITE_REINDEX", "SQLITE_ANALYZE",
    )
    if hasattr(sqlite3, name)
}
"""Statements a tool's SQL may never contain: they escape the world, its transaction or its schema."""

_RECURSIVE = getattr(sqlite3, "SQLITE_RECURSIVE", 33)
FORBIDDEN_FUNCTIONS = frozenset({"load_extension", "randomblob", "zeroblob", "random", "readfile", "writefile",
                                 "edit", "fts3_tokenizer", "zipfile", "sqlite_compileoption_get"})
"""Functions tool SQL may not call: extensions and files, huge blobs, nondeterminism."""
_LEADING = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.S)


def first_keyword(sql: str) -> str:
    """The statement's first keyword, upper-cased, after comments and blanks (``VACUUM``, ``SELECT``...)."""
    rest = _LEADING.sub("", sql, count=1)  # (the pattern matches at the start, if only the empty string)
    m = re.match(r"[A-Za-z]+", rest)
    return m.group(0).upper() if m else ""


def analyze_sql(conn: sqlite3.Connection, sql: str) -> SqlInfo:
    """Prepare ``sql`` on ``conn`` and report what it touches. Raises sqlite3.Error if it doesn't prepare."""
    info = SqlInfo()

    def auth(action: int, a1: str | None, a2: str | None, db: str | None, trigger: str | None) -> int:
        if isinstance(trigger, str) and trigger.startswith("_log_"):
            return sqlite3.SQLITE_OK  # the world's own change-log triggers (CTE and view names arrive here too)
        if action in _FORBIDDEN:
            info.forbidden.add(_FORBIDDEN[action])
            return sqlite3.SQLITE_OK
        if action == _RECURSIVE:  # a recursive CTE may never end; tool SQL has no use for one
            info.forbidden.add("recursive query (WITH RECURSIVE)")
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and str(a2 or "").lower() in FORBIDDEN_FUNCTIONS:
            info.forbidden.add(f"function {str(a2).lower()}()")
            return sqlite3.SQLITE_OK
        if (a1 or "").startswith("_") and action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE,
                                                     sqlite3.SQLITE_INSERT, sqlite3.SQLITE_DELETE):
            info.forbidden.add(f"access to internal table {a1}")
            return sqlite3.SQLITE_OK
        if (a1 or "").startswith("sqlite_"):
            return sqlite3.SQLITE_OK
        if a1 is None:  # (SQLite names the table for every action below)
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            info.reads.add((a1, a2 or ""))  # an empty column name: a read of the rowid
        elif action == sqlite3.SQLITE_UPDATE:
            info.writes.add((a1, a2 or ""))
        elif action == sqlite3.SQLITE_INSERT:
            info.inserts.add(a1)
        elif action == sqlite3.SQLITE_DELETE:
            info.deletes.add(a1)
        return sqlite3.SQLITE_OK

    if ";" in _STRING.sub("''", sql).strip().rstrip(";"):
        raise sqlite3.ProgrammingError("only one SQL statement is allowed per entry")
    if first_keyword(sql) == "VACUUM":  # VACUUM [INTO file] attaches its target only when it runs
        info.forbidden.add("vacuum")
    conn.set_authorizer(auth)
    try:
        conn.execute("EXPLAIN " + strict_identifiers(sql), {p: None for p in sql_params(sql)}).fetchall()
    finally:
        conn.set_authorizer(getattr(conn, "authorize", None))  # a world connection's own guard
    return info

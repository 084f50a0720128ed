"""The run-time guard on every world connection: what SQL may do, how big and how long it may get.

Whatever a spec's SQL or a tool's code asks for, a world connection made by :func:`guarded_connect`

- refuses, through SQLite's authorizer (``Connection.set_authorizer``), ``ATTACH``/``DETACH`` (and
  so ``VACUUM``, which attaches its target), every ``PRAGMA`` outside a short read-only list, schema
  changes (``CREATE``/``DROP``/``ALTER``, temporary objects, virtual tables, ``REINDEX``,
  ``ANALYZE``), writes to SQLite's own ``sqlite_*`` tables and ``load_extension()``; only while the
  world builds its own schema (``building``) is DDL allowed;
- caps sizes with ``Connection.setlimit`` (value length, SQL length, LIKE pattern length,
  expression depth, compound selects, trigger depth, no attached databases);
- keeps extensions off (``enable_load_extension(False)``);
- bounds time: a progress handler runs every :data:`PROGRESS_STEPS` VM steps and interrupts a
  statement past its owner's deadline (a tool call's budget) or :data:`STATEMENT_LIMIT_S` after
  it started, whoever runs it (tool runtime, gates, sampler, rewards).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

from scaleenv.world.canon import register as register_canon

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

    Parameters: TypeAlias = SupportsLenAndGetItem[object] | Mapping[str, object]
    """Statement parameters: a sequence for ``?`` placeholders, a mapping for ``:name`` ones."""

PROGRESS_STEPS = 1_000
"""VM steps between deadline checks (each check costs one Python call)."""
STATEMENT_LIMIT_S = 10.0
"""No single statement (with the fetching of its rows) may run longer than this."""

LIMITS: dict[int, int] = {
    sqlite3.SQLITE_LIMIT_LENGTH: 1_000_000,  # a value (string or blob) of at most ~1 MB: no 300 MB randomblob
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 1_000_000,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 1_000,  # LIKE costs pattern x text per row, uninterruptibly
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 200,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 64,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 16,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 64,
}

PRAGMAS_READ = frozenset({"foreign_keys", "page_count", "page_size", "database_list"})
"""Pragmas a world connection may read, never set, once built (``serialize()`` reads page_count)."""
PRAGMAS_QUERY = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                           "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check"})
"""Pragmas that only report (their argument names what to report on)."""

_A = sqlite3
DENIED_ACTIONS = frozenset(getattr(_A, n) for n in (
    "SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_CREATE_TABLE", "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TRIGGER",
    "SQLITE_CREATE_VIEW", "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_INDEX", "SQLITE_CREATE_TEMP_TRIGGER",
    "SQLITE_CREATE_TEMP_VIEW", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_TABLE", "SQLITE_DROP_INDEX",
    "SQLITE_DROP_TRIGGER", "SQLITE_DROP_VIEW", "SQLITE_DROP_TEMP_TABLE", "SQLITE_DROP_TEMP_INDEX",
    "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DROP_VTABLE", "SQLITE_ALTER_TABLE",
    "SQLITE_REINDEX", "SQLITE_ANALYZE") if hasattr(_A, n))
_WRITES = frozenset({_A.SQLITE_INSERT, _A.SQLITE_UPDATE, _A.SQLITE_DELETE})
DENIED_FUNCTIONS = frozenset({"load_extension"})

Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]
"""SQLite's authorizer callback: action code, two action arguments, database name, innermost trigger/view."""


class GuardedConnection(sqlite3.Connection):
    """An SQLite connection that times every statement from its ``execute`` and owns the guard."""

    def __init__(self, *args: Any, **kwargs: Any):  # sqlite3.connect's own arguments, passed through
        super().__init__(*args, **kwargs)
        self.building = False
        self.owner_deadline: Callable[[], float | None] | None = None
        self.extra_authorizer: Authorizer | None = None
        self.guard_installed = False
        """Whether :meth:`authorize` is the installed authorizer (installing one expires every compiled
        statement, so a connection handed to the next world re-installs it only when it must)."""
        self.stmt_start = time.monotonic()

    def set_authorizer(self, authorizer_callback: Authorizer | None, /) -> None:
        super().set_authorizer(authorizer_callback)
        self.guard_installed = authorizer_callback == self.authorize

    # Each entry point restarts the statement clock; rows fetched later count against it.
    def execute(self, sql: str, parameters: Parameters = (), /) -> sqlite3.Cursor:
        self.stmt_start = time.monotonic()
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Parameters], /) -> sqlite3.Cursor:
        self.stmt_start = time.monotonic()
        return super().executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        self.stmt_start = time.monotonic()
        return super().executescript(sql_script)

    def progress(self) -> int:
        """SQLite's progress handler: non-zero interrupts the running statement."""
        now = time.monotonic()
        if now - self.stmt_start > STATEMENT_LIMIT_S:
            return 1
        owner = self.owner_deadline
        if owner is not None:
            d = owner()
            if d is not None and now > d:
                return 1
        return 0

    def authorize(self, action: int, a1: str | None, a2: str | None, db: str | None, trigger: str | None) -> int:
        if self.building:
            return _A.SQLITE_OK
        if action in DENIED_ACTIONS:
            return _A.SQLITE_DENY
        if action == _A.SQLITE_PRAGMA:
            name = str(a1 or "").lower()
            ok = name in PRAGMAS_QUERY or (a2 is None and name in PRAGMAS_READ)
            return _A.SQLITE_OK if ok else _A.SQLITE_DENY
        if action in _WRITES and isinstance(a1, str) and a1.lower().startswith("sqlite_"):
            return _A.SQLITE_DENY
        if action == _A.SQLITE_FUNCTION and str(a2 or "").lower() in DENIED_FUNCTIONS:
            return _A.SQLITE_DENY
        extra = self.extra_authorizer
        return _A.SQLITE_OK if extra is None else extra(action, a1, a2, db, trigger)


def guarded_connect() -> GuardedConnection:
    """A fresh in-memory world connection with the whole guard installed."""
    # A domain's tools alone run 150-200 distinct statements: the default cache of 128 would recompile
    # them in turn on a connection that serves task after task (see world.py's connection pool).
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False, factory=GuardedConnection)

    assert isinstance(conn, GuardedConnection)
    conn.execute("PRAGMA foreign_keys = ON")
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(False)
    for which, value in LIMITS.items():
        conn.setlimit(which, value)
    conn.set_authorizer(conn.authorize)
    conn.set_progress_handler(conn.progress, PROGRESS_STEPS)
    register_canon(conn)
    return conn


def restore_authorizer(conn: sqlite3.Connection) -> None:
    """Put the guard back after a caller installed its own authorizer (none for a plain connection)."""
    conn.set_authorizer(conn.authorize if isinstance(conn, GuardedConnection) else None)


@contextmanager
def extra_authorizer(conn: sqlite3.Connection, auth: Authorizer) -> Iterator[None]:
    """Within the block, statements must pass the guard *and* ``auth``."""
    if not isinstance(conn, GuardedConnection):
        conn.set_authorizer(auth)
        try:
            yield
        finally:
            conn.set_authorizer(None)
        return
    prev = conn.extra_authorizer
    conn.extra_authorizer = auth
    conn.set_authorizer(conn.authorize)  # re-prepares cached statements under the new rule
    try:
        yield
    finally:
        conn.extra_authorizer = prev
        conn.set_authorizer(conn.authorize)


_DENIED = {
    sqlite3.SQLITE_ATTACH,
    sqlite3.SQLITE_DETACH,
    sqlite3.SQLITE_TRANSACTION,
    sqlite3.SQLITE_SAVEPOINT,
    sqlite3.SQLITE_PRAGMA,
    sqlite3.SQLITE_CREATE_TABLE,
    sqlite3.SQLITE_DROP_TABLE,
    sqlite3.SQLITE_CREATE_TRIGGER,
    sqlite3.SQLITE_DROP_TRIGGER,
    sqlite3.SQLITE_ALTER_TABLE,
    sqlite3.SQLITE_CREATE_INDEX,
    sqlite3.SQLITE_DROP_INDEX,
    sqlite3.SQLITE_CREATE_VIEW,
    sqlite3.SQLITE_DROP_VIEW,
}


def deny_escapes(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    """Tool code may read and write rows, never change the schema, transactions or attach files."""
    if action in _DENIED:
        return sqlite3.SQLITE_DENY
    if arg1 and isinstance(arg1, str) and arg1.startswith("_") and trigger is None and action != sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK

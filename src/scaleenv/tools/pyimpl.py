"""Python-implemented tools: ``run(db, args)`` over a narrow world API, with restricted builtins.

Tool code never runs in the trainer's process: the runtime hands each call to a sandboxed child
(``scaleenv.tools.sandbox.run_python_call``), where :class:`RecordingAPI` runs the code on a copy of
the world and records the statements it wrote with; the parent replays those statements itself,
under its own authorizer, so the world's change log sees every write. Restricted builtins and the
private-name check are only the first line.
"""

from __future__ import annotations

import builtins
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from scaleenv.errors import ToolError

_SAFE_BUILTINS = {
    n: getattr(builtins, n)
    for n in [
        "abs", "all", "any", "bool", "dict", "enumerate", "filter", "float", "int", "isinstance", "len", "list",
        "map", "max", "min", "range", "round", "set", "sorted", "str", "sum", "tuple", "zip",
        "ValueError", "KeyError", "TypeError", "Exception",
    ]
}


_TABLE_FUNCTION = re.compile(r"\b(json_each|json_tree|pragma_\w+)\b")
_QUOTES = str.maketrans("", "", "\"'`[]")


def check_sql(sql: object) -> str:
    """Refuse SQL that names a table-valued function: SQLite 3.40 crashes (use-after-free) when one is
    prepared on a connection after ``deserialize()``, which every world reset does. The identifier has
    to appear literally in the text, so a scan of the unquoted, lower-cased text is enough."""
    if not isinstance(sql, str):
        raise ToolError("internal_error", "SQL must be a string")
    if _TABLE_FUNCTION.search(sql.translate(_QUOTES).lower()):
        raise ToolError("internal_error", "table-valued functions (json_each, json_tree, pragma_*) are not allowed")
    return sql


class WorldAPI:
    """What tool code may touch: parameterised queries and statements on one world."""

    def __init__(self, conn: sqlite3.Connection, clock: str):
        self._conn = conn
        self.clock = clock

    def query(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cur = self._conn.execute(check_sql(sql), params)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def query_one(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> int:
        return self._conn.execute(check_sql(sql), params).rowcount

    def fail(self, code: str, message: str = "") -> None:
        raise ToolError(code, message or code)


class RecordingAPI(WorldAPI):
    """The world API inside the sandbox: ``execute`` also records ``[sql, params]`` for the parent."""

    MAX_WRITES = 10_000

    def __init__(self, conn: sqlite3.Connection, clock: str):
        super().__init__(conn, clock)
        self.writes: list[list[Any]] = []

    def execute(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> int:
        if len(self.writes) >= self.MAX_WRITES:
            raise ToolError("internal_error", f"more than {self.MAX_WRITES} statements in one call")
        if isinstance(params, dict):
            named = {str(k): v for k, v in params.items()}
            bound: dict[str, Any] | list[Any] = named
            values = list(named.values())
        else:
            bound = values = list(params)
        if any(isinstance(v, bytes | bytearray | memoryview) for v in values):
            raise ToolError("internal_error", "binary values cannot be written by tool code")
        n = super().execute(sql, params)
        self.writes.append([sql, bound])
        return n


_CACHE: dict[str, Callable[..., Any]] = {}


def private_names(source: str) -> list[str]:
    """Dunder names and ``_private`` attributes in ``source``: the usual ways out of restricted builtins
    (``db._conn``, ``().__class__.__subclasses__()``). Tool code may use neither."""
    import ast

    from scaleenv.utils.pyast import parse_python

    found: list[str] = []
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            found.append(node.attr)
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            found.append(node.id)
    return sorted(set(found))


def compile_python_tool(source: str) -> Callable[..., Any]:
    """Compile ``source`` and return its ``run`` function (cached by source text)."""
    fn = _CACHE.get(source)
    if fn is not None:
        return fn
    bad = private_names(source)
    if bad:
        raise ValueError(f"tool code may not use private names {bad}")
    env: dict[str, Any] = {"__builtins__": _SAFE_BUILTINS, "ToolError": ToolError}
    exec(compile(source, "<tool>", "exec"), env)  # noqa: S102 - restricted builtins, trusted source
    run: object = env.get("run")
    if not callable(run):
        raise ValueError("python implementation must define run(db, args)")
    _CACHE[source] = run
    return run

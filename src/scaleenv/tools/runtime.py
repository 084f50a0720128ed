"""Run one tool call on a world: validate, check preconditions, apply effects atomically, check
postconditions, return deterministic JSON. A failing call leaves the world exactly as it was."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.spec.models import Contract, Generated, ToolSpec
from scaleenv.tools.args import validate_arguments
from scaleenv.tools.pyimpl import WorldAPI, compile_python_tool
from scaleenv.world.ddl import quote_ident
from scaleenv.world.world import World


@dataclass
class ToolResult:
    """The outcome of one call. ``output`` is the JSON string shown to the agent."""

    ok: bool
    output: str
    value: Any = None
    error: str | None = None
    message: str | None = None


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def error_output(code: str, message: str) -> str:
    return dumps({"error": code, "message": message})


class _SafeFormat(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _holds(conn: sqlite3.Connection, c: Contract, params: dict[str, Any]) -> bool:
    row = conn.execute(c.sql, params).fetchone()
    return row is not None and bool(row[0])


def _fail(c: Contract, params: dict[str, Any], default: str) -> ToolError:
    msg = c.message or default
    try:
        msg = msg.format_map(_SafeFormat({k: v for k, v in params.items() if v is not None}))
    except (ValueError, IndexError, AttributeError):
        pass
    return ToolError(c.error, msg)


def _generate(world: World, name: str, g: Generated) -> Any:
    clock = world.clock
    if g.kind == "now":
        return clock
    if g.kind == "today":
        return clock[:10]
    col, tbl = quote_ident(g.column or "id"), quote_ident(g.table or "")
    n = len(g.prefix)
    row = world.conn.execute(
        f"SELECT MAX(CAST(substr({col}, ?) AS INTEGER)) FROM {tbl} WHERE substr({col}, 1, ?) = ?",
        (n + 1, n, g.prefix),
    ).fetchone()
    nxt = (row[0] or 0) + 1
    return f"{g.prefix}{nxt:0{g.width}d}" if g.prefix or g.width else nxt


def _shape(cur: sqlite3.Cursor, mode: str) -> Any:
    names = [d[0] for d in cur.description or ()]
    if mode == "scalar":
        r = cur.fetchone()
        return None if r is None else r[0]
    if mode == "one":
        r = cur.fetchone()
        return None if r is None else dict(zip(names, r, strict=True))
    return [dict(zip(names, r, strict=True)) for r in cur]


def run_tool(world: World, tool: ToolSpec, args: Any) -> Any:
    """Execute ``tool`` and return its result value; raise ToolError on any failure (world unchanged)."""
    params = validate_arguments(tool, args)
    for name, g in tool.generated.items():
        params[name] = _generate(world, name, g)
    conn = world.conn
    for c in tool.preconditions:
        try:
            ok = _holds(conn, c, params)
        except sqlite3.Error as e:
            raise ToolError("internal_error", f"precondition could not run: {e}") from None
        if not ok:
            raise _fail(c, params, f"precondition failed for {tool.name}")
    is_sql_read = tool.kind == "read" and tool.implementation.kind == "sql" and not tool.effects
    if is_sql_read:
        return _returns(conn, tool, params)
    conn.execute("SAVEPOINT tool_call")
    before = conn.total_changes
    try:
        value = None
        if tool.implementation.kind == "python":
            fn = compile_python_tool(tool.implementation.source or "")
            api = WorldAPI(conn, world.clock)
            conn.set_authorizer(_deny_escapes)
            try:
                value = fn(api, dict(params))
            finally:
                conn.set_authorizer(None)
        for stmt in tool.effects:
            conn.execute(stmt, params)
        if tool.kind == "read" and conn.total_changes != before:
            raise ToolError("internal_error", f"read tool {tool.name} tried to write")
        for c in tool.postconditions:
            if not _holds(conn, c, params):
                raise _fail(c, params, f"postcondition failed for {tool.name}")
        if tool.returns.query:
            value = _returns(conn, tool, params)
        value = json.loads(dumps(value))
    except ToolError:
        _rollback(conn)
        raise
    except sqlite3.IntegrityError as e:
        _rollback(conn)
        raise ToolError("constraint_violation", f"{tool.name} would break a data constraint: {e}") from None
    except sqlite3.Error as e:
        _rollback(conn)
        raise ToolError("internal_error", f"{tool.name} failed in the database: {e}") from None
    except Exception as e:  # noqa: BLE001 - tool code is untrusted; contain everything
        _rollback(conn)
        raise ToolError("internal_error", f"{tool.name} raised {type(e).__name__}: {e}") from None
    conn.execute("RELEASE tool_call")
    return value


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


def _deny_escapes(action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
    """Tool code may read and write rows, never change the schema, transactions or attach files."""
    if action in _DENIED:
        return sqlite3.SQLITE_DENY
    if arg1 and isinstance(arg1, str) and arg1.startswith("_") and trigger is None and action != sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _returns(conn: sqlite3.Connection, tool: ToolSpec, params: dict[str, Any]) -> Any:
    if not tool.returns.query or tool.returns.mode == "none":
        return None
    try:
        return _shape(conn.execute(tool.returns.query, params), tool.returns.mode)
    except sqlite3.Error as e:
        raise ToolError("internal_error", f"returns query failed: {e}") from None


def _rollback(conn: sqlite3.Connection) -> None:
    conn.execute("ROLLBACK TO tool_call")
    conn.execute("RELEASE tool_call")


def execute_tool(world: World, tool: ToolSpec, args: Any) -> ToolResult:
    """Like :func:`run_tool` but never raises a ToolError: failures come back as an error result."""
    try:
        value = run_tool(world, tool, args)
    except ToolError as e:
        return ToolResult(False, error_output(e.code, e.message), error=e.code, message=e.message)
    return ToolResult(True, dumps(value), value=value)


def bind_params(world: World, tool: ToolSpec, args: Any) -> dict[str, Any]:
    """Validated arguments plus generated values, exactly as the contracts will see them."""
    params = validate_arguments(tool, args)
    for name, g in tool.generated.items():
        params[name] = _generate(world, name, g)
    return params


def first_failing_precondition(world: World, tool: ToolSpec, params: dict[str, Any], upto: int | None = None) -> int | None:
    """Index of the first precondition (among the first ``upto``) that does not hold, or None."""
    conn = world.conn
    for i, c in enumerate(tool.preconditions[:upto]):
        try:
            if not _holds(conn, c, params):
                return i
        except sqlite3.Error:
            return i
    return None

"""Run one tool call on a world: validate, check preconditions, apply effects atomically, check
postconditions, return deterministic JSON. A failing call leaves the world exactly as it was."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import Contract, Generated, ToolSpec
from scaleenv.formats.jsonvalue import JSONValue
from scaleenv.tools.args import validate_arguments
from scaleenv.tools.output import dumps, error_output
from scaleenv.tools.pyimpl import WorldAPI, compile_python_tool
from scaleenv.world.ddl import next_id_query
from scaleenv.world.guard import deny_escapes, extra_authorizer
from scaleenv.world.world import World


@dataclass
class ToolResult:
    """The outcome of one call. ``output`` is the JSON string shown to the agent."""

    ok: bool
    output: str
    value: JSONValue = None
    error: str | None = None
    message: str | None = None


class _SafeFormat(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _holds(conn: sqlite3.Connection, c: Contract, params: dict[str, Any]) -> bool:
    row = conn.execute(c.sql, params).fetchone()
    return row is not None and bool(row[0])


def _fail(c: Contract, params: dict[str, Any], default: str) -> ToolError:
    msg = c.message or default
    with contextlib.suppress(ValueError, IndexError, AttributeError, TypeError, KeyError):
        msg = msg.format_map(_SafeFormat({k: v for k, v in params.items() if v is not None}))
    return ToolError(c.error, msg)


_NEXT_ID_SQL: dict[tuple[int, str, str], tuple[Any, str]] = {}


def _next_id_sql(world: World, name: str, g: Generated) -> str:
    key = (id(world.spec), g.table or "", f"{g.column or 'id'}\x00{g.prefix}")
    hit = _NEXT_ID_SQL.get(key)
    if hit is not None and hit[0] is world.spec:
        return hit[1]
    table = world.spec.table(g.table or "")
    if table is None:
        raise ToolError("internal_error", f"{name}: next_id refers to unknown table {g.table!r}")
    sql = next_id_query(table, g.column or "id", g.prefix)
    if len(_NEXT_ID_SQL) > 4096:
        _NEXT_ID_SQL.clear()
    _NEXT_ID_SQL[key] = (world.spec, sql)
    return sql


def _generate(world: World, name: str, g: Generated) -> str | int:
    if g.kind == "now":
        return world.clock
    if g.kind == "today":
        return world.clock[:10]
    sql = _next_id_sql(world, name, g)
    try:
        row = world.conn.execute(sql).fetchone()
    except sqlite3.Error as e:
        raise ToolError("internal_error", f"{name}: next_id could not run: {e}") from None
    nxt = (row[0] or 0) + 1
    return f"{g.prefix}{nxt:0{g.width}d}" if g.prefix or g.width else nxt


def _shape(cur: sqlite3.Cursor, mode: str) -> JSONValue:
    names = [d[0] for d in cur.description or ()]
    if mode == "scalar":
        r = cur.fetchone()
        return None if r is None else r[0]
    if mode == "one":
        r = cur.fetchone()
        return None if r is None else dict(zip(names, r, strict=True))
    return [dict(zip(names, r, strict=True)) for r in cur]


def run_tool(world: World, tool: ToolSpec, args: object) -> JSONValue:
    """Execute ``tool`` and return its result value; raise ToolError on any failure (world unchanged)."""
    return _run(world, tool, args)[0]


TOOL_TIME_LIMIT_S = 2.0
"""Wall-clock budget of the SQL of one tool call: SQLite interrupts statements past it."""


def _db_error(tool: ToolSpec, e: sqlite3.Error, what: str) -> ToolError:
    if "interrupt" in str(e):  # the progress handler stopped a statement past the deadline
        return ToolError("internal_error", f"{tool.name} ran longer than {TOOL_TIME_LIMIT_S:g} s")
    return ToolError("internal_error", f"{what}: {e}")


def _run(world: World, tool: ToolSpec, args: object) -> tuple[JSONValue, str]:
    """(value, JSON output) of a successful call; any failure raises ToolError with the world unchanged."""
    world.deadline = time.monotonic() + TOOL_TIME_LIMIT_S
    try:
        return _run_unbounded(world, tool, args)
    finally:
        world.deadline = None


def _run_unbounded(world: World, tool: ToolSpec, args: object) -> tuple[JSONValue, str]:
    params = validate_arguments(tool, args, world.spec)
    conn = world.conn
    try:
        for name, g in tool.generated.items():
            params[name] = _generate(world, name, g)
        for c in tool.preconditions:
            try:
                ok = _holds(conn, c, params)
            except sqlite3.Error as e:
                raise _db_error(tool, e, "precondition could not run") from None
            if not ok:
                raise _fail(c, params, f"precondition failed for {tool.name}")
        if tool.kind == "read" and tool.implementation.kind == "sql" and not tool.effects:
            read = _returns(conn, tool, params)
            return read, dumps(read)
    except ToolError:
        raise
    except Exception as e:  # noqa: BLE001 - e.g. a value SQLite cannot bind; never escape the episode
        raise ToolError("internal_error", f"{tool.name} failed: {type(e).__name__}: {e}") from None
    conn.execute("SAVEPOINT tool_call")
    before = conn.total_changes
    try:
        value: JSONValue = None
        raw: object = None  # what a Python tool returned
        python = tool.implementation.kind == "python"
        if python:
            raw = _python(world, tool, params)
        for stmt in tool.effects:
            conn.execute(stmt, params)
        if tool.kind == "read" and conn.total_changes != before:
            raise ToolError("internal_error", f"read tool {tool.name} tried to write")
        for c in tool.postconditions:
            if not _holds(conn, c, params):
                raise _fail(c, params, f"postcondition failed for {tool.name}")
        if tool.returns.query:
            value = _returns(conn, tool, params)
            output = dumps(value)
        else:
            output = dumps(raw)
            if python:  # whatever Python returned, the agent and the caller see the same JSON value
                value = json.loads(output)
    except ToolError:
        _rollback(conn)
        raise
    except sqlite3.IntegrityError as e:
        _rollback(conn)
        raise ToolError("constraint_violation", f"{tool.name} would break a data constraint: {e}") from None
    except sqlite3.Error as e:
        _rollback(conn)
        raise _db_error(tool, e, f"{tool.name} failed in the database") from None
    except Exception as e:  # noqa: BLE001 - tool code is untrusted; contain everything
        _rollback(conn)
        raise ToolError("internal_error", f"{tool.name} raised {type(e).__name__}: {str(e)[:500]}") from None
    except BaseException:
        _rollback(conn)
        raise
    conn.execute("RELEASE tool_call")
    return value, output


def _python(world: World, tool: ToolSpec, params: dict[str, Any]) -> object:
    """A Python tool's value: its code runs in a sandboxed child and only its writes come back
    (see ``sandbox.run_python_call``); in a sandbox child itself it runs here, already confined."""
    import scaleenv.tools.sandbox as sandbox

    source = tool.implementation.source or ""
    if not sandbox._IN_SANDBOX:
        return sandbox.run_python_call(world.conn, source, params, world.clock)
    fn = compile_python_tool(source)
    with extra_authorizer(world.conn, deny_escapes):
        return fn(WorldAPI(world.conn, world.clock), dict(params))


def _returns(conn: sqlite3.Connection, tool: ToolSpec, params: dict[str, Any]) -> JSONValue:
    if not tool.returns.query or tool.returns.mode == "none":
        return None
    try:
        return _shape(conn.execute(tool.returns.query, params), tool.returns.mode)
    except sqlite3.Error as e:
        raise _db_error(tool, e, "returns query failed") from None


def _rollback(conn: sqlite3.Connection) -> None:
    conn.execute("ROLLBACK TO tool_call")
    conn.execute("RELEASE tool_call")


def execute_tool(world: World, tool: ToolSpec, args: object) -> ToolResult:
    """Like :func:`run_tool` but never raises: failures come back as an error result."""
    try:
        value, output = _run(world, tool, args)
    except ToolError as e:
        return ToolResult(False, error_output(e.code, e.message), error=e.code, message=e.message)
    except Exception as e:  # noqa: BLE001 - last resort; the world is unchanged (see _run)
        msg = f"{tool.name} failed: {type(e).__name__}: {str(e)[:500]}"
        return ToolResult(False, error_output("internal_error", msg), error="internal_error", message=msg)
    return ToolResult(True, output, value=value)


def bind_params(world: World, tool: ToolSpec, args: object) -> dict[str, Any]:
    """Validated arguments plus generated values, exactly as the contracts will see them."""
    params = validate_arguments(tool, args, world.spec)
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

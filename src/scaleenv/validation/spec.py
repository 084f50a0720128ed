"""Check a DomainSpec for consistency. Every problem is reported as (path, reason)."""

from __future__ import annotations

import ast
import sqlite3
from collections import Counter
from typing import Any

from scaleenv.errors import SpecError, WorldError
from scaleenv.formats.domain import TOOL_NAME_RE, DomainSpec, ToolSpec
from scaleenv.formats.sqlinfo import SqlInfo, analyze_sql, sql_params
from scaleenv.utils.pyast import parse_python

Problems = list[tuple[str, str]]

RUNTIME_ERRORS = {"invalid_arguments", "internal_error", "constraint_violation", "unknown_tool"}


def _dupes(names: list[str]) -> list[str]:
    return sorted(n for n, k in Counter(names).items() if k > 1)


def _check_tables(spec: DomainSpec, problems: Problems) -> None:
    for name in _dupes([t.name for t in spec.tables]):
        problems.append((f"tables[{name}]", "duplicate table name"))
    tables = {t.name: t for t in spec.tables}
    for i, t in enumerate(spec.tables):
        path = f"tables[{i}]({t.name})"
        if not TOOL_NAME_RE.match(t.name) or t.name.startswith("_"):
            problems.append((path, "table name must be an identifier not starting with '_'"))
        for name in _dupes([c.name for c in t.columns]):
            problems.append((f"{path}.columns[{name}]", "duplicate column name"))
        if t.column(t.primary_key) is None:
            problems.append((f"{path}.primary_key", f"primary key column {t.primary_key!r} is not a column"))
        for j, c in enumerate(t.columns):
            cpath = f"{path}.columns[{j}]({c.name})"
            if c.min is not None and c.max is not None and c.min > c.max:
                problems.append((cpath, "min is greater than max"))
            if c.enum is not None and c.default is not None and c.default not in c.enum:
                problems.append((cpath, f"default {c.default!r} is not in the enum"))
            if c.foreign_key:
                ft, dot, fc = c.foreign_key.partition(".")
                if not dot:
                    problems.append((f"{cpath}.foreign_key", "must be 'table.column'"))
                elif ft not in tables:
                    problems.append((f"{cpath}.foreign_key", f"references missing table {ft!r}"))
                elif tables[ft].column(fc) is None:
                    problems.append((f"{cpath}.foreign_key", f"references missing column {ft}.{fc}"))


def _column_ref_ok(spec: DomainSpec, ref: str) -> bool:
    t, _, c = ref.partition(".")
    table = spec.table(t)
    return table is not None and table.column(c) is not None


def _python_params(source: str) -> set[str]:
    """Names read from ``args`` in Python tool code (``args["x"]`` or ``args.get("x")``)."""
    used: set[str] = set()
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if isinstance(node.value, ast.Name) and node.value.id == "args":
                used.add(str(node.slice.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "args"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            used.add(str(node.args[0].value))
    return used


def tool_sql(tool: ToolSpec) -> list[tuple[str, str]]:
    """Every SQL snippet of a tool with its path inside the tool."""
    out = [(f"preconditions[{i}]", c.sql) for i, c in enumerate(tool.preconditions)]
    out += [(f"effects[{i}]", s) for i, s in enumerate(tool.effects)]
    out += [(f"postconditions[{i}]", c.sql) for i, c in enumerate(tool.postconditions)]
    if tool.returns.query:
        out.append(("returns.query", tool.returns.query))
    return out


def _check_tool(spec: DomainSpec, tool: ToolSpec, path: str, conn: sqlite3.Connection | None,
                problems: Problems) -> dict[str, SqlInfo]:
    infos: dict[str, SqlInfo] = {}
    if not TOOL_NAME_RE.match(tool.name):
        problems.append((f"{path}.name", f"{tool.name!r} does not match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$"))
    if not tool.description.strip():
        problems.append((f"{path}.description", "is empty"))
    for name in _dupes([p.name for p in tool.parameters]):
        problems.append((f"{path}.parameters[{name}]", "duplicate parameter name"))
    for j, p in enumerate(tool.parameters):
        ppath = f"{path}.parameters[{j}]({p.name})"
        if not TOOL_NAME_RE.match(p.name):
            problems.append((ppath, "parameter name must be an identifier"))
        if p.column and not _column_ref_ok(spec, p.column):
            problems.append((f"{ppath}.column", f"unknown column {p.column!r}"))
        if p.type == "array" and p.enum is not None:
            problems.append((ppath, "arrays cannot have an enum"))
    for name, g in tool.generated.items():
        if g.kind == "next_id" and not _column_ref_ok(spec, f"{g.table}.{g.column}"):
            problems.append((f"{path}.generated.{name}", f"unknown column {g.table}.{g.column}"))
        if tool.param(name):
            problems.append((f"{path}.generated.{name}", "clashes with a parameter of the same name"))
    declared_errors = {e.code for e in tool.errors}
    for kind, contracts in (("preconditions", tool.preconditions), ("postconditions", tool.postconditions)):
        for i, c in enumerate(contracts):
            if c.error not in declared_errors and c.error not in RUNTIME_ERRORS:
                problems.append((f"{path}.{kind}[{i}].error", f"error {c.error!r} is not declared in errors"))
    if tool.kind == "read" and tool.effects:
        problems.append((f"{path}.effects", "a read tool cannot have effects"))
    declared = {p.name for p in tool.parameters} | set(tool.generated)
    used: set[str] = set()
    for spath, sql in tool_sql(tool):
        params = sql_params(sql)
        used |= params
        for name in sorted(params - declared):
            problems.append((f"{path}.{spath}", f"uses parameter :{name} that is not declared"))
        if conn is None:
            continue
        try:
            info = analyze_sql(conn, sql)
        except sqlite3.Error as e:
            problems.append((f"{path}.{spath}", f"SQL does not prepare: {e}"))
            continue
        infos[spath] = info
        if info.forbidden:
            problems.append((f"{path}.{spath}", f"not allowed in tool SQL: {', '.join(sorted(info.forbidden))}"))
        foreign = sorted({t for t in info.tables_read if spec.table(t) is None})
        if foreign:
            problems.append((f"{path}.{spath}", f"reads {', '.join(foreign)}, which is not a table of the schema "
                             "(table-valued functions such as json_each crash SQLite 3.40 after a world reset; "
                             "use json_extract or instr instead)"))
        if not spath.startswith("effects") and info.tables_written:
            problems.append((f"{path}.{spath}", "contracts and returns must not write"))
    if tool.implementation.kind == "python":
        from scaleenv.tools.pyimpl import private_names

        src = tool.implementation.source or ""
        try:
            used |= _python_params(src)
            if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in parse_python(src).body):
                problems.append((f"{path}.implementation.source", "must define run(db, args)"))
            bad = private_names(src)
            if bad:
                problems.append((f"{path}.implementation.source", f"uses private names {bad}"))
        except SyntaxError as e:
            problems.append((f"{path}.implementation.source", f"does not compile: {e.msg} (line {e.lineno})"))
    for name in sorted({p.name for p in tool.parameters} - used):
        problems.append((f"{path}.parameters({name})", "is declared but never used"))
    return infos


def spec_problems(spec: DomainSpec) -> Problems:
    """All problems of ``spec`` as (path, reason); empty when the spec is valid."""
    from scaleenv.world.world import World

    problems: Problems = []
    _check_tables(spec, problems)
    conn = None
    if not problems:
        try:
            conn = World(spec).conn
        except WorldError as e:
            problems.append(("tables", str(e)))
    if conn is not None and spec.invariants:
        from scaleenv.world.invariants import invariant_problems

        problems += invariant_problems(spec)
    for name in _dupes([t.name for t in spec.tools]):
        problems.append((f"tools[{name}]", "duplicate tool name"))
    for i, tool in enumerate(spec.tools):
        _check_tool(spec, tool, f"tools[{i}]({tool.name})", conn, problems)
    if spec.policy is not None:
        _check_policy(spec, conn, problems)
    return problems


def _check_policy(spec: DomainSpec, conn: sqlite3.Connection | None, problems: Problems) -> None:
    """Every rule governs write tools of the spec; a predicate is one read-only SELECT that prepares."""
    for i, rule in enumerate(spec.policy.rules if spec.policy else []):
        path = f"policy.rules[{i}]({rule.name})"
        for t in rule.tools:
            tool = spec.tool(t)
            if tool is None or tool.kind != "write":
                problems.append((f"{path}.tools", f"{t!r} is not a write tool of the spec"))
        if rule.forbid is None:
            if rule.unless is not None:
                problems.append((f"{path}.unless", "an exception needs the predicate (forbid) it waives"))
            continue
        if not rule.tools:
            problems.append((f"{path}.forbid", "a predicate needs the tools it governs"))
        if conn is None:
            continue
        for key, sql in (("forbid", rule.forbid), ("unless", rule.unless)):
            if sql is None:
                continue
            try:
                info = analyze_sql(conn, sql)
            except sqlite3.Error as e:
                problems.append((f"{path}.{key}", f"SQL does not prepare: {e}"))
                continue
            if info.tables_written or info.forbidden:
                problems.append((f"{path}.{key}", "a predicate must only read"))


def validate_spec(spec: DomainSpec | dict[str, Any]) -> DomainSpec:
    """Parse (if needed) and check a spec; raise SpecError listing every problem."""
    if not isinstance(spec, DomainSpec):
        from pydantic import ValidationError

        try:
            spec = DomainSpec.model_validate(spec)
        except ValidationError as e:
            raise SpecError([(".".join(map(str, err["loc"])) or "<root>", err["msg"]) for err in e.errors()]) from None
    problems = spec_problems(spec)
    if problems:
        raise SpecError(problems)
    return spec

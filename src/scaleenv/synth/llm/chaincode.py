"""Tool chains written by an LLM as Python, read into the gold-chain format without executing them.

    s0 = find_owner(email="nora.quinn@example.com")
    s1 = list_pets_by_owner(owner_id=s0["id"])
    s2 = book_appointment(pet_id=pick(s1, name="Biscuit")["id"], date="2026-07-02")

Arguments are literals or references to earlier outputs: ``sK["field"]`` (a field of step K's
record, or of the first row of its list), ``sK[0]["field"]``, or ``pick(sK, col=value)["field"]``
(the first row of step K's list whose columns match). The code is parsed with ``ast`` and never
run as Python; it *is* executed as a tool chain (``scaleenv.tools.chain.run_chain``), and
:func:`scaleenv.formats.task.chain_to_python` writes the same form back.
"""

from __future__ import annotations

import ast
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Call
from scaleenv.utils.pyast import parse_python


class ChainCodeError(ScaleEnvError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems[:3]))


_MAX_STEPS = 16


def _literal(node: ast.AST) -> object:
    return ast.literal_eval(node)


def parse_chain(code: str, spec: DomainSpec | None = None, allowed: set[str] | None = None) -> list[Call]:
    """The calls of ``code``; raise :class:`ChainCodeError` listing every problem (with line numbers)."""
    try:
        tree = parse_python(code)
    except SyntaxError as e:
        raise ChainCodeError([f"line {e.lineno}: syntax error: {e.msg}"]) from None
    problems: list[str] = []
    steps: dict[str, int] = {}
    calls: list[Call] = []

    def ref(node: ast.AST, line: int) -> dict[str, Any]:
        # sK["f"], sK[0]["f"], pick(sK, a=1)["f"]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(
                node.slice.value, str):
            field = node.slice.value
            inner = node.value
            where: dict[str, Any] = {}
            if isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Constant) and inner.slice.value == 0:
                inner = inner.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "pick":
                if len(inner.args) != 1 or not isinstance(inner.args[0], ast.Name):
                    raise ValueError("pick() takes one earlier step and column=value filters")
                try:
                    where = {kw.arg: _literal(kw.value) for kw in inner.keywords if kw.arg}
                except ValueError:
                    raise ValueError("pick() filters must be literal values") from None
                inner = inner.args[0]
            if isinstance(inner, ast.Name):
                if inner.id not in steps:
                    raise ValueError(f"{inner.id} is not an earlier step")
                out: dict[str, Any] = {"$ref": steps[inner.id], "field": field}
                if where:
                    out["where"] = where
                return out
        raise ValueError("an argument must be a literal, sK[\"field\"] or pick(sK, column=value)[\"field\"]")

    def value(node: ast.AST, line: int) -> object:
        try:
            return _literal(node)
        except (ValueError, SyntaxError, TypeError):
            return ref(node, line)

    for stmt in tree.body:
        line = getattr(stmt, "lineno", 0)
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, call = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.Expr):
            call = stmt.value
        else:
            problems.append(f"line {line}: only 'sN = tool(param=value, ...)' lines are allowed")
            continue
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            problems.append(f"line {line}: expected a tool call")
            continue
        name = call.func.id
        if call.args:
            problems.append(f"line {line}: {name}: pass arguments by name (param=value)")
            continue
        tool = spec.tool(name) if spec is not None else None
        if spec is not None and tool is None:
            problems.append(f"line {line}: unknown tool {name!r}")
            continue
        if allowed is not None and name not in allowed:
            problems.append(f"line {line}: tool {name!r} may not be used here")
            continue
        args: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                problems.append(f"line {line}: {name}: **kwargs are not allowed")
                continue
            if tool is not None and tool.param(kw.arg) is None:
                problems.append(f"line {line}: {name} has no parameter {kw.arg!r} "
                                f"(it has: {', '.join(p.name for p in tool.parameters) or 'none'})")
                continue
            try:
                args[kw.arg] = value(kw.value, line)
            except ValueError as e:
                problems.append(f"line {line}: {name}({kw.arg}=...): {e}")
        if tool is not None:
            missing = [p.name for p in tool.parameters if p.required and p.name not in args]
            if missing:
                problems.append(f"line {line}: {name}: missing required parameter(s) {missing}")
        if target is not None:
            steps[target] = len(calls)
        calls.append(Call(tool=name, args=args))
    if not calls and not problems:
        problems.append("the chain has no calls")
    if len(calls) > _MAX_STEPS:
        problems.append(f"the chain has {len(calls)} calls; at most {_MAX_STEPS}")
    if problems:
        raise ChainCodeError(problems)
    return calls


def literal_values(chain: list[Call]) -> list[Any]:
    """Every literal argument value of the chain (what the user must be able to say)."""
    out: list[Any] = []
    for c in chain:
        for v in c.args.values():
            if isinstance(v, dict) and "$ref" in v:
                out.extend(x for x in (v.get("where") or {}).values())
            elif isinstance(v, list):
                out.extend(v)
            elif v is not None:
                out.append(v)
    return out

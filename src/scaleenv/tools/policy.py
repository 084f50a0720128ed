"""A domain policy's machine-checkable rules: which rules a tool call would break."""

from __future__ import annotations

import sqlite3
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import DomainSpec, PolicyRule, ToolSpec
from scaleenv.tools.runtime import bind_params
from scaleenv.world.world import World


def rule_params(world: World, tool: ToolSpec, args: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters a rule's predicate sees: the call's (validated, generated values added), ``:id``
    (the first argument), ``:today`` and ``:now``; None when the arguments are invalid."""
    try:
        params = bind_params(world, tool, args)
    except ToolError:
        return None
    clock = world.clock
    params.setdefault("today", clock[:10])
    params.setdefault("now", clock)
    if tool.parameters:
        params.setdefault("id", params.get(tool.parameters[0].name))
    return params


def broken_rules(world: World, spec: DomainSpec, tool: ToolSpec, args: dict[str, Any]) -> list[PolicyRule]:
    """The policy rules the call ``tool(args)`` would break on ``world`` as it is now (a predicate that
    fails to run counts as broken: the rule cannot be shown to hold)."""
    if spec.policy is None:
        return []
    rules = spec.policy.checks(tool.name)
    if not rules:
        return []
    params = rule_params(world, tool, args)
    if params is None:
        return []
    out = []
    for rule in rules:
        assert rule.forbid is not None
        try:
            row = world.conn.execute(rule.forbid, params).fetchone()
        except sqlite3.Error:
            out.append(rule)
            continue
        if row is not None and row[0]:
            out.append(rule)
    return out


__all__ = ["broken_rules", "rule_params"]

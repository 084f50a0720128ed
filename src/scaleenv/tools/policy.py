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


def _holds(world: World, sql: str, params: dict[str, Any]) -> bool:
    """Whether the predicate ``sql`` gives a truthy first column (an error counts as holding: the rule
    cannot be shown not to apply)."""
    try:
        row = world.conn.execute(sql, params).fetchone()
    except sqlite3.Error:
        return True
    return row is not None and bool(row[0])


def broken_rules(world: World, spec: DomainSpec, tool: ToolSpec, args: dict[str, Any]) -> list[PolicyRule]:
    """The policy rules the call ``tool(args)`` would break on ``world`` as it is now: the rule's predicate
    covers the call and its exception (``unless``) does not waive it (a predicate that fails to run
    counts as broken: the rule cannot be shown to hold)."""
    rules = spec.policy.checks(tool.name) if spec.policy is not None else []
    params = rule_params(world, tool, args) if rules else None
    if params is None:
        return []
    out = []
    for rule in rules:
        assert rule.predicate is not None
        if _holds(world, rule.predicate, params):
            out.append(rule)
    return out


def waived_rules(world: World, spec: DomainSpec, tool: ToolSpec, args: dict[str, Any]) -> list[PolicyRule]:
    """The rules whose predicate covers the call ``tool(args)`` but whose exception allows it after all
    (a reservation cancelled late, but insured): the call is allowed, and an agent that reads the rule
    without its exception would refuse it."""
    rules = [r for r in spec.policy.checks(tool.name) if r.unless] if spec.policy is not None else []
    params = rule_params(world, tool, args) if rules else None
    if params is None:
        return []
    out = []
    for rule in rules:
        assert rule.forbid is not None and rule.unless is not None
        try:
            covered = world.conn.execute(f"SELECT COALESCE(({rule.forbid}), 0) != 0", params).fetchone()
            waived = world.conn.execute(f"SELECT COALESCE(({rule.unless}), 0) != 0", params).fetchone()
        except sqlite3.Error:
            continue
        if covered and covered[0] and waived and waived[0]:
            out.append(rule)
    return out


__all__ = ["broken_rules", "rule_params", "waived_rules"]

"""The policy agent: the domain's rules for the agent (identity, confirmation, scope, and eligibility
rules with a checkable predicate), written once the tools are admitted. A policy that stays invalid after
the repair rounds is left out: the domain is built without one."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import DomainSpec, Policy, PolicyRule
from scaleenv.llm.session import Scoped
from scaleenv.synth.llm.prompts import render
from scaleenv.world.world import World

KINDS = ("identity", "confirmation", "eligibility", "limit", "scope")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _tables(spec: DomainSpec) -> str:
    return "\n".join(f"- {t.name}: {', '.join(c.name for c in t.columns)}" for t in spec.tables)


def _tools(spec: DomainSpec) -> str:
    return "\n".join(f"- {t.name}: {', '.join(p.name for p in t.parameters)} | {t.description}"
                     for t in spec.tools if t.kind == "write")


def _predicate_problems(world: World, path: str, sql: Any, params: dict[str, Any]) -> list[str]:
    """What is wrong with one predicate of a rule (``forbid``, ``unless``): not one SELECT, an unknown
    parameter, or SQL that does not run on the base world."""
    if not isinstance(sql, str) or not sql.lstrip().upper().startswith("SELECT") or ";" in sql.strip()[:-1]:
        return [f"{path}: must be one SELECT statement"]
    unknown = sorted(set(_PARAM.findall(sql)) - set(params))
    if unknown:
        return [f"{path}: unknown parameter(s) {', '.join(':' + u for u in unknown)}"]
    try:
        world.conn.execute(sql, params).fetchone()
    except sqlite3.Error as e:
        return [f"{path}: does not run: {e}"]
    return []


def policy_problems(obj: dict[str, Any], spec: DomainSpec, base: bytes) -> list[str]:
    """What is wrong with a policy reply: unknown kinds or tools, a reason not in its text, a predicate
    that is not one SELECT or does not run on the base world, a missing identity or confirmation rule."""
    rules = obj.get("rules")
    if not isinstance(rules, list) or not rules:
        return ["'rules' must be a non-empty list"]
    problems: list[str] = []
    writes = {t.name: t for t in spec.tools if t.kind == "write"}
    world = World.from_snapshot(spec, base)
    try:
        for i, r in enumerate(rules):
            path = f"rules[{i}]"
            if not isinstance(r, dict) or not isinstance(r.get("text"), str) or not str(r.get("name") or "").strip():
                problems.append(f"{path}: needs a name and a text")
                continue
            if r.get("kind") not in KINDS:
                problems.append(f"{path}.kind: must be one of {', '.join(KINDS)}")
            forbid, tools = r.get("forbid"), r.get("tools") or []
            if not forbid:
                continue
            if not isinstance(tools, list) or not tools or any(t not in writes for t in tools):
                problems.append(f"{path}.tools: must name write tools of the list")
                continue
            if not isinstance(r.get("reason"), str) or not r["reason"] or r["reason"] not in r["text"]:
                problems.append(f"{path}.reason: must be a phrase of its text")
            tool = writes[tools[0]]
            params = {p.name: None for p in tool.parameters} | {"id": None, "today": world.clock[:10],
                                                                  "now": world.clock}
            for key in ("forbid", "unless"):
                if r.get(key) is not None:
                    problems += _predicate_problems(world, f"{path}.{key}", r[key], params)
        kinds = {r.get("kind") for r in rules if isinstance(r, dict)}
        problems += [f"a rule of kind {k!r} is missing" for k in ("identity", "confirmation") if k not in kinds]
    finally:
        world.close()
    return problems


def design_policy(ask: Scoped, title: str, spec: DomainSpec, base: bytes) -> Policy | None:
    """The domain's policy from the policy agent (None when no valid one came back)."""
    messages = render("policy", title=title, clock=spec.clock, tables=_tables(spec), tools=_tools(spec))
    try:
        obj = ask.json("policy", messages, validate=lambda o: policy_problems(o, spec, base))
    except ScaleEnvError:
        return None
    rules = []
    for r in obj["rules"]:
        rules.append(PolicyRule(name=str(r["name"]).strip(), kind=r["kind"], text=r["text"].strip(),
                                tools=list(r.get("tools") or []) if r.get("forbid") else [],
                                forbid=r.get("forbid") or None,
                                unless=(r.get("unless") or None) if r.get("forbid") else None,
                                reason=str(r.get("reason") or "")))
    return Policy(rules=rules)


__all__ = ["design_policy", "policy_problems"]

"""Rival reasons that are true: a refusal's reason fact has the policy's other reasons as rivals (so
reciting the whole policy does not state it), but a rule that does forbid something about a record the
agent is shown is no guess. Refusing to withdraw a listing because an offer is pending, an agent may
rightly add that it cannot decline that offer either, for the offer is above the rule's 70 percent:
that reason is true of what it saw, and is dropped from the rivals."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import REFUSAL_FACT
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.tools.policy import broken_rules
from scaleenv.world.world import World


def reasons_true_of(world: World, ctx: DomainContext, ids: Iterable[Any]) -> set[str]:
    """The reasons of the policy rules that forbid a call of one of their tools on one of the records
    ``ids`` (a call that needs nothing but the record: a rule over an amount the agent would choose is
    never shown true this way)."""
    spec: DomainSpec = ctx.spec
    if spec.policy is None:
        return set()
    seen = sorted({i for i in ids if isinstance(i, str)})
    out: set[str] = set()
    for rule in spec.policy.rules:
        if not rule.reason or rule.predicate is None:
            continue
        for name in rule.tools:
            tool = spec.tool(name)
            focus = ctx.focus(tool) if tool is not None else None
            if tool is None or focus is None:
                continue
            param, table = focus
            if any(world.row(table, i) is not None and rule in broken_rules(world, spec, tool, {param: i})
                   for i in seen):
                out.add(rule.reason)
                break
    return out


def drop_true_rivals(facts: list[dict[str, Any]], true_reasons: set[str]) -> list[dict[str, Any]]:
    """``facts`` with the refusal reason's rivals that are ``true_reasons`` removed, as long as one rival
    is left (with none, reciting the policy would state the reason: the strict rivals stay)."""
    for f in facts:
        if f.get("name") != REFUSAL_FACT or not f.get("rivals"):
            continue
        kept = [r for r in f["rivals"] if r not in true_reasons]
        if kept:
            f["rivals"] = kept
    return facts


__all__ = ["drop_true_rivals", "reasons_true_of"]

"""Turn a blueprint's declared rules into the checked invariants of its DomainSpec.

Sources, per entity: ``derived`` columns, ``rules``, ``unique_together`` groups, the lifecycle's
``set_in`` / ``future_in`` / ``past_in`` maps, and ``{by: [column, {value: [choices]}]}`` generators
(a breed is one of its species' breeds).
"""

from __future__ import annotations

import re
from typing import Any

from scaleenv.formats.domain import Invariant
from scaleenv.synth.procedural.blueprint import Blueprint, Entity, entity_rules
from scaleenv.world.ddl import quote_ident, sql_literal


def _in(col: str, values: list[Any]) -> str:
    return f"{quote_ident(col)} IN ({', '.join(sql_literal(v) for v in values)})"


def _parent_fix(ent: Entity, check: str) -> dict[str, Any] | None:
    """How to mend a row breaking a rule about the one parent row it names (``(SELECT c.status FROM cars c
    WHERE c.id = rentals.car_id) = 'rented'``): point it at another parent row that obeys the rule."""
    refs = [c for c in ent.columns if c.ref and re.search(rf"\b{re.escape(ent.name)}\.{re.escape(c.name)}\b", check)]
    if len(refs) != 1:
        return None
    return {"kind": "parent", "column": refs[0].name, "table": refs[0].ref}


def entity_invariants(ent: Entity, bp: Blueprint | None = None) -> list[Invariant]:
    """The invariants one entity declares (deterministic order); given ``bp``, also the parent side
    of its children's ``status_agrees`` constraints."""
    out: list[Invariant] = []
    t = ent.name
    for d in ent.derived:
        out.append(Invariant(name=f"{t}.{d.column}_derived", kind="derived", table=t, column=d.column, expr=d.expr,
                             depends_on=list(d.depends_on),
                             description=d.description or f"{d.column} is computed from its rows"))
    for i, r in enumerate(entity_rules(ent, bp)):
        out.append(Invariant(name=r.name and f"{t}.{r.name}" or f"{t}.rule_{i + 1}", kind="row", table=t,
                             check=r.check, when=r.when, description=r.description or r.check,
                             fix=r.fix or _parent_fix(ent, r.check)))
    refs = {c.name: c.ref for c in ent.columns if c.ref}
    for group in ent.unique_together:
        # a taken parent is mended by choosing another parent (one invoice per appointment), a value by a fresh one
        fix = ({"kind": "parent", "column": group[-1], "table": refs[group[-1]]} if group[-1] in refs
               else {"kind": "fresh", "column": group[-1]})
        out.append(Invariant(name=f"{t}.unique_{'_'.join(group)}", kind="unique", table=t, columns=list(group),
                             description=f"one {ent.singular} per {', '.join(group)}", fix=fix))
    lc = ent.lifecycle
    if lc:
        for col, states in lc.set_in.items():
            out.append(Invariant(
                name=f"{t}.{col}_set_iff_{'_'.join(states)}", kind="row", table=t,
                check=f"({_in(lc.column, states)}) = ({quote_ident(col)} IS NOT NULL)",
                description=f"{col} is set exactly when {lc.column} is {' or '.join(states)}",
                fix={"kind": "set_in", "column": col, "states": list(states), "state_column": lc.column}))
        for key, op, word in (("future_in", ">=", "on or after"), ("past_in", "<=", "on or before")):
            for col, states in getattr(lc, key).items():
                q = quote_ident(col)
                timed = key == "past_in" and any(c.name == col and c.type == "datetime" for c in ent.columns)
                # a past state's time is not later than the clock (nothing "completed at 14:45" at 09:00);
                # a future state may sit earlier today (an 08:30 appointment that is checked in at 09:00)
                check = (f"{q} IS NULL OR datetime({q}) <= datetime(:now)" if timed
                         else f"{q} IS NULL OR substr({q}, 1, 10) {op} :today")
                out.append(Invariant(
                    name=f"{t}.{col}_{key.removesuffix('_in')}_when_{'_'.join(states)}", kind="row", table=t,
                    when=_in(lc.column, states), check=check,
                    description=(f"{col} lies before now when {lc.column} is {' or '.join(states)}" if timed else
                                 f"{col} lies {word} today when {lc.column} is {' or '.join(states)}"),
                    fix={"kind": "clock", "column": col, "side": key.removesuffix("_in")}))
    for c in ent.columns:
        if isinstance(c.gen, dict) and set(c.gen) == {"by"}:
            key, table = c.gen["by"]
            cases = " ".join(f"WHEN {sql_literal(k)} THEN {_in(c.name, list(v))}" for k, v in table.items())
            out.append(Invariant(name=f"{t}.{c.name}_matches_{key}", kind="row", table=t,
                                 check=f"{quote_ident(c.name)} IS NULL OR CASE {quote_ident(key)} {cases} ELSE 1 END",
                                 description=f"{c.name} is one of the values allowed for its {key}",
                                 fix={"kind": "choice", "column": c.name, "key": key,
                                      "allowed": {str(k): list(v) for k, v in table.items()}}))
    return out


def blueprint_invariants(bp: Blueprint) -> list[Invariant]:
    """Every invariant of ``bp`` (the same for every seed)."""
    return [inv for ent in bp.entities for inv in entity_invariants(ent, bp)]

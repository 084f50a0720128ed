"""The ``programmatic`` family: a question whose answer is a small query program over the user's
records ("how much is the total amount over every open invoice of my appointment ...?").

The program (an SQL aggregate with named parameters) is recorded in the task
(``verification.program``) and run on the task's initial world to give the expected answer; the
same figure is computed from the gold chain's own output (the listing it reads) and the attempt is
rejected when the two differ. The records the condition leaves out hold other amounts, and the
totals a wrong program gives (every record, the records left out) are the answer's rivals.
"""

from __future__ import annotations

import random
from typing import Any

from scaleenv.formats.domain import Column, Table
from scaleenv.synth.tasks.families.bulk import BulkBuilder
from scaleenv.synth.tasks.families.selection import (
    Selection,
    col_words,
    is_money,
    lister_for,
    measure_words,
    order_columns,
    structural,
    words_of,
)
from scaleenv.synth.tasks.generate import LEVELS, TaskRejected
from scaleenv.synth.tasks.instruction import Goal
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.tiers import draw_tier
from scaleenv.synth.tasks.validity import same_answer
from scaleenv.tools.chain import ChainError, run_chain
from scaleenv.world.world import World

COUNTS = {"easy": (2, 2), "medium": (2, 3), "hard": (2, 4), "expert": (3, 5)}


ADDITIVE = ("price", "amount", "fee", "cost", "fare", "total", "charge", "premium", "rent", "budget", "balance",
            "salary", "paid", "hours", "minutes", "quantity", "qty", "count", "points", "credits", "kg", "weight",
            "distance", "km", "score", "shares", "units", "seats", "value", "spent", "duration", "calories")
"""Words of the number columns whose total means something (not an order, a year or a rating)."""


def additive(c: Column) -> bool:
    return c.type in ("integer", "real") and bool(words_of(c) & set(ADDITIVE)) and "rate" not in words_of(c)


def summable(table: Table, row: dict[str, Any]) -> list[Column]:
    """Number columns whose total means something (amounts, prices, quantities), money first."""
    cols = [c for c in order_columns(table, row) if additive(c)]
    return sorted(cols, key=lambda c: (not is_money(c), c.name))


class ProgrammaticBuilder(BulkBuilder):
    """An answer defined by a query program: the total of a column over the records meeting a condition."""

    family = "programmatic"
    counts = COUNTS

    @classmethod
    def applies(cls, ctx: Any) -> bool:
        return bool(cls.tables(ctx))

    @staticmethod
    def tables(ctx: Any) -> list[str]:
        """Tables listed under a parent, with an enum to filter by and a number to total."""
        out = []
        ctx = structural(ctx)
        for t in ctx.spec.tables:
            if lister_for(ctx, t.name) is None:
                continue
            if any(c.enum for c in t.columns) and any(additive(c) and not c.foreign_key and not c.enum
                                                       and c.match != "exempt" and c.name != t.primary_key
                                                       for c in t.columns):
                out.append(t.name)
        return sorted(out)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.total: Column | None = None

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        cols = summable(table, target)
        if not cols:
            raise TaskRejected(Reason.NO_SELECTION, f"nothing to total in {table.name}")
        self.total = cols[0] if self.rng.random() < 0.7 else self.rng.choice(cols)
        looks, same = super().shape(table, target, rows)
        c = self.total
        for r in looks + same:  # amounts of their own, so every total differs
            v = float(target[c.name])
            r[c.name] = _vary(c, v, self.rng)
        return looks, same

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        sel = super().select(table, target, siblings)
        assert self.filter is not None and self.total is not None
        f, fv = self.filter
        c = self.total
        sql = (f'SELECT ROUND(SUM("{c.name}"), 2) FROM "{table.name}" WHERE "{sel.fk}" = :parent '
               f'AND "{f.name}" = :value')
        params = {"parent": sel.parent_id, "value": fv}
        value = self.run_program(sql, params)[0][0]
        if value is None:
            raise TaskRejected(Reason.NO_SELECTION, "nothing to total")
        value = int(value) if c.type == "integer" else round(float(value), 2)
        sel.program = {"sql": sql, "params": params, "world": "initial", "value": value}
        return sel

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        """The records, their parent's path and the question; no writes (further read goals may follow)."""
        rng = self.rng
        level = self.tier = self.tier or draw_tier(rng, self.config.tier_mix, self.tiers)
        _, (d_lo, d_hi), withheld, _ = LEVELS[level]
        density = rng.randint(max(1, d_lo), max(1, d_hi))
        tables = self.tables(self.ctx)
        if not tables:
            raise TaskRejected(Reason.NO_GOAL_TOOLS, "no table to total over")
        deep = [t for t in tables if self.depth(t) >= self.config.min_length]  # the listings make the chain
        table = rng.choice(deep or tables)
        pk = self.world.primary_key(table)
        keys = [r[0] for r in self.world.conn.execute(f'SELECT "{pk}" FROM "{table}" ORDER BY 1 LIMIT 500')]
        if not keys:
            raise TaskRejected(Reason.MISSING_ROW, table)
        _, clones = self.clone_path(table, rng.choice(keys), reserve=density)
        self.add_distractors(clones, density)
        self.resolve_entities(clones)
        self.add_lookalikes()
        initial = self.world.snapshot()
        self.ask_total()
        scratch = World.from_snapshot(self.spec, initial)
        try:
            run_chain(scratch, self.spec, self.chain)
        except ChainError as e:
            raise TaskRejected(Reason.RESOLUTION_FAILED, str(e)) from None
        while len(self.chain) < self.config.min_length:
            if not self.add_more_goal(scratch, read=True, confirm=True):
                raise TaskRejected(Reason.CHAIN_TOO_SHORT)
        return initial, level, density, withheld

    def depth(self, table: str) -> int:
        """How many records the path from ``table`` up to its root holds (one look-up each)."""
        seen, t = {table}, table
        while (link := self.ctx.parent_link(t)) is not None and link[1] not in seen:
            t = link[1]
            seen.add(t)
        return len(seen)

    def ask_total(self) -> None:
        """The question, its answer (the program's value, checked against the gold chain's listing)
        and the totals a wrong program would give as its rivals."""
        assert self.sel is not None and self.filter is not None and self.total is not None
        assert self.sel.program is not None
        f, fv = self.filter
        c = self.total
        listed = [r for r in self.outputs[self.sel.listed_step] if isinstance(r, dict)]
        from_chain = _sum(c, [r for r in listed if r.get(f.name) == fv])
        value = self.sel.program["value"]
        if from_chain != value:
            raise TaskRejected(Reason.PROGRAM_MISMATCH, f"program {value} != gold chain {from_chain}")
        rivals = [_sum(c, listed), _sum(c, [r for r in listed if r.get(f.name) != fv])]
        if any(same_answer(value, r) for r in rivals):
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, "a wrong total equals the answer")
        name = f"total {col_words(c)}"
        self.answer_facts.append({"name": name, "value": value, "rivals": rivals})
        lister = self.spec.tool(self.chain[self.sel.listed_step].tool)
        parent = self.entities[self.ctx.parent_link(self.sel.table)[1]]  # type: ignore[index]
        sentence = self.rng.choice([
            f"What is the total {measure_words(c)} over every {self.sel.phrase}?",
            f"Could you add up the {measure_words(c)} of every {self.sel.phrase} and tell me the total?",
        ])
        assert lister is not None
        fk = self.sel.fk
        self.goals.append(Goal(lister, {fk: parent.row["id"]}, {fk: parent}, answer=name,
                               sentence=sentence[0].upper() + sentence[1:]))

    def write_sentences(self) -> None:
        return None  # the question is written with the answer


def _vary(c: Column, v: float, rng: random.Random) -> int | float:
    out = v * rng.choice([0.55, 0.7, 0.85, 1.15, 1.3, 1.6, 1.9]) + rng.choice([0.35, 0.65, 0.85, 1.45])
    if c.min is not None:
        out = max(out, c.min)
    if c.max is not None:
        out = min(out, c.max)
    return int(round(out)) if c.type == "integer" else round(out, 2)


def _sum(c: Column, rows: list[dict[str, Any]]) -> int | float:
    total = sum(float(r.get(c.name) or 0) for r in rows)
    return int(round(total)) if c.type == "integer" else round(total, 2)

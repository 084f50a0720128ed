"""The ``computed`` family: the target is the earliest, latest, cheapest, largest... of the user's
own records, optionally among those meeting a condition ("cancel my cheapest pending reservation").

The target's siblings are ranked behind it on the criterion's column, the runner-up one step away,
so picking by the wrong end or the wrong column fails; at the hard tiers a decoy that ranks ahead
of the target but fails the condition is added too, so ignoring the condition fails.
"""

from __future__ import annotations

from typing import Any

from scaleenv.formats.domain import Column, Table
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.selection import (
    Selection,
    SelectionBuilder,
    enum_columns,
    is_money,
    lister_for,
    measure_words,
    order_columns,
    other_value,
    qualified,
    shift_dates,
    step_of,
    words_of,
)
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.state import next_id

_CHEAP = ("price", "fee", "cost", "fare", "rate", "charge", "premium", "rent")


class ComputedBuilder(SelectionBuilder):
    """Computed selection: the target is the argmin or argmax of a column over the user's records."""

    family = "computed"

    @classmethod
    def table_ok(cls, ctx: DomainContext, table: Table) -> bool:
        return any(c.type in ("integer", "real", "date", "datetime") and not (c.foreign_key or c.unique or c.enum)
                   and c.name != table.primary_key and c.match != "exempt" for c in table.columns)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.criterion: tuple[Column, str, Column | None, Any] | None = None

    def rank(self, table: Table, c: Column, target: dict[str, Any], row: dict[str, Any], k: int, sign: int) -> bool:
        """Put ``row`` ``k`` steps behind (``sign`` +1: after) the target on ``c``; False if it cannot be."""
        v0 = target[c.name]
        if c.type in ("date", "datetime"):
            for col in table.columns:
                if col.type in ("date", "datetime") and col.name in target and not col.foreign_key:
                    row[col.name] = target[col.name]
            return shift_dates(table, row, sign * (2 * k + self.rng.randint(0, 1)), self.spec.clock)
        step = step_of(c, float(v0))
        v = v0 + sign * step * k
        v = int(v) if c.type == "integer" else round(float(v), 2)
        if (c.min is not None and v < c.min) or (c.max is not None and v > c.max) or (v0 >= 0 > v):
            return False
        row[c.name] = v
        return True

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        cols = [c for c in order_columns(table, target) if c.name not in self.written_columns()]
        if not cols:
            raise TaskRejected(Reason.NO_SELECTION, f"nothing to rank {table.name} by")
        c = self.rng.choice(cols)
        dated = c.type in ("date", "datetime")
        signs = [1, -1] if dated or self.rng.random() < 0.5 else [-1, 1]
        for sign in signs:
            trial = [dict(r) for r in rows]
            if all(self.rank(table, c, target, r, k + 1, sign) for k, r in enumerate(trial)):
                break
        else:
            raise TaskRejected(Reason.NO_SELECTION, f"cannot rank look-alikes on {c.name}")
        direction = "min" if sign > 0 else "max"
        f, fv = None, None
        filters = enum_columns(table, target)
        if filters and (self.tier in ("hard", "expert") or self.rng.random() < 0.3):
            f = self.rng.choice(filters)
            fv = target[f.name]
            decoy = dict(trial[0])
            decoy["id"] = next_id(self.world, table.name, {r["id"] for r in trial})
            decoy[f.name] = other_value(f, fv, self.rng)
            if self.rank(table, c, target, decoy, 1, -sign):  # ahead of the target, but not in the condition
                trial.append(decoy)
            else:
                f, fv = None, None
        self.criterion = (c, direction, f, fv)
        return trial, []

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        assert self.criterion is not None
        c, direction, f, fv = self.criterion
        found = lister_for(self.ctx, table.name)
        assert found is not None
        _, fk, parent_table = found
        pool = [r for r in siblings if (f is None or r.get(f.name) == fv) and r.get(c.name) is not None]
        if len(pool) < 2:
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, "fewer than two records to choose from")
        best = (min if direction == "min" else max)(r[c.name] for r in pool)
        winners = [r for r in pool if r[c.name] == best]
        if len(winners) != 1 or winners[0]["id"] != target["id"]:
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, f"{c.name} does not single the target out")
        pk = table.primary_key
        cond = f' AND "{f.name}" = :value' if f is not None else ""
        sql = (f'SELECT "{pk}" FROM "{table.name}" WHERE "{fk}" = :parent{cond} AND "{c.name}" IS NOT NULL '
               f'ORDER BY "{c.name}" {"ASC" if direction == "min" else "DESC"}, "{pk}" LIMIT 1')
        params: dict[str, Any] = {"parent": target[fk], **({"value": fv} if f is not None else {})}
        ids = [r[0] for r in self.run_program(sql, params)]
        if ids != [target["id"]]:
            raise TaskRejected(Reason.PROGRAM_MISMATCH, f"the program picks {ids}")
        return Selection(table.name, fk, target[fk], [target], self.phrase(table, c, direction, f, fv, parent_table),
                         {"sql": sql, "params": params, "world": "initial", "ids": ids})

    def phrase(self, table: Table, c: Column, direction: str, f: Column | None, fv: Any, parent: str) -> str:
        noun = self.noun(table.name)
        held = qualified(noun, f, fv) if f is not None else noun  # "open bill", "order that is out for delivery"
        where = self.parent_part(parent)
        if c.type in ("date", "datetime"):
            return f"{held} with the {'earliest' if direction == 'min' else 'latest'} {measure_words(c)}{where}"
        prices = [x for x in table.columns if x.type in ("integer", "real") and is_money(x)]
        if words_of(c) & set(_CHEAP) and prices == [c]:  # "cheapest" says which column only then
            return f"{'cheapest' if direction == 'min' else 'most expensive'} {held}{where}"
        return f"{held} with the {'lowest' if direction == 'min' else 'highest'} {measure_words(c)}{where}"

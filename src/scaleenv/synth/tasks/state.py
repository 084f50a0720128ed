"""Initial states: the domain's base world plus a patch of rows the task needs (fresh clones of
the chain's entities, distractors, and expansion patches)."""

from __future__ import annotations

import random
import re
from typing import Any

from scaleenv.formats.domain import Table
from scaleenv.tools.values import fresh_value
from scaleenv.utils.dates import shift_iso
from scaleenv.world.ddl import quote_ident
from scaleenv.world.world import World


def next_id(world: World, table: str, extra: set[str] = frozenset()) -> str:
    """The next free ``PREFIX-NNNN`` id of ``table`` (also avoiding ``extra``)."""
    pk = world.primary_key(table)
    ids = [r[0] for r in world.conn.execute(f"SELECT {quote_ident(pk)} FROM {quote_ident(table)}")]
    ids += list(extra)
    best, prefix, width = 0, None, 4
    for v in ids:
        m = re.match(r"^(.*?)(\d+)$", str(v))
        if m:
            prefix = prefix or m.group(1)
            width = max(width, len(m.group(2)))
            best = max(best, int(m.group(2)))
    return f"{prefix or table[:3].upper() + '-'}{best + 1:0{width}d}"


_BIRTH = re.compile(r"birth|born|dob")
_CONTACT = re.compile(r"email|phone|mobile|tel")


def fresh_unique(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any]) -> dict[str, Any]:
    """Give a cloned row new, realistic values in its unique columns (another spelling of the
    person's e-mail, a redrawn code or phone, another name), never a numeric suffix."""
    out = dict(row)
    for c in table.columns:
        if c.unique and c.name != table.primary_key and isinstance(out.get(c.name), str | int) \
                and not isinstance(out.get(c.name), bool):
            out[c.name] = fresh_value(c.name, out[c.name], rng, taken, row=out, lo=c.min, hi=c.max)
            taken.add(out[c.name])
    return out


def distractor(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any], *,
               clock: str = "2026-06-15T09:00:00") -> dict[str, Any]:
    """A complete entity confusable with ``row``: the same names, titles, places, states and parents,
    but its own e-mail and phone, a birth date years earlier, its own unique codes, and its other
    dates moved together by a week or two (their order, and their side of the world's ``clock``,
    unchanged), so the look-alike obeys the same rules as the original."""
    out = fresh_unique(table, row, rng, taken)
    dates = [c for c in table.columns if c.type in ("date", "datetime") and isinstance(out.get(c.name), str)
             and c.name != table.primary_key and not c.foreign_key and not c.unique]
    for c in dates:
        if _BIRTH.search(c.name):
            out[c.name] = shift_iso(out[c.name], -(rng.randint(3, 12) * 365 + rng.randint(-40, 40)))
    others = [c for c in dates if not _BIRTH.search(c.name)]
    for delta in rng.sample([-14, -7, 7, 14], 4):
        moved = {c.name: shift_iso(out[c.name], delta) for c in others}
        if all((out[c.name][:19] <= clock[: len(out[c.name][:19])]) == (moved[c.name][:19] <= clock[: len(moved[c.name][:19])])
               for c in others):
            out.update(moved)
            break
    for c in table.columns:
        v = out.get(c.name)
        if c.type == "text" and isinstance(v, str) and v and _CONTACT.search(c.name) and not c.unique:
            out[c.name] = fresh_value(c.name, v, rng, taken, row=out)
            taken.add(out[c.name])
    return out

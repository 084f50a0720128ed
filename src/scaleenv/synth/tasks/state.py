"""Initial states: the domain's base world plus a patch of rows the task needs (fresh clones of
the chain's entities, distractors, and expansion patches)."""

from __future__ import annotations

import random
import re
from typing import Any

from scaleenv.formats.domain import Table
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


def fresh_unique(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any]) -> dict[str, Any]:
    """Give a cloned row new values in its unique columns."""
    out = dict(row)
    for c in table.columns:
        if c.unique and c.name != table.primary_key and isinstance(out.get(c.name), str):
            v = out[c.name]
            tag = rng.randrange(100, 999)
            user, at, host = v.partition("@")
            out[c.name] = f"{user}.{tag}@{host}" if at else f"{v}-{tag}"
            while out[c.name] in taken:
                tag += 1
                out[c.name] = f"{user}.{tag}@{host}" if at else f"{v}-{tag}"
            taken.add(out[c.name])
    return out


def distractor(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any]) -> dict[str, Any]:
    """A row confusable with ``row``: same names and parents, nearby dates, another status."""
    out = fresh_unique(table, row, rng, taken)
    for c in table.columns:
        if c.name == table.primary_key or c.foreign_key or c.unique:
            continue
        v = out.get(c.name)
        if c.type in ("date", "datetime"):
            out[c.name] = shift_iso(v, rng.choice([-3, -2, -1, 1, 2, 3]))
        elif c.enum and rng.random() < 0.6:
            out[c.name] = c.enum[rng.randrange(len(c.enum))]
        elif c.type in ("real", "integer") and isinstance(v, int | float) and rng.random() < 0.5:
            lo = c.min if c.min is not None else float("-inf")
            hi = c.max if c.max is not None else float("inf")
            nv = v + rng.choice([-1, 1]) * max(1, abs(v) * 0.1)
            nv = min(max(nv, lo), hi)
            out[c.name] = int(round(nv)) if c.type == "integer" else round(nv, 2)
    return out

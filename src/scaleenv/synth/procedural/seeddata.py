"""Seed rows for a blueprint: realistic values (Faker), consistent foreign keys, configurable sizes.

Value generators (``gen`` in a blueprint column):
  a Faker provider name               "name", "email", "city", "company", "sentence", ...
  {int: [lo, hi]}                     uniform integer
  {float: [lo, hi, decimals]}         uniform, rounded
  {choice: [a, b, ...]}               uniform choice (or {choice: {a: weight, ...}})
  {date: [start, end]}                ISO date in range;   {datetime: [start, end]} likewise
  {date_after: [col, min_days, max_days]}  a date/datetime after another column of the row
  {scale: [col, lo, hi]}              row[col] * uniform(lo, hi), rounded to 2 decimals
  {copy: col}                         the same value as another column
  {bool: p}                           True with probability p
  {pattern: "SKU-####-??"}            # -> digit, ? -> upper-case letter
  {template: "{last_name} Farm"}      Faker providers substituted in braces
  {words: n}                          n lorem words
  {json: {...}}                       a fixed JSON document
Columns without ``gen`` get a default by type, enum or lifecycle state.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from typing import Any

from faker import Faker

from scaleenv.errors import SpecError
from scaleenv.synth.procedural.blueprint import Blueprint, BlueprintColumn, Entity

_EPOCH = dt.date(2026, 6, 15)


def _parse_date(s: Any) -> dt.date:
    return s if isinstance(s, dt.date) else dt.date.fromisoformat(str(s)[:10])


class SeedGenerator:
    def __init__(self, bp: Blueprint, seed: int, scale: float = 1.0):
        self.bp = bp
        self.rng = random.Random(f"seed-data:{bp.name}:{seed}")
        self.fake = Faker("en_US")
        self.fake.seed_instance(self.rng.randrange(2**31))
        self.scale = scale
        self.ids: dict[str, list[str]] = {}
        self.clock = dt.datetime(2026, 6, 15, 9, 0, 0)

    def order(self) -> list[Entity]:
        """Entities with parents first (foreign keys must point at existing rows)."""
        done: list[Entity] = []
        pending = list(self.bp.entities)
        while pending:
            progressed = False
            for e in list(pending):
                deps = {c.ref for c in e.columns if c.ref and c.ref != e.name}
                if deps <= {d.name for d in done}:
                    done.append(e)
                    pending.remove(e)
                    progressed = True
            if not progressed:
                raise SpecError([(f"entities.{pending[0].name}", "foreign keys form a cycle or name a missing entity")])
        return done

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        out = {}
        for ent in self.order():
            n = max(3, round(ent.count * self.scale))
            ids = [f"{ent.id_prefix}-{i:04d}" for i in range(1, n + 1)]
            self.ids[ent.name] = ids
            rows = []
            seen: dict[str, set] = {c.name: set() for c in ent.columns if c.unique}
            for rid in ids:
                row: dict[str, Any] = {"id": rid}
                for c in ent.columns:
                    row[c.name] = self.value(ent, c, row)
                    if c.unique:
                        v, k = row[c.name], 2
                        while v in seen[c.name]:
                            v = _uniquify(row[c.name], k)
                            k += 1
                        row[c.name] = v
                        seen[c.name].add(v)
                rows.append(row)
            out[ent.name] = rows
        return out

    def value(self, ent: Entity, c: BlueprintColumn, row: dict[str, Any]) -> Any:
        rng = self.rng
        if c.ref:
            ids = self.ids.get(c.ref, [])
            if c.nullable and (not ids or rng.random() < 0.15):
                return None
            return ids[rng.randrange(len(ids))]
        if c.nullable and c.gen is None and rng.random() < 0.3:
            return None
        lc = ent.lifecycle
        if lc and c.name == lc.column:
            weights = [3 if s == lc.initial else 1 for s in lc.states]
            return rng.choices(lc.states, weights)[0]
        if c.auto:
            return self.clock.isoformat() if c.auto == "now" else self.clock.date().isoformat()
        if c.gen is None:
            return self.default(c)
        return self.generate(c, c.gen, row)

    def default(self, c: BlueprintColumn) -> Any:
        rng = self.rng
        if c.enum:
            return c.enum[rng.randrange(len(c.enum))]
        lo = c.min if c.min is not None else 0
        hi = c.max if c.max is not None else 100
        if c.type == "integer":
            return rng.randint(int(lo), int(hi))
        if c.type == "real":
            return round(rng.uniform(lo, hi), 2)
        if c.type == "boolean":
            return rng.random() < 0.5
        if c.type == "date":
            return (_EPOCH - dt.timedelta(days=rng.randint(0, 720))).isoformat()
        if c.type == "datetime":
            return (self.clock - dt.timedelta(minutes=rng.randint(0, 720 * 24 * 60))).replace(second=0).isoformat()
        if c.type == "json":
            return {}
        return self.fake.word()

    def generate(self, c: BlueprintColumn, gen: Any, row: dict[str, Any]) -> Any:
        rng = self.rng
        if isinstance(gen, str):
            fn = getattr(self.fake, gen, None)
            if fn is None or not callable(fn):
                raise SpecError([(f"columns.{c.name}.gen", f"unknown Faker provider {gen!r}")])
            v = fn()
            return v if isinstance(v, str | int | float) else str(v)
        if not isinstance(gen, dict) or len(gen) != 1:
            raise SpecError([(f"columns.{c.name}.gen", f"bad generator {gen!r}")])
        (kind, arg), = gen.items()
        if kind == "int":
            return rng.randint(int(arg[0]), int(arg[1]))
        if kind == "float":
            return round(rng.uniform(arg[0], arg[1]), int(arg[2]) if len(arg) > 2 else 2)
        if kind == "choice":
            if isinstance(arg, dict):
                return rng.choices(list(arg), list(arg.values()))[0]
            return arg[rng.randrange(len(arg))]
        if kind in ("date", "datetime"):
            a, b = _parse_date(arg[0]), _parse_date(arg[1])
            d = a + dt.timedelta(days=rng.randint(0, max(0, (b - a).days)))
            if kind == "date":
                return d.isoformat()
            return dt.datetime(d.year, d.month, d.day, rng.randint(7, 20), rng.choice([0, 15, 30, 45])).isoformat()
        if kind == "date_after":
            col, lo, hi = arg
            base = row.get(col)
            if base is None:
                return None
            days = rng.randint(int(lo), int(hi))
            if "T" in str(base):
                return (dt.datetime.fromisoformat(str(base)) + dt.timedelta(days=days)).isoformat()
            return (_parse_date(base) + dt.timedelta(days=days)).isoformat()
        if kind == "scale":
            col, lo, hi = arg
            base = row.get(col) or 0
            v = round(base * rng.uniform(lo, hi), 2)
            return int(v) if c.type == "integer" else v
        if kind == "copy":
            return row.get(arg)
        if kind == "bool":
            return rng.random() < float(arg)
        if kind == "pattern":
            return "".join(str(rng.randrange(10)) if ch == "#" else chr(65 + rng.randrange(26)) if ch == "?" else ch
                           for ch in arg)
        if kind == "template":
            return re.sub(r"\{(\w+)\}", lambda m: str(getattr(self.fake, m.group(1))()), arg)
        if kind == "words":
            return " ".join(self.fake.words(int(arg))).capitalize()
        if kind == "json":
            return json.loads(json.dumps(arg))
        raise SpecError([(f"columns.{c.name}.gen", f"unknown generator kind {kind!r}")])


def _uniquify(v: Any, k: int) -> Any:
    if isinstance(v, str):
        if "@" in v:
            user, _, host = v.partition("@")
            return f"{user}{k}@{host}"
        return f"{v} {k}"
    if isinstance(v, int):
        return v + k
    return v


def seed_rows(bp: Blueprint, seed: int = 0, scale: float = 1.0) -> dict[str, list[dict[str, Any]]]:
    """Deterministic seed rows for every entity of ``bp``."""
    return SeedGenerator(bp, seed, scale).rows()

"""Seed rows for an LLM-designed schema, driven by column types, names, constraints and the
database agent's example values (no tokens spent on bulk data; deterministic for a seed)."""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Any

from faker import Faker

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import Column, DomainSpec, Table
from scaleenv.world.patch import table_order
from scaleenv.world.world import World

PERSON_NOUNS = {"owner", "customer", "user", "patient", "client", "member", "person", "employee", "staff",
                "doctor", "vet", "veterinarian", "student", "instructor", "teacher", "driver", "guest", "tenant",
                "applicant", "candidate", "contact", "author", "agent", "manager", "planner", "farmer", "player",
                "coach", "courier", "seller", "buyer", "trainer", "groomer", "attendee", "traveler", "passenger"}
_TEXT_HINTS = ("description", "notes", "note", "comment", "reason", "bio", "summary", "message", "content",
               "body", "text", "details", "instructions", "feedback", "review")


def id_prefixes(tables: list[Table], singular: dict[str, str] | None = None) -> dict[str, str]:
    """A distinct ``ABC-`` prefix for every table (from its singular noun)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for t in tables:
        noun = re.sub(r"[^A-Za-z]", "", (singular or {}).get(t.name) or t.name.removesuffix("s")).upper() or "ROW"
        noun = (noun + "XXX")[: max(3, len(noun))]
        consonants = "".join(c for c in noun[1:] if c not in "AEIOU")
        options = [noun[:3], (noun[0] + consonants + "XX")[:3], noun[:2] + noun[-1]]
        cand = next((o for o in options if o not in used), None)
        k = 2
        while cand is None or cand in used:
            cand = f"{noun[:2]}{k}"
            k += 1
        used.add(cand)
        out[t.name] = f"{cand}-"
    return out


class RowGenerator:
    def __init__(self, spec: DomainSpec, seed: int, scale: float = 1.0):
        self.spec = spec
        self.rng = random.Random(f"llm-seed-data:{spec.name}:{seed}")
        self.fake = Faker("en_US")
        self.fake.seed_instance(self.rng.randrange(2**31))
        self.scale = scale
        meta = spec.meta or {}
        self.prefix: dict[str, str] = meta.get("id_prefix") or id_prefixes(spec.tables, meta.get("singular"))
        self.singular: dict[str, str] = meta.get("singular") or {}
        self.examples: dict[str, list[Any]] = meta.get("examples") or {}
        self.clock = dt.datetime.fromisoformat(spec.clock)
        self.ids: dict[str, list[Any]] = {}

    def count(self, table: Table) -> int:
        has_parent = any(c.foreign_key and c.foreign_key.split(".")[0] != table.name for c in table.columns)
        return max(3, round((12 if has_parent else 8) * self.scale))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name in table_order(self.spec):
            table = self.spec.table(name)
            assert table is not None
            n = self.count(table)
            pk = table.column(table.primary_key)
            if pk is not None and pk.type == "integer":
                ids: list[Any] = list(range(1, n + 1))
            else:
                ids = [f"{self.prefix.get(name, name[:3].upper() + '-')}{i:04d}" for i in range(1, n + 1)]
            self.ids[name] = ids
            seen: dict[str, set[Any]] = {c.name: set() for c in table.columns if c.unique}
            rows = []
            for rid in ids:
                row: dict[str, Any] = {table.primary_key: rid}
                for c in table.columns:
                    if c.name == table.primary_key:
                        continue
                    v = self.value(table, c, row)
                    if c.unique and v is not None:
                        k = 2
                        base = v
                        while v in seen[c.name]:
                            v = _uniquify(base, k)
                            k += 1
                        seen[c.name].add(v)
                    row[c.name] = v
                rows.append(row)
            out[name] = rows
        return out

    def value(self, table: Table, c: Column, row: dict[str, Any]) -> Any:
        rng, _fake = self.rng, self.fake
        name = c.name.lower()
        if c.foreign_key:
            ft = c.foreign_key.split(".")[0]
            parents = self.ids.get(ft) or ([row[table.primary_key]] if ft == table.name else [])
            if not parents or (c.nullable and rng.random() < 0.15):
                return None
            return parents[rng.randrange(len(parents))]
        if c.nullable and c.default is None and rng.random() < 0.2:
            return None
        if c.default is not None and rng.random() < 0.3:
            return c.default
        if c.enum:
            weights = [3] + [1] * (len(c.enum) - 1)
            return rng.choices(c.enum, weights)[0]
        examples = self.examples.get(f"{table.name}.{c.name}")
        if c.type == "boolean":
            return rng.random() < 0.5
        if c.type == "integer":
            return self._number(c, name, integer=True)
        if c.type == "real":
            return self._number(c, name, integer=False)
        if c.type == "date":
            return self._date(name).isoformat()
        if c.type == "datetime":
            d = self._date(name)
            t = dt.datetime(d.year, d.month, d.day, rng.randint(8, 18), rng.choice([0, 15, 30, 45]))
            if t >= self.clock and any(k in name for k in ("created", "updated", "registered", "joined")):
                t = self.clock - dt.timedelta(days=rng.randint(1, 300), hours=rng.randint(0, 8))
            return t.replace(second=0, microsecond=0).isoformat()
        if c.type == "json":
            return {} if rng.random() < 0.5 else []
        if examples:
            return examples[rng.randrange(len(examples))]
        return self._text(table, name)

    def _number(self, c: Column, name: str, integer: bool) -> Any:
        rng = self.rng
        lo, hi = 0.0, 100.0
        if any(k in name for k in ("price", "amount", "cost", "fee", "total", "balance", "salary", "budget")):
            lo, hi = 5.0, 500.0
        elif any(k in name for k in ("quantity", "qty", "count", "number_of", "seats", "nights")):
            lo, hi = 1.0, 10.0
        elif any(k in name for k in ("rating", "stars", "score", "priority", "level")):
            lo, hi = 1.0, 5.0
        elif name == "age" or name.endswith("_age"):
            lo, hi = 1.0, 15.0
        elif "year" in name:
            lo, hi = 2015.0, 2026.0
        elif any(k in name for k in ("minutes", "duration")):
            lo, hi = 15.0, 120.0
        elif "weight" in name:
            lo, hi = 1.0, 60.0
        if c.min is not None:
            lo = max(lo, c.min) if c.max is None or max(lo, c.min) <= c.max else c.min
        if c.max is not None:
            hi = min(hi, c.max) if min(hi, c.max) >= lo else c.max
        if hi < lo:
            hi = lo
        if integer:
            return rng.randint(int(-(-lo // 1)), max(int(-(-lo // 1)), int(hi)))
        return round(rng.uniform(lo, hi), 2)

    def _date(self, name: str) -> dt.date:
        rng, today = self.rng, self.clock.date()
        if "birth" in name or name in ("dob", "born"):
            return dt.date(rng.randint(1960, 2022), rng.randint(1, 12), rng.randint(1, 28))
        if any(k in name for k in ("created", "updated", "registered", "joined", "issued", "paid", "completed")):
            return today - dt.timedelta(days=rng.randint(1, 365))
        if any(k in name for k in ("due", "scheduled", "start", "end", "expires", "expiry", "until", "deadline",
                                   "date_for", "appointment", "event", "check_in", "check_out")):
            return today + dt.timedelta(days=rng.randint(-30, 90))
        return today - dt.timedelta(days=rng.randint(-30, 365))

    def _text(self, table: Table, name: str) -> str:
        fake, rng = self.fake, self.rng
        noun = (self.singular.get(table.name) or table.name.removesuffix("s")).lower()
        if "email" in name:
            return fake.email()
        if name == "first_name":
            return fake.first_name()
        if name == "last_name":
            return fake.last_name()
        if name in ("full_name", "contact_name", "customer_name", "owner_name") or (
                name in ("name", "display_name") and noun in PERSON_NOUNS):
            return fake.name()
        if "phone" in name:
            return fake.numerify("555-###-####")
        if "address" in name or name == "street":
            return fake.street_address()
        if "city" in name:
            return fake.city()
        if "country" in name:
            return fake.country()
        if "zip" in name or "postal" in name:
            return fake.postcode()
        if "url" in name or "website" in name:
            return fake.url()
        if "company" in name or "organization" in name or "vendor" in name or "clinic" in name:
            return fake.company()
        if "currency" in name:
            return rng.choice(["USD", "EUR", "GBP"])
        if name.endswith("code") or "sku" in name or "number" in name:
            return fake.bothify("??-####").upper()
        if any(h in name for h in _TEXT_HINTS):
            return fake.sentence(nb_words=8)
        if name in ("name", "title", "label", "subject", "headline"):
            return " ".join(fake.words(2)).title()
        return fake.word()


def _uniquify(v: Any, k: int) -> Any:
    if isinstance(v, str):
        if "@" in v:
            user, _, host = v.partition("@")
            return f"{user}{k}@{host}"
        return f"{v} {k}"
    if isinstance(v, int | float) and not isinstance(v, bool):
        return v + k
    return v


def seed_world(spec: DomainSpec, seed: int = 0, scale: float = 1.0) -> World:
    """A world of ``spec`` filled with generated rows (parents first). Raises ScaleEnvError if the
    schema's constraints reject the rows."""
    gen = RowGenerator(spec, seed, scale)
    rows = gen.rows()
    world = World(spec)
    for name in table_order(spec):
        try:
            world.load_rows(name, rows[name])
        except ScaleEnvError as e:
            raise ScaleEnvError(f"cannot seed table {name}: {e}") from None
    return world

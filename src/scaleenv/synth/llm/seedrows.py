"""Seed rows for an LLM-designed schema, driven by column types, names, constraints and the
database agent's example values (no tokens spent on bulk data; deterministic for a seed)."""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
from typing import Any, cast

from faker import Faker

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import Column, DomainSpec, Invariant, Table
from scaleenv.formats.jsonvalue import JSONValue
from scaleenv.tools.values import email_for_name, fresh_value
from scaleenv.world.ddl import quote_ident, sql_literal
from scaleenv.world.invariants import Violation, check_connection
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
        self.examples: dict[str, list[JSONValue]] = meta.get("examples") or {}
        self.clock = dt.datetime.fromisoformat(spec.clock)
        self.ids: dict[str, list[int | str]] = {}

    def count(self, table: Table) -> int:
        has_parent = any(c.foreign_key and c.foreign_key.split(".")[0] != table.name for c in table.columns)
        return max(3, round((12 if has_parent else 8) * self.scale))

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        order = table_order(self.spec)
        for name in order:  # every table's ids first, so a two-way link can point at a later table
            table = self.spec.table(name)
            assert table is not None
            n = self.count(table)
            pk = table.column(table.primary_key)
            if pk is not None and pk.type == "integer":
                self.ids[name] = list(range(1, n + 1))
            else:
                self.ids[name] = [f"{self.prefix.get(name, name[:3].upper() + '-')}{i:04d}" for i in range(1, n + 1)]
        self.out = out
        for name in order:
            table = self.spec.table(name)
            assert table is not None
            seen: dict[str, set[Any]] = {c.name: set() for c in table.columns if c.unique or _naturally_unique(c)}
            rows = []
            for rid in self.ids[name]:
                row: dict[str, Any] = {table.primary_key: rid}
                for c in table.columns:
                    if c.name == table.primary_key:
                        continue
                    v = self.value(table, c, row)
                    if c.foreign_key and c.name in seen and v is not None:
                        # a unique link (one loan per reservation): each parent once, then none
                        ft = c.foreign_key.split(".")[0]
                        free = [p for p in self.ids.get(ft, []) if p not in seen[c.name]]
                        v = v if v not in seen[c.name] else (free[self.rng.randrange(len(free))] if free else None)
                        if v is None and not c.nullable:
                            raise ScaleEnvError(f"cannot seed table {name}: {c.name} is a unique link to {ft}, "
                                                f"which has fewer rows than {name}")
                        if v is not None:
                            seen[c.name].add(v)
                        row[c.name] = v
                        continue
                    if c.name in seen and v is not None:
                        if v in seen[c.name]:
                            v = fresh_value(c.name, v, self.rng, seen[c.name], row=row, fake=self.fake,
                                            lo=c.min, hi=c.max)
                        seen[c.name].add(v)
                    row[c.name] = v
                before = {c.name: row.get(c.name) for c in table.columns if c.foreign_key and c.name in seen}
                cohere(self.spec, table, row, self.rng, out, self.clock, taken=seen)
                for col, old in before.items():  # a unique link the owner rule moved
                    if row.get(col) != old:
                        seen[col].discard(old)
                        if row.get(col) is not None:
                            seen[col].add(row[col])
                rows.append(row)
            out[name] = rows
        return out

    def value(self, table: Table, c: Column, row: dict[str, Any]) -> JSONValue:
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
            return cast(JSONValue, c.default)  # a column default in a spec: a JSON value
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

    def _number(self, c: Column, name: str, integer: bool) -> int | float:
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
            return email_for_name(fake.name(), rng) or fake.email()
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


# --- coherence: rules every LLM-designed world obeys, inferred from its schema ---------------------

_PERIODS = [("start", "end"), ("starts", "ends"), ("from", "until"), ("from", "to"), ("check_in", "check_out"),
            ("begins", "ends"), ("issued", "expires"), ("opens", "closes"), ("pickup", "return"), ("departs", "arrives"),
            ("departure", "arrival"), ("scheduled", "completed"),
            ("given_on", "next_due")]
_STATE_ROOTS = {"cancel": ["cancel"], "paid": ["paid"], "payment": ["paid"], "ship": ["ship", "deliver"],
                "deliver": ["deliver"], "complet": ["complet"], "approv": ["approv"], "reject": ["reject"],
                "decision": ["approv", "reject", "deni", "declin"], "decided": ["approv", "reject", "deni", "declin"],
                "close": ["close"], "resolv": ["resolv"], "return": ["return"], "refund": ["refund"],
                "revok": ["revok"], "revoc": ["revok"], "terminat": ["terminat"], "archiv": ["archiv"],
                "publish": ["publish"], "sent": ["sent"], "withdr": ["withdr"]}
_EARLY = {"pending", "draft", "new", "open", "requested", "submitted", "scheduled", "active", "waiting", "planned",
          "created", "applied", "unpaid", "booked", "confirmed", "in_review", "under_review"}
_EXCLUSIVE = {"cancel", "reject", "refund", "revok", "terminat", "withdr"}
_NATURAL_UNIQUE = re.compile(r"(^|_)(plate|license_plate|vin|serial|serial_number|isbn|sku|barcode|tracking_number|"
                             r"email|username|handle|permit_number|policy_number|account_number)$")


def _naturally_unique(c: Column) -> bool:
    return c.type == "text" and not c.foreign_key and bool(_NATURAL_UNIQUE.search(c.name.lower()))


def _status_column(table: Table) -> Column | None:
    return next((c for c in table.columns if c.enum and c.name.lower() in ("status", "state")), None)


def _state_columns(table: Table) -> list[tuple[Column, list[str], list[str]]]:
    """(date column, states in which it is set, early states in which it is empty) for a table's
    lifecycle dates: ``cancelled_at`` with ``cancelled``, ``decision_date`` with approved/rejected."""
    status = _status_column(table)
    if status is None:
        return []
    out = []
    for c in table.columns:
        if c.type not in ("date", "datetime") or not c.nullable:
            continue
        stem = c.name.lower()
        roots = next((r for k, r in _STATE_ROOTS.items() if stem.startswith(k)), None)
        if roots is None:
            continue
        on = [st for st in status.enum or [] if any(st.lower().startswith(r) for r in roots)]
        if not on:
            continue
        exclusive = any(r in _EXCLUSIVE for r in roots)  # a cancellation date belongs to cancelled rows only
        early = [st for st in status.enum or [] if st not in on and (exclusive or st.lower() in _EARLY)]
        out.append((c, on, early))
    return out


def _periods(table: Table) -> list[tuple[Column, Column]]:
    """(start, end) date column pairs: start_date/end_date, valid_from/valid_until, check_in/check_out."""
    dates = {c.name: c for c in table.columns if c.type in ("date", "datetime")}
    out = []
    for a in dates:
        tokens = a.split("_")
        for x, y in _PERIODS:
            xs, ys = x.split("_"), y.split("_")
            for i in range(len(tokens) - len(xs) + 1):
                if tokens[i:i + len(xs)] == xs:
                    b = "_".join(tokens[:i] + ys + tokens[i + len(xs):])
                    if b in dates and b != a and (dates[a], dates[b]) not in out:
                        out.append((dates[a], dates[b]))
    return out


def _owner_links(spec: DomainSpec, table: Table) -> list[tuple[Column, Column, str, str]]:
    """(a, b, b's table, b's column) where row.a and row.b's parent name the same row: an application's
    applicant must own the car it names (applications.applicant_id = cars.owner_id of applications.car_id).

    A link the schema marks independent (``meta["independent_links"]``: a charge's resident, who need not
    be its work order's reporter) binds nothing, and neither does a link to a table the row links to twice
    or more (a booking change's from and to sailings): no single one of them is the row's row there."""
    out = []
    free = set(((spec.meta or {}).get("independent_links") or {}).get(table.name) or [])
    fks = [c for c in table.columns if c.foreign_key and c.name != table.primary_key and c.name not in free]
    parents = [(c.foreign_key or "").split(".")[0] for c in table.columns if c.foreign_key]
    for a in fks:
        pa = (a.foreign_key or "").split(".")[0]  # (every column of fks has one)
        if parents.count(pa) > 1:
            continue
        for b in fks:
            pb = (b.foreign_key or "").split(".")[0]
            if b is a or pb == table.name:
                continue
            tb = spec.table(pb)
            owner = next((c for c in tb.columns if c.foreign_key and c.foreign_key.split(".")[0] == pa
                          and not c.nullable), None) if tb else None
            if owner is not None:
                out.append((a, b, pb, owner.name))
    return out


def infer_invariants(spec: DomainSpec) -> list[Invariant]:
    """The rules an LLM-designed schema implies, as invariants (besides those ``spec`` declares):
    periods end after they start, a lifecycle date is set exactly in its states (and empty in the
    early ones), a row's two links agree on their owner, and natural identifiers (plates, VINs,
    e-mails, SKUs) are unique."""
    out = list(spec.invariants)
    for t in spec.tables:
        q = quote_ident
        for a, b in _periods(t):
            out.append(Invariant(name=f"{t.name}.{b.name}_after_{a.name}", kind="row", table=t.name,
                                 check=f"{q(a.name)} IS NULL OR {q(b.name)} IS NULL OR {q(b.name)} >= {q(a.name)}",
                                 description=f"{b.name} is not before {a.name}"))
        status = _status_column(t)
        for c, on, early in _state_columns(t):
            assert status is not None
            s_on = ", ".join(sql_literal(x) for x in on)
            s_early = ", ".join(sql_literal(x) for x in early) or "NULL"
            out.append(Invariant(
                name=f"{t.name}.{c.name}_with_{status.name}", kind="row", table=t.name,
                check=f"CASE WHEN {q(status.name)} IN ({s_on}) THEN {q(c.name)} IS NOT NULL "
                      f"WHEN {q(status.name)} IN ({s_early}) THEN {q(c.name)} IS NULL ELSE 1 END",
                description=f"{c.name} is set when {status.name} is {' or '.join(on)}"
                            + (f" and empty when it is {' or '.join(early)}" if early else "")))
        for a, b, pb, owner in _owner_links(spec, t):
            out.append(Invariant(
                name=f"{t.name}.{b.name}_belongs_to_{a.name}", kind="row", table=t.name,
                check=f"{q(a.name)} IS NULL OR {q(b.name)} IS NULL OR (SELECT x.{q(owner)} FROM {q(pb)} x "
                      f"WHERE x.id = {q(t.name)}.{q(b.name)}) = {q(a.name)}",
                description=f"the {pb} row named by {b.name} belongs to {a.name}"))
        for c in t.columns:
            if _naturally_unique(c) and not c.unique:
                out.append(Invariant(name=f"{t.name}.unique_{c.name}", kind="unique", table=t.name, columns=[c.name],
                                     description=f"no two {t.name} share a {c.name}"))
    first: dict[str, Invariant] = {}
    for inv in out:
        first.setdefault(inv.name, inv)  # each name once, as first derived
    return list(first.values())


def cohere(spec: DomainSpec, table: Table, row: dict[str, Any], rng: random.Random,
           done: dict[str, list[dict[str, Any]]], clock: dt.datetime,
           taken: dict[str, set[Any]] | None = None) -> None:
    """Make one generated row obey the inferred rules (in place)."""
    for a, b in _periods(table):
        va, vb = row.get(a.name), row.get(b.name)
        if isinstance(va, str) and isinstance(vb, str) and vb < va:
            start = dt.datetime.fromisoformat(va) if "T" in va else dt.datetime.fromisoformat(va + "T00:00:00")
            end = start + dt.timedelta(days=rng.randint(1, 30))
            row[b.name] = end.isoformat() if b.type == "datetime" else end.date().isoformat()
    status = _status_column(table)
    for c, on, early in _state_columns(table):
        st = row.get(status.name) if status else None
        if st in on and row.get(c.name) is None:
            d = clock - dt.timedelta(days=rng.randint(1, 60), hours=rng.randint(0, 8))
            row[c.name] = d.replace(microsecond=0).isoformat() if c.type == "datetime" else d.date().isoformat()
        elif st in early:
            row[c.name] = None
    _cohere_owner_links(_owner_links(spec, table), row, rng, done, taken or {})


def _cohere_owner_links(links: list[tuple[Column, Column, str, str]], row: dict[str, Any], rng: random.Random,
                        done: dict[str, list[dict[str, Any]]], taken: dict[str, set[Any]]) -> None:
    """Make a row's links agree on their owners. Mending one pair can break another that shares a
    column (a subscription's location names both its desk's and its member's location), so the pairs
    are mended in rounds until they all agree: a link to another owner's row moves to one of the
    owner's own rows, or is cleared when it is optional and the owner has none, or else the owner
    follows the named row."""
    for _round in range(4):
        agreed = True
        for a, b, pb, owner in links:
            if row.get(a.name) is None or row.get(b.name) is None or not done.get(pb):
                continue
            named = next((r for r in done[pb] if r["id"] == row[b.name]), None)
            if named is not None and named.get(owner) == row[a.name]:
                continue
            agreed = False
            used = taken.get(b.name, set()) if b.unique else set()  # a unique link: each parent once
            mine = [r["id"] for r in done[pb] if r.get(owner) == row[a.name] and r["id"] not in used]
            if mine:
                row[b.name] = mine[rng.randrange(len(mine))]
            elif b.nullable:
                row[b.name] = None
            elif named is not None:
                row[a.name] = named.get(owner)
        if agreed:
            return


def load_coherent(world: World, rows: dict[str, list[dict[str, Any]]], invariants: list[Invariant]) -> None:
    """Load every table's rows in one transaction with foreign keys checked at its end (so two-way
    links load), then check ``invariants``. Raises ScaleEnvError naming the row and the broken link
    or rule; nothing is loaded then."""
    with world.trusted():
        _load_coherent(world, rows, invariants)


def _load_coherent(world: World, rows: dict[str, list[dict[str, Any]]], invariants: list[Invariant]) -> None:
    conn = world.conn
    conn.execute("BEGIN")
    try:
        conn.execute("PRAGMA defer_foreign_keys = ON")
        for name in table_order(world.spec):
            try:
                world.load_rows(name, rows.get(name, []))
            except ScaleEnvError as e:
                raise ScaleEnvError(f"cannot seed table {name}: {e}") from None
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            tbl, rowid, parent, _fk = broken[0]
            t = world.spec.table(tbl)
            pk = t.primary_key if t else "rowid"
            key, cols = _row_links(conn, tbl, rowid, pk, parent, world.spec)
            raise ScaleEnvError(f"cannot seed: {tbl} row {key!r} links to a missing {parent} row "
                                f"({', '.join(cols)}); {len(broken)} broken link(s) in all")
        bad = check_connection(conn, world.spec.model_copy(update={"invariants": invariants}), limit=5)
        if bad:
            raise ScaleEnvError("cannot seed: " + "; ".join(str(v) for v in bad[:5]))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        conn.execute("PRAGMA defer_foreign_keys = OFF")


def _row_links(conn: sqlite3.Connection, tbl: str, rowid: int, pk: str, parent: str,
               spec: DomainSpec) -> tuple[object, list[str]]:
    t = spec.table(tbl)
    row = conn.execute(f"SELECT * FROM {quote_ident(tbl)} WHERE rowid = ?", (rowid,)).fetchone()
    names = [c.name for c in t.columns] if t else []
    data = dict(zip(names, row, strict=False)) if row else {}
    cols = [f"{c.name} = {data.get(c.name)!r}" for c in (t.columns if t else [])
            if c.foreign_key and c.foreign_key.split(".")[0] == parent]
    return data.get(pk), cols


def mend(spec: DomainSpec, rows: dict[str, list[dict[str, Any]]], violations: list[Violation],
         rng: random.Random, clock: dt.datetime) -> int:
    """The repair round: re-apply the coherence rules to each failing row named in ``violations``;
    a row that cannot be mended (a declared rule with no known fix) is dropped if nothing links to
    it. Returns how many rows changed."""
    changed = 0
    for v in violations:
        t = spec.table(v.table)
        if t is None:
            continue
        row = next((r for r in rows.get(v.table, []) if r.get(t.primary_key) == v.key), None)
        if row is None:
            continue
        before = dict(row)
        if v.invariant.split(".")[-1].startswith("unique_"):
            col = v.invariant.split(".")[-1].removeprefix("unique_")
            if col in row:
                taken = {r.get(col) for r in rows[v.table]}
                row[col] = fresh_value(col, row[col], rng, taken, row=row)
        linked: dict[str, set[Any]] = {c.name: {r.get(c.name) for r in rows.get(v.table, []) if r is not row} - {None}
                 for c in t.columns if c.foreign_key and c.unique}
        cohere(spec, t, row, rng, rows, clock, taken=linked)
        if row != before:
            changed += 1
    return changed


_MEND_ROUNDS = 4
"""Repair rounds a seeded world gets before its first broken rule is reported."""


def seed_world(spec: DomainSpec, seed: int = 0, scale: float = 1.0) -> World:
    """A world of ``spec`` filled with generated rows that obey its rules (``infer_invariants``).

    Rows are drawn, checked, and the failing ones repaired (each round names them) for up to
    :data:`_MEND_ROUNDS` rounds;
    every table loads in one transaction with deferred foreign keys, so two-way links load.
    Raises ScaleEnvError naming the row and the link or rule it breaks."""
    gen = RowGenerator(spec, seed, scale)
    rows = gen.rows()
    invariants = infer_invariants(spec)
    first: ScaleEnvError | None = None
    for _round in range(_MEND_ROUNDS + 1):
        world = World(spec)
        try:
            load_coherent(world, rows, invariants)
            return world
        except ScaleEnvError as e:
            first = first or e
        # mending a row can break a row that links to it (an invoice names a mended subscription),
        # so the repair rounds go on while they change something
        scratch = World(spec)
        conn = scratch.conn
        with scratch.trusted():
            conn.execute("PRAGMA foreign_keys = OFF")
        for name in table_order(spec):
            try:
                scratch.load_rows(name, rows.get(name, []))
            except ScaleEnvError:
                raise first from None
        bad = check_connection(conn, spec.model_copy(update={"invariants": invariants}), limit=1000)
        if not bad or not mend(spec, rows, bad, gen.rng, gen.clock):
            raise first from None
    assert first is not None
    raise first

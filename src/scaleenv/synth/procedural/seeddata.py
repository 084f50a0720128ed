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
  {template: "{last_name} Farm"}      Faker providers (or the row's columns: "{full_name:first}") in braces
  {words: n}                          n lorem words
  {json: {...}}                       a fixed JSON document
  {by: [col, {value: [a, b], ...}]}   a choice that depends on another column (breed by species)
  {case: [col, {value: gen, ...}]}    another generator per value of a column, NULL for values not listed
  {parent: [fk, col]}                 the value of ``col`` in the parent row the foreign key ``fk`` names
  {price: [lo, hi]}                   a price-list amount: whole dollars or .50/.95/.99
  {email_from: col}                   an e-mail address spelled from a person's name in ``col``
  {username_from: col}                a user name spelled from a person's name in ``col`` ("mdavis")
  {sql: "expr"}                       an SQL expression over the columns drawn so far (the row is named as
                                      its table; subqueries read the parent rows): a fare from the price list
  {ref_date: [fk, col, lo, hi]}       a date lo..hi days after ``col`` of the parent row ``fk`` names
                                      (a number ``col``, a year: lo..hi more)
  {ref_ratio: [fk, col, lo, hi]}      ``col`` of the parent row ``fk`` names times a factor drawn in lo..hi,
                                      to the cent (an offer of 40-100 percent of the asking price)
Columns without ``gen`` get a default by type, enum or lifecycle state; free text gets a sentence
of the column's kind (notes, titles, addresses...), never a placeholder. A ``gen: email`` column in
a row that has a person's name follows that name.

Coherence: the lifecycle state is drawn first and the columns that depend on it follow it
(``set_in``, ``future_in``, ``past_in``, ``gen_in``); every row is checked against its entity's row
and uniqueness invariants in a scratch database and redrawn until it satisfies them; derived
columns are computed from the children at the end.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sqlite3
from typing import Any, cast

from faker import Faker

from scaleenv.errors import SpecError
from scaleenv.formats.domain import Invariant
from scaleenv.formats.jsonvalue import JSONValue
from scaleenv.synth.procedural.blueprint import Blueprint, BlueprintColumn, Entity
from scaleenv.synth.procedural.invariants import blueprint_invariants
from scaleenv.tools.values import email_for_name, email_key, email_styles, fresh_value, text_for_column
from scaleenv.world.ddl import quote_ident
from scaleenv.world.invariants import violation_query
from scaleenv.world.world import _to_sql

_EPOCH = dt.date(2026, 6, 15)
_ATTEMPTS = 80
_PARENTS = 150  # parents tried for a row that breaks a rule about its parent
_PERSON = re.compile(r"(^|_)(full_name|name)$")
_PRICE = re.compile(r"(^|_)(price|fee|cost|fare|rent|rate|tuition|premium)(_|$)")


def _parse_date(s: object) -> dt.date:
    return s if isinstance(s, dt.date) else dt.date.fromisoformat(str(s)[:10])


class SeedGenerator:
    def __init__(self, bp: Blueprint, seed: int, scale: float = 1.0):
        self.bp = bp
        self.rng = random.Random(f"seed-data:{bp.name}:{seed}")
        self.fake = Faker("en_US")
        self.fake.seed_instance(self.rng.randrange(2**31))
        self.scale = scale
        self.ids: dict[str, list[str]] = {}
        self.clock = dt.datetime.fromisoformat(bp.clock)
        self.invariants = blueprint_invariants(bp)
        self.vocabulary = sorted({w for k in bp.keywords for w in re.findall(r"[a-z]+", k.lower()) if len(w) > 3})
        self.scratch = sqlite3.connect(":memory:")
        self._drawing = bp.entities[0]  # the entity whose row ``draw`` is drawing

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
        clock = {"now": self.clock.isoformat(), "today": self.clock.date().isoformat()}
        order = self.order()
        # a rule about the row's children is kept once they are drawn (``keep_children``); one that reads a
        # table drawn later (a couple's bookings within its budget) holds of the rows drawn so far while they
        # are drawn, and is checked again once every table is
        checks: dict[str, list[tuple[Invariant, str]]] = {}
        deferred: list[Invariant] = []
        for ent in order:
            self.create_table(ent)
            checks[ent.name] = []
            for inv in self.invariants:
                if inv.table == ent.name and inv.kind in ("row", "unique") and (inv.fix or {}).get("kind") != "children":
                    sql = self._row_check(inv)
                    checks[ent.name].append((inv, sql))
                    if not self._compiles(sql, clock):
                        deferred.append(inv)
        for ent in order:
            n = max(3, round(ent.count * self.scale))
            ids = [f"{ent.id_prefix}-{i:04d}" for i in range(1, n + 1)]
            self.ids[ent.name] = ids
            cols = ["id", *(c.name for c in ent.columns)]
            rows = []
            seen: dict[str, set[object]] = {c.name: set() for c in ent.columns if _distinct(c)}
            states = list(ent.lifecycle.states) if ent.lifecycle else []
            for i, rid in enumerate(ids):
                # the first rows cover every lifecycle state, so each transition has a row to act on
                forced = states[i] if i < len(states) and len(ids) >= 2 * len(states) else None
                try:
                    row = self.conforming_row(ent, rid, seen, forced, _Trial(self.scratch, ent.name, cols, checks[ent.name], clock))
                except SpecError:
                    if i < 3:  # a table keeps at least three rows (tasks need a target and look-alikes)
                        raise
                    # the parents the rules allow are used up (one certificate per completed enrollment):
                    # the table keeps the rows drawn so far rather than break a rule
                    self.ids[ent.name] = ids[:i]
                    break
                for c in ent.columns:
                    if _distinct(c):
                        seen[c.name].add(row[c.name])
                        if email_key(row[c.name]):  # namesakes' addresses differ in more than word order
                            seen[c.name].add(("@", email_key(row[c.name])))
                rows.append(row)
            out[ent.name] = rows
            self.keep_children(ent, out, clock)
        self.apply_derived(out)
        self.still_kept(deferred, clock, "once the tables it reads are drawn")
        return out

    def create_table(self, ent: Entity) -> None:
        """``ent``'s table in the scratch database (every column, an index per foreign key)."""
        t = quote_ident(ent.name)
        cols = ["id", *(c.name for c in ent.columns)]
        self.scratch.execute(f"CREATE TABLE {t} ({', '.join(quote_ident(c) for c in cols)}, PRIMARY KEY (id))")
        for c in ent.columns:
            if c.ref:
                self.scratch.execute(f"CREATE INDEX {quote_ident('_i_' + ent.name + c.name)} ON {t}({quote_ident(c.name)})")

    def _compiles(self, sql: str, clock: dict[str, str]) -> bool:
        """Whether the check ``sql`` runs on the tables drawn so far (it names none drawn later)."""
        try:
            self.scratch.execute("EXPLAIN " + sql, {**_used(sql, clock), "_key": None})
        except sqlite3.OperationalError:
            return False
        return True

    def conforming_row(self, ent: Entity, rid: str, seen: dict[str, set[object]], forced: str | None,
                       trial: _Trial) -> dict[str, Any]:
        """A row of ``ent`` that obeys its rules, left inserted in the scratch database: drawn, then
        mended where a rule says how (the parent's value copied, a conforming parent chosen), else
        drawn again. A state forced for coverage is given up only for the last draws (a state no
        parent can take: an active loan when every copy on loan already has one)."""
        bad: list[Invariant] = []
        for attempt in range(_ATTEMPTS):
            row = self.draw(ent, rid, seen, forced if attempt < _ATTEMPTS * 3 // 4 else None)
            bad = trial.bad(row)
            if not bad:
                return row
            mended = self.mend(ent, row, bad, trial)
            if mended is not None:
                return mended
        raise SpecError([(f"entities.{ent.name}", f"no seed row satisfies {bad[0].name} "
                                                  f"({bad[0].description}) after {_ATTEMPTS} draws")])

    def mend(self, ent: Entity, row: dict[str, Any], bad: list[Invariant], trial: _Trial) -> dict[str, Any] | None:
        """``row`` changed to obey every rule (inserted), or None: first the values a rule derives
        from the parent, then each other parent the broken rules allow, in a seeded order."""
        fixed = self.parent_values(ent, dict(row), bad)
        if fixed != row and not trial.bad(fixed):
            return fixed
        for col in dict.fromkeys(str(inv.fix["column"]) for inv in bad if inv.fix and inv.fix.get("kind") == "parent"):
            c = next((x for x in ent.columns if x.name == col), None)
            if c is None or not c.ref:
                continue
            candidates = [i for i in self.ids.get(c.ref, []) if i != row.get(col)]
            self.rng.shuffle(candidates)
            for cand in candidates[:_PARENTS]:
                moved = self.follow_parent(ent, {**row, col: cand}, col)
                moved = self.parent_values(ent, moved, [i for i in self.invariants if i.table == ent.name])
                if not trial.bad(moved):
                    return moved
        return None

    def follow_parent(self, ent: Entity, row: dict[str, Any], fk: str) -> dict[str, Any]:
        """Redraw the columns whose generator reads the parent ``fk`` names (a date after the parent's)."""
        for c in ent.columns:
            if isinstance(c.gen, dict) and set(c.gen) & {"parent", "ref_date", "ref_ratio"}:
                (arg,) = c.gen.values()
                if arg[0] == fk:
                    row[c.name] = self.generate(c, c.gen, row)
        return row

    def parent_values(self, ent: Entity, row: dict[str, Any], invs: list[Invariant]) -> dict[str, Any]:
        """Values that a ``parent`` constraint ties to the parent row: copied for ``=``, drawn on the
        allowed side of a number for the others (a service at no more kilometres than the car shows)."""
        for inv in invs:
            value = (inv.fix or {}).get("value")
            if not isinstance(value, dict) or inv.fix is None:
                continue
            col, op, pcol = str(value["column"]), str(value["op"]), str(value["parent_column"])
            pv = self._parent_value(str(inv.fix["column"]), pcol, row)
            if pv is None or row.get(col) is None:
                continue
            if op == "=":
                row[col] = pv
            elif isinstance(pv, int | float) and not isinstance(pv, bool):
                cur = row[col]
                if isinstance(cur, int | float) and not _holds(cur, op, pv):
                    lo, hi = (0.4, 1.0) if op in ("<=", "<") else (1.0, 1.6)
                    v = pv * self.rng.uniform(lo, hi) + (-1 if op == "<" else 1 if op == ">" else 0)
                    row[col] = int(v) if isinstance(cur, int) else round(v, 2)
        return row

    def keep_children(self, child: Entity, out: dict[str, list[dict[str, Any]]], clock: dict[str, str]) -> None:
        """Once ``child``'s rows are drawn, every parent whose state says it has such a child and has
        none goes back to its ``otherwise`` state (a copy listed on loan without an active loan)."""
        for inv in self.invariants:
            fix = inv.fix or {}
            if fix.get("kind") != "children" or fix.get("table") != child.name or inv.table not in out:
                continue
            t, col = quote_ident(inv.table), quote_ident(str(fix["state_column"]))
            sql = violation_query(inv)
            broken = [k for k, _ in self.scratch.execute(sql, _used(sql, clock))]
            for key in broken:
                self.scratch.execute(f"UPDATE {t} SET {col} = ? WHERE id = ?", (fix["otherwise"], key))
            rows = {r["id"]: r for r in out[inv.table]}
            for key in broken:
                rows[key][str(fix["state_column"])] = fix["otherwise"]
            others = [i for i in self.invariants if i.table == inv.table and i.kind in ("row", "unique")]
            self.still_kept(others, clock, "once its children are drawn")

    def still_kept(self, invariants: list[Invariant], clock: dict[str, str], when: str) -> None:
        """Raise SpecError naming the first of ``invariants`` a drawn row breaks (``when``: at what point)."""
        for inv in invariants:
            q = violation_query(inv)
            left = self.scratch.execute(q, _used(q, clock)).fetchone()
            if left:
                raise SpecError([(f"entities.{inv.table}", f"row {left[0]} breaks {inv.name} ({inv.description}) {when}")])

    def _row_check(self, inv: Invariant) -> str:
        return f"SELECT 1 FROM ({violation_query(inv, key=True)})"

    def apply_derived(self, out: dict[str, list[dict[str, Any]]]) -> None:
        """Compute every derived column from the finished children (parents before aggregates of them)."""
        for inv in self.invariants:
            if inv.kind != "derived" or inv.table not in out:
                continue
            t, col = quote_ident(inv.table), quote_ident(inv.column or "")
            self.scratch.execute(f"UPDATE {t} SET {col} = ({inv.expr})")
            values = dict(self.scratch.execute(f"SELECT id, {col} FROM {t}"))
            assert inv.column is not None  # a derived invariant names its column (blueprint_invariants)
            for row in out[inv.table]:
                row[inv.column] = values[row["id"]]

    def draw(self, ent: Entity, rid: str, seen: dict[str, set[object]], state: str | None = None) -> dict[str, Any]:
        """One candidate row: the lifecycle state first (``state`` if given), then each column to match it."""
        row: dict[str, Any] = {"id": rid}
        self._drawing = ent
        if state is not None and ent.lifecycle:
            row[ent.lifecycle.column] = state
        lc = ent.lifecycle
        cols = sorted(ent.columns, key=lambda c: 0 if lc and c.name == lc.column else 1)
        derived = {d.column for d in ent.derived}
        for c in cols:
            if c.name in row:
                continue
            state = row.get(lc.column) if lc else None
            override = lc.gen_in.get(state, {}).get(c.name) if lc and state is not None else None
            if c.name in derived:
                v: JSONValue = 0 if c.type in ("integer", "real") else None
            elif lc and c.name in lc.set_in and state not in lc.set_in[c.name]:
                v = None
            elif override is not None:
                v = self.generate(c, override, row)
            else:
                v = self.value(ent, c, row)
                if lc and c.name in lc.set_in and v is None:
                    # set in this state: a link names a parent (a dispatched order has its courier)
                    ids = self.ids.get(c.ref, []) if c.ref else []
                    v = ids[self.rng.randrange(len(ids))] if ids else None if c.ref else self.default(c)
            if lc and v is not None and c.type in ("date", "datetime"):
                follows = _follows(override if override is not None else c.gen)
                if state in lc.future_in.get(c.name, ()) and not (follows and self.on_side(v, future=True)):
                    v = self.place(c, v, future=True)
                elif state in lc.past_in.get(c.name, ()) and not (follows and self.on_side(v, future=False)):
                    v = self.place(c, v, future=False)
            if _distinct(c) and v is not None:
                v = self.unique_value(ent, c, row, v, seen[c.name])
            row[c.name] = v
        return {"id": rid, **{c.name: row[c.name] for c in ent.columns}}

    def unique_value(self, ent: Entity, c: BlueprintColumn, row: dict[str, Any], v: JSONValue,
                     seen: set[object]) -> JSONValue:
        def free(x: JSONValue) -> bool:
            return x not in seen and ("@", email_key(x)) not in seen

        for _ in range(20):
            if free(v):
                return v
            v = self.value(ent, c, row)
        for _ in range(20):
            v = fresh_value(c.name, v, self.rng, seen, row=row, fake=self.fake, lo=c.min, hi=c.max)
            if free(v):
                break
        return v

    def on_side(self, v: JSONValue, *, future: bool) -> bool:
        """Whether a date already lies where its row's state demands: on or after today, or not after now."""
        if future:
            return str(v)[:10] >= self.clock.date().isoformat()
        return _as_datetime(str(v)) <= self.clock

    def place(self, c: BlueprintColumn, v: JSONValue, *, future: bool) -> str:
        """Move a date to the side of the clock its row's state demands (keeping its time of day)."""
        cur = _as_datetime(str(v))
        today = self.clock.date()
        # some rows sit on today itself, so transitions from a future state to a past one have rows to act on
        on_today = self.rng.random() < (0.2 if future else 0.1)
        if on_today or (future and cur.date() < today):
            days = 0 if on_today or self.rng.random() < 0.3 else self.rng.randint(1, 75)
            cur = dt.datetime.combine(today + dt.timedelta(days=days), cur.time())
        elif not future and cur.date() > today:
            days = 0 if self.rng.random() < 0.3 else self.rng.randint(1, 240)
            cur = dt.datetime.combine(today - dt.timedelta(days=days), cur.time())
        if cur.date() == today and self.rng.random() < 0.5:
            cur = self.clock - dt.timedelta(minutes=self.rng.choice([30, 60, 90, 120]))
        if c.type == "date":
            return cur.date().isoformat()
        return cur.isoformat()

    def value(self, ent: Entity, c: BlueprintColumn, row: dict[str, Any]) -> JSONValue:
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
            weights = [lc.weights.get(s, 3 if s == lc.initial else 1) for s in lc.states]
            return rng.choices(lc.states, weights)[0]
        if c.auto and c.gen is None:  # a generator, where given, draws the seed rows' values
            return self.clock.isoformat() if c.auto == "now" else self.clock.date().isoformat()
        if c.gen is None:
            return self.default(c)
        return self.generate(c, c.gen, row)

    def default(self, c: BlueprintColumn) -> JSONValue:
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
        return text_for_column(c.name, self.fake, rng, self.vocabulary)

    def _parent_value(self, fk: str, col: str, row: dict[str, Any]) -> object:
        ent = next(e for e in self.bp.entities if any(x.name == fk for x in e.columns))
        parent = next(x.ref for x in ent.columns if x.name == fk)
        got = self.scratch.execute(f"SELECT {quote_ident(col)} FROM {quote_ident(str(parent))} WHERE id = ?",
                                   (row.get(fk),)).fetchone()
        return got[0] if got else None

    def _slot(self, name: str, part: str | None, row: dict[str, Any]) -> str:
        """A template slot: a column of the row drawn so far (``{display_name:first}``: its first
        word), else a Faker provider."""
        value = str(row[name]) if name in row and row[name] is not None else str(getattr(self.fake, name)())
        words = [w for w in value.split() if w.rstrip(".").lower() not in ("mr", "mrs", "ms", "dr", "miss")]
        if part and words:
            return words[0] if part == "first" else words[-1]
        return value

    def generate(self, c: BlueprintColumn, gen: object, row: dict[str, Any]) -> JSONValue:
        rng = self.rng
        if isinstance(gen, str):
            if gen in ("email", "safe_email", "free_email", "company_email"):
                # the row's person, or someone's name: an address spelled from a name, never "sarah86@"
                person = next((v for k, v in row.items() if isinstance(v, str) and _PERSON.search(k)), None)
                if person and len(person.split()) == 1:
                    person = f"{person} {self.fake.last_name()}"
                return email_for_name(person or self.fake.name(), rng) or email_for_name(self.fake.name(), rng)
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
            decimals = int(arg[2]) if len(arg) > 2 else 2
            if decimals == 2 and _PRICE.search(c.name) and arg[1] - arg[0] >= 2:
                return self.generate(c, {"price": arg[:2]}, row)  # list prices end in .00, .50, .95 or .99
            return round(rng.uniform(arg[0], arg[1]), decimals)
        if kind == "choice":
            if isinstance(arg, dict):
                return cast(JSONValue, rng.choices(list(arg), list(arg.values()))[0])
            return cast(JSONValue, arg[rng.randrange(len(arg))])
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
            return re.sub(r"\{(\w+)(?::(first|last))?\}", lambda m: self._slot(m.group(1), m.group(2), row), arg)
        if kind == "words":
            return " ".join(self.fake.words(int(arg))).capitalize()
        if kind == "json":
            return cast(JSONValue, json.loads(json.dumps(arg)))
        if kind == "by":
            key, table = arg
            options = table.get(str(row.get(key))) or [v for vs in table.values() for v in vs]
            return cast(JSONValue, options[rng.randrange(len(options))])
        if kind == "case":
            key, table = arg
            sub = table.get(str(row.get(key)))
            return None if sub is None else self.generate(c, sub, row)
        if kind == "price":
            lo, hi = arg
            whole = rng.randint(int(lo), max(int(lo), int(hi) - 1))
            return float(whole) + rng.choice([0.0, 0.0, 0.0, 0.5, 0.95, 0.99])
        if kind == "parent":  # the value of ``col`` in the parent row that ``fk`` names
            fk, col = arg
            return cast(JSONValue, self._parent_value(fk, col, row))
        if kind == "sql":  # an SQL expression over the row drawn so far (named as its table) and its parents
            names = [k for k in row if k in {"id", *(x.name for x in self._drawing.columns)}]
            sel = ", ".join(f"? AS {quote_ident(k)}" for k in names) or "NULL AS id"
            got = self.scratch.execute(f"SELECT ({arg}) FROM (SELECT {sel}) AS {quote_ident(self._drawing.name)}",
                                       [_to_sql(row[k]) for k in names]).fetchone()
            return cast(JSONValue, got[0] if got else None)
        if kind == "ref_date":
            fk, col, lo, hi = arg
            ent = next(e for e in self.bp.entities if any(x.name == fk for x in e.columns))
            parent = next(x.ref for x in ent.columns if x.name == fk)
            assert parent is not None  # fk is a reference column (the blueprint's checks)
            got = self.scratch.execute(f"SELECT {quote_ident(col)} FROM {quote_ident(parent)} WHERE id = ?",
                                       (row.get(fk),)).fetchone()
            if not got or got[0] is None:
                return None
            if isinstance(got[0], int | float):  # a number of the parent (a year): lo..hi more
                return type(got[0])(got[0] + rng.randint(int(lo), int(hi)))
            d = _parse_date(got[0]) + dt.timedelta(days=rng.randint(int(lo), int(hi)))
            return d.isoformat() if c.type == "date" else f"{d.isoformat()}T{rng.randint(8, 17):02d}:00:00"
        if kind == "ref_ratio":  # a share of a number of the parent row: an offer against the asking price
            fk, col, lo, hi = arg
            base = self._parent_value(fk, col, row)
            if not isinstance(base, int | float):
                return None
            return round(float(base) * rng.uniform(float(lo), float(hi)), 2)
        if kind == "username_from":  # a handle spelled from the person's name: "mdavis", "martha_davis"
            person = row.get(arg)
            styles = [x for x in (email_styles(str(person)) if person else []) if "_" not in x]
            return styles[rng.randrange(min(4, len(styles)))] if styles else self.fake.user_name()
        if kind == "email_from":
            person = row.get(arg)
            return (email_for_name(str(person), rng) if person else None) or self.fake.email()
        raise SpecError([(f"columns.{c.name}.gen", f"unknown generator kind {kind!r}")])


class _Trial:
    """Try a candidate row of one table in the scratch database against that table's rules."""

    def __init__(self, conn: sqlite3.Connection, table: str, cols: list[str],
                 checks: list[tuple[Invariant, str]], clock: dict[str, str]):
        self.conn, self.table, self.cols, self.checks, self.clock = conn, quote_ident(table), cols, checks, clock
        self.insert = f"INSERT INTO {self.table} VALUES ({', '.join('?' * len(cols))})"

    def bad(self, row: dict[str, Any]) -> list[Invariant]:
        """The rules ``row`` breaks; a row that breaks none stays inserted."""
        self.conn.execute(self.insert, [_to_sql(row[c]) for c in self.cols])
        bad = [inv for inv, sql in self.checks
               if self.conn.execute(sql, {**_used(sql, self.clock), "_key": row["id"]}).fetchone()]
        if bad:
            self.conn.execute(f"DELETE FROM {self.table} WHERE id = ?", (row["id"],))
        return bad


def _as_datetime(s: str) -> dt.datetime:
    """A date or datetime column's value as a datetime (a date at midnight)."""
    return dt.datetime.fromisoformat(s) if "T" in s else dt.datetime.combine(_parse_date(s), dt.time())


def _follows(gen: object) -> bool:
    """Whether a generator draws a date from another date, of the row or of its parent (a due date 21 days
    after the loan, work handed in before the assignment's due date): such a date keeps its distance when
    it already lies on its state's side of the clock."""
    return isinstance(gen, dict) and len(gen) == 1 and next(iter(gen)) in ("date_after", "ref_date")


def _holds(a: float, op: str, b: float) -> bool:
    return {"=": a == b, "<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b}[op]


def _distinct(c: BlueprintColumn) -> bool:
    """Whether no two seed rows share the column's value: a unique column, or a person's own e-mail
    address (two namesakes never share an address, nor its words reordered)."""
    return c.unique or (c.name == "email" and c.type == "text")


def _used(sql: str, params: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in params.items() if f":{k}" in sql}


def seed_rows(bp: Blueprint, seed: int = 0, scale: float = 1.0) -> dict[str, list[dict[str, Any]]]:
    """Deterministic seed rows for every entity of ``bp``."""
    return SeedGenerator(bp, seed, scale).rows()

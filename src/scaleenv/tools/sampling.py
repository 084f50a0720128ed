"""Draw schema-valid arguments for a tool from a world, and search for arguments that satisfy
(or violate exactly one of) its preconditions. Used by the procedural tester, the task sampler,
environment expansion and the random policy."""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import Param, ToolSpec
from scaleenv.formats.sqlinfo import analyze_sql, sql_params
from scaleenv.tools.args import _check_param, validate_arguments
from scaleenv.tools.runtime import bind_params, first_failing_precondition
from scaleenv.tools.values import fresh_value
from scaleenv.utils.dates import shift_iso
from scaleenv.world.ddl import quote_ident
from scaleenv.world.world import World

_POOL = 60


def _missing_like(v: str, existing: set[Any]) -> str:
    """A value shaped like an existing id that names nothing (PET-0042 -> PET-9999)."""
    out = re.sub(r"\d", "9", v) if re.search(r"\d", v) else v + "-missing"
    while out in existing:
        out += "9"
    return out


def _fresh(column: str, v: str, rng: random.Random, taken: set[Any]) -> str:
    """A new realistic value of the same kind (for unique columns): another spelling of an e-mail,
    a redrawn code, another name (see :func:`scaleenv.tools.values.fresh_value`)."""
    return fresh_value(column, v, rng, taken)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _is_date_param(world: World, p: Param, values: list[Any]) -> bool:
    """A string parameter that carries a date: its column is typed date/datetime, or its values are ISO
    dates, or (no values at all) its name says so (``checked_out_on``, ``start_date``, ``due_at``)."""
    if p.column:
        t, _, c = p.column.partition(".")
        table = world.spec.table(t)
        col = table.column(c) if table else None
        if col is not None and col.type in ("date", "datetime"):
            return True
    strs = [v for v in values if isinstance(v, str)]
    if strs:
        return bool(_DATE.match(strs[0]))
    return bool(re.search(r"(_on|_date|_at|^date)$", p.name))


@dataclass
class Refusal:
    """The closest a failed search came: the first precondition that no single changed argument made
    hold, the arguments it stood at, and the values it tried per parameter (with their columns)."""

    index: int
    error: str
    sql: str
    args: dict[str, Any]
    tried: dict[str, list[Any]]
    columns: dict[str, str]

    def text(self, shown: int = 5) -> str:
        """One bounded line for a failure log."""
        import json

        def dump(v: object) -> str:
            return json.dumps(v, ensure_ascii=False, default=str)

        tried = "; ".join(
            f"{n} from {self.columns.get(n, 'its type')}: "
            f"{dump(vs[:shown])}{f' and {len(vs) - shown} more' if len(vs) > shown else ''}"
            for n, vs in self.tried.items())
        sql = self.sql if len(self.sql) <= 300 else self.sql[:300] + " [...]"
        head = (f"precondition {self.index + 1} ({self.error}: {sql}) refused the closest candidate "
                f"{dump(self.args)}")
        return head + (f"; values tried: {tried}" if tried else "")


class ArgSampler:
    """Candidate values per parameter, drawn from the world's data (deterministic for a given rng)."""

    def __init__(self, world: World, rng: random.Random):
        self.world = world
        self.rng = rng
        self._col_cache: dict[str, list[Any]] = {}
        self._cand_cache: dict[tuple[Any, ...], list[Any]] = {}
        self.refusal: Refusal | None = None

    def invalidate(self) -> None:
        """Forget cached column values (call after the world's rows change)."""
        self._col_cache.clear()
        self._cand_cache.clear()

    def column_values(self, ref: str) -> list[Any]:
        """Distinct values of ``table.column`` (following a foreign key to its target)."""
        if ref in self._col_cache:
            return self._col_cache[ref]
        t, _, c = ref.partition(".")
        table = self.world.spec.table(t)
        col = table.column(c) if table else None
        vals: list[Any] = []
        if col is not None:
            if col.foreign_key:
                t, _, c = col.foreign_key.partition(".")
            vals = [r[0] for r in self.world.conn.execute(
                f"SELECT DISTINCT {quote_ident(c)} FROM {quote_ident(t)} WHERE {quote_ident(c)} IS NOT NULL "
                f"ORDER BY 1 LIMIT 400")]
        self._col_cache[ref] = vals
        return vals

    def candidates(self, p: Param, *, invalid: bool = False) -> list[Any]:
        """Schema-valid candidate values for ``p``; with ``invalid`` also values likely to break rules."""
        key = (p.name, p.type, p.column, tuple(p.enum) if p.enum is not None else None, p.minimum, p.maximum,
               p.items, invalid)
        hit = self._cand_cache.get(key)
        if hit is None:
            hit = self._cand_cache[key] = self._candidates(p, invalid)
        return hit

    def _candidates(self, p: Param, invalid: bool) -> list[Any]:
        if p.type == "boolean":
            return [True, False]
        rng = self.rng
        out: list[Any] = []
        if p.enum is not None:
            out = list(p.enum)
        elif p.column:
            base = self.column_values(p.column)
            base = rng.sample(base, min(len(base), _POOL)) if base else []
            for v in base:
                out.append(v)
            if p.type in ("number", "integer"):
                nums = [v for v in base if isinstance(v, int | float) and not isinstance(v, bool)]
                for v in nums[:15]:
                    for f in (0.5, 0.1, 0.25) + ((2, 10) if invalid else ()):
                        x = round(v * f, 2)
                        out.append(int(round(x)) if p.type == "integer" else x)
                out += [10, 20, 50, 100, 1] if p.type == "integer" else [1.0, 5.0, 10.0]
            elif p.type == "string":
                strs = [v for v in base if isinstance(v, str)]
                if strs and re.match(r"^\d{4}-\d{2}-\d{2}", strs[0]):
                    out += [shift_iso(v, d) for v in strs[:10] for d in (1, 7, 30)]
                elif strs:
                    col = p.column.partition(".")[2]
                    # a value-seeded rng, so drawing fresh values leaves the search's random stream as it was
                    taken = set(self.column_values(p.column))
                    out += [_fresh(col, v, random.Random(f"{p.column}:{v}"), taken) for v in strs[:2]]
                if invalid and strs:
                    existing = set(self.column_values(p.column))
                    out += list(dict.fromkeys(_missing_like(v, existing) for v in strs[:3]))
        if invalid and p.type == "string" and p.enum is None:
            out += ["", "   "]
        if not out:
            defaults: dict[str, list[Any]] = {
                "string": ["sample text", "other note"],
                "integer": [1, 2, 5, 10],
                "number": [1.0, 10.0, 50.0],
                "boolean": [True, False],
                "array": [[]],
            }
            out = defaults[p.type]
        valid = []
        for v in out:
            try:
                _check_param(p, v)
            except ValueError:
                continue
            valid.append(v)
        return valid

    def random_args(self, tool: ToolSpec, *, optional_rate: float = 0.5) -> dict[str, Any]:
        """Schema-valid arguments, anchored on one random row per referenced table when possible."""
        args: dict[str, Any] = {}
        anchors: dict[str, dict[str, Any] | None] = {}
        for p in tool.parameters:
            if not p.required and self.rng.random() < optional_rate:
                continue
            v = None
            if p.column:
                # all or none of a table's values come from its anchor row: a new pet's species with its
                # breed and weight, a review's 5 stars with its title and body
                t, _, c = p.column.partition(".")
                if t not in anchors:
                    anchors[t] = self._random_row(t) if self.rng.random() < 0.75 else None
                row = anchors[t]
                if row is not None and row.get(c) is not None and (p.enum is None or row[c] in p.enum):
                    v = row[c]
                    if p.type == "boolean" and v in (0, 1):
                        v = bool(v)  # SQLite stores booleans as 0/1
                    try:
                        v = _check_param(p, v)
                        if p.type == "array":
                            v = [row[c]]
                    except ValueError:
                        v = None
            if v is None:
                cands = self.candidates(p)
                v = cands[self.rng.randrange(len(cands))] if cands else None
            if v is not None:
                args[p.name] = v
        return args

    def _random_row(self, table: str) -> dict[str, Any] | None:
        if self.world.spec.table(table) is None:
            return None
        n = self.world.count(table)
        if n == 0:
            return None
        cur = self.world.conn.execute(f"SELECT * FROM {quote_ident(table)} LIMIT 1 OFFSET ?",
                                      (self.rng.randrange(n),))
        r = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], r, strict=True))

    # --- contract-guided search ----------------------------------------------------
    def _fails_at(self, tool: ToolSpec, args: dict[str, Any], upto: int | None = None) -> int | None | str:
        try:
            params = bind_params(self.world, tool, args)
        except ToolError:
            return "invalid"
        return first_failing_precondition(self.world, tool, params, upto)

    def satisfying_args(self, tool: ToolSpec, attempts: int = 8,
                        fixed: dict[str, Any] | None = None, *, widen: bool = False,
                        hints: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """Arguments under which every precondition holds (coordinate search), or None.
        ``fixed`` arguments are kept as given.

        With ``widen``, a search that found nothing is tried once more: first each of ``hints``
        whole (argument sets known to work, such as a test agent's positive cases), then with wider
        candidates: the hints' values, and for a date parameter the clock's date and the dates of the
        columns the failing precondition reads. A date a tool writes into the row it creates
        (``checked_out_on`` -> ``loans.start_date``) then needs no existing row carrying it. The
        first search is unchanged, so whatever it found before it still finds, from the same stream.
        :attr:`refusal` says afterwards which precondition refused the closest candidate."""
        fixed = fixed or {}
        self.refusal = None
        found = self._search(tool, attempts, fixed, lambda i, p: self.candidates(p))
        if found is not None or not widen:
            return found
        for h in hints or []:
            args = {**h, **fixed}
            if isinstance(h, dict) and self._fails_at(tool, args) is None:
                return args
        hinted: dict[str, list[Any]] = {}
        for h in hints or []:
            for k, v in (h or {}).items():
                hinted.setdefault(k, []).append(v)
        return self._search(tool, attempts, fixed, lambda i, p: self._wide_candidates(tool, i, p, hinted))

    def _search(self, tool: ToolSpec, attempts: int, fixed: dict[str, Any],
                cands: Any) -> dict[str, Any] | None:
        for _ in range(attempts):
            args = {**self.random_args(tool), **fixed}
            ok = True
            for i, pre in enumerate(tool.preconditions):
                if self._fails_at(tool, args, i + 1) is None:
                    continue
                names = [n for n in sorted(sql_params(pre.sql)) if tool.param(n) and n not in fixed]
                self.rng.shuffle(names)
                repaired = False
                tried: dict[str, list[Any]] = {}
                for name in names:
                    values = cands(i, tool.param(name))
                    tried[name] = values
                    for v in values:
                        trial = {**args, name: v}
                        if self._fails_at(tool, trial, i + 1) is None:
                            args, repaired = trial, True
                            break
                    if repaired:
                        break
                if not repaired:
                    if self.refusal is None or i > self.refusal.index:
                        columns = {n: str(getattr(tool.param(n), "column", "") or "") for n in tried}
                        self.refusal = Refusal(i, pre.error, pre.sql, dict(args), tried,
                                               {n: c for n, c in columns.items() if c})
                    ok = False
                    break
            if ok:
                at = self._fails_at(tool, args)
                if at is None:
                    return args
                if isinstance(at, int) and (self.refusal is None or at > self.refusal.index):
                    pre = tool.preconditions[at]
                    self.refusal = Refusal(at, pre.error, pre.sql, dict(args), {}, {})
        return None

    def _wide_candidates(self, tool: ToolSpec, index: int, p: Param, hinted: dict[str, list[Any]]) -> list[Any]:
        out = list(dict.fromkeys([*hinted.get(p.name, []), *self.candidates(p)]))
        if p.type == "string" and p.enum is None and _is_date_param(self.world, p, out):
            extra: list[Any] = []
            today = str(self.world.spec.clock)[:10]
            extra += [today] + [shift_iso(today, d) for d in (-30, -7, -1, 1, 7, 30)]
            try:
                reads = analyze_sql(self.world.conn, tool.preconditions[index].sql).reads
            except sqlite3.Error:
                reads = set()
            for t, c in sorted(reads):
                table = self.world.spec.table(t)
                col = table.column(c) if table else None
                if col is not None and col.type in ("date", "datetime"):
                    vals = self.column_values(f"{t}.{c}")
                    extra += vals[:_POOL]
            # a datetime parameter gets datetimes, a date parameter dates
            want_time = any(isinstance(v, str) and len(v) > 10 for v in out)
            shaped = [v if want_time or not isinstance(v, str) else v[:10] for v in extra]
            for v in dict.fromkeys(shaped):
                if v in out:
                    continue
                try:
                    _check_param(p, v)
                except ValueError:
                    continue
                out.append(v)
        return out

    def violating_args(self, tool: ToolSpec, base: dict[str, Any], index: int) -> dict[str, Any] | None:
        """Change one argument of ``base`` so that precondition ``index`` is the first to fail."""
        pre = tool.preconditions[index]
        names = [n for n in sorted(sql_params(pre.sql)) if tool.param(n)]
        for name in names:
            for v in self.candidates(tool.param(name), invalid=True):  # type: ignore[arg-type]
                trial = {**base, name: v}
                if self._fails_at(tool, trial) == index:
                    return trial
        return None


def is_valid(tool: ToolSpec, args: dict[str, Any]) -> bool:
    try:
        validate_arguments(tool, args)
    except ToolError:
        return False
    return True

"""Compare a final world with the expected one, column by column, by each column's match policy."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scaleenv.formats.task import AnswerFact
from scaleenv.reward.facts import fact_stated_in
from scaleenv.reward.match import DEFAULT_THRESHOLD, Matcher, fuzzy_similarity
from scaleenv.utils.dates import same_iso
from scaleenv.world.world import World, norm_value


class RowIndex(Protocol):
    """What the reward needs of the initial state: which rows it had (a :class:`World`, or a
    registered snapshot's :class:`~scaleenv.world.world.SnapshotKeys`)."""

    def has_row(self, table: str, key: object) -> bool: ...


@dataclass
class Reward:
    """``score`` is 1.0 only when every non-exempt cell matches and every answer fact was stated."""

    score: float
    success: bool
    components: dict[str, float]
    diff: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, Any, str]] = field(default_factory=list, repr=False, compare=False)
    """``(table, key, why)`` for each mismatched row (``why``: ``missing``, ``extra`` or ``cells``; the
    expected key of a created row, the final key of an unpaired extra one); not in :meth:`to_json`
    (the sub-goal rewards read it: :mod:`scaleenv.reward.subgoals`)."""
    unseen: list[str] = field(default_factory=list, repr=False, compare=False)
    """The answer facts (names) stated without the agent having been shown any record they are about
    (:attr:`~scaleenv.formats.task.AnswerFact.seen`): they do not count."""

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "success": self.success, "components": self.components, "diff": self.diff}


def _json_value(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except (ValueError, RecursionError):
            return v
    return v


def same_value(want: Any, got: Any, column_type: str = "text") -> bool:
    """Exact match by value, not by spelling: 1 == 1.0, float round-off (1e-9) is forgiven, json
    columns compare parsed documents (key order and whitespace don't matter), and date and datetime
    columns compare the day or moment an ISO value means (``2026-06-26 10:00:00`` is
    ``2026-06-26T10:00:00``; a date is not a datetime at midnight)."""
    if norm_value(want) == norm_value(got):
        return True
    num = (int, float)
    if isinstance(want, num) and isinstance(got, num) and not isinstance(want, bool) and not isinstance(got, bool):
        return bool(math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9))
    if column_type == "json":
        return bool(_json_value(want) == _json_value(got))
    if column_type in ("date", "datetime"):
        return bool(same_iso(want, got))
    return False


def _fmt(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _fk_tables(final: World) -> dict[tuple[str, str], str]:
    """(table, column) -> the table a foreign-key column refers to."""
    return {(t.name, c.name): c.foreign_key.partition(".")[0] for t in final.spec.tables for c in t.columns
            if c.foreign_key}


def _table_order(final: World) -> list[str]:
    """Tables parents first, so created parents are paired before the rows that refer to them."""
    deps = {t.name: {c.foreign_key.partition(".")[0] for c in t.columns if c.foreign_key} - {t.name}
            for t in final.spec.tables}
    order: list[str] = []
    while deps:
        ready = sorted(t for t, d in deps.items() if not d - set(order))
        if not ready:  # a reference cycle: keep the rest in name order
            ready = sorted(deps)
        order.extend(ready)
        for t in ready:
            deps.pop(t)
    return order


class _Cells:
    """Cell comparison by each column's match policy, with references to created rows followed
    through the pairing of created rows."""

    def __init__(self, final: World, matcher: Matcher, threshold: float,
                 before: World | Callable[[], World] | None = None):
        self.columns = {(t.name, c.name): c for t in final.spec.tables for c in t.columns}
        self.pk = {t.name: t.primary_key for t in final.spec.tables}
        self.fk = _fk_tables(final)
        self.matcher = matcher
        self.threshold = threshold
        self.before = before
        self.pairs: dict[str, dict[Any, Any]] = {}
        """table -> expected created key -> the final key it is paired with"""

    def checked(self, table: str, col: str) -> bool:
        spec_col = self.columns.get((table, col))
        return col != self.pk.get(table) and (spec_col is None or spec_col.match != "exempt")

    def mismatch(self, table: str, col: str, want: Any, got: Any, key: Any = None) -> str | None:
        """``None`` when the cell matches, else the diff line's tail. A semantic cell of a row that was
        there before (``key`` in ``before``) must also be nearer the expected value than the value it had:
        "Best regards, David" left as it was is no copy of the expected "Best regards, Darius"."""
        spec_col = self.columns.get((table, col))
        ref = self.fk.get((table, col))
        if ref is not None and ref in self.pairs and want in self.pairs[ref]:
            want = self.pairs[ref][want]
        policy = spec_col.match if spec_col is not None else "exact"
        if policy == "semantic" and want is not None and got is not None:
            sim = self.matcher(str(want), str(got))
            if sim >= self.threshold and (str(want) == str(got) or not self._unchanged(table, col, want, got, key, sim)):
                return None
            return f"expected ~{_fmt(want)}, got {_fmt(got)} (similarity {sim:.2f})"
        if same_value(want, got, spec_col.type if spec_col is not None else "text"):
            return None
        return f"expected {_fmt(want)}, got {_fmt(got)}"

    def _unchanged(self, table: str, col: str, want: Any, got: Any, key: Any, sim: float) -> bool:
        """Whether ``got`` is at least as near the cell's value before the episode as the expected value."""
        if self.before is None or key is None:
            return False
        if not isinstance(self.before, World):  # opened only when a near copy needs it
            self.before = self.before()
        row = self.before.row(table, key)
        old = None if row is None else row.get(col)
        if old is None or str(old) == str(want):
            return False
        return self.matcher(str(old), str(got)) >= sim

    def row_mismatches(self, table: str, want: Mapping[str, Any], got: Mapping[str, Any]) -> list[tuple[str, str]]:
        return [(col, why) for col, w in want.items() if self.checked(table, col)
                and (why := self.mismatch(table, col, w, got.get(col))) is not None]


def _pair_created(cells: _Cells, table: str, want: dict[Any, dict[str, Any]], got: dict[Any, dict[str, Any]]
                  ) -> dict[Any, Any]:
    """Pair expected created rows with final created rows by content (the matched columns), not by
    their generated ids: fewest mismatched cells first, ties by key order (deterministic)."""
    scored = []
    for i, (wk, wrow) in enumerate(sorted(want.items(), key=lambda kv: _sort(kv[0]))):
        for j, (gk, grow) in enumerate(sorted(got.items(), key=lambda kv: _sort(kv[0]))):
            n = len(cells.row_mismatches(table, wrow, grow))
            scored.append((n, wk != gk, i, j, wk, gk))
    scored.sort(key=lambda s: s[:4])
    pairs: dict[Any, Any] = {}
    used: set[Any] = set()
    for n, _, _, _, wk, gk in scored:
        if wk in pairs or gk in used:
            continue
        checked = sum(1 for c in want[wk] if cells.checked(table, c))
        if checked and n >= checked:  # nothing in common: not the same row
            continue
        pairs[wk] = gk
        used.add(gk)
    return pairs


def _created_keys(final: World, expected: World, initial: RowIndex | None, keys: Mapping[str, Iterable[Any]] | None,
                  changes: Mapping[str, list[Any]]) -> dict[str, set[Any]]:
    """Per table, the keys in scope of rows created during the episode (in either world)."""
    if initial is None:
        return {t: {ch.key for ch in chs if ch.kind in ("added", "removed")} for t, chs in changes.items()}
    out: dict[str, set[Any]] = {}
    for table in final.table_names:
        if keys is not None:
            scope = set(keys.get(table, ()))
        else:
            scope = {r[final.primary_key(table)] for r in final.rows(table)}
            scope |= {r[expected.primary_key(table)] for r in expected.rows(table)}
        new = {k for k in scope if not initial.has_row(table, k)}
        if new:
            out[table] = new
    return out


def _sort(k: Any) -> tuple[int, str]:
    return (0, f"{k:020d}") if isinstance(k, int) else (1, str(k))


def compute_reward(
    final: World,
    expected: World,
    *,
    answer_facts: Iterable[AnswerFact] = (),
    said: str | Sequence[str] = "",
    keys: Mapping[str, Iterable[Any]] | None = None,
    matcher: Matcher = fuzzy_similarity,
    threshold: float = DEFAULT_THRESHOLD,
    initial: RowIndex | None = None,
    shown: Collection[str] | None = None,
    before: World | Callable[[], World] | None = None,
) -> Reward:
    """Score ``final`` against ``expected``.

    ``keys`` limits the comparison to those primary keys (the rows touched by the gold chain or
    the agent); without it the whole database is compared. ``said`` is what the agent told
    the user (one string, or its messages in order), checked against ``answer_facts``: the agent's
    last word on each fact's attribute counts (:func:`scaleenv.reward.facts.fact_stated_in`).

    Rows created during the episode are paired with the expected created rows by content (their
    matched columns), not by their generated ids, and references to created rows follow that
    pairing: two independent inserts made in the other order still match. A created row is one
    whose key is not in ``initial`` (without it: a key that only one of the two worlds holds).

    ``before`` is the initial world with its values, or a function that opens it (called only when a
    near copy needs it; optional): a ``semantic`` cell of a row it holds
    matches only when the final value is nearer the expected one than to the value it had, so leaving a
    text as it was never passes for a change to a similar one.

    ``shown`` holds the record ids the agent's successful calls showed it: a fact with ``seen`` ids
    counts only when one of them is among them (``None``: not tracked, nothing is checked).
    """
    cells = _Cells(final, matcher, threshold, before)
    diff: list[str] = []
    bad_rows: list[tuple[str, Any, str]] = []
    rows_bad = 0
    cells_bad = 0
    by_table: dict[str, list[Any]] = {}
    for ch in expected.diff(final, keys):
        by_table.setdefault(ch.table, []).append(ch)
    created = _created_keys(final, expected, initial, keys, by_table)
    tables = set(by_table) | {t for t, ks in created.items() if ks}
    order = [t for t in _table_order(final) if t in tables]
    for table in order:
        changes = by_table.get(table, [])
        want = {k: r for k in created.get(table, ()) if (r := expected.row(table, k)) is not None}
        got = {k: r for k in created.get(table, ()) if (r := final.row(table, k)) is not None}
        pairs = _pair_created(cells, table, want, got) if want and got else {}
        cells.pairs[table] = pairs
        paired_final = set(pairs.values())
        for k in sorted(want.keys() - pairs.keys(), key=_sort):
            rows_bad += 1
            bad_rows.append((table, k, "missing"))
            diff.append(f"{table}[{k!r}]: expected row is missing")
        for k in sorted(got.keys() - paired_final, key=_sort):
            rows_bad += 1
            bad_rows.append((table, k, "extra"))
            diff.append(f"{table}[{k!r}]: unexpected row written (extra write)")
        for ch in changes:
            where = f"{table}[{ch.key!r}]"
            if ch.key in want or ch.key in got:
                continue  # a created row: compared through the pairing
            if ch.kind == "added":
                rows_bad += 1
                bad_rows.append((table, ch.key, "cells"))  # a row the gold chain removed is still there
                diff.append(f"{where}: unexpected row written (extra write)")
                continue
            if ch.kind == "removed":
                rows_bad += 1
                bad_rows.append((table, ch.key, "missing"))
                diff.append(f"{where}: expected row is missing")
                continue
            bad = [(c, why) for c, (w, g) in ch.columns.items() if cells.checked(table, c)
                   and (why := cells.mismatch(table, c, w, g, ch.key)) is not None]
            cells_bad += len(bad)
            rows_bad += bool(bad)
            if bad:
                bad_rows.append((table, ch.key, "cells"))
            diff.extend(f"{where}.{c}: {why}" for c, why in bad)
        for wk, gk in sorted(pairs.items(), key=lambda kv: _sort(kv[0])):
            bad = cells.row_mismatches(table, want[wk], got[gk])
            where = f"{table}[{wk!r}]" if wk == gk else f"{table}[{wk!r} as {gk!r}]"
            cells_bad += len(bad)
            rows_bad += bool(bad)
            if bad:
                bad_rows.append((table, wk, "cells"))
            diff.extend(f"{where}.{c}: {why}" for c, why in bad)
    facts = list(answer_facts)
    facts_ok = 0
    unseen: list[str] = []
    for f in facts:
        if not fact_stated_in(f, [said] if isinstance(said, str) else list(said)):
            diff.append(f"answer fact {f.name!r} = {_fmt(f.value)} was not stated to the user")
        elif f.seen and shown is not None and not any(i in shown for i in f.seen):
            unseen.append(f.name)
            diff.append(f"answer fact {f.name!r} was stated without looking at the record it is about "
                        f"({', '.join(f.seen)})")
        else:
            facts_ok += 1
    state_ok = rows_bad == 0
    facts_frac = facts_ok / len(facts) if facts else 1.0
    success = state_ok and facts_ok == len(facts)
    components = {
        "state_match": 1.0 if state_ok else 0.0,
        "mismatched_rows": float(rows_bad),
        "mismatched_cells": float(cells_bad),
        "answer_facts": facts_frac,
    }
    return Reward(1.0 if success else 0.0, success, components, diff, bad_rows, unseen)


RULES_KEPT = "policy_rules_kept"
"""The reward component that says no write broke a rule of the domain's policy when it was made."""


def with_rules_kept(reward: Reward, broken: Sequence[str]) -> Reward:
    """``reward`` with :data:`RULES_KEPT` (1.0 or 0.0): a write that broke a rule of the policy when it
    was made (``broken``: ``tool: rule`` each) makes the binary reward 0 and says so in the diff, even
    where a later change left the final state as expected."""
    components = {**reward.components, RULES_KEPT: 0.0 if broken else 1.0}
    if not broken:
        return replace(reward, components=components)
    diff = [*reward.diff, *(f"policy: {b} was broken when the change was made" for b in broken)]
    return replace(reward, score=0.0, success=False, components=components, diff=diff)

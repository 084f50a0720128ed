"""Compare a final world with the expected one, column by column, by each column's match policy."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaleenv.reward.facts import AnswerFact, fact_stated
from scaleenv.reward.match import DEFAULT_THRESHOLD, Matcher, fuzzy_similarity
from scaleenv.world.world import World, norm_value


@dataclass
class Reward:
    """``score`` is 1.0 only when every non-exempt cell matches and every answer fact was stated."""

    score: float
    success: bool
    components: dict[str, float]
    diff: list[str] = field(default_factory=list)

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
    """Exact match by value, not by spelling: 1 == 1.0, float round-off (1e-9) is forgiven, and
    json columns compare parsed documents (key order and whitespace don't matter)."""
    if norm_value(want) == norm_value(got):
        return True
    num = (int, float)
    if isinstance(want, num) and isinstance(got, num) and not isinstance(want, bool) and not isinstance(got, bool):
        return math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9)
    if column_type == "json":
        return _json_value(want) == _json_value(got)
    return False


def _fmt(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def compute_reward(
    final: World,
    expected: World,
    *,
    answer_facts: Iterable[AnswerFact] = (),
    said: str = "",
    keys: Mapping[str, Iterable[Any]] | None = None,
    matcher: Matcher = fuzzy_similarity,
    threshold: float = DEFAULT_THRESHOLD,
) -> Reward:
    """Score ``final`` against ``expected``.

    ``keys`` limits the comparison to those primary keys (the rows touched by the gold chain or
    the agent); without it the whole database is compared. ``said`` is everything the agent told
    the user, checked against ``answer_facts``.
    """
    columns = {(t.name, c.name): c for t in final.spec.tables for c in t.columns}
    diff: list[str] = []
    rows_bad = 0
    cells_checked = cells_bad = 0
    changes = expected.diff(final, keys)
    for ch in changes:
        where = f"{ch.table}[{ch.key!r}]"
        if ch.kind == "added":
            rows_bad += 1
            diff.append(f"{where}: unexpected row written (extra write)")
            continue
        if ch.kind == "removed":
            rows_bad += 1
            diff.append(f"{where}: expected row is missing")
            continue
        row_bad = False
        for col, (want, got) in ch.columns.items():
            spec_col = columns.get((ch.table, col))
            policy = spec_col.match if spec_col is not None else "exact"
            if policy == "exempt":
                continue
            cells_checked += 1
            if policy == "semantic" and want is not None and got is not None:
                sim = matcher(str(want), str(got))
                if sim >= threshold:
                    continue
                diff.append(f"{where}.{col}: expected ~{_fmt(want)}, got {_fmt(got)} (similarity {sim:.2f})")
            else:
                if same_value(want, got, spec_col.type if spec_col is not None else "text"):
                    continue
                diff.append(f"{where}.{col}: expected {_fmt(want)}, got {_fmt(got)}")
            cells_bad += 1
            row_bad = True
        rows_bad += row_bad
    facts = list(answer_facts)
    facts_ok = 0
    for f in facts:
        if fact_stated(f, said):
            facts_ok += 1
        else:
            diff.append(f"answer fact {f.name!r} = {_fmt(f.value)} was not stated to the user")
    state_ok = rows_bad == 0
    facts_frac = facts_ok / len(facts) if facts else 1.0
    success = state_ok and facts_ok == len(facts)
    components = {
        "state_match": 1.0 if state_ok else 0.0,
        "mismatched_rows": float(rows_bad),
        "mismatched_cells": float(cells_bad),
        "answer_facts": facts_frac,
    }
    return Reward(1.0 if success else 0.0, success, components, diff)

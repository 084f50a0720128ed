"""Difficulty tiers: the knobs each tier sets, the default mix, and drawing a tier from a mix."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

from scaleenv.formats.task import TIERS

Knobs = tuple[tuple[int, int], tuple[int, int], int, float]
"""(sub-goals range, look-alikes per entity range, withheld facts, probability of an extra read goal)."""

TIER_KNOBS: dict[str, Knobs] = {
    "easy": ((1, 1), (0, 1), 0, 0.25),
    "medium": ((1, 2), (1, 2), 1, 0.4),
    "hard": ((2, 3), (2, 3), 2, 0.5),
    "expert": ((3, 4), (3, 4), 3, 0.6),
}
"""The knobs of each tier (families add their own: selection criteria, counts, horizons)."""

DEFAULT_TIER_MIX: dict[str, float] = {"easy": 0.25, "medium": 0.4, "hard": 0.25, "expert": 0.1}
"""The default build's share of tasks per tier (renormalised over the tiers a family is built at)."""


def draw_tier(rng: random.Random, mix: Mapping[str, float] | None = None, allowed: Iterable[str] = TIERS) -> str:
    """A tier drawn from ``mix`` among ``allowed`` (the easiest allowed tier when the mix gives them none)."""
    mix = DEFAULT_TIER_MIX if mix is None else mix
    ok = [t for t in TIERS if t in set(allowed)]
    if not ok:
        raise ValueError("no tier allowed")
    weights = [float(mix.get(t, 0.0)) for t in ok]
    if sum(weights) <= 0:
        return ok[0]
    return rng.choices(ok, weights)[0]


def parse_mix(text: str, names: Iterable[str], flag: str) -> dict[str, float]:
    """``easy=0.2,medium=0.3`` as a mix over ``names``: every name known, every share >= 0 and the
    shares not all 0 (ValueError with one line saying what is wrong otherwise). Names left out get 0."""
    known = list(names)
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise ValueError(f"{flag}: {part!r} is not NAME=SHARE with NAME one of {', '.join(known)}")
        if name in out:
            raise ValueError(f"{flag}: {name} is given twice")
        try:
            share = float(value)
        except ValueError:
            raise ValueError(f"{flag}: the share of {name} must be a number, got {value.strip()!r}") from None
        if not share >= 0 or share == float("inf"):
            raise ValueError(f"{flag}: the share of {name} must be a finite number >= 0, got {value.strip()}")
        out[name] = share
    if not out or sum(out.values()) <= 0:
        raise ValueError(f"{flag}: give at least one share above 0 (e.g. {known[0]}=1)")
    return out


def check_mix(mix: Mapping[str, float], names: Iterable[str], flag: str) -> dict[str, float]:
    """A mix given as a mapping, checked like :func:`parse_mix`."""
    return parse_mix(",".join(f"{k}={v}" for k, v in mix.items()), names, flag)

"""Pluggable text matchers for ``semantic`` columns. The default needs no network and no model."""

from __future__ import annotations

import re
from collections.abc import Callable

from rapidfuzz import fuzz

Matcher = Callable[[str, str], float]
"""Similarity of (expected, actual) in [0, 1]."""

_WS = re.compile(r"\s+")


def normalize_text(s: str) -> str:
    return _WS.sub(" ", s.casefold()).strip(" .!?,;:")


_PUNCT = re.compile(r"[^\w\s]+")


def _fold(s: str) -> str:
    return " ".join(_PUNCT.sub(" ", s.casefold()).split())


def fuzzy_similarity(expected: str, actual: str) -> float:
    """Token-order-insensitive fuzzy similarity (rapidfuzz), case and punctuation folded
    (``gift-wrap`` and ``Gift wrap.`` are the same)."""
    a, b = _fold(expected), _fold(actual)
    if a == b:
        return 1.0
    return fuzz.token_sort_ratio(a, b) / 100.0


DEFAULT_THRESHOLD = 0.85

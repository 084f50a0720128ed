"""Answer facts: values an agent must state to the user for read goals."""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from scaleenv.formats.task import AnswerFact
from scaleenv.reward.match import normalize_text

_NUM = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
"""A number that stands alone: the digits of an id such as ``O002`` or ``#W1000007`` are not numbers."""




_WORDS = {w: float(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
_NUM_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)


def _numbers(text: str) -> list[float]:
    out = []
    for tok in _NUM.findall(text):
        try:
            out.append(float(tok.replace(",", "")))
        except ValueError:
            continue
    return out


def fact_stated(fact: AnswerFact, text: str) -> bool:
    """Whether ``text`` (what the agent told the user) states ``fact``'s value, and none of its
    rivals (the values look-alike records hold for the same attribute; a rival that the value's own
    wording states, ``Buy`` of ``Buy on dip``, does not count).

    Numbers match by value (``$1,234.50`` states 1234.5); text matches case-insensitively as a whole
    word or phrase (``no`` is not stated by ``nothing``), or fuzzily when the value is long enough
    for a near match to be meaningful.
    """
    if not value_stated(fact.value, text):
        return False
    own = str(fact.value)
    return not any(value_stated(r, text) and not value_stated(r, own) for r in fact.rivals)


def value_stated(v: object, text: str) -> bool:
    """Whether ``text`` states the value ``v`` (the matching rules of :func:`fact_stated`)."""
    if isinstance(v, bool):
        v = "yes" if v else "no"
    if isinstance(v, int | float):
        nums = _numbers(text)
        if float(v).is_integer() and 0 <= v <= 20:
            nums += [_WORDS[w.lower()] for w in _NUM_WORD.findall(text)]
        return any(abs(n - float(v)) <= 0.005 + 1e-9 * abs(float(v)) for n in nums)
    needle, hay = normalize_text(str(v)), normalize_text(text)
    if not needle:
        return True
    if needle in hay and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay):
        return True
    return len(needle) >= 12 and fuzz.partial_ratio(needle, hay) >= 92

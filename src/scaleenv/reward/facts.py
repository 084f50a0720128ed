"""Answer facts: values an agent must state to the user for read goals.

Matching is fair to the ways people write values: numbers by value (``$1,234.50``), dates and
datetimes in the common spoken and written forms (``2026-06-26 10:00``, "June 26, 2026 at 10am",
"26 June 2026"), enum values with spaces (``no_show`` as "no show"). And it discriminates: a fact
whose ``rivals`` (the values look-alike records hold) are also asserted is not stated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime, time
from typing import Any

from rapidfuzz import fuzz

from scaleenv.formats.task import REFUSAL_FACT, AnswerFact
from scaleenv.reward.match import normalize_text

_NUM = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
"""A number that stands alone: the digits of an id such as ``O002`` or ``#W1000007`` are not numbers."""

_WORDS = {w: float(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
     "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
_NUM_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_MONTH_RE = r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
            r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_TIME_RE = r"(?:\s*(?:,|at|@|T)?\s*(?P<h>\d{1,2})(?::(?P<mi>\d{2}))?(?::(?P<s>\d{2}))?\s*(?P<ap>[ap]\.?m\.?)?(?![\w:]))?"
_DATE_FORMS = [
    re.compile(r"(?<!\d)(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})" + _TIME_RE, re.IGNORECASE),
    re.compile(r"\b" + _MONTH_RE + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})" + _TIME_RE, re.IGNORECASE),
    re.compile(r"(?<!\d)(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH_RE + r",?\s+(?P<y>\d{4})" + _TIME_RE,
               re.IGNORECASE),
]
_ISO_VALUE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?$")


_SIGNED_MONEY = re.compile(r"(?:[-\u2212]\s*[$\u20ac\u00a3]|[$\u20ac\u00a3]\s*[-\u2212]|\bminus\s+[$\u20ac\u00a3]?)\s*(?=\d)",
                           re.IGNORECASE)
"""A negative amount written with its currency ("-$92,143.74", "$-5", "minus $3"): the sign is kept."""


def _numbers(text: str) -> list[float]:
    out = []
    text = _SIGNED_MONEY.sub("-", text.replace("\u2212", "-"))
    for tok in _NUM.findall(text):
        try:
            out.append(float(tok.replace(",", "")))
        except ValueError:
            continue
    return out


def _month(tok: str) -> int:
    tok = tok.lower().rstrip(".")
    return next(n for name, n in _MONTHS.items() if name.startswith(tok[:3]))


def stated_datetimes(text: str) -> list[tuple[date, time | None]]:
    """Every date in ``text`` (ISO, "June 26, 2026", "26 June 2026"), each with the time written
    right after it, if any (``10:00``, ``10:00:00``, "at 10am", ``T10:00``)."""
    out: list[tuple[date, time | None]] = []
    for form in _DATE_FORMS:
        for m in form.finditer(text):
            g = m.groupdict()
            try:
                month = int(g["m"]) if g.get("m") else _month(g["mon"])
                day = date(int(g["y"]), month, int(g["d"]))
            except (ValueError, StopIteration):
                continue
            at: time | None = None
            if g.get("h") is not None and (g.get("mi") is not None or g.get("ap")):
                hour = int(g["h"])
                ap = (g.get("ap") or "").lower().replace(".", "")
                if ap == "pm" and hour < 12:
                    hour += 12
                elif ap == "am" and hour == 12:
                    hour = 0
                try:
                    at = time(hour, int(g.get("mi") or 0), int(g.get("s") or 0))
                except ValueError:
                    at = None
            out.append((day, at))
    return out


def _iso_value(v: Any) -> tuple[date, time | None] | None:
    if not isinstance(v, str) or not _ISO_VALUE.match(v.strip()):
        return None
    s = v.strip().replace(" ", "T")
    try:
        if "T" in s:
            dt = datetime.fromisoformat(s)
            return dt.date(), dt.time()
        return date.fromisoformat(s), None
    except ValueError:
        return None


def _spaced(s: str) -> str:
    """Enum spellings folded: ``no_show``, ``no-show`` and "No show" are the same words."""
    return re.sub(r"\s+", " ", re.sub(r"[_\-]+", " ", s)).strip()


def value_stated(value: Any, text: str, *, fuzzy: bool = True) -> bool:
    """Whether ``text`` states ``value`` (no rival check): see :func:`fact_stated`."""
    v = value
    if isinstance(v, bool):
        v = "yes" if v else "no"
    if isinstance(v, int | float):
        nums = _numbers(text)
        if float(v).is_integer() and 0 <= v <= 20:
            nums += [_WORDS[w.lower()] for w in _NUM_WORD.findall(text)]
        return any(abs(n - float(v)) <= 0.005 + 1e-9 * abs(float(v)) for n in nums)
    when = _iso_value(v)
    if when is not None:
        day, at = when
        for got_day, got_at in stated_datetimes(text):
            if got_day == day and (at is None or got_at == at or (got_at is None and at == time(0))):
                return True
        return False
    needle, hay = normalize_text(str(v)), normalize_text(text)
    if not needle:
        return True
    if needle in hay and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay):
        return True
    spaced_needle, spaced_hay = _spaced(needle), _spaced(hay)
    if spaced_needle != needle and re.search(r"(?<!\w)" + re.escape(spaced_needle) + r"(?!\w)", spaced_hay):
        return True
    return fuzzy and len(needle) >= 12 and fuzz.partial_ratio(needle, hay) >= 92


# A policy's reason is said in many ways: "above 150 dollars" is "over $150", "more than 150 USD".
# Both sides are brought to one wording (a comparison word, a bare number, one unit word) and the
# reason counts as stated when every one of its words is in the text.
_COMPARE = [
    (re.compile(r"\b(?:more than|greater than|larger than|higher than|bigger than|in excess of|exceed(?:s|ing|ed)?|"
                r"over|above)\b"), " above "),
    (re.compile(r"\b(?:less than|fewer than|lower than|smaller than|under|below)\b"), " below "),
    (re.compile(r"\bwithin(?: the (?:last|past|next))?\b"), " within "),
]
_UNITS = [
    (re.compile(r"(?:\$|\busd\s*|\bus\$)\s*(\d[\d,]*(?:\.\d+)?)"), r" \1 dollars "),
    (re.compile(r"(\d)\s*(?:usd|dollars?|bucks|\$)(?!\w)"), r"\1 dollars "),
    (re.compile(r"(\d)\s*(?:%|per ?cent\b)"), r"\1 percent "),
    (re.compile(r"(\d)\s*(?:kg|kgs|kilos?|kilograms?)\b"), r"\1 kg "),
    (re.compile(r"(\d)\s*(?:kb|kilobytes?)\b"), r"\1 kb "),
    (re.compile(r"(\d)[\s-]*(day|week|month|year|hour|minute|share|view|like|hectare)s?\b"), r"\1 \2s "),
]
_NUMBER_TOKEN = re.compile(r"(?<![\w.])(\d[\d,]*)(?:\.(\d+))?(?![\w])")
_FILLER = {"a", "an", "the", "of", "is", "are", "it", "its", "than", "ago", "before", "after", "to", "for", "and"}


def _canon_number(m: re.Match[str]) -> str:
    whole, frac = m.group(1).replace(",", ""), (m.group(2) or "").rstrip("0")
    return f"{int(whole)}.{frac}" if frac else str(int(whole))


def reason_words(text: str) -> list[str]:
    """``text`` in one wording for reasons: comparisons, currencies, percentages and units folded,
    numbers bare (``$1,500.00`` is ``1500 dollars``), filler words dropped."""
    t = text.casefold()
    for pattern, repl in _UNITS:
        t = pattern.sub(repl, t)
    for pattern, repl in _COMPARE:
        t = pattern.sub(repl, t)
    t = _NUMBER_TOKEN.sub(_canon_number, t)
    return [w for w in re.findall(r"\d+(?:\.\d+)?|[a-z]+", t) if w not in _FILLER]


def reason_stated(reason: str, text: str) -> bool:
    """Whether ``text`` gives the policy reason ``reason`` in any common wording: every word of the
    reason (see :func:`reason_words`) occurs in the text, so "the subtotal is over $150" gives
    "above 150 dollars"."""
    need = reason_words(reason)
    if not need:
        return True
    have = set(reason_words(text))
    return all(w in have for w in need)


def fact_value_stated(fact: AnswerFact, text: str, *, fuzzy: bool = True) -> bool:
    """Whether ``text`` states ``fact``'s value: :func:`value_stated`, and for a policy reason
    (:data:`~scaleenv.formats.task.REFUSAL_FACT`) any wording of it (:func:`reason_stated`)."""
    if value_stated(fact.value, text, fuzzy=fuzzy):
        return True
    return fact.name == REFUSAL_FACT and isinstance(fact.value, str) and reason_stated(fact.value, text)


def _rival_in(fact: AnswerFact, text: str) -> bool:
    """Whether ``text`` asserts one of the fact's rivals (a rival reason in any wording, too)."""
    reason = fact.name == REFUSAL_FACT
    return any(value_stated(r, text, fuzzy=False) or (reason and isinstance(r, str) and reason_stated(r, text))
               for r in fact.rivals if not _same(r, fact.value))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | str):
        return abs(float(a) - float(b)) <= 0.005
    return normalize_text(str(a)) == normalize_text(str(b))


def fact_stated(fact: AnswerFact, text: str) -> bool:
    """Whether ``text`` (what the agent told the user) states ``fact``'s value and none of its rivals.

    Numbers match by value (``$1,234.50`` states 1234.5); dates and datetimes by value in the usual
    written forms; text matches case-insensitively as a whole word or phrase (``no`` is not stated by
    ``nothing``; ``no_show`` is stated by "no show"), or fuzzily when the value is long enough for a
    near match to be meaningful. A text that also asserts a rival value (one a look-alike record
    holds for the same attribute) does not state the fact: listing every candidate's value fails.
    """
    if not fact_value_stated(fact, text):
        return False
    return not _asserts_rival(fact, text)


def _asserts_rival(fact: AnswerFact, text: str) -> bool:
    rest = text
    if isinstance(fact.value, str) and _iso_value(fact.value) is None and fact.value.strip():
        # a rival that is part of the value ("Rex" in "Rex Junior") is not asserted by the value itself
        rest = re.sub(re.escape(fact.value.strip()), " ", text, flags=re.IGNORECASE)
    return _rival_in(fact, rest)


_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_PROSE_LIMIT = 1500  # a longer message is a dump of outputs, judged whole (see reward.subgoals.DUMP_MIN_CHARS)


def last_word(fact: AnswerFact, text: str) -> tuple[bool, bool]:
    """(value stated, rival asserted) by the message ``text``'s last word on the fact. In a prose
    message that is its last sentence that states either ("215.61 still due on the bill ... The total
    you owe is 862.44" answers 862.44); a dump of outputs (braces, or longer than a message of prose)
    is judged whole, so pasting every record's value still asserts the rivals."""
    if "{" not in text and len(text) <= _PROSE_LIMIT:
        for sentence in reversed([x for x in _SENTENCE_END.split(text) if x.strip()]):
            has_value, has_rival = fact_value_stated(fact, sentence), _asserts_rival(fact, sentence)
            if has_value or has_rival:
                return has_value, has_rival
        return False, False
    return fact_value_stated(fact, text), _asserts_rival(fact, text)


def fact_stated_in(fact: AnswerFact, messages: Sequence[str]) -> bool:
    """Whether the agent's messages state ``fact``: its final word on the attribute counts. The last
    message (and in it the last sentence, :func:`last_word`) that states the value or a rival value
    must state the value and no rival, so describing a record before changing it ("status paid",
    then "now cancelled") is fair, while one sentence listing every candidate's value is not."""
    for text in reversed(messages):
        has_value, has_rival = last_word(fact, text)
        if has_value or has_rival:
            return has_value and not has_rival
    return False

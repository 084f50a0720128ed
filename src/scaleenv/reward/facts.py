"""Answer facts: values an agent must state to the user for read goals.

Matching is fair to the ways people write values: numbers by value (``$1,234.50``, "forty-two"), dates
and datetimes in the common spoken and written forms (``2026-06-26 10:00``, "June 26, 2026 at 10am",
"10:00 on June 26, 2026", "26 June 2026", ``6/26/2026``: numeric dates with slashes are read in the US
order, month first, always; only a first number above 12 is read as the day), enum values with spaces
(``no_show`` as "no show"), a long text value with a slip of the keyboard. And it discriminates:

* a text value is stated only by a near-copy of the whole value, never by a part of it (``e`` does not
  state "Golden Retriever puppy food");
* a number or a date is read only where it stands as a token of its own, never out of an id, a date or a
  time (``PET-0063`` does not state 63, ``2026-05-28`` neither 5 nor 28);
* a fact whose ``rivals`` (the values look-alike records hold) are also asserted is not stated, and a
  rival is matched with the same tolerance as the value (a near-copy of it asserts it); where one
  stretch of text could be either, it is the candidate it is closest to;
* the agent's last assertion on the attribute wins (:func:`fact_stated_in`);
* a policy reason (:data:`~scaleenv.formats.task.REFUSAL_FACT`) counts when the agent names the rule's
  condition as true of this record (:func:`reason_asserted`), not when it recites the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from scaleenv.formats.task import REFUSAL_FACT, AnswerFact
from scaleenv.reward.match import normalize_text
from scaleenv.utils.dates import parse_iso

# --------------------------------------------------------------------------------------------- dates

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_MONTH_NAME = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
              r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])\.?"
_MONTH_RE = r"(?P<mon>" + _MONTH_NAME + ")"
_CLOCK = r"(?:(?P<h>\d{1,2})(?::(?P<mi>\d{2})|\.(?P<mi2>\d{2})(?=\s*[ap]\.?m\b))?(?::(?P<s>\d{2}))?\s*(?P<ap>[ap]\.?m\b\.?)?(?![\w:])|(?P<word>noon|midnight)\b)"
"""A time of day: ``10:00``, ``10:00:00``, "10am", "2:30 p.m.", "noon" (a bare hour is no time)."""
_TIME_RE = r"(?:\s*(?:,|at|@|T)?\s*" + _CLOCK + ")?"
_DATE_FORMS = [
    # ISO: 2026-06-26, 2026-06-26 10:00, 2026-06-26T10:00:00
    re.compile(r"(?<![\d-])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?![\d-])" + _TIME_RE, re.IGNORECASE),
    # June 26, 2026; Jun 26th 2026
    re.compile(r"\b" + _MONTH_RE + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})(?!\d)" + _TIME_RE,
               re.IGNORECASE),
    # 26 June 2026; the 26th of June, 2026
    re.compile(r"(?<!\d)(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH_RE + r",?\s+(?P<y>\d{4})(?!\d)"
               + _TIME_RE, re.IGNORECASE),
    # numeric with slashes, US order: 6/26/2026 is June 26; a first number above 12 can only be a day
    # (26/6/2026), and 2026/06/26 puts the year first. 05/06/2026 is May 6 (the US reading, always).
    re.compile(r"(?<![\d/.-])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})(?![\d/])" + _TIME_RE, re.IGNORECASE),
    re.compile(r"(?<![\d/.-])(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})(?![\d/])" + _TIME_RE, re.IGNORECASE),
]
_TIME_BEFORE = re.compile(r"(?<![\w:.])" + _CLOCK + r"\s*(?:,|on|of)?\s*(?:the\s+)?"
                          r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s+)?$", re.IGNORECASE)
"""A time said just before a date: "10:00 on June 26, 2026", "at 2pm, 2026-06-26"."""
_YEARLESS = re.compile(r"\b" + _MONTH_NAME + r"\s+\d{1,2}(?:st|nd|rd|th)?\b|(?<![\w.])\d{1,2}(?:st|nd|rd|th)?\s+"
                       r"(?:of\s+)?(?!may\b)" + _MONTH_NAME, re.IGNORECASE)
"""A day of a month without its year ("June 5", "5th of June"): a date, not the number 5."""
_CLOCK_ALONE = re.compile(r"(?<![\w:.])\d{1,2}(?::\d{2}){1,2}(?:\s*[ap]\.?m\b\.?)?|(?<![\w:.])\d{1,2}\s*[ap]\.?m\b\.?",
                          re.IGNORECASE)


def _month(tok: str) -> int:
    tok = tok.lower().rstrip(".")
    return next(n for name, n in _MONTHS.items() if name.startswith(tok[:3]))


def _clock(g: dict[str, str | None]) -> time | None:
    """The time of day a :data:`_CLOCK` match says (None for a bare hour or an impossible time)."""
    if g.get("word"):
        return time(12) if (g["word"] or "").lower() == "noon" else time(0)
    if g.get("mi") is None and g.get("mi2") is not None:
        g = {**g, "mi": g["mi2"]}  # "7.45am"
    if g.get("h") is None or (g.get("mi") is None and not g.get("ap")):
        return None
    hour = int(g["h"] or 0)
    ap = (g.get("ap") or "").lower().replace(".", "")
    if ap and not 1 <= hour <= 12:
        return None
    if ap == "pm" and hour < 12:
        hour += 12
    elif ap == "am" and hour == 12:
        hour = 0
    try:
        return time(hour, int(g.get("mi") or 0), int(g.get("s") or 0))
    except ValueError:
        return None


def _day(g: dict[str, str | None]) -> date | None:
    try:
        if g.get("a") is not None:  # numeric with slashes: month first, unless the first is no month
            a, b = int(g["a"] or 0), int(g["b"] or 0)
            month, day = (a, b) if a <= 12 else (b, a)
        else:
            month = int(g["m"] or 0) if g.get("m") else _month(g["mon"] or "")
            day = int(g["d"] or 0)
        return date(int(g["y"] or 0), month, day)
    except (ValueError, StopIteration):
        return None


@lru_cache(maxsize=512)
def _dates_in(text: str) -> tuple[tuple[int, int, date, time | None], ...]:
    """(start, end, day, time of day or None) of every date written in ``text``, in text order."""
    out: list[tuple[int, int, date, time | None]] = []
    for form in _DATE_FORMS:
        for m in form.finditer(text):
            g = m.groupdict()
            day = _day(g)
            if day is None:
                continue
            at, start, end = _clock(g), m.start(), m.end()
            if at is None and g.get("h") is not None:
                end = m.start("h")  # "2026-08-18, 3 guests": a bare number after a date is no hour of it
            if at is None:
                before = _TIME_BEFORE.search(text, max(0, start - 40), start)
                if before is not None and (at := _clock(before.groupdict())) is not None:
                    start = before.start()
            out.append((start, end, day, at))
    return tuple(sorted(out, key=lambda x: (x[0], x[1])))


def stated_datetimes(text: str) -> list[tuple[date, time | None]]:
    """Every date in ``text`` (ISO, "June 26, 2026", "26 June 2026", ``6/26/2026``), each with the time
    written right after it ("at 10am", ``T10:00``) or right before it ("10:00 on June 26, 2026"), if any."""
    return [(day, at) for _, _, day, at in _dates_in(text)]


def _iso_value(v: Any) -> tuple[date, time | None] | None:
    when = parse_iso(v)
    if isinstance(when, datetime):
        return when.date(), when.time()
    if isinstance(when, date):
        return when, None
    return None


@lru_cache(maxsize=512)
def _masked(text: str) -> str:
    """``text`` with its dates and times blanked out: their digits are no numbers."""
    spans = [(s, e) for s, e, _, _ in _dates_in(text)]
    spans += [m.span() for pattern in (_YEARLESS, _CLOCK_ALONE) for m in pattern.finditer(text)]
    if not spans:
        return text
    chars = list(text)
    for s, e in spans:
        chars[s:e] = " " * (e - s)
    return "".join(chars)


# ------------------------------------------------------------------------------------------- numbers

_NUM = re.compile(r"(?<![\w.#@/:\\-])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\w*\d)(?!\.\d)(?![/:]\w)(?!-\d)")
"""A number that stands alone: not the digits of an id (``O002``, ``PET-0063``, ``#W1000007``), of a date
or a time (``2026-05-28``, ``10:30``), of a version (``1.5.3``) or a range (``5-10``)."""

_SIGNED_MONEY = re.compile(r"(?:[-\u2212]\s*[$\u20ac\u00a3]|[$\u20ac\u00a3]\s*[-\u2212]|\bminus\s+[$\u20ac\u00a3]?)\s*(?=\d)",
                           re.IGNORECASE)
"""A negative amount written with its currency ("-$92,143.74", "$-5", "minus $3"): the sign is kept."""

_SMALL = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
     "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"])}
_TENS = {w: 10 * i for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
_SCALES = {"thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}


def _numbers(text: str) -> list[float]:
    """The numbers written in digits in ``text`` that stand as tokens of their own."""
    return [n for n, _ in _numbers_cued(text)]


def _numbers_cued(text: str) -> list[tuple[float, bool]]:
    """Each number of :func:`_numbers`, and whether a mention cue stands right before it (:func:`_cued`)."""
    out = []
    text = _SIGNED_MONEY.sub("-", _masked(text.replace("\u2212", "-")))
    for m in _NUM.finditer(text):
        try:
            number = float(m.group(1) + m.group(2).replace(",", "") + (m.group(3) or ""))
        except ValueError:
            continue
        scale = _SCALE_AFTER.match(text, m.end())
        if scale is not None:  # "$358.7K", "2.5 million"
            number *= _SCALE_OF[(scale.group(1) or scale.group(2)).lower()]
        out.append((number, _cued(text[: m.start()])))
    return out


_SCALE_AFTER = re.compile(r"(?:(K|M|bn)|\s+(thousand|million|billion))\b")
_SCALE_OF = {"k": 1e3, "m": 1e6, "bn": 1e9, "thousand": 1e3, "million": 1e6, "billion": 1e9}


@lru_cache(maxsize=1)
def _mention_cues() -> tuple[str, ...]:
    """The phrases of the data file ``reward/mention_cues.txt``."""
    from importlib.resources import files

    text = files("scaleenv.reward").joinpath("mention_cues.txt").read_text(encoding="utf-8")
    return tuple(" ".join(w.split()) for line in text.splitlines() if (w := line.split("#")[0].strip().lower()))


_CLAUSE_MARK = re.compile(r"[,;:()\[\]\u2014|]|[.!?](?=\s)|\n")


def _cued(before: str) -> bool:
    """Whether the last three words of the clause that ``before`` ends in hold a mention cue ("previously",
    "of the", "not": ``reward/mention_cues.txt``)."""
    marks = list(_CLAUSE_MARK.finditer(before[-80:]))
    clause = before[-80:][marks[-1].end():] if marks else before[-80:]
    words = " ".join(re.findall(r"[a-z']+", clause.lower())[-3:])
    return any(f" {cue} " in f" {words} " for cue in _mention_cues())


def _number_word_kind(w: str) -> str:
    if w in _SMALL:
        return "zero" if w == "zero" else "unit" if _SMALL[w] < 10 else "teen"
    if w in _TENS:
        return "tens"
    if w in _SCALES:
        return "scale"
    return w if w in ("hundred", "a", "and") else ""


def _follows(kind: str, last: str, nxt: str) -> bool:
    """Whether a number word of ``kind`` goes on a number whose last word was of kind ``last`` ("" for a
    new number); ``nxt`` is the word after it ("a" and "and" need a number word next)."""
    if kind == "zero":
        return last == ""
    if kind == "unit":
        return last in ("", "tens", "hundred", "scale", "and")
    if kind in ("teen", "tens"):
        return last in ("", "hundred", "scale", "and")
    if kind == "hundred":
        return last in ("unit", "teen", "a")
    if kind == "scale":
        return last in ("unit", "teen", "tens", "hundred", "a")
    if kind == "a":
        return last == "" and (nxt == "hundred" or nxt in _SCALES)
    if kind == "and":
        return last in ("hundred", "scale") and nxt in _SMALL.keys() - {"zero"} | _TENS.keys()
    return False


_COMPLETE = {"zero", "unit", "teen", "tens", "hundred", "scale"}


def word_numbers(text: str) -> list[int]:
    """The whole numbers spelt out in ``text``: "seven", "thirty", "forty-two", "one hundred and five",
    "a thousand", "two thousand five hundred". Number words that cannot make one number ("one, two",
    "one two") are several numbers."""
    t = text.casefold()
    words = [(m.group(), m.start(), m.end()) for m in re.finditer(r"[a-z]+", t)]
    out: list[int] = []
    total = cur = 0
    last, prev_end = "", 0
    for i, (w, start, end) in enumerate(words):
        kind, nxt = _number_word_kind(w), words[i + 1][0] if i + 1 < len(words) else ""
        joined = last != "" and re.fullmatch(r"[\s-]+", t[prev_end:start]) is not None
        if not (joined and _follows(kind, last, nxt)):
            if last in _COMPLETE:
                out.append(total + cur)
            total = cur = 0
            last = ""
            if not _follows(kind, "", nxt):
                continue
        if kind in ("unit", "teen", "zero"):
            cur += _SMALL[w]
        elif kind == "tens":
            cur += _TENS[w]
        elif kind == "hundred":
            cur = (cur or 1) * 100
        elif kind == "scale":
            total += (cur or 1) * _SCALES[w]
            cur = 0
        last, prev_end = kind, end
    if last in _COMPLETE:
        out.append(total + cur)
    return out


# ---------------------------------------------------------------------------------------------- text

_FUZZY_MIN_CHARS = 12
"""Text this long or longer may be stated with a slip (a near-copy); shorter text must be exact."""
_FUZZY_RATIO = 92.0
"""How near a copy must be (rapidfuzz ``ratio`` of the whole value and a stretch of the text, 0-100)."""
_EDGE = "\"'([{<*`"
_TRAIL = ".,;:!?\"')]}>*`"


def _spaced(s: str) -> str:
    """Enum spellings folded: ``no_show``, ``no-show`` and "No show" are the same words."""
    return re.sub(r"\s+", " ", re.sub(r"[_\-]+", " ", s)).strip()


@lru_cache(maxsize=1)
def _abbreviations() -> tuple[re.Pattern[str], dict[str, str]]:
    """A pattern of the abbreviations of the data file ``reward/abbreviations.txt`` and the word of each."""
    from importlib.resources import files

    words: dict[str, str] = {}
    forms: list[str] = []
    for line in files("scaleenv.reward").joinpath("abbreviations.txt").read_text(encoding="utf-8").splitlines():
        parts = line.split("#")[0].split()
        if len(parts) != 2:
            continue
        abbr, word = parts[0].lower(), parts[1].lower()
        stem = abbr.rstrip(".")
        words[stem] = word
        forms.append(re.escape(stem) + (r"\." if abbr.endswith(".") else r"\.?"))
    return re.compile(r"(?<![\w.])(?:" + "|".join(forms) + r")(?![\w])", re.IGNORECASE), words


def _expanded(s: str) -> str:
    """``s`` with its abbreviations written out ("Apt. 287" as "apartment 287")."""
    pattern, words = _abbreviations()
    return pattern.sub(lambda m: words[m.group().rstrip(".").lower()], s)


def _fold(s: str) -> str:
    """Text as it is compared: case, spacing, underscores, hyphens, abbreviations and the dots between groups
    of digits ("555.750.4431" is "555-750-4431") folded."""
    return _spaced(normalize_text(_DOTTED_PHONE.sub(r"\1 \2 \3", _expanded(s))))


_DOTTED_PHONE = re.compile(r"(?<![\w.])(\d{3})\.(\d{3})\.(\d{4})(?![\w.]\w)")
"""A phone number written with dots ("555.750.4431"); a decimal point is never one of its dots."""


@dataclass(frozen=True)
class _Hit:
    """A stretch of the (folded) text that states a candidate value, and how closely (100: exactly)."""

    start: int
    end: int
    score: float
    rival: bool

    def beats(self, other: _Hit) -> bool:
        """Whether this stretch takes ``other``'s place: they overlap, and this one is a closer copy, or as
        close and longer (the value "Rex Junior" holds the rival "Rex")."""
        if self.end <= other.start or other.end <= self.start:
            return False
        if self.score != other.score:
            return self.score > other.score
        return self.start <= other.start and self.end >= other.end and self.end - self.start > other.end - other.start


def _tokens(hay: str) -> list[tuple[int, int]]:
    """(start, end) of each word of ``hay``, quotes and trailing punctuation left out."""
    out = []
    for m in re.finditer(r"\S+", hay):
        s, e = m.span()
        while s < e and hay[s] in _EDGE:
            s += 1
        while e > s and hay[e - 1] in _TRAIL:
            e -= 1
        if s < e:
            out.append((s, e))
    return out


def _text_hits(value: str, hay: str, *, fuzzy: bool, rival: bool = False) -> list[_Hit]:
    """Where the folded text ``hay`` holds the whole of ``value``: exactly as a word or phrase, or (a long
    value, ``fuzzy``) as a near-copy of a run of words. A stretch of the text that is only part of the
    value never states it."""
    needle = _fold(value)
    if not needle:
        return []
    hits = [_Hit(m.start(), m.end(), 100.0, rival)
            for m in re.finditer(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay)]
    if not fuzzy or len(needle) < _FUZZY_MIN_CHARS:
        return hits
    words = _tokens(hay)
    k = len(needle.split())
    for n in range(max(1, k - 1), k + 2):
        for i in range(len(words) - n + 1):
            s, e = words[i][0], words[i + n - 1][1]
            size = e - s
            if 200.0 * min(size, len(needle)) / (size + len(needle)) < _FUZZY_RATIO:
                continue  # too short or too long to be a near-copy
            score = fuzz.ratio(needle, hay[s:e], score_cutoff=_FUZZY_RATIO)
            if score:
                hits.append(_Hit(s, e, float(score), rival))
    return hits


def _is_text(v: Any) -> bool:
    return isinstance(v, str) and _iso_value(v) is None


# ------------------------------------------------------------------------------------------ values

def value_stated(value: Any, text: str, *, fuzzy: bool = True) -> bool:
    """Whether ``text`` states ``value`` (no rival check): see :func:`fact_stated`."""
    return bool(_said(value, text, fuzzy=fuzzy))


def _said(value: Any, text: str, *, fuzzy: bool = True) -> list[bool]:
    """Where ``text`` states ``value``: for each place, whether a mention cue stands before it (:func:`_cued`;
    a number written in words is taken as uncued)."""
    v = value
    if isinstance(v, bool):
        v = "yes" if v else "no"
    if isinstance(v, int | float):
        nums = _numbers_cued(text)
        if float(v).is_integer():
            nums += [(float(n), False) for n in word_numbers(_masked(text))]
        return [cued for n, cued in nums if abs(n - float(v)) <= 0.005 + 1e-9 * abs(float(v))]
    when = _iso_value(v)
    if when is not None:
        day, at = when
        return [_cued(text[:start]) for start, _, got_day, got_at in _dates_in(text)
                if got_day == day and (at is None or got_at == at or (got_at is None and at == time(0)))]
    if not _fold(str(v)):
        return [False]
    hay = _fold(text)
    return [_cued(hay[: h.start]) for h in _text_hits(str(v), hay, fuzzy=fuzzy)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | str):
        return abs(float(a) - float(b)) <= 0.005
    return normalize_text(str(a)) == normalize_text(str(b))


def _claims(fact: AnswerFact, text: str, message: str | None = None, *, nouned: bool = False) -> tuple[bool, bool]:
    """(value stated, rival asserted) by ``text`` (a part of ``message``, the agent's whole message).

    Text values and rivals are found as stretches of the text with the same tolerance; a stretch that
    two candidates could fill is the one it copies more closely, so the value "Rex Junior" does not assert
    its rival "Rex", and a near-copy of a rival is that rival, not a slip for the value. A count (``nouned``:
    the whole message says one of its numbers with the fact's noun) is read only where a number stands with
    that noun ("2 copies are available; one went out on loan" asserts 2, not 1)."""
    if fact.name == REFUSAL_FACT and isinstance(fact.value, str):
        ctx = message if message is not None else text
        return (reason_asserted(fact.value, text, ctx),
                any(isinstance(r, str) and not _same(r, fact.value) and reason_asserted(r, text, ctx)
                    for r in fact.rivals))
    rivals = [r for r in fact.rivals if not _same(r, fact.value)]
    if nouned:
        said = [(n, cued) for n, with_noun, cued in _counted(text, _nouns(fact.name)) if with_noun]
        return _weighed([cued for n, cued in said if _same(n, fact.value)],
                        [cued for n, cued in said for r in rivals
                         if isinstance(r, int | float) and not isinstance(r, bool) and _same(n, r)])
    hay = _fold(text)
    hits: list[_Hit] = []
    value_cues: list[bool] = []
    rival_cues: list[bool] = []
    if _is_text(fact.value):
        hits += _text_hits(str(fact.value), hay, fuzzy=True)
        value_cues += [False] if not _fold(str(fact.value)) else []
    else:
        value_cues += _said(fact.value, text)
    for r in rivals:
        if _is_text(r):
            hits += _text_hits(str(r), hay, fuzzy=True, rival=True)
        else:
            rival_cues += _said(r, text)
    value_cues += [_cued(hay[: h.start]) for h in hits
                   if not h.rival and not any(o.rival and o.beats(h) for o in hits)]
    rival_cues += [_cued(hay[: h.start]) for h in hits
                   if h.rival and not any(not o.rival and o.beats(h) for o in hits)]
    return _weighed(value_cues, rival_cues)


def _weighed(value_cues: list[bool], rival_cues: list[bool]) -> tuple[bool, bool]:
    """(value stated, rival asserted) from where each was said and whether a mention cue stood before it:
    a rival said after a cue ("previously", "of the", "not") does not count against a value said without one;
    where the value is said only after cues, every rival said counts."""
    asserted = any(not cued for cued in value_cues)
    return bool(value_cues), any(not cued for cued in rival_cues) if asserted else bool(rival_cues)


# ---------------------------------------------------------------------------------------------- counts

_STOP = re.compile(r"(?<=[.!?])\s+|\n+")
"""Where a count's noun stops being its own: the end of a sentence (a colon joins a label to its number)."""
_WINDOW = 4
"""How many words from a number its noun may stand ("2 copies", "unread: 2", "copies available right now: 2")."""


@lru_cache(maxsize=1)
def _generic_name_words() -> frozenset[str]:
    """Words of a fact's name that name no thing counted ("total", "count", "number", "by"): a data file."""
    from importlib.resources import files

    text = files("scaleenv.reward").joinpath("count_words.txt").read_text(encoding="utf-8")
    return frozenset(w for line in text.splitlines() if (w := line.split("#")[0].strip().lower()))


def _singular(word: str) -> str:
    w = word.lower()
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("ses", "xes", "ches", "shes")):
        return w[:-2]
    return w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w


def _nouns(name: str) -> frozenset[str]:
    """The words of a fact's name that say what is counted, singular ("available copies" -> copy, available)."""
    generic = _generic_name_words()
    return frozenset(_singular(w) for w in re.findall(r"[A-Za-z]+", name) if w.lower() not in generic)


_COUNT_LIMIT = 1000
"""A fact whose value and rivals are all numbers below this is read with its noun where the message gives it
one: small numbers come up in talk for other reasons ("one went out on loan", "I checked 3 of them")."""


def _is_count(fact: AnswerFact) -> bool:
    """Whether a fact is a small number whose name says what it counts or measures ("available copies", "total
    hours by task"): "2 copies are available; one went out on loan" answers 2, and "the total hours by task
    is 1.75 (I checked 3 of them)" answers 1.75 (seed 6262's style gate)."""
    numbers = [fact.value, *fact.rivals]
    return (all(isinstance(v, int | float) and not isinstance(v, bool) and abs(float(v)) < _COUNT_LIMIT
                for v in numbers) and bool(_nouns(fact.name)))


def _counted(text: str, nouns: frozenset[str]) -> list[tuple[float, bool, bool]]:
    """Each whole number of ``text`` that stands as a token of its own (digits or words: "2", "two",
    "forty-two"; never out of an id, a date or a time), and whether one of ``nouns`` stands within
    :data:`_WINDOW` words of it in the same sentence, and whether a mention cue stands before it."""
    out: list[tuple[float, bool, bool]] = []
    for sentence in _STOP.split(_masked(text)):
        tokens = sentence.split()
        words = [[_singular(w) for w in re.findall(r"[A-Za-z]+", t)] for t in tokens]
        for i, tok in enumerate(tokens):
            nums = _numbers(tok)
            if not nums and _number_word_kind(re.sub(r"[^a-z]", "", tok.lower().split("-")[0])):
                nums = [float(n) for n in word_numbers(tok)]
            if not nums:
                continue
            near = words[max(0, i - _WINDOW): i] + words[i + 1: i + 1 + _WINDOW]
            with_noun = any(w in nouns for ws in near for w in ws)
            cued = _cued(" ".join(tokens[:i]) + " ")
            out += [(n, with_noun, cued) for n in nums]
    return out


# --------------------------------------------------------------------------------------------- reasons

# A policy's reason is said in many ways: "above 150 dollars" is "over $150", "more than 150 USD".
# Both sides are brought to one wording (a comparison word, a bare number, one unit word).
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
_OWN_NUMBER = re.compile(r"^[\"'(\[]*(?:us)?[$\u20ac\u00a3]?-?\d[\d,]*(?:\.\d+)?(?:%|-?[a-z]+)?[.,;:!?)\]\"']*$")
"""A word with digits that is a number (``$1,500.00``, ``23kg``, ``70%``, ``3-day``), not an id or a code."""
_FILLER = {"a", "an", "the", "of", "is", "are", "it", "its", "than", "ago", "before", "after", "to", "for", "and"}
_SLACK = 3
"""Other words a reason's words may have among them in the text ("within the next 9 months")."""
_NEGATIONS = {"not", "no", "never", "t"}  # "t": the n't of "isn't"
_RULE_WORDS = re.compile(r"(?:\b(?:cannot|can ?not|can['\u2019]t|may not|must not|mustn['\u2019]t|not allowed|not permitted|"
                         r"prohibited|forbidden)|n['\u2019]t (?:allowed|permitted))\b", re.IGNORECASE)
"""What states a rule rather than a fact ("... cannot be cancelled"): a small fixed list."""
_CONDITION = re.compile(r"^\W*(?:if|whenever)\b", re.IGNORECASE)
"""A clause that says when a rule applies, not that it does ("if it is over $150, ...")."""
_CLAUSE_END = re.compile(r"[,;:]\s+|\s+[-\u2013\u2014]\s+|\s+(?:and|but|so|because|since|as|which|while|though|"
                         r"although|whereas)\s+", re.IGNORECASE)
_REASON_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _canon_number(m: re.Match[str]) -> str:
    whole, frac = m.group(1).replace(",", ""), (m.group(2) or "").rstrip("0")
    return f"{int(whole)}.{frac}" if frac else str(int(whole))


def reason_words(text: str) -> list[str]:
    """``text`` in one wording for reasons, in order: comparisons, currencies, percentages and units
    folded, numbers bare (``$1,500.00`` is ``1500 dollars``), relative days counted ("today" is ``0 days``),
    filler words dropped. The digits of ids, dates and times are no numbers (``ENR-0076`` says nothing of 76)."""
    return list(_reason_words(text))


@lru_cache(maxsize=8192)
def _reason_words(text: str) -> tuple[str, ...]:
    t = " ".join(w if not any(c.isdigit() for c in w) or _OWN_NUMBER.match(w) else " "
                 for w in _masked(text.casefold()).split())
    days, pattern = _day_words()
    t = pattern.sub(lambda m: f" {days[m.group()]} ", t)
    for pattern, repl in _UNITS:
        t = pattern.sub(repl, t)
    for pattern, repl in _COMPARE:
        t = pattern.sub(repl, t)
    t = _NUMBER_TOKEN.sub(_canon_number, t)
    return tuple(w for w in re.findall(r"\d+(?:\.\d+)?|[a-z]+", t) if w not in _FILLER)


@lru_cache(maxsize=1)
def _day_words() -> tuple[dict[str, str], re.Pattern[str]]:
    """({phrase: "N days"}, one pattern of the phrases, longest first) from the data file ``reward/day_words.txt``."""
    from importlib.resources import files

    out: dict[str, str] = {}
    for line in files("scaleenv.reward").joinpath("day_words.txt").read_text(encoding="utf-8").splitlines():
        phrase, sep, days = line.split("#")[0].partition(":")
        if sep and phrase.strip() and days.strip():
            out[phrase.strip().lower()] = days.strip()
    phrases = sorted(out, key=len, reverse=True)
    return out, re.compile(r"\b(?:" + "|".join(re.escape(p) for p in phrases) + r")\b")


def _phrase_in(need: list[str], have: list[str]) -> bool:
    """Whether ``have`` holds every word of ``need`` close together (at most :data:`_SLACK` other words
    among them), not negated ("not above 150 dollars")."""
    want = set(need)
    for i, w in enumerate(have):
        if w not in want or (i > 0 and have[i - 1] in _NEGATIONS):
            continue
        got: set[str] = set()
        for j in range(i, min(len(have), i + len(need) + _SLACK)):
            if have[j] in _NEGATIONS:
                break
            if have[j] in want:
                got.add(have[j])
            if got == want:
                return True
    return False


def reason_stated(reason: str, text: str) -> bool:
    """Whether ``text`` gives the policy reason ``reason`` in any common wording: the reason's words
    (see :func:`reason_words`) close together in one sentence, so "the subtotal is over $150" gives
    "above 150 dollars", and words scattered over a message give nothing."""
    need = reason_words(reason)
    if not need:
        return True
    return any(_phrase_in(need, reason_words(s)) for s in _REASON_SENTENCE_END.split(text) if s.strip())


def _clauses(text: str) -> Iterator[str]:
    for sentence in _REASON_SENTENCE_END.split(text):
        yield from (c for c in _CLAUSE_END.split(sentence) if c and c.strip())


def _quantities(text: str) -> list[tuple[float, str]]:
    """(number, unit word) of every amount with a unit in ``text`` (``$359.77`` is (359.77, dollars))."""
    words = reason_words(text)
    out = []
    for w, unit in zip(words, words[1:], strict=False):
        if re.fullmatch(r"\d+(?:\.\d+)?", w) and unit.isalpha():
            out.append((float(w), unit))
    return out


def _value_meets(reason: str, message: str) -> bool:
    """Whether ``message`` gives this record's own value for the condition of ``reason``: an amount in
    the reason's unit on the forbidden side of its threshold (``$359.77`` for "above 150 dollars", "6
    days" for "less than 14 days"; any amount but the threshold where the reason has no comparison word)."""
    need = reason_words(reason)
    at = next((i for i, w in enumerate(need[:-1]) if re.fullmatch(r"\d+(?:\.\d+)?", w) and need[i + 1].isalpha()),
              None)
    if at is None:
        return False
    limit, unit = float(need[at]), need[at + 1]
    compare = need[at - 1] if at > 0 and need[at - 1] in ("above", "below", "within") else ""
    for x, u in _quantities(message):
        if u != unit or x == limit:  # the threshold itself is the rule's, said by any recital of it
            continue
        if (compare == "above" and x > limit) or (compare in ("below", "within") and x < limit) or not compare:
            return True
    return False


def reason_asserted(reason: str, text: str, message: str | None = None) -> bool:
    """Whether ``text`` (a sentence of the agent's ``message``) names the policy reason ``reason`` as the
    rule's condition for this record: the reason (:func:`reason_stated`'s wording) in a clause that says
    it of the record ("it is over $150", "the visit is less than 14 days away", "it has a pending offer"),
    not in one that states the rule ("a check above $150 cannot be voided", "orders over $150 may not be
    cancelled") or when it applies ("if it is over $150, ..."). Reciting the rule counts only when the
    message also gives this record's own value on the rule's side of the threshold ("... cannot be
    voided; this one is $359.77")."""
    need = reason_words(reason)
    if not need:
        return True
    recited = False
    for clause in _clauses(text):
        if not _phrase_in(need, reason_words(clause)):
            continue
        if not _RULE_WORDS.search(clause) and not _CONDITION.match(clause):
            return True
        recited = True
    return recited and _value_meets(reason, message if message is not None else text)


# ------------------------------------------------------------------------------------------- facts

def fact_value_stated(fact: AnswerFact, text: str, *, fuzzy: bool = True) -> bool:
    """Whether ``text`` states ``fact``'s value: :func:`value_stated`, and for a policy reason
    (:data:`~scaleenv.formats.task.REFUSAL_FACT`) the rule's condition named for this record
    (:func:`reason_asserted`)."""
    if fact.name == REFUSAL_FACT and isinstance(fact.value, str):
        return reason_asserted(fact.value, text)
    return value_stated(fact.value, text, fuzzy=fuzzy)


def fact_stated(fact: AnswerFact, text: str) -> bool:
    """Whether ``text`` (what the agent told the user) states ``fact``'s value and none of its rivals.

    Numbers match by value (``$1,234.50`` states 1234.5, "forty-two" states 42) where they stand alone
    (never out of an id, a date or a time); dates and datetimes by value in the usual written forms; text
    matches case-insensitively as a whole word or phrase (``no`` is not stated by ``nothing``;
    ``no_show`` is stated by "no show"), or as a near-copy of the whole value when it is long enough for
    a slip to be meaningful (a part of the value never states it). A text that also asserts a rival value
    (one a look-alike record holds for the same attribute), or a near-copy of one, does not state the
    fact: listing every candidate's value fails.
    """
    has_value, has_rival = _claims(fact, text)
    return has_value and not has_rival


_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_PROSE_LIMIT = 1500  # a longer message is a dump of outputs, judged whole (see reward.subgoals.DUMP_MIN_CHARS)


def last_word(fact: AnswerFact, text: str) -> tuple[bool, bool]:
    """(value stated, rival asserted) by the message ``text``'s last word on the fact (:func:`_last_word`),
    read once per fact and message (a dense reward asks again at every step)."""
    try:
        key = (fact.name, _frozen(fact.value), tuple(_frozen(r) for r in fact.rivals), text)
        hash(key)
    except TypeError:
        return _last_word(fact, text)
    return _last_word_of(key)


def _frozen(value: Any) -> Any:
    return (type(value).__name__, value)


@lru_cache(maxsize=2048)
def _last_word_of(key: tuple[Any, ...]) -> tuple[bool, bool]:
    name, (_, value), rivals, text = key
    return _last_word(AnswerFact(name=name, value=value, rivals=[r for _, r in rivals]), text)


def _last_word(fact: AnswerFact, text: str) -> tuple[bool, bool]:
    """(value stated, rival asserted) by the message ``text``'s last word on the fact. The whole message is
    searched (a value may hold a full stop: "7761 Ramos Brook Apt. 287"); where it states both the value and
    a rival, the last sentence of prose that states either decides ("215.61 still due on the bill ... The
    total you owe is 862.44" answers 862.44). A dump of outputs (braces, or longer than a message of prose)
    is judged whole, so pasting every record's value still asserts the rivals. A count the message says with
    its noun ("2 copies") is judged only where it has that noun."""
    nouned = _is_count(fact) and any(with_noun for _, with_noun, _ in _counted(text, _nouns(fact.name)))
    whole = _claims(fact, text, nouned=nouned)
    if not (whole[0] and whole[1]) or "{" in text or len(text) > _PROSE_LIMIT:
        return whole
    for sentence in reversed([x for x in _SENTENCE_END.split(text) if x.strip()]):
        has_value, has_rival = _claims(fact, sentence, text, nouned=nouned)
        if has_value or has_rival:
            return has_value, has_rival
    return whole


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

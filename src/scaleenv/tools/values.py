"""Realistic values for a column's format: fresh (unused) e-mails, phones, codes, plates, SKUs and
names, e-mail addresses that follow a person's name, and meaningful text for free-text columns.

Nothing here appends a numeric suffix to make a value unique: a fresh e-mail is another spelling of
the person's name (``maria.novak@``, ``mnovak@``, ``novak.maria@``...), a fresh phone or code redraws
the digits and letters of the same shape, a fresh name is another realistic name.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Collection
from typing import Any, overload

from faker import Faker

from scaleenv.formats.jsonvalue import JSONValue

EMAIL_DOMAINS = ["example.com", "example.net", "example.org", "mail.example.com", "post.example.net"]

_PERSON_COLS = re.compile(r"(^|_)(full_name|name|owner|contact|author|recipient|sender|patient|customer|holder)$")
_FIRST_COLS = re.compile(r"(^|_)first_name$")
_LAST_COLS = re.compile(r"(^|_)(last_name|surname)$")
_SHAPE = re.compile(r"^[A-Za-z0-9]+([ ._/-][A-Za-z0-9]+)*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_TEXT_KINDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"note|comment|remark|feedback|review|message|body|content|text|reply|reason"), "sentence"),
    (re.compile(r"description|summary|bio|about|details|instructions|abstract|symptom"), "paragraph"),
    (re.compile(r"title|headline|subject|topic"), "title"),
    (re.compile(r"address|street"), "street_address"),
    (re.compile(r"city|town"), "city"),
    (re.compile(r"country"), "country"),
    (re.compile(r"company|employer|organi[sz]ation|brand|vendor|supplier"), "company"),
    (re.compile(r"job|position|occupation|profession"), "job"),
    (re.compile(r"first_name"), "first_name"),
    (re.compile(r"last_name|surname"), "last_name"),
    (re.compile(r"name"), "name"),
    (re.compile(r"url|website|link"), "url"),
    (re.compile(r"color|colour"), "color_name"),
]


def _ascii(s: str) -> str:
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z]", "", s.lower())


def _name_parts(name: str) -> tuple[str, str, str]:
    """(first, middle initial, last) of a person's name, titles and suffixes dropped."""
    words = [w for w in re.split(r"\s+", name.strip()) if w]
    words = [w for w in words if w.rstrip(".").lower() not in
             {"mr", "mrs", "ms", "miss", "dr", "prof", "jr", "sr", "ii", "iii", "iv", "md", "phd", "dds", "dvm"}]
    if not words:
        return "", "", ""
    first, last = _ascii(words[0]), _ascii(words[-1]) if len(words) > 1 else ""
    middle = _ascii(words[1])[:1] if len(words) > 2 else ""
    return first, middle, last


def email_styles(name: str) -> list[str]:
    """Local parts a person called ``name`` might use, most usual first (no digits)."""
    f, m, last = _name_parts(name)
    if not f:
        return []
    if not last:
        return [f]
    styles = [f"{f}.{last}", f"{f[0]}{last}", f"{f}_{last}", f"{f}{last[0]}", f"{last}.{f}", f"{f}{last}",
              f"{f[0]}.{last}", f"{last}{f[0]}", f"{f}.{last[0]}", f"{last}_{f}"]
    if m:
        styles[5:5] = [f"{f}.{m}.{last}", f"{f[0]}{m}{last}"]
    return list(dict.fromkeys(styles))


def email_for_name(name: str, rng: random.Random, taken: Collection[str] = (), *,
                   domain: str | None = None, usual: bool = True) -> str | None:
    """An unused e-mail address that follows ``name`` (None when every spelling is taken).

    ``usual`` prefers the three most common spellings (seed data); otherwise every spelling and
    domain is equally likely (a fresh address for a look-alike, unlikely to meet an existing one)."""
    domains = [domain] if domain else list(EMAIL_DOMAINS)
    styles = email_styles(name)
    if not styles:
        return None
    rng.shuffle(domains)
    k = min(3, len(styles)) if usual else len(styles)
    head = styles[:k]
    rng.shuffle(head)
    for d in domains:
        for s in head + styles[k:]:
            cand = f"{s}@{d}"
            if cand not in taken:
                return cand
    return None


def email_key(value: object) -> str | None:
    """An e-mail address's local part as a bag of letters: ``maria.novak@`` and ``novak_maria@`` say the
    same thing to a reader, so two look-alikes whose keys are equal differ only in word order."""
    if not isinstance(value, str) or "@" not in value:
        return None
    return "".join(sorted(ch for ch in value.split("@", 1)[0].lower() if ch.isalpha()))


def redraw_shape(value: str, rng: random.Random, *, keep_prefix: bool = True) -> str:
    """Another value of the same shape: each digit a digit, each letter a letter of the same case.

    A leading word of letters before a separator (``SKU-``, ``BK-``) or glued to the digits (an
    airline's ``HA`` in ``HA123``) is kept, and so is a leading fictional ``555`` of a phone number."""
    prefix = ""
    m = re.match(r"^([A-Za-z]+[-_ /]|[A-Z]{1,3}(?=\d)|\+?\d{1,3}[ ]|555[-. ])", value) if keep_prefix else None
    if m:
        prefix, value = m.group(1), value[m.end():]
    out = []
    for i, ch in enumerate(value):
        if ch.isdigit():
            lo = 1 if i == 0 and len(value) > 1 and not prefix else 0
            out.append(str(rng.randint(lo, 9)))
        elif ch.isalpha() and ch.isascii():
            base = 65 if ch.isupper() else 97
            out.append(chr(base + rng.randrange(26)))
        else:
            out.append(ch)
    return prefix + "".join(out)


def text_kind(column: str) -> str | None:
    """The Faker provider that suits a free-text column by its name (None when nothing fits)."""
    name = column.lower()
    for pat, kind in _TEXT_KINDS:
        if pat.search(name):
            return kind
    return None


def text_for_column(column: str, fake: Faker, rng: random.Random, vocabulary: list[str] | None = None) -> str:
    """Meaningful text for a free-text column without a generator (never a placeholder word)."""
    kind = text_kind(column)
    if kind == "title":
        words = [w for w in (vocabulary or []) if w.isalpha()]
        if len(words) >= 2:
            return " ".join(rng.sample(words, 2)).capitalize() + " " + fake.word()
        return fake.catch_phrase()
    if kind == "paragraph":
        return fake.paragraph(nb_sentences=2)
    if kind == "sentence" or kind is None:
        if vocabulary and rng.random() < 0.5:
            return f"{fake.sentence(nb_words=5).rstrip('.')} about {rng.choice(vocabulary)}."
        return fake.sentence(nb_words=8)
    return str(getattr(fake, kind)())


@overload
def fresh_value(column: str, like: str, rng: random.Random, taken: Collection[Any] = (), *,
                row: dict[str, Any] | None = None, fake: Faker | None = None,
                lo: float | None = None, hi: float | None = None, attempts: int = 200) -> str: ...
@overload
def fresh_value(column: str, like: None, rng: random.Random, taken: Collection[Any] = (), *,
                row: dict[str, Any] | None = None, fake: Faker | None = None,
                lo: float | None = None, hi: float | None = None, attempts: int = 200) -> None: ...
@overload
def fresh_value(column: str, like: JSONValue, rng: random.Random, taken: Collection[Any] = (), *,
                row: dict[str, Any] | None = None, fake: Faker | None = None,
                lo: float | None = None, hi: float | None = None, attempts: int = 200) -> JSONValue: ...
def fresh_value(column: str, like: JSONValue, rng: random.Random, taken: Collection[Any] = (), *,
                row: dict[str, Any] | None = None, fake: Faker | None = None,
                lo: float | None = None, hi: float | None = None, attempts: int = 200) -> JSONValue:
    """A realistic value for ``column`` that is not in ``taken``, shaped like ``like``.

    * e-mail (``like`` has an ``@``, or the column is named like one): another spelling of the row's
      person name (``row`` supplies it), on another domain if need be;
    * phones, codes, plates, SKUs, postcodes (letters and digits with separators): the same shape
      redrawn;
    * person names: another full name (first/last name columns: another first/last name);
    * other text: another value of the column's kind (a city, a company, a title...);
    * integers: another integer in ``[lo, hi]``; ISO dates: another nearby date.

    Returns ``like`` unchanged only for types it cannot vary (booleans, JSON, None).
    """
    name = column.lower()
    check: Callable[[Any], bool] = lambda v: v not in taken and v != like  # noqa: E731
    v: int | float | str | None
    if isinstance(like, bool) or like is None or isinstance(like, dict | list):
        return like
    if isinstance(like, int | float):
        a = int(lo) if lo is not None else 1
        b = int(hi) if hi is not None else max(a + 100, int(like) * 2 + 10)
        for _ in range(attempts):
            v = rng.randint(a, b) if isinstance(like, int) else round(rng.uniform(a, b), 2)
            if check(v):
                return v
        return like
    s = str(like)
    if "@" in s or "email" in name:
        person = _row_person(row) if row else None
        if person and len(person.split()) == 1 or not person:
            fake = fake or _faker(rng)
        if person and len(person.split()) == 1:
            person = f"{person} {fake.last_name()}"  # type: ignore[union-attr]  # a first name has too few spellings
        for _ in range(8):
            if person is None:
                fake = fake or _faker(rng)
            v = email_for_name(person or fake.name(), rng, set(taken) | {s}, usual=False)  # type: ignore[union-attr]
            if v is not None:
                return v
            person = None
        fake = fake or _faker(rng)
        return email_for_name(fake.name() + " " + fake.last_name(), rng, taken) or s
    if _DATE.match(s):
        from scaleenv.utils.dates import shift_iso

        for _ in range(attempts):
            v = shift_iso(s, rng.choice([-1, 1]) * rng.randint(1, 30))
            if check(v):
                return v
        return s
    if text_kind(name) == "street_address":  # "535 Maple Street": another real-looking street, not redrawn letters
        fake = fake or _faker(rng)
        for _ in range(attempts):
            v = str(fake.street_address())
            if check(v):
                return v
        return s
    if any(ch.isdigit() for ch in s) and _SHAPE.match(s):
        for _ in range(attempts):
            v = redraw_shape(s, rng)
            if check(v):
                return v
        return s
    fake = fake or _faker(rng)
    for _ in range(attempts):
        v = _another_text(name, s, fake, rng)
        if check(v):
            return v
    return s


def _row_person(row: dict[str, Any]) -> str | None:
    for k, v in row.items():
        if isinstance(v, str) and _PERSON_COLS.search(k) and not k.endswith("_id"):
            return v
    first = next((v for k, v in row.items() if isinstance(v, str) and _FIRST_COLS.search(k)), None)
    last = next((v for k, v in row.items() if isinstance(v, str) and _LAST_COLS.search(k)), None)
    if first and last:
        return f"{first} {last}"
    return None


_PLACE_KINDS = {"city", "country", "state", "street_name", "street_address"}
_LABEL_VARIANTS = ("Plus", "Select", "Classic", "Extra", "Lite", "Pro", "Max", "Essential", "Prime", "Advantage")


def _another_text(column: str, like: str, fake: Faker, rng: random.Random) -> str:
    if _FIRST_COLS.search(column):
        return fake.first_name()
    if _LAST_COLS.search(column):
        return fake.last_name()
    if _PERSON_COLS.search(column) and len(like.split()) in (2, 3) and like.istitle():
        return fake.name()
    words = like.split()
    kind = text_kind(column)
    if kind in _PLACE_KINDS:  # "Lake Anna" -> another town, never "New Kevin Anna"
        return str(getattr(fake, kind)())
    if len(words) >= 2 and len(words[-1]) <= 12:
        # "Gloverbury FC" -> "Millbrook FC": a new leading part, the same kind of ending
        lead = fake.city() if rng.random() < 0.5 else fake.last_name()
        return f"{lead} {words[-1]}"
    if kind in (None, "name") and len(words) == 1 and like[:1].isupper() and not any(ch.isdigit() for ch in like):
        # a one-word label ("Standard", "Off-Peak" plans) becomes another of its kind, never a person's name
        variant = f"{like} {rng.choice(_LABEL_VARIANTS)}"
        return variant if rng.random() < 0.5 else f"{fake.city()} {variant}"  # many rows: "Lake Anna Flex Plus"
    if kind and kind not in ("sentence", "paragraph", "title"):
        return str(getattr(fake, kind)())
    return fake.catch_phrase() if kind == "title" or len(words) <= 4 else fake.sentence(nb_words=len(words))


_FAKER: Faker | None = None


def _faker(rng: random.Random) -> Faker:
    """One shared Faker (building one costs milliseconds), reseeded from ``rng`` for determinism."""
    global _FAKER
    if _FAKER is None:
        _FAKER = Faker("en_US")
    _FAKER.seed_instance(rng.randrange(2**31))
    return _FAKER

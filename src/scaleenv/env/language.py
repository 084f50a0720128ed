"""Language without seams: how values are spoken, articles by sound, and a check for the seams
that templates leave (doubled words, unfilled slots, wrong articles, a user calling itself "my
owner Timothy").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def inflect_engine() -> Any:
    """The shared ``inflect`` engine. inflect wraps its functions in typeguard's ``@typechecked``,
    which re-compiles each of them at import (seconds per process, in every build worker); the
    decorator is made a no-op while inflect is imported (its run-time type checks are not needed)."""
    import sys

    if "inflect" not in sys.modules:
        import typeguard

        checked = typeguard.typechecked
        typeguard.typechecked = lambda target=None, **kw: target if target is not None else (lambda f: f)  # type: ignore[assignment] # a no-op decorator while inflect imports
        try:
            import inflect  # noqa: F401
        finally:
            typeguard.typechecked = checked
    import inflect

    return inflect.engine()


_engine = inflect_engine


def spoken(v: Any) -> str:
    """A value as a person says it: ``yes``/``no``, ``23500000`` (not ``23500000.0``), text as is."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def article(phrase: str) -> str:
    """``phrase`` with the indefinite article its sound takes ("an express shipment", "a user")."""
    try:
        return str(_engine().a(phrase))
    except Exception:  # noqa: BLE001 - inflect rejects a few tokens; "a" is then the safe default
        return f"a {phrase}"


_ARTICLE = re.compile(r"\b([Aa]n?) ([A-Za-z][\w-]*)")
_LOWER_WORD = re.compile(r"^[a-z][a-z-]*$")


def fix_articles(text: str) -> str:
    """Correct ``a``/``an`` before ordinary lower-case words ("a item" -> "an item")."""
    def sub(m: re.Match[str]) -> str:
        art, word = m.group(1), m.group(2)
        if not _LOWER_WORD.match(word):
            return m.group(0)
        want = article(word).split(" ", 1)[0]
        return (want.capitalize() if art[0].isupper() else want) + " " + word
    return _ARTICLE.sub(sub, text)


_DOUBLE = re.compile(r"\b([A-Za-z]{2,}(?: [A-Za-z]{2,}){0,2}) \1\b", re.IGNORECASE)
_DOUBLE_SAME_CASE = re.compile(r"\b([a-z]{2,}(?: [a-z]{2,}){0,2}) \1\b")
_ALLOWED_DOUBLES = {"that that", "had had", "is is"}


def undouble(text: str) -> str:
    """Collapse a lower-case word or phrase said twice in a row ("promo code promo code" -> "promo
    code"); capitalised words may be a value ("sprint Sprint 01") and are left alone."""
    return _DOUBLE_SAME_CASE.sub(lambda m: m.group(0) if m.group(0).lower() in _ALLOWED_DOUBLES else m.group(1), text)


def self_names(persona: str) -> list[str]:
    """The name a customer persona ("You are Timothy Mitchell.") goes by; none for staff."""
    m = re.match(r"You are (?!a |an |the )(.+?)\.?$", persona.strip())
    return [m.group(1)] if m else []


def polish(text: str) -> str:
    """Doubled words collapsed, articles by sound, spacing before punctuation removed, and a
    template's "1 room(s)" said as "1 room" ("2 rooms")."""
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s+([A-Za-z]+)\(s\)",
                  lambda m: f"{m[1]} {m[2] if m[1] == '1' else inflect_engine().plural_noun(m[2])}", text)
    text = fix_articles(undouble(text))
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"\s{2,}", " ", text).strip()
    text = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)
    return text


_SLOT = re.compile(r"\{\w*\}|\[\w[\w ]*\](?<!\[ask me\])|\b(None|nan|null)\b")
_EMPTY = re.compile(r"\(\s*\)|\b(in|on|for|to|of|with|at|by|from) [.,;]")
_SELF = r"\bmy (?:[a-z]+ ){1,2}(?:{names})\b"


def language_defects(text: str, *, self_names: Iterable[str] = ()) -> list[str]:
    """The seams in a user-facing sentence, each as ``kind: excerpt``; empty when it reads clean.

    Kinds: ``doubled_word`` ("the plan plan"), ``unfilled_slot`` ("{course}", "None"),
    ``empty_slot`` ("in course." with nothing after the preposition, "()"), ``article``
    ("a item", "an user"), ``self_reference`` ("my owner Timothy Mitchell" where the speaker is
    Timothy Mitchell: pass the names the speaker goes by in ``self_names``).
    """
    out: list[str] = []
    for m in _DOUBLE.finditer(text):
        if re.match(r"-\d", text[m.end():]):  # "vet VET-0006": a noun and an id
            continue
        if m.group(0).lower() not in _ALLOWED_DOUBLES:
            out.append(f"doubled_word: {m.group(0)!r}")
    out += [f"unfilled_slot: {m.group(0)!r}" for m in _SLOT.finditer(text)]
    out += [f"empty_slot: {m.group(0)!r}" for m in _EMPTY.finditer(text)]
    for m in _ARTICLE.finditer(text):
        word = m.group(2)
        if _LOWER_WORD.match(word) and article(word).split(" ", 1)[0] != m.group(1).lower():
            out.append(f"article: {m.group(0)!r}")
    names = [re.escape(n) for n in self_names if isinstance(n, str) and n.strip()]
    if names:
        pat = re.compile(_SELF.replace("{names}", "|".join(names)))
        out += [f"self_reference: {m.group(0)!r}" for m in pat.finditer(text)]
    return out

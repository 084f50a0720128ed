"""The English the scripted user reads an agent's message by, as data: the phrases of each act (a yes/no
check, a report of work done, a refusal, ...) in ``env/acts.txt``, one per line, compiled once into a
whole-word, case-blind pattern per act. A new phrasing found in play is a line there and a labelled row in
``tests/data/conversation_corpus.jsonl``, not a branch in code."""

from __future__ import annotations

import re
from functools import cache, lru_cache


@lru_cache(maxsize=1)
def acts() -> dict[str, tuple[str, ...]]:
    """Every act's phrases, from the data file ``env/acts.txt`` (in file order)."""
    from importlib.resources import files

    out: dict[str, list[str]] = {}
    for line in files("scaleenv.env").joinpath("acts.txt").read_text(encoding="utf-8").splitlines():
        act, sep, phrase = line.split("#")[0].partition(":")
        phrase = " ".join(phrase.split()).lower()
        if sep and act.strip() and phrase:
            out.setdefault(act.strip(), []).append(phrase)
    return {act: tuple(phrases) for act, phrases in out.items()}


def _regex(phrase: str) -> str:
    """A phrase as a pattern of whole words: spaces match any run of spaces, ``*`` one word, an apostrophe
    either kind."""
    out = re.escape(phrase).replace("'", "['’]").replace(r"\*", r"[\w'’-]+").replace(r"\ ", r"\s+")
    return (r"\b" if phrase[0].isalnum() else "") + out + (r"\b" if phrase[-1].isalnum() or phrase[-1] == "*" else "")


@cache
def act_pattern(act: str) -> re.Pattern[str]:
    """One pattern that finds any phrase of ``act`` as whole words, in any case (the longest phrase first)."""
    phrases = sorted(acts()[act], key=len, reverse=True)
    return re.compile("|".join(_regex(p) for p in phrases), re.IGNORECASE)

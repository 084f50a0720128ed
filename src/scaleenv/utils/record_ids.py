"""Record ids in free text ("RES-0154"): finding them, naming them whole, saying one for another."""

from __future__ import annotations

import re

RECORD_ID = re.compile(r"\b[A-Za-z][A-Za-z0-9]*-\d+\b")
"""A record id as the worlds write them: a prefix, a hyphen and a number."""


def names(text: str, record_id: str) -> bool:
    """Whether ``text`` names the record id (whole, in any case: RES-0154 is not named by RES-01540)."""
    return re.search(rf"(?<![\w-]){re.escape(record_id)}(?![\w-])", text, re.IGNORECASE) is not None


def said_with(text: str, said: str, meant: str) -> str:
    """``text`` with the id ``meant`` given as ``said``."""
    return re.sub(rf"(?<![\w-]){re.escape(meant)}(?![\w-])", said, text)

"""The domain filter hook: refuse to synthesize environments for harmful domains.

The paper's impact statement asks for a mechanism that blocks malicious domains while keeping
diversity. Every LLM build passes the bare domain name, and again the model's description and
keywords, through the registered filters; the first refusal stops the build with a one-line error.
The built-in filter matches a list of harmful themes on word boundaries; register your own (for
example a moderation endpoint) with :func:`register_domain_filter`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from scaleenv.errors import ScaleEnvError


@dataclass
class FilterVerdict:
    allowed: bool
    reason: str = ""


DomainFilter = Callable[[str, str, list[str]], FilterVerdict]

HARMFUL_THEMES = (
    "bioweapon", "biological weapon", "chemical weapon", "nerve agent", "nuclear weapon", "dirty bomb",
    "bomb making", "bomb-making", "explosives manufacturing", "build explosives", "improvised explosive",
    "weapon smuggling", "arms trafficking", "gun trafficking", "ghost gun",
    "terrorism", "terrorist", "extremist recruitment", "mass shooting", "assassination", "hitman", "contract killing",
    "human trafficking", "sex trafficking", "child sexual", "child exploitation", "csam", "child abuse material",
    "drug trafficking", "drug cartel", "meth lab", "methamphetamine synthesis", "fentanyl synthesis",
    "drug synthesis",
    "malware", "ransomware", "botnet", "keylogger", "credential stuffing", "phishing kit", "phishing campaign",
    "carding", "credit card fraud", "identity theft", "money laundering", "counterfeit currency",
    "stalking", "doxxing", "doxing", "revenge porn", "sextortion", "extortion", "blackmail",
    "torture", "genocide", "ethnic cleansing", "self-harm", "suicide method",
)
_PATTERNS = [re.compile(r"(?<![a-z])" + re.escape(t).replace(r"\ ", r"[\s_-]+") + r"(?![a-z])") for t in HARMFUL_THEMES]


def keyword_filter(name: str, description: str = "", keywords: list[str] | None = None) -> FilterVerdict:
    text = " ".join([name, description, *(keywords or [])]).lower().replace("_", " ")
    for theme, pat in zip(HARMFUL_THEMES, _PATTERNS, strict=True):
        if pat.search(text):
            return FilterVerdict(False, f"it matches the harmful theme {theme!r}")
    return FilterVerdict(True)


_FILTERS: list[DomainFilter] = [keyword_filter]


def register_domain_filter(fn: DomainFilter) -> None:
    """Add a filter; it is asked after the built-in one, for every LLM-built domain."""
    _FILTERS.append(fn)


def unregister_domain_filter(fn: DomainFilter) -> None:
    if fn in _FILTERS and fn is not keyword_filter:
        _FILTERS.remove(fn)


class DomainRefused(ScaleEnvError):
    """A domain filter refused the domain."""


def check_domain(name: str, description: str = "", keywords: list[str] | None = None) -> None:
    """Raise :class:`DomainRefused` if any registered filter refuses the domain."""
    for f in list(_FILTERS):
        verdict = f(name, description, list(keywords or []))
        if not verdict.allowed:
            raise DomainRefused(f"domain {name!r} refused by the domain filter: {verdict.reason or 'not allowed'}; "
                                "scaleenv does not synthesize environments for harmful domains")

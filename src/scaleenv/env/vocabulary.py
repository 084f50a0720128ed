"""The words of a domain, for a simulated user that understands what it is asked.

A fact the user knows is named like ``candidate id`` or ``appointment scheduled at`` (a table's
singular and a column) or like a tool parameter (``reason``, ``new owner id``). The agent may call
it by any name the domain gives it: the table's entity name (``job seeker``), its plural, the
parameter's description (``Start time``), a synonym (``email address``, ``date of birth``), or an
id word (``number``, ``reference``, ``code``). :class:`Vocabulary` gives each fact those aliases
and finds the facts a message asks about. It reads only the domain spec (never a world).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from scaleenv.formats.domain import DomainSpec

ID_WORDS = ("id", "number", "reference", "ref", "code", "no")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "email": ("email address", "e mail", "mail address"),
    "phone": ("phone number", "telephone", "mobile", "mobile number", "contact number"),
    "phone number": ("phone", "telephone", "mobile"),
    "full name": ("name", "full name"),
    "display name": ("name",),
    "birth date": ("date of birth", "birthday", "dob", "born"),
    "date of birth": ("birth date", "birthday", "dob", "born"),
    "scheduled at": ("time", "date", "scheduled", "when", "slot"),
    "starts at": ("time", "start", "when"),
    "kickoff at": ("kickoff", "kick off", "time", "date", "when"),
    "address": ("street", "street address", "home address"),
    "city": ("town",),
    "username": ("user name", "handle", "login"),
    "title": ("name", "called"),
    "amount": ("sum", "how much"),
    "price": ("cost", "how much"),
    "quantity": ("how many",),
    "reason": ("why", "purpose"),
    "zip code": ("zip", "zipcode", "postal code", "postcode", "post code"),
    "zip": ("zip code", "zipcode", "postal code", "postcode", "post code"),
    "zipcode": ("zip", "zip code", "postal code", "postcode", "post code"),
    "postal code": ("postcode", "post code", "zip code", "zipcode", "zip"),
    "postcode": ("postal code", "post code", "zip code", "zipcode", "zip"),
    "tracking number": ("tracking", "tracking code"),
    "serial number": ("serial",),
    "plate": ("plate number", "registration", "license plate"),
}
GENERIC = {"id", "name", "date", "time", "status", "type", "number", "code", "reference", "ref", "no", "when",
           "new", "the", "a", "of", "at", "on", "in", "by", "to", "for", "value", "amount", "how much", "how many",
           "start", "called", "sum", "why", "purpose", "born", "slot", "scheduled", "mail address", "street"}
"""Words too common to name a fact on their own (they still name it next to its entity's noun)."""
LEADS = {"the", "your", "my", "a", "an", "this", "that", "its", "their", "his", "her", "what", "which", "any",
         "what is", "whats", "is", "and", "or", "same", "exact", "full", "correct", "right"}
"""Words that may stand before a fact's generic name without making it the name of something else
("the code", "what code"; not "promo code", "postal code", "customer number")."""


def norm(text: str) -> str:
    """Lower case, possessives dropped, punctuation and underscores to spaces."""
    text = re.sub(r"['’]s\b", "", text.lower().replace("_", " "))
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


@lru_cache(maxsize=4096)
def _plural(word: str) -> str:
    from scaleenv.env.language import inflect_engine

    try:
        return str(inflect_engine().plural_noun(word) or word)
    except Exception:  # noqa: BLE001 - inflect rejects some tokens; the word itself still counts
        return word


def with_plurals(phrases: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in phrases:
        for q in (p, " ".join([*p.split()[:-1], _plural(p.split()[-1])]) if p.split() else p):
            if q and q not in out:
                out.append(q)
    return out


def has_phrase(text_norm: str, phrase: str) -> bool:
    return f" {phrase} " in f" {text_norm} "


class Vocabulary:
    """Aliases of the facts a user knows, from the domain's tables, entity names and parameters."""

    def __init__(self, spec: DomainSpec | None, facts: Iterable[str]):
        self.spec = spec
        self.nouns: dict[str, list[str]] = {}
        """table -> the nouns that name one of its rows (singular, entity name, table name, plurals)"""
        if spec is not None:
            singular = spec.meta.get("singular") or {}
            entity = spec.meta.get("entity_names") or {}
            for t in spec.tables:
                names = [norm(x) for x in (singular.get(t.name), entity.get(t.name), t.name)
                         if isinstance(x, str) and x]
                self.nouns[t.name] = with_plurals(dict.fromkeys(n for n in names if n))
        self.param_words: dict[str, list[str]] = {}
        if spec is not None:
            for tool in spec.tools:
                for p in tool.parameters:
                    head = norm(re.split(r"[,.;(]", p.description, maxsplit=1)[0])
                    head = re.sub(r"^(the|a|an) ", "", head)
                    if head and len(head.split()) <= 4 and not head.startswith(("maximum", "optional")):
                        self.param_words.setdefault(norm(p.name), [])
                        if head not in self.param_words[norm(p.name)]:
                            self.param_words[norm(p.name)].append(head)
        self.columns: dict[str, list[str]] = {}
        """parameter words -> the tables its column lies in (a bare ``code`` is a gift card's)"""
        if spec is not None:
            for tool in spec.tools:
                for p in tool.parameters:
                    table = self._named_table(spec, p.column or "")
                    if table and table not in self.columns.setdefault(norm(p.name), []):
                        self.columns[norm(p.name)].append(table)
        self.facts = list(facts)
        self.aliases = {f: self._aliases(f) for f in self.facts}
        self.pairs = {f: self._pairs(f) for f in self.facts}
        self._context: tuple[str, set[str]] | None = None
        """The last context :meth:`asked` read and the facts whose nouns it names (a message's questions share it)."""

    @staticmethod
    def _named_table(spec: DomainSpec, column: str) -> str:
        """The table whose row a parameter's column names: a link's target (``members.plan_id`` names
        a membership plan, so "member id" is no alias of a plan id), else the column's own table."""
        table, _, col = column.partition(".")
        t = spec.table(table) if table else None
        c = t.column(col) if t is not None and col else None
        if c is not None and c.foreign_key:
            return c.foreign_key.partition(".")[0]
        return table

    def split(self, fact: str) -> tuple[str | None, str]:
        """``(table, column words)`` of a fact named ``<singular> <column>``; ``(None, fact)`` else."""
        words = norm(fact)
        best: tuple[str | None, str] = (None, words)
        best_len = 0
        for table, nouns in self.nouns.items():
            for n in nouns:
                if (words == n or words.startswith(n + " ")) and len(n) > best_len:
                    best, best_len = (table, words[len(n):].strip() or "id"), len(n)
        if best[0] is not None and best[0] not in self.columns.get(words, [best[0]]):
            return None, words  # a parameter's own name: a show's "rental price" is no rental's price
        if best[0] is None and words.endswith(" id"):  # a parameter naming a row: "new owner id"
            stem = re.sub(r"^new ", "", words[:-3])
            for table, nouns in self.nouns.items():
                if stem in nouns:
                    return table, "id"
        return best

    def column_aliases(self, col: str) -> list[str]:
        col = norm(col)
        out = [col, *SYNONYMS.get(col, ())]
        if col in ID_WORDS or col.endswith(" id"):
            out += list(ID_WORDS)
        out += self.param_words.get(col.replace(" ", " "), [])
        if col.startswith("new "):
            out += self.column_aliases(col[4:])
        words = col.split()
        if len(words) >= 2 and words[-1] in _UNITS:  # "what is its weight?" asks for the weight kg
            out += self.column_aliases(" ".join(words[:-1]))
        return list(dict.fromkeys(out))

    def _nouns_col(self, fact: str) -> tuple[list[str], str]:
        """The nouns of a fact's entity and its column words; without a table, the first word is
        taken for the noun (``order number``: order, number)."""
        table, col = self.split(fact)
        if table is not None:
            return self.nouns.get(table, []), col
        words = norm(fact).split()
        if len(words) >= 3 and words[0] == "new":  # "new member email": the e-mail of a member to create
            table, col = self.split(" ".join(words[1:]))
            if table is not None:
                return self.nouns.get(table, []), col
        # a known compound ("zip code", "phone number") is a column's words, not "<noun> <column>"
        # ... and so is a parameter's own name ("declared value", "avg rating": not the "declared's value")
        if len(words) >= 2 and words[0] != "new" and " ".join(words) not in self.param_words \
                and " ".join(words) not in SYNONYMS and " ".join(words) not in self.columns:
            return with_plurals([words[0]]), " ".join(words[1:])
        return [], col

    def _match_nouns_col(self, fact: str) -> tuple[list[str], str]:
        """:meth:`_nouns_col`, where a bare parameter fact takes the nouns of its column's table
        (``code`` of ``gift_cards.code``: "gift card code"), so that it is not the only fact a
        generic question word can name."""
        nouns, col = self._nouns_col(fact)
        if not nouns:
            for table in self.columns.get(norm(fact), []):
                nouns = nouns + [n for n in self.nouns.get(table, []) if n not in nouns]
        return nouns, col

    def _aliases(self, fact: str) -> list[str]:
        """Phrases that name the fact on their own (``job seeker id``, ``email address``)."""
        nouns, col = self._match_nouns_col(fact)
        out = [norm(fact)]
        cols = self.column_aliases(col)
        for noun in nouns:
            out += [f"{noun} {c}" for c in cols if c != noun]
        if not (nouns and norm(fact).startswith("new ")):  # a new record's e-mail is not "the e-mail"
            out += [c for c in cols if c not in GENERIC and len(c) >= 3]
        return list(dict.fromkeys(p for p in out if p))

    def _pairs(self, fact: str) -> tuple[list[str], list[str]]:
        """(nouns, column words): a sentence holding one of each asks about the fact ("the id of
        the pet")."""
        nouns, col = self._match_nouns_col(fact)
        return nouns, self.column_aliases(col)

    def asked(self, sentence: str, context: str = "") -> list[str]:
        """The facts one sentence names: by an alias, else by an entity noun and a column word (a
        pronoun -- "what is its name?" -- takes its noun from ``context``, the whole message)."""
        s = norm(sentence)
        found = self._asked(s)
        if context and re.search(r"\b(its|their|his|her|it|they|them)\b", s):
            named = self._named_in(context)
            for f in self.facts:
                if f not in found and f in named and any(has_phrase(s, w) for w in self.pairs[f][1]):
                    found.append(f)
        return found

    def _named_in(self, context: str) -> set[str]:
        """The facts whose entity nouns ``context`` names, read once for the questions of one message (the
        same text object) rather than once per question."""
        if self._context is None or self._context[0] is not context:
            c = norm(context)
            self._context = (context, {f for f in self.facts if any(has_phrase(c, n) for n in self.pairs[f][0])})
        return self._context[1]

    def phrase(self, fact: str, mine: Iterable[str] = (), owner: str = "my") -> str:
        """How the user names its fact: ``my email`` (its own), ``my pet's birth date``, ``the reason``
        (``owner`` "the" for a member of staff, whose records are not theirs: ``the household's name``)."""
        nouns, col = self._nouns_col(fact)
        if fact in set(mine) and nouns:
            return f"{owner} {col}"
        if nouns and norm(fact).startswith("new "):
            words = norm(fact).split()
            return f"the {' '.join(words[: len(words) - len(col.split())])}'s {col}"  # the new member's email
        if nouns:
            words = norm(fact).split()
            noun = " ".join(words[: len(words) - len(col.split())])
            return f"{owner} {noun}'s {col}" if noun else f"{owner} {fact}"
        return f"the {norm(fact)}"

    def statement(self, fact: str, value: str, mine: Iterable[str] = (), owner: str = "my") -> str:
        """The user stating a fact: "My email is x.", "My pet's name is Rex.", "My appointment is
        scheduled at 2026-05-10T07:45:00.", "The reason is checkup." """
        words = norm(fact).split()
        if len(words) >= 2 and words[-1] in _UNITS and fact not in set(mine):
            # "weight kg": the weight is 1.5 kg, not "my weight's kg is 1.5"
            said = self.phrase(" ".join(words[:-1]), mine, owner)
            return f"{said[0].upper()}{said[1:]} is {value}{_UNITS[words[-1]]}."
        table, col = self.split(fact)
        if table is not None and re.search(r" (at|on|by)$", col) and fact not in set(mine):
            words = norm(fact).split()
            noun = " ".join(words[: len(words) - len(col.split())])
            if noun:
                return f"{owner.capitalize()} {noun} is {col} {value}."
        said = self.phrase(fact, mine, owner)
        return f"{said[0].upper()}{said[1:]} is {value}."

    def _asked(self, s: str) -> list[str]:
        s = re.sub(r"\be mail\b", "email", s)  # "e-mail address" is one word's address, not an "address" of its own
        matched = {f: [a for a in self.aliases[f] if has_phrase(s, a) and (a not in GENERIC or _bare(s, a))]
                   for f in self.facts}
        matched = {f: m for f, m in matched.items() if m}
        if matched:
            # "job seeker id" names the candidate's id; the column word inside it ("id", "number")
            # does not name another fact on its own
            longer = [a for m in matched.values() for a in m]
            return [f for f, m in matched.items()
                    if any(not any(a != b and has_phrase(b, a) and b not in m for b in longer) for a in m)]
        out = []
        for f in self.facts:
            nouns, cols = self.pairs[f]
            named = any(has_phrase(s, n) for n in nouns)
            col_named = any(has_phrase(s, c) for c in cols)
            is_id = "id" in cols
            which = any(has_phrase(s, f"which {n}") or has_phrase(s, f"what {n}") for n in nouns)
            # without its noun, a generic column word names the fact only when nothing qualifies it:
            # "the number", not "the reference number" or "your customer number"
            bare = any(has_phrase(s, c) and (c not in GENERIC and c not in ID_WORDS or _bare(s, c)) for c in cols)
            if (named and (col_named or is_id or which)) or (not nouns and bare):
                out.append(f)
        return out


_UNITS = {"kg": " kg", "g": " g", "lb": " lb", "lbs": " lb", "km": " km", "cm": " cm", "mm": " mm", "mi": " miles",
          "min": " minutes", "mins": " minutes", "minutes": " minutes", "hours": " hours", "hrs": " hours",
          "days": " days", "usd": " dollars", "eur": " euros", "gbp": " pounds", "pct": "%", "percent": "%",
          "ml": " ml", "kwh": " kWh", "mb": " MB", "gb": " GB", "kb": " KB", "ha": " hectares", "sqm": " square metres"}
"""Column words that end in a unit, and how the unit follows a value in speech."""


def _bare(s: str, word: str) -> bool:
    """Whether a generic ``word`` stands in ``s`` (normalised) with nothing naming it something
    else: at the start, or after a determiner or question word ("the code", "what code"), not after
    another noun ("promo code", "postal code", "gift card code", "customer number")."""
    words = s.split()
    n = len(word.split())
    for i in range(len(words) - n + 1):
        if words[i:i + n] != word.split():
            continue
        if i == 0 or words[i - 1] in LEADS or words[i - 1] in ID_WORDS and i == 1:
            return True
    return False

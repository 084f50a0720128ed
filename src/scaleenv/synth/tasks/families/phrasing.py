"""Goal sentences for a target the user names by a description (``my cheapest pending invoice``)
instead of by its facts: the tool's phrasings with the target's slot (and the noun before it)
replaced by the description, else a plain sentence per tool family."""

from __future__ import annotations

import random
import re

from scaleenv.env.language import article, polish, spoken
from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.synth.tasks.instruction import (
    SINGULAR_VERBS,
    EntityRef,
    Goal,
    _attribute,
    _canonical_slots,
    _fill,
    _nouns,
    column_phrase,
    drop_unit,
    human,
    speakable_phrasings,
)

_DETERMINERS = {"my", "the", "our", "your", "this", "that", "a", "an"}
_PREPOSITIONS = {"for", "on", "to", "towards", "of", "with", "in", "from", "at", "about", "into"}
_MARK = "\x01"


def _slot_names(goal: Goal, target: EntityRef) -> set[str]:
    names = {p for p, r in goal.refs.items() if r is target}
    return names | {target.singular, f"{target.singular}_id"}


def _cut_noun(before: str, target: EntityRef, spec: DomainSpec, extra: frozenset[str] = frozenset()) -> str:
    """``before`` without the determiner and noun that precede the slot ("cancel my visit " ->
    "cancel ", "confirm pickup request " -> "confirm "), when they name the target's kind (the
    description says it again) or are one of ``extra``."""
    nouns = (_nouns(target, spec) | extra) - {"my", "the", "our"}
    cut = before
    for _ in range(3):  # a noun of the target's kind, one word at a time ("pickup request")
        words = list(re.finditer(r"[A-Za-z]+", cut))
        if not words or cut[words[-1].end():].strip() or words[-1].group(0).lower() not in nouns:
            break
        cut = cut[: words[-1].start()]
    words = list(re.finditer(r"[A-Za-z]+", cut))
    if cut != before and len(words) > 1 and not cut[words[-1].end():].strip() \
            and words[-2].group(0).lower() in _DETERMINERS:  # "reject the lowball offer": the description says which
        cut = cut[: words[-2].start()]
        words = words[:-2]
    elif cut == before and len(words) > 1 and not cut[words[-1].end():].strip():
        prev = words[-2].group(0).lower()
        infinitive = prev == "to" and len(words) > 2 and words[-3].group(0).lower() in _WANTING  # "want to switch"
        if (prev in _DETERMINERS or prev in _PREPOSITIONS) and not infinitive:  # "my visit", "towards bill"
            cut = cut[: words[-1].start()]
            words = words[:-1]
    if words and not cut[words[-1].end():].strip() and words[-1].group(0).lower() in _DETERMINERS:
        cut = cut[: words[-1].start()]
    return cut


_WANTING = {"want", "need", "like", "love", "have", "going", "trying", "wish", "hoping", "able", "wanted", "needs"}
"""Words before an infinitive's "to" ("I want to switch {member}"): the verb after it is no noun to cut."""


_RECORD_NOUNS = frozenset({"request", "record", "entry", "item", "booking", "reservation", "order", "ticket", "number",
                           "id"})
"""Nouns a phrasing puts before its slot that say the record's kind ("Approve follow request {id}")."""


def _fits_a_set(template: str, names: set[str]) -> bool:
    """Whether ``template`` can be said of several records: its target slot is no subject of a verb
    for one record, nor is an ``it`` that stands for the target."""
    for m in re.finditer(r"\{(\w+)\}", template):
        if m.group(1) in names and re.match(r"\s+(\w+\s+)?" + SINGULAR_VERBS, template[m.end():], re.IGNORECASE):
            return False
    return not re.search(r"\bit\s+" + SINGULAR_VERBS, template, re.IGNORECASE)


def fill_phrasing(template: str, goal: Goal, target: EntityRef, subject: str, entities: dict[str, EntityRef],
                  spec: DomainSpec, me: EntityRef | None, later: str = "it") -> str | None:
    """``template`` with the target's slots said as ``subject`` (``later`` after the first), the other
    slots filled as usual; None when a slot has no value."""
    names = _slot_names(goal, target)
    many = bool(re.match(r"(every|each|all)\b", subject))
    if many and not _fits_a_set(template, names):
        return None
    # said of a set, the tool's own noun goes too: "Cancel reservation {id}" -> "Cancel every rental of mine"
    # ... but not a word of its verb ("cancel_scheduled_send": "Don't send them later after all")
    verb = set(str(goal.tool.meta.get("verb") or "").lower().split("_"))
    extra = frozenset(set(goal.tool.name.lower().split("_")[1:]) - verb) | _RECORD_NOUNS if many else frozenset()
    out, pos, n = [], 0, 0
    for m in re.finditer(r"\{(\w+)\}", template):
        if m.group(1) not in names:
            continue
        out.append(_cut_noun(template[pos : m.start()], target, spec, extra))  # "mark item {id}" said later: "mark it"
        out.append(_MARK if n == 0 else later)
        pos, n = m.end(), n + 1
    if n == 0:
        return None  # the phrasing does not name the target
    out.append(template[pos:])
    slots = {k: v for k, v in _canonical_slots(goal, entities).items() if k not in names}
    text = _fill("".join(out), slots, spec, me)
    if text is None:
        return None
    if re.match(r"(every|each|all)\b", subject):  # "Book me ({member_id})" said of a set: "Book each of them"
        text = re.sub(r"\bme \(" + _MARK + r"\)", _MARK, text)
    start = text.index(_MARK)
    lead = text[:start].strip()
    said = subject[0].upper() + subject[1:] if not lead or lead[-1] in ".!?" else subject
    return polish(text.replace(_MARK, said))


def plain_sentence(goal: Goal, subject: str, rng: random.Random) -> str:
    """The goal without a phrasing: one sentence per tool family, every literal argument stated."""
    tool = goal.tool
    fam = tool.meta.get("family")
    literal = {k: v for k, v in goal.args.items() if k not in goal.refs}
    details = ", ".join(f"{human(k)}: {spoken(v)}" for k, v in literal.items())
    if fam == "update" and literal:
        col = drop_unit(column_phrase(tool.meta.get("column", next(iter(literal)))))
        new = spoken(literal.get(tool.meta.get("column", ""), next(iter(literal.values()))))
        return polish(rng.choice([f"Please change the {col} of {subject} to {new}.",
                                  f"I need the {col} on {subject} updated to {new}."]))
    if fam == "create":
        ent = human(tool.meta.get("entity_singular") or tool.name.split("_", 1)[-1])
        extra = f" ({details})" if details else ""
        return polish(f"I'd like to add {article('new ' + ent)}{extra} for {subject}.")
    if fam == "delete":
        return polish(f"Please delete {subject}.")
    if fam == "transition":
        verb = human(str(tool.meta.get("verb") or tool.name.split("_")[0]))
        to = human(str(tool.meta.get("to") or ""))
        many = bool(re.match(r"(every|each|all)\b", subject))
        head, _, state = verb.partition(" ")
        if state and state == to:  # "flag spam": "Please flag every inbox message of mine as spam"
            verb, subject, tail = head, f"{subject} as", f" {state}"
        else:
            tail = _end_state(tool, verb, to, many)
        return polish(f"Please {verb} {subject}{tail}" + (f" ({details})." if details else "."))
    # the description's first sentence only: what the tool does, not its rules ("Its upcoming scheduled
    # appointments are cancelled" is the tool's text, not something a customer says)
    desc = re.split(r"(?<=[.!?])\s+", tool.description.strip(), maxsplit=1)[0].rstrip(".")
    noun = human(str(tool.meta.get("entity_singular") or ""))
    nouns = [n for n in {noun, *(human(r.singular) for r in goal.refs.values())} if n]
    for n in sorted(nouns, key=len, reverse=True):  # "Void an unpaid invoice": "Void every unpaid invoice of mine"
        m = re.search(r"\b(?:a|an|the|one)\s+(?:[\w-]+\s+){0,2}?" + re.escape(n) + r"\b", desc, re.IGNORECASE)
        if m:
            text = desc[: m.start()] + subject + desc[m.end():]
            return polish(text + (f" ({details})." if details else "."))
    return polish(f"{desc} for {subject}" + (f" ({details})." if details else "."))


def _end_state(tool: ToolSpec, verb: str, to: str, many: bool) -> str:
    """What a transition leaves, when its verb does not already say it: " so that they are archived", " so
    that its folder is inbox" (a state that is a place); nothing after "remove" ("so that they are removed")."""
    if not to or to in verb or to.startswith(verb.split()[0][:-1] or verb):
        return ""
    column = str(tool.meta.get("state_column") or "status")
    if column == "status":
        return f" so that {'they are' if many else 'it is'} {to}"
    return f" so that {'their' if many else 'its'} {human(column)} is {to}"


def selection_sentence(goal: Goal, target: EntityRef, subject: str, entities: dict[str, EntityRef],
                       spec: DomainSpec, me: EntityRef | None, rng: random.Random, later: str = "it") -> str:
    """The goal said with ``subject`` for its target: a phrasing of the tool that names the target,
    else :func:`plain_sentence`."""
    phrasings = speakable_phrasings(goal, entities, me)
    if phrasings:
        start = rng.randrange(len(phrasings))
        for i in range(len(phrasings)):
            text = fill_phrasing(phrasings[(start + i) % len(phrasings)], goal, target, subject, entities, spec,
                                 me, later)
            if text is not None:
                return text
    if goal.answer:
        attr = _attribute(goal, target)
        return polish(rng.choice([f"Can you tell me the {attr} of {subject}?", f"I'd like to know the {attr} of {subject}."]))
    return plain_sentence(goal, subject, rng)

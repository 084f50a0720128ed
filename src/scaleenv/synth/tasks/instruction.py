"""User profile and instruction, grounded only in the gold chain, built from blueprint phrasings."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.language import article, inflect_engine, polish, spoken
from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.task import Objective

_ACRONYMS = {"pt": "PT", "vip": "VIP", "sms": "SMS", "url": "URL", "dob": "DOB"}
"""Name parts a person writes in capitals ("PT session", "VIP level")."""


def human(name: str) -> str:
    """A column or table name as words (``pt_session`` -> ``PT session``)."""
    return " ".join(_ACRONYMS.get(w, w) for w in name.split("_"))


# the noun of a date column's verb ("purchased_on" -> "purchase date"); others: "<verb> date/time"
_DATE_NOUNS = {"purchased": "purchase", "booked": "booking", "joined": "joining", "loaned": "loan", "issued": "issue",
               "opened": "opening", "posted": "posting", "placed": "order", "installed": "installation",
               "activated": "activation", "prescribed": "prescription", "ordered": "order", "submitted": "submission",
               "enrolled": "enrollment", "harvested": "harvest", "planted": "planting", "applied": "application",
               "paid": "payment", "filed": "filing", "requested": "request", "received": "receipt",
               "registered": "registration", "delivered": "delivery", "shipped": "shipping", "returned": "return",
               "signed": "signing", "scheduled": "scheduled", "starts": "start", "started": "start", "ends": "end",
               "created": "creation", "updated": "last update", "saved": "save", "sent": "sending", "given": "vaccination",
               "uploaded": "upload", "recorded": "recording", "irrigated": "irrigation", "occurred": "incident",
               "blocked": "blocking", "fired": "firing", "rented": "rental", "added": "added", "extended": "offer",
               "checked_in": "check-in", "performed": "service", "renewed": "renewal", "bid": "bid", "work": "work",
               "kickoff": "kick-off", "due": "due", "expires": "expiry", "valid": "expiry", "last_run": "last run"}


def column_phrase(column: str) -> str:
    """A column as a person names it: ``purchased_on`` -> "purchase date", ``starts_at`` -> "start
    time", ``scheduled_for`` -> "scheduled time"; other columns with spaces for underscores."""
    if column in ("paid", "refunded", "charged", "owed", "spent", "raised", "collected"):
        return f"amount {column}"  # "the amount paid on my contract", not "the paid of my contract"
    m = re.match(r"^(.*?)_(on|at|for|date|until|by)$", column)
    if not m:
        return human(column)
    stem, tail = m.group(1), m.group(2)
    noun = _DATE_NOUNS.get(stem, human(stem))
    return f"{noun} {'time' if tail in ('at', 'for') else 'date'}"


UNIT_WORDS = frozenset({"kg", "g", "lb", "km", "mi", "cm", "mm", "min", "mins", "sec", "secs", "pct", "kb", "mb",
                        "gb", "usd", "eur", "kw", "kwh", "ml"})
"""Unit suffixes of column names (``weight_kg``) that a person does not say with the attribute."""


def drop_unit(phrase: str) -> str:
    """An attribute without its unit suffix: "weight kg" -> "weight", "total size kb" -> "total size"."""
    words = phrase.split()
    return " ".join(words[:-1]) if len(words) > 1 and words[-1] in UNIT_WORDS else phrase


_ENUM_WORDS = re.compile(r"^[a-z]+(_[a-z]+)+$")
# codes only staff or systems see: never how a customer names a record while anything else tells it apart
INTERNAL_CODE = re.compile(r"(^|_)(pos_code|sku|catalog_number|imdb_id|serial|serial_number|barcode|imei|"
                           r"ticket_number|internal_code|batch)$")


def say(v: Any) -> str:
    """A value as the user says it: enum words with spaces ("hate speech", not "hate_speech")."""
    text = spoken(v)
    return text.replace("_", " ") if isinstance(v, str) and _ENUM_WORDS.match(v) else text


@dataclass
class EntityRef:
    """How the user identifies one entity of the chain: by ``facts`` (column -> value) or by id."""

    table: str
    singular: str
    row: dict[str, Any]
    by: dict[str, Any] = field(default_factory=dict)

    display: str | None = None
    owner_word: str = "my"
    """How the user speaks of its own records: ``my`` (a customer), ``the`` (a member of staff)."""
    phrase: str | None = None
    """A description that stands for the entity instead of its facts (``earliest pending appointment
    for Rex``): the user never gives its id or a fact that names it (computed and described selections)."""
    speaker_name: str | None = None
    """The name the user goes by when this entity is the user (its full name, not a user name)."""
    self_facts: dict[str, Any] = field(default_factory=dict)
    """Facts of the user's own records the user knows besides those that name it (the e-mail, or the
    phone number of their line, the agent looks the user up by): profile key -> value."""
    within: EntityRef | None = None
    """The record this one is found under (the chain lists it from there), named with it when its
    own facts match records elsewhere too ("the open check from 07:00 at dining table TBL-0040")."""

    def short(self) -> str:
        """The entity without its noun: ``Rex (birth date 2017-09-03)`` or ``APT-0081``; with the record
        it is found under where its facts alone name others too."""
        own = self._own()
        if self.within is None or self.phrase:
            return own
        return f"{own} at {self.within.describe()}"

    def _own(self) -> str:
        if self.phrase:
            return self.phrase
        if not self.by or list(self.by) == ["id"]:
            return str(self.row["id"])
        name = self.row.get(self.display) if self.display else None
        facts = ", ".join(f"{column_phrase(k)} {say(v)}" for k, v in self.by.items() if k != self.display)
        if name is not None and self.display and re.match(r"^\d{4}-\d{2}-\d{2}", str(name)):
            shown = f"from {spoken(name)}"  # a record named by its date: "loan from 2026-04-28"
        else:
            shown = spoken(name) if name is not None else ""
        if name is not None and facts:
            return f"{shown} ({facts})"
        return shown if name is not None else facts

    def describe(self) -> str:
        if self.phrase:
            return f"{self.owner_word} {self.phrase}"
        if not self.by or list(self.by) == ["id"]:
            return f"{human(self.singular)} {self.row['id']}"
        short, noun = self.short(), human(self.singular)
        if short.lower().startswith(noun.lower() + " "):  # "Sprint 49" needs no "sprint" before it
            return f"{self.owner_word} {short}"
        return f"{self.owner_word} {noun} {short}"


@dataclass
class Goal:
    tool: ToolSpec
    args: dict[str, Any]
    refs: dict[str, EntityRef]  # param -> entity it refers to
    answer: str | None = None
    sentence: str | None = None
    """The goal as the user says it, where a family wrote it (else it comes from the tool's phrasings)."""


def _canonical_slots(goal: Goal, entities: dict[str, EntityRef]) -> dict[str, Any]:
    slots: dict[str, Any] = {}
    for name, value in goal.args.items():
        slots[name] = goal.refs.get(name) or value
    for ref in entities.values():
        slots.setdefault(ref.singular, ref)
        slots.setdefault(f"{ref.singular}_id", ref)
    return slots


_NOUN_BEFORE = re.compile(r"(\w+)\s*$")
# a phrasing in the customer's own voice: "my plans changed", "I'm moving away", "I lost the book"
_CUSTOMER_VOICE = re.compile(r"\b(my|mine|me|I'm|I am|I've|I’m)\b|\bI (don't|no longer|can't|lost|changed|decided|"
                             r"collected|want|need to cancel|fixed|just)\b")
_SELF_SLOT = re.compile(r"\b(?:me|myself|my account|mine)\s*\(\{(\w+)\}\)|"
                        r"\b(?:I'm|I am|I’m|this is|my account)\s+(?:[a-z]+\s+)?\{(\w+)\}")


def actor_slots(phrasings: list[str]) -> set[str]:
    """The parameters a tool's phrasings call the speaker ("I'm {buyer_id}", "from me ({customer_id})"):
    the person who acts, whatever the parameter's name says."""
    return {m.group(1) or m.group(2) for p in phrasings for m in _SELF_SLOT.finditer(p)}


def _speaks_as_other(phrasing: str, goal: Goal, me: EntityRef | None) -> bool:
    """Whether the phrasing calls a slot's record the speaker ("from me ({customer_id})") while that
    record is someone else (another person, or a customer whose record a member of staff looks after)."""
    for m in _SELF_SLOT.finditer(phrasing):
        slot = m.group(1) or m.group(2)
        ref = goal.refs.get(slot)  # "from me ({customer_id})", "I'm {buyer_id}"
        if ref is not None and ref is not me:
            return True
        value = goal.args.get(slot)
        if ref is None and isinstance(value, str | int) and not isinstance(value, bool) \
                and (me is None or value != me.row.get("id")):
            return True  # a literal id of someone else: a courier is not "me (CUS-0023)"
    return False


_SELF_BEFORE = re.compile(r"\b(I'm|I am|I’m|We're|We are)\s*$")
_DETERMINER_NOUN = re.compile(r"\b(the|a|an|this|that|my|our|your) [a-z]+\s*$", re.IGNORECASE)
_ID_BEFORE = re.compile(r"\s+(id|ID|number)\s*$")


def _nouns(ref: EntityRef, spec: DomainSpec | None) -> set[str]:
    """The words that name the entity's kind (its singular, entity name, table name and the blueprint's
    other names for it: "Ticket {task_id}" names a task)."""
    names = {ref.singular, *human(ref.singular).split(), ref.table, human(ref.table).split()[-1]}
    if spec is not None:
        entity = (spec.meta.get("entity_names") or {}).get(ref.table)
        if isinstance(entity, str) and entity:
            names |= {entity, *human(entity).split()}
        aliases = (spec.meta.get("aliases") or {}).get(ref.table) or []
        names |= {w for a in aliases if isinstance(a, str) for w in (a, *human(a).split())}
    return {n.lower() for n in names} | {"my", "the", "our"}


def _undouble_noun(text: str, out: list[str]) -> str:
    """Drop the template's noun when the value starts with it ("sprint {name}" with "Sprint 01")."""
    prev = _NOUN_BEFORE.search(out[-1]) if out else None
    if prev and text.lower().startswith(prev.group(1).lower() + " "):
        out[-1] = out[-1][: len(out[-1].rstrip()) - len(prev.group(1))]
    return text


def _render(val: EntityRef, text: str, bare: bool, spec: DomainSpec | None, me: EntityRef | None,
            out: list[str], after: str = "") -> str:
    """One entity slot, given the template text before it (``out[-1]`` may lose a redundant noun)
    and after it."""
    prev = _NOUN_BEFORE.search(text)
    nouns = _nouns(val, spec)
    named = bool(val.by) and list(val.by) != ["id"]
    if val is me and val.display and val.row.get(val.display) is not None:
        name = val.speaker_name or spoken(val.row[val.display])
        mine = val.short().replace(" (", ", ").rstrip(")") if named else name
        if after.startswith("'s "):  # "{staff_member_id}'s net sales": "my net sales"
            out[-1] = re.sub(r"\b(my|the|our)\s*$", "", out[-1])
            return "my\x00"
        if _SELF_BEFORE.search(text) or bare:
            return name
        if text.rstrip().endswith("(") and text.rstrip()[:-1].rstrip().endswith(name):
            rest = mine[len(name):].lstrip(", ")  # "Assign Courtney Wilson (phone ...)": the name once
            return rest or name
        self_noun = re.search(r"\b(I'm|I am|We're|We are)\s+(\w+)\s*$", text)
        if self_noun and self_noun.group(2).lower() in nouns:
            out[-1] = re.sub(r"\s+" + re.escape(self_noun.group(2)) + r"\s*$", " ", out[-1])
            return name
        if text.endswith("("):
            return mine
        if _ID_BEFORE.search(text):
            out[-1] = _ID_BEFORE.sub("", out[-1]) + " "
            return mine
        if prev and prev.group(1).lower() in nouns - {"my", "the", "our"}:
            noun = prev.group(1)
            out[-1] = re.sub(r"\b(?:(?:my|the|our|your)\s+)?" + re.escape(noun) + r"\s*$", "", out[-1])
            if out[-1].rstrip().endswith("("):  # "(customer {customer_id})": "(Jesse Ryan, email ...)"
                return mine
            owned = _OF_END.search(out[-1])
            if noun.lower() in _ROLE_NOUNS and owned:  # "the guest list of couple {couple_id}": my guest list
                out[-1] = out[-1][: owned.start()] + f"my {owned.group(1)} "
                return f"({mine})"
            if noun.lower() in _ROLE_NOUNS and (_PREPOSITION_END.search(out[-1]) or _VERB_END.search(out[-1])):
                return f"me ({mine})"  # "reserve a room for client {client_id}": for me, not "for my client"
            return f"my {noun.lower()} ({mine})"
        if prev and prev.group(1).lower() in ("my", "the", "our", "account"):
            out[-1] = re.sub(r"\b(my|the|our|account)\s*$", "", out[-1])
        return f"my account ({mine})"
    if bare and val.display and val.row.get(val.display) is not None:
        return _undouble_noun(spoken(val.row[val.display]), out)
    if named and _ID_BEFORE.search(text):  # "Patient id {patient_id}" for a patient named by facts
        out[-1] = _ID_BEFORE.sub("", out[-1]) + " "
        return val.short()
    if prev and prev.group(1).lower() in nouns:
        return _undouble_noun(val.short(), out)
    if prev and _DETERMINER_NOUN.search(text):  # "The consultation {appointment}": the noun is said
        return val.short()
    return val.describe()


_ROLE_NOUNS = frozenset({"client", "customer", "patient", "member", "passenger", "guest", "owner", "student",
                         "candidate", "user", "couple", "traveler", "traveller", "subscriber", "applicant", "buyer",
                         "seller", "renter", "tenant", "driver", "shopper", "diner", "learner", "patron", "resident",
                         "courier", "rider", "investor", "instructor", "trainer", "clinician", "employee", "player"})
"""Nouns that name a person by the role they play: the user is not "my client" but "me"."""
_OF_END = re.compile(r"\bthe ((?:[a-z]+ ){0,2}[a-z]+) of\s*$")
_VERB_END = re.compile(r"[a-z]\s*$")  # after a verb mid-sentence ("retire player {player_id}"): "retire me (...)"
_PREPOSITION_END = re.compile(r"\b(for|to|from|with|by|behalf of)\s*$", re.IGNORECASE)


SINGULAR_VERBS = r"(?:is|was|has|does|isn't|wasn't|hasn't|doesn't|keeps|needs|wants|breaks|belongs|looks|seems|" \
                 r"takes|goes|works|costs|runs|stays|sits|comes|starts|ends|expires|fails|can't|cannot|won't|" \
                 r"couldn't)(?!\w)"
"""Verbs for one third person or record: a phrasing that makes its slot their subject ("{courier_id} has
finished the shift", "{task_id} is stuck") is said neither of the speaker nor of a set of records."""
_SUBJECT_OF_ONE = re.compile(r"\s+(\w+\s+)?" + SINGULAR_VERBS, re.IGNORECASE)
"""A verb for a third person right after a slot: the slot is its subject."""


def said_once(sentences: list[str]) -> list[str]:
    """The goal sentences with each parenthesis said only the first time: "rent TTL-0037 for my
    profile", not a second "(Stephanie, email s.white@example.com)" in the same request."""
    seen: set[str] = set()

    def first(m: re.Match[str]) -> str:
        inner = m.group(1)
        if inner in seen:
            return ""
        seen.add(inner)
        return m.group(0)

    return [re.sub(r" \(([^()]{6,})\)", first, s) for s in sentences]


def _fill(template: str, slots: dict[str, Any], spec: DomainSpec | None = None,
          me: EntityRef | None = None) -> str | None:
    """Fill ``{slot}``s; an entity right after a noun of its own ("pet {pet_id}", "statement
    {bill_id}") is rendered without it; the user itself (``me``) by its name. ``None`` when a slot
    has no value (the phrasing does not fit this goal)."""
    out: list[str] = []
    pos = 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out.append(template[pos : m.start()])
        val = slots.get(m.group(1))
        if val is None:
            return None
        if isinstance(val, EntityRef):
            if val is me and _SUBJECT_OF_ONE.match(template[m.end():]):
                return None  # "Driver {courier_id} has finished the shift" is no sentence about the speaker
            out.append(_render(val, "".join(out), m.group(1) == val.singular, spec, me, out,
                               template[m.end():]))
        elif _is_prose(val) and template[m.start() - 1 : m.start()] not in ("'", '"'):
            # free text in quotes, its own full stop inside them: updated to "Sign model hit media away."
            out.append(f'"{val}"')
            pos = m.end() + (template[m.end():m.end() + 1] == ".")
            continue
        else:
            out.append(_undouble_noun(say(val), out))
        pos = m.end()
    out.append(template[pos:])
    return "".join(out).replace("my\x00's ", "my ")


def _is_prose(value: object) -> bool:
    """A free-text value the user dictates word for word (a sentence, ending in its own stop)."""
    return isinstance(value, str) and " " in value.strip() and value.rstrip()[-1:] in (".", "!", "?") \
        and '"' not in value


_AGGREGATE_WORDS = {"sum": "total", "total": "total", "avg": "average", "average": "average", "count": "number of",
                    "max": "highest", "min": "lowest"}


def _attribute(goal: Goal, target: EntityRef | None) -> str:
    """The attribute a read goal asks about, as a person names it, without its entity's noun
    ("loyalty points", "total fare" for ``sum_fare_by_member``, "purchase date" for ``purchased_on``)."""
    answer = goal.answer or ""
    words = human(answer).split()
    if words and words[0] in _AGGREGATE_WORDS and " by " in f" {' '.join(words)} ":
        words = " ".join(words).split(" by ")[0].split()  # "sum fare by member": "sum fare"
        words = [*_AGGREGATE_WORDS[words[0]].split(), *words[1:]]
        summed = goal.tool.meta.get("entity") if goal.tool.meta.get("family") == "total" else None
        # "my total amount on vendor contracts", not "my total amount" (of what: budget, contracts?)
        return " ".join(words) + (f" on {human(str(summed))}" if summed else "")
    last = answer.split(" ")[-1]
    if re.match(r"^\w+_(on|at|for|date|until|by)$", last):
        words = [*human(answer[: len(answer) - len(last)]).split(), *column_phrase(last).split()]
    if target is not None and len(words) > 1 and words[0] in (target.singular, human(target.singular)):
        words = words[1:]
    elif target is not None and words[: len(human(target.singular).split())] == human(target.singular).split():
        words = words[len(human(target.singular).split()):] or words
    said = drop_unit(" ".join(words))
    return _SPOKEN_ATTRIBUTES.get(said, said)


_SPOKEN_ATTRIBUTES = {"phone": "phone number", "mobile": "mobile number", "email": "e-mail address",
                      "dob": "date of birth", "zip": "zip code"}
"""Attributes people name in full ("I'd like to know my phone number", not "... my phone")."""


def _first_filled(phrasings: list[str], slots: dict[str, Any], spec: DomainSpec, me: EntityRef | None,
                  rng: random.Random) -> str | None:
    """The first of ``phrasings`` that fills, from a random one on in turn, polished."""
    start = rng.randrange(len(phrasings))
    for i in range(len(phrasings)):
        text = _fill(phrasings[(start + i) % len(phrasings)], slots, spec, me)
        if text is not None:
            return polish(text)
    return None


def speakable_phrasings(goal: Goal, entities: dict[str, EntityRef], me: EntityRef | None) -> list[str]:
    """The phrasings of the goal's tool its user may say: a member of staff does not speak in the
    customer's voice ("I'm ready to train again"), and "collect 1 parcels from me ({customer_id})" or
    "I'm supporter {supporter_id}" is said only by that customer."""
    phrasings = list(goal.tool.meta.get("phrasings") or [])
    if me is None and any(r.owner_word == "the" for r in entities.values()):
        phrasings = [p for p in phrasings if not _CUSTOMER_VOICE.search(p)]
    return [p for p in phrasings if not _speaks_as_other(p, goal, me)]


def goal_sentence(goal: Goal, entities: dict[str, EntityRef], rng: random.Random, spec: DomainSpec,
                  me: EntityRef | None = None) -> str:
    """The goal as the user says it: one of the tool's phrasings that fits, else a plain sentence."""
    if goal.sentence:
        return goal.sentence
    tool = goal.tool
    slots = _canonical_slots(goal, entities)
    phrasings = speakable_phrasings(goal, entities, me)
    if me is not None and me in goal.refs.values():
        # a customer asks in their own voice where the blueprint has one ("I'm ready to train again")
        voiced = [p for p in phrasings if _CUSTOMER_VOICE.search(p)]
        if voiced:
            # the other phrasings after them, before the tool's description ("for a client through an agent")
            text = _first_filled(voiced, slots, spec, me, rng)
            if text is not None:
                return text
            phrasings = [p for p in phrasings if p not in voiced]
    if phrasings:
        text = _first_filled(phrasings, slots, spec, me, rng)
        if text is not None:
            return text
    fam = tool.meta.get("family")
    target = next((r for p, r in goal.refs.items()), None)
    mine = target is not None and target is me
    what = "my account" if mine else (target.describe() if target else "it")
    literal = {k: v for k, v in goal.args.items() if k not in goal.refs}
    if fam == "update":
        col = drop_unit(column_phrase(str(tool.meta.get("column", "value"))))
        new = spoken(next(iter(literal.values()), ""))
        if mine:
            return polish(rng.choice([f"Please change my {col} to {new}.", f"I need my {col} updated to {new}."]))
        return polish(rng.choice([f"Please change the {col} of {what} to {new}.",
                                  f"I need the {col} on {what} updated to {new}."]))
    if fam == "create":
        details = ", ".join(f"{column_phrase(k)}: {say(v)}" for k, v in literal.items())
        ent = human(tool.meta.get("entity_singular") or tool.name.split("_", 1)[-1])
        # the records the new one belongs to are said too: "a new module ... for course MU-925"
        parents = list(dict.fromkeys("my account" if r is me else r.describe() for r in goal.refs.values()))
        owner = f" for {' and '.join(parents)}" if parents else ""
        return polish(rng.choice([f"I'd like to add {article('new ' + ent)} ({details}){owner}.",
                                  f"Please register {article('new ' + ent)} with {details}{owner}."]))
    if fam == "delete":
        return polish(f"Please delete {what}.")
    if goal.answer:
        attr = _attribute(goal, target)
        if mine:
            return polish(rng.choice([f"Can you tell me my {attr}?", f"I'd like to know my {attr}."]))
        return polish(rng.choice([f"Can you tell me the {attr} of {what}?",
                                  f"I'd like to know the {attr} for {what}."]))
    details = ", ".join(f"{column_phrase(k)} {say(v)}" for k, v in literal.items())
    if fam == "transition" and tool.meta.get("verb"):
        verb = human(str(tool.meta["verb"]))
        if verb.startswith("mark ") or verb.startswith("set "):  # "mark lost": "mark the loan ... as lost"
            head, rest = verb.split(" ", 1)
            return polish(f"Please {head} {what} as {rest}" + (f" ({details})." if details else "."))
        to = human(str(tool.meta.get("to") or ""))
        if mine and to:  # "please mark me as off duty", not "please go off duty my account"
            return polish(f"Please mark me as {to}" + (f" ({details})." if details else "."))
        return polish(f"Please {verb} {what}" + (f" ({details})." if details else "."))
    first = re.split(r"(?<=[a-z])\. ", tool.description.strip())[0].rstrip(".")
    return polish(f"{first} for {what}" + (f" ({details})." if details else "."))


def _lower_first(s: str) -> str:
    first = s.split(" ", 1)[0]
    if first in ("I", "I'd", "I'm", "I've", "I'll") or first.isupper():
        return s
    return s[0].lower() + s[1:]


# the columns that hold a person's own name, most usual first (a user name is not one: "You are jsmith.")
_PERSON_NAME_COLUMNS = ("full_name", "display_name", "holder_name", "owner_name", "partner_one", "contact_name")
_PERSON_NOUNS = {"customer", "user", "member", "patient", "client", "owner", "guest", "passenger", "subscriber",
                 "student", "candidate", "investor", "account", "profile", "couple", "seller", "buyer", "patron",
                 "traveller", "traveler", "instructor", "supporter", "job_seeker", "resident", "renter", "cardholder",
                 "borrower", "trader", "tenant", "fan", "shopper", "diner", "sender"}
# kinds of record that are never the speaker, whatever their columns ("Hi, I am Downtown.")
_PLACE_NOUNS = {"branch", "library_branch", "store", "hub", "depot", "restaurant", "clinic", "venue", "hotel", "household",
                "home", "club", "team", "squad", "company", "employer", "studio", "production_company", "farm",
                "field", "room", "space", "pharmacy", "plan", "course", "project", "listing", "product", "station",
                "warehouse", "office", "site", "location", "kitchen", "department", "agency", "vendor", "stock"}


def person_name(spec: DomainSpec, ref: EntityRef) -> str | None:
    """The name the person ``ref`` goes by (its full name, not its user name), None for a non-person."""
    if not is_person(spec, ref):
        return None
    table = spec.table(ref.table)
    cols = [c.name for c in table.columns] if table is not None else []
    for col in (*_PERSON_NAME_COLUMNS, ref.display):
        if col and col in cols and isinstance(ref.row.get(col), str) and ref.row[col].strip():
            value = str(ref.row[col]).strip()
            if col == ref.display and col not in _PERSON_NAME_COLUMNS and (" " not in value or value.islower()):
                return None  # a user name or a single word is not how a person introduces themself
            return value
    return None


_CONTACT_PARAM = re.compile(r"(^|_)(email|e_mail|email_address|phone|phone_number|mobile|full_name|first_name|"
                            r"last_name)$")


def goal_fact(spec: DomainSpec, tool: ToolSpec, param: str) -> str:
    """The name the user knows a goal's argument by: the parameter's words, or, for a new record's
    name, e-mail or phone, ``new <record> <attribute>`` ("new member email"), which is never the
    user's own: asked for their e-mail, the user does not give the one of the member they sign up."""
    name = human(param)
    if tool.meta.get("family") == "create" and _CONTACT_PARAM.search(param):
        singular = (spec.meta.get("singular") or {}).get(str(tool.meta.get("entity") or ""))
        if isinstance(singular, str) and singular:
            return f"new {human(singular)} {name}"
    return name


def is_person(spec: DomainSpec, ref: EntityRef) -> bool:
    """Whether the entity is someone who would speak for themself (a customer, a member): a person's
    kind of record, or one with a person's name column, never a place or an organisation."""
    if ref.table in (spec.meta.get("silent") or ()):
        return False  # a club's player: a record staff look after, never a user of the service
    table = spec.table(ref.table)
    cols = {c.name for c in table.columns} if table is not None else set()
    entity = str((spec.meta.get("entity_names") or {}).get(ref.table, ""))
    kinds = {ref.singular, entity}
    if kinds & _PLACE_NOUNS:
        return False
    return bool(kinds & _PERSON_NOUNS) or bool(cols & set(_PERSON_NAME_COLUMNS))


def persona_of(spec: DomainSpec, root: EntityRef | None) -> str:
    """Who the user is: the customer themself, or a member of staff who looks after the record."""
    if root is None:
        return ""
    name = root.row.get(root.display) if root.display else None
    me = person_name(spec, root)
    if me:
        return f"You are {me.rstrip('.')}."
    noun = human((spec.meta.get("entity_names") or {}).get(root.table) or root.singular)
    if isinstance(name, str) and name.lower().startswith("the "):
        return f"You are a staff member looking after {name}."  # not "the home The Silva Home"
    label = f"{noun} {name}" if name else f"{noun} {root.row['id']}"
    return f"You are a staff member looking after the {label}."


_VERB_PAST = {"pay": "paid", "set": "set", "put": "put", "send": "sent", "make": "made", "buy": "bought",
              "sell": "sold", "hold": "held", "give": "given", "take": "taken", "write": "written", "run": "run",
              "freeze": "frozen", "unfreeze": "unfrozen", "shut": "shut", "split": "split", "bid": "bid",
              "transfer": "transferred", "refer": "referred", "prefer": "preferred", "submit": "submitted",
              "admit": "admitted", "commit": "committed", "permit": "permitted", "control": "controlled",
              "patrol": "patrolled", "expel": "expelled"}
_FAMILY_DONE = {"update": ["updated", "changed", "set to", "is now"], "create": ["created", "added", "registered",
                "booked", "scheduled", "placed", "opened"], "delete": ["deleted", "removed"]}


_PARTICLES = frozenset({"out", "up", "in", "off", "on", "back", "to", "for", "from", "of", "by", "my", "a", "an", "the",
                        "all", "and", "as", "new"})


def past(verb: str) -> str:
    """The past participle of a regular verb, or of the few irregular ones tools use."""
    if verb in _VERB_PAST:
        return _VERB_PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ied"
    if re.search(r"[^aeiou][aeiou][bdgmnpt]$", verb) and len(verb) <= 4:
        return verb + verb[-1] + "ed"
    return verb + "ed"


_AGGREGATE_ASKS = {"count": ["how many", "number of"], "sum": ["total", "in all"], "total": ["total", "in all"]}


def objective_of(goal: Goal, sentence: str, spec: DomainSpec) -> Objective:
    """The goal in the form the scripted user judges: what it asks, the words that say it is done."""
    tool = goal.tool
    target = next(iter(goal.refs.values()), None)
    subject: list[str] = []
    if target is not None:
        subject = [human(target.singular)]
        entity = (spec.meta.get("entity_names") or {}).get(target.table)
        if isinstance(entity, str) and human(entity) not in subject:
            subject.append(human(entity))
    if goal.answer:
        attr = _attribute(goal, target)
        asks = [human(goal.answer), attr]
        words = tool.name.split("_")
        if words[0] in ("get", "fetch", "lookup", "look", "count", "sum", "total", "show", "find", "list", "view"):
            asks.append(" ".join(words[1:]).replace("up ", "", 1))
        asks += _AGGREGATE_ASKS.get(words[0], [])
        asks += [re.sub(r" by \w+$", "", a) for a in asks]  # "total amount by couple": "total amount"
        table = spec.table(tool.returns.table or "")
        col = table.column(goal.answer.split(" ", 1)[-1]) if table is not None else None
        if col is not None and col.enum:
            asks += [human(v) for v in col.enum]  # every value: says it was answered, not how
        return Objective(kind="read", text=sentence, asks=[a for a in dict.fromkeys(asks) if a])
    made = tool.meta.get("entity") if tool.meta.get("family") == "create" else None
    if isinstance(made, str) and made:
        # "your new listing LST-0074 is live": the new record is the subject, not only its seller
        *head, last = made.split("_")
        nouns = [" ".join([*head, inflect_engine().singular_noun(last) or last])]
        alias = (spec.meta.get("entity_names") or {}).get(made)
        subject += [human(n) for n in [*nouns, *([alias] if isinstance(alias, str) else [])] if human(n) not in subject]
    if tool.meta.get("family") == "operation":
        # what the operation acts on, by its name ("cash_out_wallet": a report of "the wallet" paid out
        # reports it, though its record is the profile; play round 29)
        subject += [w for w in tool.name.split("_")[1:] if w not in _PARTICLES and w not in subject]
    done = list(_FAMILY_DONE.get(tool.meta.get("family", ""), []))
    if tool.meta.get("to"):
        done.append(human(str(tool.meta["to"])))
    verb = str(tool.meta.get("verb") or tool.name.split("_")[0]).split("_")[0]
    done.append(past(verb))
    return Objective(kind="write", text=sentence, done_words=list(dict.fromkeys(done)), subject=subject)


STALE_DAYS = 365
"""A thing dated this many days before the world's today is not "new" any more."""

# words that call the user's thing new: "my new Galaxy S24", "brand-new", "I just bought"
_AGE_WORD = re.compile(r"\b(?:(?<=\bmy )|(?<=\bour ))new\s|\bbrand[- ]new\s|\bnewly\s|"
                       r"\b(?:just|recently)\s(?=(?:bought|purchased|installed|got|acquired|adopted|opened)\b)",
                       re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _stale(sentence: str, today: str) -> bool:
    """Whether ``sentence`` dates something a year or more before ``today`` (an ISO date)."""
    from datetime import date

    try:
        now = date.fromisoformat(today[:10])
    except ValueError:
        return False
    for m in _ISO_DATE.finditer(sentence):
        try:
            if (now - date.fromisoformat(m.group(1))).days >= STALE_DAYS:
                return True
        except ValueError:
            continue
    return False


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.!?;])\s+", text)


def stale_age_words(text: str, today: str) -> list[str]:
    """Age words that the sentence's own dates contradict ("my new Galaxy S24 ... bought 2021-06-10"
    when today is 2026-06-15)."""
    return [m.group(0).strip() for s in _sentences(text) if _stale(s, today) for m in _AGE_WORD.finditer(s)]


def drop_stale_age_words(text: str, today: str) -> str:
    """``text`` without the age words its dates contradict (the dates stay: they are facts)."""
    return " ".join(_AGE_WORD.sub("", s) if _stale(s, today) else s for s in _sentences(text))


def drop_self_introduction(sentence: str, name: str) -> str:
    """The sentence without the user saying its name again ("I'm Jean Morrison, block them"): the
    opening already says who the user is ("Hi, I am Jean Morrison.")."""
    first = name.split()[0] if name.split() else name
    said = "(?:" + "|".join(re.escape(n) for n in dict.fromkeys([name, first])) + ")"  # "I'm Jessica" too
    out = re.sub(rf"\s*\((?:I'm|I am) {said}\)", "", sentence)  # "my loyalty points (I'm Jay Mathews PhD)"
    out = re.sub(rf"\b(?:I'm|I am) {said}(?:\s*[;,]\s*|\s+and\s+)", "", out)
    out = re.sub(rf"^(?:I'm|I am) {said}\.\s+", "", out)  # "I'm Jessica. Please ..."
    out = re.sub(rf"(?<=[?!])\s+(?:I'm|I am) {said}\.$", "", out)  # "... prescribed? I'm Jessica."
    out = re.sub(rf"(?:[;,]\s*|\s+)(?:I'm|I am) {said}(?=[.!]?$)", "", out)  # "... tonight; I'm Jessica."
    return out[:1].upper() + out[1:] if out else sentence


def speaker_of(spec: DomainSpec, root: EntityRef | None, entities: dict[str, EntityRef]) -> EntityRef | None:
    """The user when it speaks for itself: the first person on the chain's path (root first) with a
    name; None when a member of staff speaks for the root."""
    return next((r for r in [root, *entities.values()] if r is not None and r.display
                 and r.row.get(r.display) is not None and person_name(spec, r)), None)


CONNECTORS = ["", "Also, ", "And ", "Lastly, "]
"""How the user joins its requests: in no order of time. "Then" would ask for an order the policy may forbid
(football/00065: "put the fixture back on the schedule. Then, please cancel ticket TKT-0084", where the
refund is allowed only while the fixture is postponed: the refund must come first)."""


def build_user_side(spec: DomainSpec, root: EntityRef | None, entities: dict[str, EntityRef], goals: list[Goal],
                    withheld_n: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The instruction (for the simulated user) and the user profile (what the user knows)."""
    known: dict[str, Any] = {}
    persona_keys: set[str] = set()
    identity: set[str] = set()
    me = speaker_of(spec, root, entities)
    speaker = me or root
    if me is not None:
        me.speaker_name = person_name(spec, me)
    for ref in entities.values():
        if ref.display and ref.row.get(ref.display) is not None:
            known[f"{human(ref.singular)} {human(ref.display)}"] = ref.row[ref.display]
            if ref is speaker:
                persona_keys.add(f"{human(ref.singular)} {human(ref.display)}")
        if ref is me and me.speaker_name != spoken(ref.row.get(ref.display or "")):
            col = next(c for c in (*_PERSON_NAME_COLUMNS, ref.display) if c and ref.row.get(c) == me.speaker_name)
            known[f"{human(ref.singular)} {human(col)}"] = me.speaker_name
            persona_keys.add(f"{human(ref.singular)} {human(col)}")
        for k, v in ref.by.items():
            known[f"{human(ref.singular)} {human(k)}"] = v
            if ref is speaker:
                identity.add(f"{human(ref.singular)} {human(k)}")
        if ref is me:
            for k, v in ref.self_facts.items():
                known[k] = v
                identity.add(k)
    for g in goals:
        for k, v in g.args.items():
            if k not in g.refs:
                known[goal_fact(spec, g.tool, k)] = v
    if root is not None and me is None:
        for ref in entities.values():
            ref.owner_word = "the"  # a member of staff speaks of the records it looks after
    sentences = said_once([drop_stale_age_words(goal_sentence(g, entities, rng, spec, me), spec.clock) for g in goals])
    if me is not None and me.speaker_name:
        sentences = [drop_self_introduction(s, me.speaker_name) for s in sentences]
    # A withheld fact must not already be spelled out in the goals the user states.
    said = " ".join(sentences)
    candidates = sorted(k for k in known if not k.endswith(" id") and k not in persona_keys
                        and str(known[k]) not in said and spoken(known[k]) not in said)
    rng.shuffle(candidates)
    withheld = sorted(candidates[:withheld_n])
    persona = persona_of(spec, speaker)
    body = " ".join(
        (CONNECTORS[min(i, 3)] + _lower_first(s)) if i else s for i, s in enumerate(sentences)
    )
    facts = "; ".join(f"{k}: {spoken(v)}" for k, v in sorted(known.items()))
    instruction = f"{persona} {body}".strip()
    if facts:
        instruction += f" Facts you know: {facts}."
    if withheld:
        instruction += f" Only reveal {', '.join(withheld)} if the agent asks for it."
    profile = {
        "persona": persona,
        "known": known,
        "withheld": withheld,
        "goals": sentences,
        "objectives": [objective_of(g, s, spec).model_dump(mode="json") for g, s in zip(goals, sentences,
                                                                                         strict=True)],
        "identity": sorted(k for k in persona_keys | identity if k in known),
    }
    return instruction, profile


_IDENTIFIER = re.compile(r"(?<![\w@/.-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w@/-])")
# "the purchased on of my device", "my scheduled at?": a column's name where the attribute's name belongs
_COLUMN_LEAK = re.compile(r"\b(?:the|my|your) [a-z]+(?:ed|ts|en) (?:on|at|for)(?=\s+(?:of|for|to|is|was)\b|\s*[?.,;]|$)")
_SEAMS = (
    re.compile(r"\bmy [a-z]+ my\b"),  # "to my profile my account"
    re.compile(r"\((?:them|it)\)"),  # "for the club Luisbury FC (them)"
    re.compile(r"\bIf [^.]*?, I'm\b"),  # "If my credit is at least 57, I'm Kari Perez."
    re.compile(r"\botherwise, I'm\b"),  # "...; otherwise, I'm Lori Clark; I'd like to order ..."
    re.compile(r"\b(?:into|onto|give) (?!my\b|your\b|the\b|a\b|an\b|it\b|them\b|me\b|us\b|her\b|him\b)[a-z]+ my\b"),
    re.compile(r"\b(?:for|of|on|with) (?:pet|account|order|record|booking|member|item|car|room|player) (?:it|them)\b"),
    # "cancel membership my account (Wesley Jones)": a verb's noun left before the pasted description
    re.compile(r"\b(?i:cancel|close|end|renew|update|change|delete|remove|freeze|pause|resume|reactivate|suspend|"
               r"confirm|approve|reject|book|mark|register) (?!(?:my|your|the|a|an|it|them|every|each|all|this|that|"
               r"me|us|off|out|up|down|in|back|over)\b)[a-z]+ my\b"),
    # "mark item them sold out": a noun of the record left before the pronoun that stands for it
    re.compile(r"\b(?:item|order|booking|ticket|card|line|loan|task|post|bill|invoice|claim|shipment|parcel|listing|"
               r"reservation|appointment|subscription|rental|policy) (?:it|them)\b"),
    # "every booked class booking": a state said again by its noun
    re.compile(r"\b([a-z]{3,})ed (?:[a-z]+ )?\1ings?\b"),
)
"""Seams where a description was pasted into a phrasing ("give parcel my shipment", "the records for pet it")."""
_REPEATED = re.compile(r"(?:^|(?<=[.?!] ))([^.?!]{3,}[.?!]) \1")  # "You are Tina. You are Tina."
_AGGREGATE_LEAK = re.compile(r"\b(?:sum|count|total|avg) [a-z]+ by [a-z]+\b")
_UNIT_WORDS = r"(?:kg|km|cm|mm|min|mins|pct|kb|mb|gb|kwh|usd)"
_STIFF = (
    # "with the lowest weight kg", "the size kb of", "my battery pct": a column's unit where its name belongs
    re.compile(r"\b(?i:the|my|your|lowest|highest|earliest|latest) (?:[a-z]+ ){0,2}" + _UNIT_WORDS +
               r"(?=\s+(?:of|for|is|are|was|to)\b|\s*[?.,;]|\s+with\b|$)"),
    # "with the highest charged": a superlative before a bare participle
    re.compile(r"\b(?:lowest|highest|largest|smallest) [a-z]+ed(?=\s+(?:for|of|in|on|is|are|was|just|has|had|and)\b|\s*[?.,;]|$)"),
    # "my out for delivery order", "the in progress task": a state of several words before its noun
    re.compile(r"\b(?:my|the|our|every|each|your|cheapest) (?:out for [a-z]+|in [a-z]+|on [a-z]+|"
               r"picked up|not [a-z]+|no show) (?!(?:for|of|with|by|at|to)\b)[a-z]+\b", re.IGNORECASE),
    # "the loyalty points of my pet is at least", "my vacancies is at least": a plural with "is"
    re.compile(r"\bIf (?:the|my) (?:[a-z]+ )?(?:points|vacancies|hours|refills|credits|days|nights|seats|"
               r"guests|views|likes|sales|minutes|units|parcels|items)(?: [a-z]+)?(?: of [^,;]+?)? is at least\b"),
)
"""Stiff phrasings of an attribute (its unit, a bare participle, a multi-word state before the noun,
a plural measure with "is")."""


def language_defects(text: str, today: str | None = None) -> list[str]:
    """The seams in an instruction or goal the user says (``kind: excerpt``): those of
    :func:`scaleenv.env.language.language_defects`, plus raw identifiers (``hate_speech``), a column's
    name where a person names the attribute ("the purchased on"), and a tool's aggregate name ("my sum
    fare by member"), stiff attribute phrases ("the lowest weight kg", "the highest charged", "my out for
    delivery order", "my loyalty points is"), and with ``today`` an age word the sentence's own dates
    contradict ("my new phone ... bought 2021-06-10"). The facts list after "Facts you know:" names
    facts by their keys and is not speech."""
    from scaleenv.env.language import language_defects as seams
    from scaleenv.env.language import self_names

    speech = text.split(" Facts you know:", 1)[0]
    persona = re.match(r"You are [^.]+\.", speech)
    out = seams(speech, self_names=self_names(persona.group(0)) if persona else [])
    out += [f"identifier: {m.group(0)!r}" for m in _IDENTIFIER.finditer(speech)]
    out += [f"column_name: {m.group(0)!r}" for m in _COLUMN_LEAK.finditer(speech)]
    out += [f"tool_name: {m.group(0)!r}" for m in _AGGREGATE_LEAK.finditer(speech)]
    out += [f"repeated: {m.group(1)!r}" for m in _REPEATED.finditer(speech)]
    out += [f"seam: {m.group(0)!r}" for pattern in _SEAMS for m in pattern.finditer(speech)]
    out += [f"stiff: {m.group(0)!r}" for pattern in _STIFF for m in pattern.finditer(speech)]
    if today:
        out += [f"age_word: {w!r} contradicts a date" for w in stale_age_words(speech, today)]
    return out

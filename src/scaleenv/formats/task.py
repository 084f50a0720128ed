"""The Task format: a verified, replayable unit of training/evaluation (one JSON line per task)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Record(BaseModel):
    """A task part whose optional fields are left out of its JSON while unset (so older files
    round-trip byte for byte): ``OPTIONAL_FIELDS`` while ``None``, ``EMPTY_FIELDS`` while empty."""

    model_config = ConfigDict(extra="forbid")
    OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ()
    EMPTY_FIELDS: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in self.OPTIONAL_FIELDS:
            if data.get(key) is None:
                data.pop(key, None)
        for key in self.EMPTY_FIELDS:
            if key in data and not data[key]:
                data.pop(key)
        return data


class AnswerFact(_Record):
    """A value the agent must state. ``name`` says what it is (for diffs and instructions).

    ``rivals`` are the values look-alike records hold for the same attribute: the fact is not
    stated when the agent's text also asserts one of them (listing every candidate's value fails).
    ``seen`` are record ids of which the agent must have been shown one (in a successful call's
    arguments or output) for the fact to count: a refusal's reason counts only once the agent looked
    at the record the rule is about (refusing blindly, with the one rule a tool has, is a guess).
    """

    EMPTY_FIELDS: ClassVar[tuple[str, ...]] = ("rivals", "seen")
    name: str
    value: object
    rivals: list[Any] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)


class Objective(_Record):
    """One goal of the user, in a form the scripted user can judge from the conversation alone.

    ``kind`` ``write``: something to do; the user counts it done when the agent reports it done
    (a sentence with one of ``done_words``, or naming the goal by ``subject``, without a failure).
    ``kind`` ``read``: a question; answered when the agent states a value next to one of ``asks``
    (the attribute's names). ``kind`` ``refusal``: a request the policy forbids; the user counts it
    settled when the agent says it cannot do it. ``text`` is the goal as the user says it.
    """

    kind: Literal["read", "write", "refusal"]
    text: str
    asks: list[str] = Field(default_factory=list)
    done_words: list[str] = Field(default_factory=list)
    subject: list[str] = Field(default_factory=list)


class Decision(_Record):
    """A decision point: when the agent's message holds every word of one ``when`` phrase list
    (e.g. ``["promo code", "rejected"]``), the user answers ``say``."""

    when: list[str]
    say: str


class Slip(_Record):
    """A slip of the user's: goal number ``goal`` (0-based) is said with the id ``said`` (a look-alike
    record's) where the user means ``meant``, the id the goal holds. The user puts it right once the
    agent names ``said`` back to it (to confirm a change, or to say it cannot make it)."""

    goal: int
    said: str
    meant: str


class UserProfile(_Record):
    """What the simulated user knows and wants. ``known`` maps a fact's name to its value; the facts
    named in ``withheld`` are given only when the agent asks for them."""

    EMPTY_FIELDS: ClassVar[tuple[str, ...]] = ("objectives", "identity", "decisions", "pushback", "gradual")
    OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ("slip",)
    persona: str = ""
    goals: list[str] = Field(default_factory=list)
    known: dict[str, Any] = Field(default_factory=dict)
    withheld: list[str] = Field(default_factory=list)
    objectives: list[Objective] = Field(default_factory=list)
    """The goals, structured (one per entry of ``goals``, same order); empty in older task files."""
    identity: list[str] = Field(default_factory=list)
    """The known facts that identify the user (what "what is your id?" gets)."""
    decisions: list[Decision] = Field(default_factory=list)
    pushback: str = ""
    """What the user says, once, the first time the agent says it cannot do something ("Are you sure? Can't
    you make an exception?"): a user who presses before accepting a refusal (empty: one who accepts it)."""
    gradual: bool = False
    """Whether the user says its goals one at a time, in order: the first in its opening, each next one
    once the agent has dealt with (done, answered or refused) those said before."""
    slip: Slip | None = None
    """A wrong id the user gives at first and corrects when the agent names it back (None: no slip)."""


class Difficulty(_Record):
    """The knobs a task was generated with (``chains``: the LLM back end's chain count; ``tier``: the
    difficulty tier the task was built for, one of ``TIERS``)."""

    OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ("chains", "tier")
    level: str = "medium"
    chain_length: int = 0
    sub_goals: int = 0
    distractor_density: int = 0
    withheld_facts: int = 0
    chains: int | None = None
    tier: str | None = None


TIERS = ("easy", "medium", "hard", "expert")
"""Difficulty tiers, easiest first."""

REFUSAL_FACT = "policy reason"
"""The name of the answer fact a refused request carries: the policy rule's reason, which the agent must tell
the user (its rivals are the other rules' reasons, so reciting the whole policy does not state it)."""

DEFAULT_FAMILY = "direct"
"""The family of tasks that ask for look-ups and changes directly (and of task files older than families)."""


class Verification(_Record):
    """How a task was verified: state hashes, the rows the gold chain touches (count per table), the
    distractor ids per table, the gate scores, and (LLM back end only) its provenance."""

    OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ("backend", "synthesis", "language", "program")
    initial_hash: str = ""
    expected_hash: str = ""
    gold_keys: dict[str, int] = Field(default_factory=dict)
    distractors: dict[str, list[Any]] = Field(default_factory=dict)
    gates: dict[str, float] = Field(default_factory=dict)
    backend: str | None = None
    synthesis: dict[str, Any] | None = None
    language: dict[str, Any] | None = None
    """The LLM rewrite of the user's language, where one ran (status, attempts)."""
    program: dict[str, Any] | None = None
    """The query program that defines the goal, where a family has one (``programmatic``, ``bulk``,
    ``computed``): ``sql`` with named ``params``, run on the ``world`` it names (``initial`` or
    ``expected``), and what it gave (``value`` for an answer, ``ids`` for the rows a write set acts on),
    which the gold chain's result was checked against."""


class Call(BaseModel):
    """One step of a gold chain. Argument values are literals or references to earlier outputs:
    ``{"$ref": STEP, "field": "id", "where": {"email": "..."}}`` picks, from step STEP's output
    (a row or a list of rows), the first row matching ``where`` and takes ``field``."""

    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    purpose: str = ""


class Task(_Record):
    """A verified task. ``family`` is left out of its JSON while ``direct``, and ``forbidden``, ``waived``
    and ``ordered`` while empty, so task lines older than families round-trip byte for byte."""

    EMPTY_FIELDS: ClassVar[tuple[str, ...]] = ("forbidden", "waived", "ordered")
    id: str
    domain: str
    instruction: str
    user_profile: UserProfile
    initial_patch: dict[str, list[dict[str, Any]]]
    gold_chain: list[Call]
    answer_facts: list[AnswerFact] = Field(default_factory=list)
    tools: list[str]
    difficulty: Difficulty
    verification: Verification
    attempt: int = 0
    family: str = DEFAULT_FAMILY
    """The generator that made the task (see ``scaleenv.synth.tasks.families``): ``direct``, ``refusal``,
    ``partial``, ``conditional``, ``computed``, ``description``, ``bulk``, ``programmatic``, ``long``,
    ``screened``, ``waived``, ``enabled``."""
    forbidden: list[Call] = Field(default_factory=list)
    """The calls the literal request asks for that must not happen (a refused request; the branch a
    condition rules out), resolved against the gold chain's outputs; the policy-ignorant gate plays the gold
    chain followed by them and must score 0."""
    waived: list[int] = Field(default_factory=list)
    """The steps of the gold chain that a policy rule covers but its exception allows (a late cancellation
    of an insured reservation): the strict gate plays the gold chain without them (the policy read without
    its exceptions) and must score 0."""
    ordered: list[tuple[int, int]] = Field(default_factory=list)
    """Pairs ``(i, j)`` of gold-chain writes that must be made in that order: the other way round, one of
    them would break a rule of the policy when it is made (a ticket refunded while its fixture is
    postponed, then the fixture restored; fines paid down, then a loan renewed). The environment checks
    each rule at the moment of the write, so the other order scores 0 though it ends in the same state."""

    @model_serializer(mode="wrap")
    def _drop_default_family(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = _Record._drop_unset(self, handler)
        if data.get("family") == DEFAULT_FAMILY:
            data.pop("family")
        return data

    def chain_hash(self) -> str:
        payload = json.dumps([c.model_dump(mode="json") for c in self.gold_chain], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def dedup_key(self) -> tuple[str, str]:
        return (self.chain_hash(), self.verification.initial_hash)

    def to_jsonl(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _py(v: object) -> str:
    if isinstance(v, dict) and "$ref" in v:
        base = f"s{v['$ref']}"
        if v.get("where"):
            conds = ", ".join(f"{k}={_py(x)}" for k, x in sorted(v["where"].items()))
            base = f"pick({base}, {conds})"
        return f"{base}[{v.get('field', 'id')!r}]"
    return json.dumps(v) if not isinstance(v, bool | int | float) or v is None else repr(v)


def chain_to_python(chain: list[Call]) -> str:
    """The gold chain as readable Python (``sN = tool(arg=...)``)."""
    lines = []
    for i, c in enumerate(chain):
        args = ", ".join(f"{k}={_py(v)}" for k, v in c.args.items())
        comment = f"  # {c.purpose}" if c.purpose else ""
        lines.append(f"s{i} = {c.tool}({args}){comment}")
    return "\n".join(lines)

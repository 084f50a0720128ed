"""User profile and instruction, grounded only in the gold chain, built from blueprint phrasings."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from scaleenv.formats.domain import DomainSpec, ToolSpec


def human(name: str) -> str:
    return name.replace("_", " ")


@dataclass
class EntityRef:
    """How the user identifies one entity of the chain: by ``facts`` (column -> value) or by id."""

    table: str
    singular: str
    row: dict[str, Any]
    by: dict[str, Any] = field(default_factory=dict)

    display: str | None = None

    def short(self) -> str:
        """The entity without its noun: ``Rex (birth date 2017-09-03)`` or ``APT-0081``."""
        if not self.by or list(self.by) == ["id"]:
            return str(self.row["id"])
        name = self.row.get(self.display) if self.display else None
        facts = ", ".join(f"{human(k)} {v}" for k, v in self.by.items() if k != self.display)
        if name and facts:
            return f"{name} ({facts})"
        return str(name) if name else facts

    def describe(self) -> str:
        if not self.by or list(self.by) == ["id"]:
            return f"{human(self.singular)} {self.row['id']}"
        return f"my {human(self.singular)} {self.short()}"


@dataclass
class Goal:
    tool: ToolSpec
    args: dict[str, Any]
    refs: dict[str, EntityRef]  # param -> entity it refers to
    answer: str | None = None


def _canonical_slots(goal: Goal, entities: dict[str, EntityRef]) -> dict[str, EntityRef | str]:
    slots: dict[str, EntityRef | str] = {}
    for name, value in goal.args.items():
        slots[name] = goal.refs.get(name) or str(value)
    for ref in entities.values():
        slots.setdefault(ref.singular, ref)
        slots.setdefault(f"{ref.singular}_id", ref)
    return slots


_NOUN_BEFORE = re.compile(r"(\w+)\s*$")


def _fill(template: str, slots: dict[str, EntityRef | str]) -> str:
    """Fill ``{slot}``s; an entity right after its own noun ("pet {pet_id}") is rendered without it."""
    out, pos = [], 0
    for m in re.finditer(r"\{(\w+)\}", template):
        before = template[pos : m.start()]
        out.append(before)
        val = slots.get(m.group(1))
        if isinstance(val, EntityRef):
            prev = _NOUN_BEFORE.search("".join(out))
            bare = m.group(1) == val.singular
            if bare and val.display and val.row.get(val.display):
                out.append(str(val.row[val.display]))
            elif prev and prev.group(1).lower() in (val.singular, human(val.singular).split()[-1], "my", "the", "our"):
                out.append(val.short())
            else:
                out.append(val.describe())
        else:
            out.append(val if val is not None else human(m.group(1)))
        pos = m.end()
    out.append(template[pos:])
    return "".join(out)


def goal_sentence(goal: Goal, entities: dict[str, EntityRef], rng: random.Random, spec: DomainSpec) -> str:
    tool = goal.tool
    slots = _canonical_slots(goal, entities)
    phrasings = list(tool.meta.get("phrasings") or [])
    if phrasings:
        return _fill(phrasings[rng.randrange(len(phrasings))], slots)
    fam = tool.meta.get("family")
    target = next((r for p, r in goal.refs.items()), None)
    what = target.describe() if target else "it"
    literal = {k: v for k, v in goal.args.items() if k not in goal.refs}
    if fam == "update":
        col = tool.meta.get("column", "value")
        new = next(iter(literal.values()), "")
        return rng.choice([f"Please change the {human(col)} of {what} to {new}.",
                           f"I need the {human(col)} on {what} updated to {new}."])
    if fam == "create":
        details = ", ".join(f"{human(k)}: {v}" for k, v in literal.items())
        ent = human(tool.meta.get("entity_singular") or tool.name.split("_", 1)[-1])
        return rng.choice([f"I'd like to add a new {ent} ({details}).", f"Please register a new {ent} with {details}."])
    if fam == "delete":
        return f"Please delete {what}."
    if goal.answer:
        return rng.choice([f"Can you tell me the {human(goal.answer)} of {what}?",
                           f"I'd like to know the {human(goal.answer)} for {what}."])
    details = ", ".join(f"{human(k)} {v}" for k, v in literal.items())
    return f"{tool.description.rstrip('.')} for {what}" + (f" ({details})." if details else ".")


def _lower_first(s: str) -> str:
    first = s.split(" ", 1)[0]
    if first in ("I", "I'd", "I'm", "I've", "I'll") or first.isupper():
        return s
    return s[0].lower() + s[1:]


def build_user_side(spec: DomainSpec, root: EntityRef | None, entities: dict[str, EntityRef], goals: list[Goal],
                    withheld_n: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The instruction (for the simulated user) and the user profile (what the user knows)."""
    known: dict[str, Any] = {}
    persona_keys = set()
    for ref in entities.values():
        if ref.display and ref.row.get(ref.display) is not None:
            known[f"{human(ref.singular)} {human(ref.display)}"] = ref.row[ref.display]
            if ref is root:
                persona_keys.add(f"{human(ref.singular)} {human(ref.display)}")
        for k, v in ref.by.items():
            known[f"{human(ref.singular)} {human(k)}"] = v
    for g in goals:
        for k, v in g.args.items():
            if k not in g.refs:
                known[human(k)] = v
    sentences = [goal_sentence(g, entities, rng, spec) for g in goals]
    # A withheld fact must not already be spelled out in the goals the user states.
    said = " ".join(sentences)
    candidates = sorted(k for k in known if not k.endswith(" id") and k not in persona_keys
                        and str(known[k]) not in said)
    rng.shuffle(candidates)
    withheld = sorted(candidates[:withheld_n])
    persona = ""
    if root is not None:
        name = root.row.get(root.display) if root.display else None
        table = spec.table(root.table)
        person = table is not None and any(c.name in ("email", "phone", "phone_number") for c in table.columns)
        if name and person:
            persona = f"You are {name}."
        elif name:
            persona = f"You are responsible for the {human(root.singular)} {name}."
        else:
            persona = f"You are the {human(root.singular)} {root.row['id']}."
    connectors = ["", "Then, ", "After that, ", "Finally, "]
    body = " ".join(
        (connectors[min(i, 3)] + _lower_first(s)) if i else s for i, s in enumerate(sentences)
    )
    facts = "; ".join(f"{k}: {v}" for k, v in sorted(known.items()))
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
    }
    return instruction, profile

"""User profile and instruction, grounded only in the gold chain, built from blueprint phrasings."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from scaleenv.spec.models import DomainSpec, ToolSpec


def human(name: str) -> str:
    return name.replace("_", " ")


@dataclass
class EntityRef:
    """How the user identifies one entity of the chain: by ``facts`` (column -> value) or by id."""

    table: str
    singular: str
    row: dict[str, Any]
    by: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.by or list(self.by) == ["id"]:
            return f"{human(self.singular)} {self.row['id']}"
        facts = ", ".join(f"{human(k)} {v}" for k, v in self.by.items())
        return f"my {human(self.singular)} ({facts})"


@dataclass
class Goal:
    tool: ToolSpec
    args: dict[str, Any]
    refs: dict[str, EntityRef]  # param -> entity it refers to
    answer: str | None = None


def _canonical_slots(tool: ToolSpec, goal: Goal, entities: dict[str, EntityRef]) -> dict[str, str]:
    slots: dict[str, str] = {}
    for name, value in goal.args.items():
        ref = goal.refs.get(name)
        slots[name] = ref.describe() if ref else str(value)
    for ref in entities.values():
        display = ref.row.get("name") or ref.row.get("full_name") or ref.row.get("title")
        slots.setdefault(ref.singular, str(display) if display else ref.describe())
        slots.setdefault(f"{ref.singular}_id", ref.describe())
    return slots


def _fill(template: str, slots: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: slots.get(m.group(1), human(m.group(1))), template)


def goal_sentence(goal: Goal, entities: dict[str, EntityRef], rng: random.Random, spec: DomainSpec) -> str:
    tool = goal.tool
    slots = _canonical_slots(tool, goal, entities)
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


def build_user_side(spec: DomainSpec, root: EntityRef | None, entities: dict[str, EntityRef], goals: list[Goal],
                    withheld_n: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The instruction (for the simulated user) and the user profile (what the user knows)."""
    known: dict[str, Any] = {}
    for ref in entities.values():
        for k, v in ref.by.items():
            known[f"{human(ref.singular)} {human(k)}"] = v
    for g in goals:
        for k, v in g.args.items():
            if k not in g.refs:
                known[human(k)] = v
    candidates = sorted(k for k in known if not k.endswith(" id"))
    rng.shuffle(candidates)
    withheld = sorted(candidates[:withheld_n])
    sentences = [goal_sentence(g, entities, rng, spec) for g in goals]
    persona = ""
    if root is not None:
        display = root.row.get("full_name") or root.row.get("name") or root.row.get("title")
        persona = f"You are {display}." if display else f"You are the {human(root.singular)} {root.row['id']}."
    connectors = ["", "Then, ", "After that, ", "Finally, "]
    body = " ".join(
        (connectors[min(i, 3)] + s[0].lower() + s[1:]) if i else s for i, s in enumerate(sentences)
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

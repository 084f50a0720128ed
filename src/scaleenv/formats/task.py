"""The Task format: a verified, replayable unit of training/evaluation (one JSON line per task)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AnswerFact(BaseModel):
    """A value the agent must state. ``name`` says what it is (for diffs and instructions)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    value: Any


class Call(BaseModel):
    """One step of a gold chain. Argument values are literals or references to earlier outputs:
    ``{"$ref": STEP, "field": "id", "where": {"email": "..."}}`` picks, from step STEP's output
    (a row or a list of rows), the first row matching ``where`` and takes ``field``."""

    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    purpose: str = ""


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    domain: str
    instruction: str
    user_profile: dict[str, Any]
    initial_patch: dict[str, list[dict[str, Any]]]
    gold_chain: list[Call]
    answer_facts: list[AnswerFact] = Field(default_factory=list)
    tools: list[str]
    difficulty: dict[str, Any]
    verification: dict[str, Any]
    attempt: int = 0

    def chain_hash(self) -> str:
        payload = json.dumps([c.model_dump(mode="json") for c in self.gold_chain], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def dedup_key(self) -> tuple[str, str]:
        return (self.chain_hash(), self.verification["initial_hash"])

    def to_jsonl(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _py(v: Any) -> str:
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

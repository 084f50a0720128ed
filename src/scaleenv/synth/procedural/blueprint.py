"""Blueprint files: a compact, human-written description of a domain that derivation expands into
tables, 25-70 contract-checked tools, seed data and intent phrasings. See ``catalog/README.md``."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scaleenv.errors import SpecError
from scaleenv.formats.domain import ColumnType, Contract, MatchPolicy, ParamType

CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BlueprintColumn(_M):
    """A column. ``ref`` names another entity (a foreign key to its id). ``gen`` makes seed values."""

    name: str
    type: ColumnType = "text"
    description: str = ""
    ref: str | None = None
    nullable: bool = False
    default: object = None
    enum: list[str] | None = None
    min: float | None = None
    max: float | None = None
    unique: bool = False
    match: MatchPolicy | None = None
    gen: object = None
    """A Faker provider name or a one-key generator (``{int: [1, 9]}``); checked when seeding."""
    search: bool = False
    mutable: bool = False
    sum: bool = False
    auto: Literal["now", "today"] | None = None


class Transition(_M):
    """A lifecycle move. ``verb`` may list naming variants (one is picked per seed)."""

    verb: str | list[str]
    description: str = ""
    from_: list[str] = Field(alias="from")
    to: str
    set: dict[str, Literal["now", "today"] | str | int | float | None] = Field(default_factory=dict)
    phrasings: list[str] = Field(default_factory=list)


class Lifecycle(_M):
    """A status state machine. ``set_in`` names the states in which a (nullable) column is set and
    NULL in all others (``cancelled_at: [cancelled]``); ``future_in`` / ``past_in`` the states in
    which a date column lies after / on-or-before the world's clock; ``gen_in`` overrides a column's
    generator in one state (``paid: {paid: {copy: amount}}``). Derivation turns each into a checked
    invariant and makes the transitions keep it; the seeder draws the state first and the rest to match."""

    column: str = "status"
    states: list[str]
    initial: str
    transitions: list[Transition]
    set_in: dict[str, list[str]] = Field(default_factory=dict)
    future_in: dict[str, list[str]] = Field(default_factory=dict)
    past_in: dict[str, list[str]] = Field(default_factory=dict)
    gen_in: dict[str, dict[str, Any]] = Field(default_factory=dict)
    weights: dict[str, float] = Field(default_factory=dict)
    """How often the seeder draws each state (default: 3 for the initial state, 1 for the others)."""

    @model_validator(mode="after")
    def _states_known(self) -> Lifecycle:
        known = set(self.states)
        bad = [s for t in self.transitions for s in [*t.from_, t.to] if s not in known]
        bad += [s for m in (self.set_in, self.future_in, self.past_in) for ss in m.values() for s in ss
                if s not in known]
        bad += [s for s in [*self.gen_in, *self.weights] if s not in known]
        if self.initial not in known or bad:
            raise ValueError(f"lifecycle uses unknown states: {sorted(set(bad) | ({self.initial} - known))}")
        return self


class DerivedColumn(_M):
    """``column`` always equals ``expr`` (SQL over the row; subqueries may read the ``depends_on``
    child tables, given as ``child_table.fk_column``)."""

    column: str
    expr: str
    depends_on: list[str] = Field(default_factory=list)
    description: str = ""


class RowRule(_M):
    """``check`` (SQL over the row; ``:now``/``:today`` are the clock) holds wherever ``when`` holds."""

    check: str
    when: str | None = None
    description: str = ""
    name: str | None = None


class Entity(_M):
    name: str
    singular: str
    aliases: list[str] = Field(default_factory=list)
    description: str
    id_prefix: str
    count: int = 30
    display: str | None = None
    columns: list[BlueprintColumn]
    lifecycle: Lifecycle | None = None
    create: bool = True
    delete: bool = False
    create_phrasings: list[str] = Field(default_factory=list)
    derived: list[DerivedColumn] = Field(default_factory=list)
    rules: list[RowRule] = Field(default_factory=list)
    unique_together: list[list[str]] = Field(default_factory=list)


def entity_rules(ent: Entity) -> list[RowRule]:
    """The entity's declared ``rules`` plus those its generators imply: a ``{date_after: [col, lo, hi]}``
    column (lo >= 0) never lies before ``col`` (a return date after its start)."""
    out = list(ent.rules)
    names = {r.name for r in out}
    for c in ent.columns:
        if isinstance(c.gen, dict) and set(c.gen) == {"date_after"} and float(c.gen["date_after"][1]) >= 0:
            base = c.gen["date_after"][0]
            name = f"{c.name}_not_before_{base}"
            if name not in names:
                out.append(RowRule(name=name, check=f'"{c.name}" IS NULL OR "{base}" IS NULL OR "{c.name}" >= "{base}"',
                                   description=f"{c.name.replace('_', ' ')} is not before {base.replace('_', ' ')}"))
    return out


class OpParam(_M):
    name: str
    type: ParamType = "string"
    description: str = ""
    ref: str | None = None
    column: str | None = None
    required: bool = True
    enum: list[Any] | None = None
    items: Literal["string", "integer", "number", "boolean"] | None = None
    minimum: float | None = None
    maximum: float | None = None


class Operation(_M):
    """A business operation or read view with explicit contracts in SQL (named parameters)."""

    name: str | list[str]
    description: str
    kind: Literal["read", "write"] = "write"
    params: list[OpParam] = Field(default_factory=list)
    generated: dict[str, dict[str, Any]] = Field(default_factory=dict)
    preconditions: list[Contract] = Field(default_factory=list)
    effects: list[str] = Field(default_factory=list)
    postconditions: list[Contract] = Field(default_factory=list)
    returns: dict[str, Any] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    phrasings: list[str] = Field(default_factory=list)
    answer: str | None = None


class PolicyEntry(_M):
    """A rule of the domain's policy. ``tools`` name what it governs: an operation by its first name
    (``pay_invoice``), a lifecycle transition as ``<entity>.<first verb>`` (``appointments.cancel``);
    see :class:`scaleenv.formats.domain.PolicyRule` for the other keys."""

    name: str
    kind: Literal["identity", "confirmation", "eligibility", "limit", "scope"]
    text: str
    tools: list[str] = Field(default_factory=list)
    forbid: str | None = None
    reason: str = ""
    enforced_by_tool: bool = False


class Blueprint(_M):
    name: str
    title: str
    description: str
    keywords: list[str]
    eval_only: bool = False
    clock: str = "2026-06-15T09:00:00"
    entities: list[Entity]
    operations: list[Operation] = Field(default_factory=list)
    views: list[Operation] = Field(default_factory=list)
    policy: list[PolicyEntry] = Field(default_factory=list)

    def entity(self, name: str) -> Entity | None:
        return next((e for e in self.entities if e.name == name), None)


def blueprint_problems(bp: Blueprint) -> list[tuple[str, str]]:
    """Cross-references a blueprint must get right before derivation (path, reason)."""
    problems: list[tuple[str, str]] = []
    names = {e.name for e in bp.entities}
    seen: set[str] = set()
    for i, e in enumerate(bp.entities):
        path = f"entities[{i}]({e.name})"
        if e.name in seen:
            problems.append((path, "duplicate entity name"))
        seen.add(e.name)
        cols = {c.name for c in e.columns}
        if "id" in cols:
            problems.append((path, "column 'id' is added automatically; do not declare it"))
        for j, c in enumerate(e.columns):
            if c.ref and c.ref not in names:
                problems.append((f"{path}.columns[{j}]({c.name}).ref", f"references missing entity {c.ref!r}"))
        if e.display and e.display not in cols:
            problems.append((f"{path}.display", f"{e.display!r} is not a column"))
        if e.lifecycle and e.lifecycle.column not in cols:
            problems.append((f"{path}.lifecycle.column", f"{e.lifecycle.column!r} is not a column"))
        if e.lifecycle:
            lc = e.lifecycle
            for key, m in (("set_in", lc.set_in), ("future_in", lc.future_in), ("past_in", lc.past_in)):
                for cn in m:
                    if cn not in cols:
                        problems.append((f"{path}.lifecycle.{key}", f"{cn!r} is not a column"))
            for cn in lc.set_in:
                col = next((x for x in e.columns if x.name == cn), None)
                if col is not None and not col.nullable:
                    problems.append((f"{path}.lifecycle.set_in", f"{cn!r} must be nullable (it is NULL in other states)"))
                entered = [t.to for t in lc.transitions if t.to in lc.set_in[cn] and cn not in t.set
                           and any(f not in lc.set_in[cn] for f in t.from_)]
                if col is not None and col.ref and entered:
                    problems.append((f"{path}.lifecycle.set_in", f"{cn!r} links a row: a transition into "
                                     f"{entered[0]!r} cannot pick one (a custom tool sets it)"))
            for cn in [*lc.future_in, *lc.past_in]:
                col = next((x for x in e.columns if x.name == cn), None)
                if col is not None and col.type not in ("date", "datetime"):
                    problems.append((f"{path}.lifecycle", f"{cn!r} is not a date or datetime column"))
        for d in e.derived:
            if d.column not in cols:
                problems.append((f"{path}.derived", f"{d.column!r} is not a column"))
        for group in e.unique_together:
            for cn in group:
                if cn not in cols:
                    problems.append((f"{path}.unique_together", f"{cn!r} is not a column"))
    refs = {op.name if isinstance(op.name, str) else op.name[0] for op in bp.operations}
    refs |= {f"{e.name}.{t.verb if isinstance(t.verb, str) else t.verb[0]}" for e in bp.entities if e.lifecycle
             for t in e.lifecycle.transitions}
    for i, rule in enumerate(bp.policy):
        for ref in rule.tools:
            if ref not in refs:
                problems.append((f"policy[{i}]({rule.name}).tools", f"{ref!r} is not an operation or a transition"))
        if rule.kind in ("eligibility", "limit") and rule.forbid and (not rule.tools or not rule.reason):
            problems.append((f"policy[{i}]({rule.name})", "a rule with a predicate needs tools and a reason"))
        if rule.reason and rule.reason not in rule.text:
            problems.append((f"policy[{i}]({rule.name}).reason", "the reason must be a phrase of the text"))
    for kind, ops in (("operations", bp.operations), ("views", bp.views)):
        for i, op in enumerate(ops):
            for j, p in enumerate(op.params):
                if p.ref and p.ref not in names:
                    problems.append((f"{kind}[{i}].params[{j}]({p.name}).ref", f"references missing entity {p.ref!r}"))
    return problems


def load_blueprint_file(path: Path) -> Blueprint:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SpecError([(str(path), f"cannot read blueprint: {e}")]) from None
    try:
        return Blueprint.model_validate(data)
    except ValidationError as e:
        raise SpecError(
            [(f"{path.name}:" + ".".join(map(str, err["loc"])), err["msg"]) for err in e.errors()]
        ) from None


@cache
def catalog() -> dict[str, Blueprint]:
    """All built-in blueprints by name."""
    out = {}
    for path in sorted(CATALOG_DIR.glob("*.yaml")):
        bp = load_blueprint_file(path)
        out[bp.name] = bp
    return out


PAPER_TRAINING_DOMAINS = [
    "wedding_planning", "knowledge_management", "job_seeking", "healthcare_telemedicine", "pet_care",
    "smart_home", "email_management", "football", "second_hand_marketplace", "express_logistics",
    "social_media_messaging", "entertainment_media_query", "online_learning", "stock_trading",
    "project_management", "agriculture_environmental",
]

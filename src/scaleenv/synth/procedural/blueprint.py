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
    staff: bool = False
    """With ``mutable``: changing it is staff's work (a consultation's clinical notes, a lab result)."""
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
    by: str | None = None
    """The foreign key through which the person who makes this move is reached, where it is not the
    person the record names: an offer is declined by the seller of its listing (``listing_id``), not
    by its buyer."""
    staff: bool = False
    """Only staff make this move (a moderator suspends an account): a customer never asks for it."""


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
    fix: dict[str, Any] | None = None
    """How a generator mends a row breaking the rule (see :class:`scaleenv.formats.domain.Invariant`);
    set by the rules a :class:`Constraint` compiles to, never written in a blueprint."""


class Constraint(_M):
    """A rule across rows or tables, declared by what it means rather than in SQL; each compiles to
    checked row rules (the audit), preconditions of the derived tools and choices of the seeder.

    * ``no_overlap``: no two rows with the same ``key`` have overlapping ``[start, end)`` periods
      while both are in ``states`` (a car is not rented twice at once); a NULL end is open;
    * ``at_most``: at most ``limit`` rows with the same ``key`` are in ``states`` at once (one
      active loan per copy, one active prescription of a drug per patient);
    * ``parent``: ``column`` compares by ``op`` with ``parent_column`` of the parent row ``fk``
      names (a service date not before the car's purchase, a fare equal to the flight's price,
      the kilometres of a service not above the car's reading);
    * ``parent_in``: the parent row's ``parent_column`` is one of ``values`` (an organic farm's
      applications are not synthetic: ``when: "product_type = 'synthetic_fertilizer'"``);
    * ``status_agrees``: declared on the child; the parent ``fk`` names is in ``parent_states``
      exactly when it has a child in ``states`` (a copy is on loan iff an active loan exists); the
      parent goes back to ``otherwise`` when its last such child leaves them (or to ``follow[state]``
      when the child moves to that state: a copy whose loan is lost is withdrawn).

    ``states`` (the entity's lifecycle) and ``when`` (SQL over the row) narrow where a rule applies."""

    kind: Literal["no_overlap", "at_most", "parent", "parent_in", "status_agrees"]
    name: str | None = None
    description: str = ""
    key: list[str] = Field(default_factory=list)
    start: str | None = None
    end: str | None = None
    states: list[str] = Field(default_factory=list)
    limit: int = Field(default=1, ge=1)
    fk: str | None = None
    column: str | None = None
    parent_column: str | None = None
    op: Literal["=", "<=", ">=", "<", ">"] = "="
    values: list[Any] = Field(default_factory=list)
    parent_states: list[str] = Field(default_factory=list)
    otherwise: str | None = None
    follow: dict[str, str] = Field(default_factory=dict)
    when: str | None = None


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
    constraints: list[Constraint] = Field(default_factory=list)
    speaks: bool = True
    """Whether a person of this kind is a user of the service who asks for things (a pet's owner), or only
    a record staff look after (a club's players): a task never has one speak for itself."""


def entity_rules(ent: Entity, bp: Blueprint | None = None) -> list[RowRule]:
    """The entity's declared ``rules`` plus those its generators imply: a ``{date_after: [col, lo, hi]}``
    column (lo >= 0) never lies before ``col`` (a return date after its start); then the rules its
    ``constraints`` compile to, and (given ``bp``) the parent side of its children's ``status_agrees``."""
    out = list(ent.rules) + constraint_rules(ent, bp)
    if bp is not None:
        out += parent_side_rules(ent, bp)
    names = {r.name for r in out}
    for c in ent.columns:
        if isinstance(c.gen, dict) and set(c.gen) == {"date_after"} and float(c.gen["date_after"][1]) >= 0:
            base = c.gen["date_after"][0]
            name = f"{c.name}_not_before_{base}"
            if name not in names:
                out.append(RowRule(name=name, check=f'"{c.name}" IS NULL OR "{base}" IS NULL OR "{c.name}" >= "{base}"',
                                   description=f"{c.name.replace('_', ' ')} is not before {base.replace('_', ' ')}"))
    return out


def _lit(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _in(expr: str, values: list[Any]) -> str:
    return f"{expr} IN ({', '.join(map(_lit, values))})"


def _col_of(ent: Entity, name: str | None) -> BlueprintColumn | None:
    return next((c for c in ent.columns if c.name == name), None)


def _where(ent: Entity, k: Constraint, prefix: str = "") -> str | None:
    """Where a constraint applies on a row (``prefix``: the row's alias, empty for the row itself)."""
    parts = []
    if k.states and ent.lifecycle:
        parts.append(_in(prefix + _q(ent.lifecycle.column), k.states))
    if k.when and not prefix:
        parts.append(f"({k.when})")
    return " AND ".join(parts) or None


def _date_pair(a: BlueprintColumn | None, b: BlueprintColumn | None, x: str, y: str) -> tuple[str, str]:
    """Compare a date with a datetime by their days (a service on the day of the purchase is not before it)."""
    kinds = {a.type if a else "text", b.type if b else "text"}
    if kinds == {"date", "datetime"}:
        return f"substr({x}, 1, 10)", f"substr({y}, 1, 10)"
    return x, y


def _key_expr(ent: Entity, bp: Blueprint | None, key: str, alias: str) -> str:
    """A key column of the row ``alias`` names, or ``fk.column``: that column of its parent row
    (one drug per patient, where a prescription names the consultation and it the patient)."""
    fk, _, pcol = key.partition(".")
    if not pcol:
        return f"{alias}.{_q(fk)}"
    ref = _col_of(ent, fk)
    return f"(SELECT p.{_q(pcol)} FROM {_q(ref.ref if ref and ref.ref else '')} p WHERE p.id = {alias}.{_q(fk)})"


def constraint_rules(ent: Entity, bp: Blueprint | None = None) -> list[RowRule]:
    """The row rules ``ent.constraints`` compile to (deterministic order); a rule about a parent row
    is mended by choosing another parent (``fix``), a copied value by taking the parent's."""
    out = []
    t = _q(ent.name)
    for k in ent.constraints:
        name = k.name or f"{k.kind}_{'_'.join(k.key or [k.column or k.fk or ''])}".replace(".", "_")
        where = _where(ent, k)
        # mended by another parent: the key's last link (another title for the same profile, as for
        # ``unique_together``), so a look-alike keeps the person it belongs to
        keys = [x.split(".")[0] for x in k.key or [k.fk or ""]]
        refs = sorted((c for c in ent.columns if c.ref and c.name in keys), key=lambda c: -keys.index(c.name))
        fix = {"kind": "parent", "column": refs[0].name, "table": refs[0].ref} if refs else None
        if k.kind in ("no_overlap", "at_most"):
            same = " AND ".join(f"{_key_expr(ent, bp, c, 'o')} IS {_key_expr(ent, bp, c, t)}" for c in k.key)
            others = _where(ent, k, "o.")
            cond = f"{same} AND o.id != {t}.id" + (f" AND {others}" if others else "")
            if k.kind == "no_overlap":
                s, e = _q(k.start or ""), _q(k.end or "")
                open_end = "'9999-12-31'"
                check = (f"{t}.{s} IS NULL OR NOT EXISTS (SELECT 1 FROM {t} o WHERE {cond} AND o.{s} IS NOT NULL "
                         f"AND o.{s} < COALESCE({t}.{e}, {open_end}) AND {t}.{s} < COALESCE(o.{e}, {open_end}))")
                desc = k.description or (f"no two {ent.name} of one {', '.join(k.key)} overlap in time"
                                         + (f" while {' or '.join(k.states)}" if k.states else ""))
            else:
                check = f"(SELECT COUNT(*) FROM {t} o WHERE {cond}) < {k.limit}"
                desc = k.description or (f"at most {k.limit} {ent.singular if k.limit == 1 else ent.name} "
                                         f"{' or '.join(k.states) or 'in all'} per {', '.join(k.key)}")
            out.append(RowRule(name=name, check=check, when=where, description=desc, fix=fix))
            continue
        fkcol = _col_of(ent, k.fk)
        parent = bp.entity(fkcol.ref) if bp is not None and fkcol and fkcol.ref else None
        ptable = _q(fkcol.ref if fkcol and fkcol.ref else "")
        pv = f"(SELECT p.{_q(k.parent_column or '')} FROM {ptable} p WHERE p.id = {t}.{_q(k.fk or '')})"
        if k.kind == "parent":
            mine, theirs = _date_pair(_col_of(ent, k.column), _col_of(parent, k.parent_column) if parent else None,
                                      f"{t}.{_q(k.column or '')}", pv)
            check = f"{t}.{_q(k.column or '')} IS NULL OR {pv} IS NULL OR {mine} {k.op} {theirs}"
            col = _col_of(ent, k.column)
            dated = col is not None and col.type in ("date", "datetime")
            word = {"=": "equals", "<=": "is not after" if dated else "is at most",
                    ">=": "is not before" if dated else "is at least", "<": "is before" if dated else "is below",
                    ">": "is after" if dated else "is above"}[k.op]
            desc = k.description or f"{k.column} {word} the {k.parent_column} of its {k.fk.removesuffix('_id') if k.fk else ''}"
            out.append(RowRule(name=name, check=check, when=where, description=desc,
                               fix=fix and {**fix, "value": {"column": k.column, "op": k.op,
                                                             "parent_column": k.parent_column}}))
        elif k.kind == "parent_in":
            check = f"{pv} IS NULL OR {_in(pv, k.values)}"
            desc = k.description or f"its {k.fk} has {k.parent_column} {' or '.join(map(str, k.values))}"
            out.append(RowRule(name=name, check=check, when=where, description=desc, fix=fix))
        elif k.kind == "status_agrees":
            pcol = parent.lifecycle.column if parent is not None and parent.lifecycle else "status"
            pv = f"(SELECT p.{_q(pcol)} FROM {ptable} p WHERE p.id = {t}.{_q(k.fk or '')})"
            check = f"{pv} IS NULL OR {_in(pv, k.parent_states)}"
            desc = k.description or (f"the {k.fk.removesuffix('_id') if k.fk else ''} of {ent.singular} "
                                     f"{' or '.join(k.states)} is {' or '.join(k.parent_states)}")
            out.append(RowRule(name=name, check=check, when=where, description=desc, fix=fix))
    return out


def parent_side_rules(ent: Entity, bp: Blueprint) -> list[RowRule]:
    """The parent side of each child's ``status_agrees`` naming ``ent``: its state is one of
    ``parent_states`` exactly when it has a child in ``states`` (a copy on loan has an active loan)."""
    out = []
    lc = ent.lifecycle
    for child in bp.entities:
        for k in child.constraints:
            fkcol = _col_of(child, k.fk)
            if k.kind != "status_agrees" or fkcol is None or fkcol.ref != ent.name or lc is None:
                continue
            if not child.lifecycle:
                continue
            active = _in(f"c.{_q(child.lifecycle.column)}", k.states)
            t = _q(ent.name)
            check = (f"({_in(f'{t}.{_q(lc.column)}', k.parent_states)}) = "
                     f"EXISTS (SELECT 1 FROM {_q(child.name)} c WHERE c.{_q(fkcol.name)} = {t}.id AND {active})")
            out.append(RowRule(
                name=f"{' or '.join(k.parent_states).replace(' ', '_')}_iff_{child.singular}_{'_'.join(k.states)}",
                check=check,
                description=(f"{article_of(ent.singular)} is {' or '.join(k.parent_states)} exactly when it has "
                             f"{article_of(child.singular)} {' or '.join(k.states)}"),
                fix={"kind": "children", "table": child.name, "state_column": lc.column,
                     "states": list(k.parent_states), "otherwise": k.otherwise or lc.initial}))
    return out


def article_of(word: str) -> str:
    """``word`` with its indefinite article (a copy, an order)."""
    w = word.replace("_", " ")
    return ("an " if w[:1].lower() in "aeiou" else "a ") + w


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
    staff: bool = False
    """Only staff do this (an interviewer's scorecard): a customer never asks for it, so no task has a
    customer ask for it."""


class PolicyEntry(_M):
    """A rule of the domain's policy. ``tools`` name what it governs: an operation by its first name
    (``pay_invoice``), a lifecycle transition as ``<entity>.<first verb>`` (``appointments.cancel``);
    see :class:`scaleenv.formats.domain.PolicyRule` for the other keys."""

    name: str
    kind: Literal["identity", "confirmation", "eligibility", "limit", "scope"]
    text: str
    tools: list[str] = Field(default_factory=list)
    forbid: str | None = None
    unless: str | None = None
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
        problems += _constraint_problems(bp, e, path)
    refs = {op.name if isinstance(op.name, str) else op.name[0] for op in bp.operations}
    refs |= {f"{e.name}.{t.verb if isinstance(t.verb, str) else t.verb[0]}" for e in bp.entities if e.lifecycle
             for t in e.lifecycle.transitions}
    for i, rule in enumerate(bp.policy):
        for ref in rule.tools:
            if ref not in refs:
                problems.append((f"policy[{i}]({rule.name}).tools", f"{ref!r} is not an operation or a transition"))
        if rule.kind in ("eligibility", "limit") and rule.forbid and (not rule.tools or not rule.reason):
            problems.append((f"policy[{i}]({rule.name})", "a rule with a predicate needs tools and a reason"))
        if rule.unless and not rule.forbid:
            problems.append((f"policy[{i}]({rule.name}).unless", "an exception needs the predicate it waives"))
        if rule.reason and rule.reason not in rule.text:
            problems.append((f"policy[{i}]({rule.name}).reason", "the reason must be a phrase of the text"))
    for kind, ops in (("operations", bp.operations), ("views", bp.views)):
        for i, op in enumerate(ops):
            for j, p in enumerate(op.params):
                if p.ref and p.ref not in names:
                    problems.append((f"{kind}[{i}].params[{j}]({p.name}).ref", f"references missing entity {p.ref!r}"))
    return problems


def _constraint_problems(bp: Blueprint, e: Entity, path: str) -> list[tuple[str, str]]:
    """What a ``constraints`` entry names that the entity or its parent lacks."""
    problems: list[tuple[str, str]] = []
    cols = {c.name for c in e.columns}
    states = set(e.lifecycle.states) if e.lifecycle else set()
    need = {"no_overlap": ("key", "start"), "at_most": ("key",), "parent": ("fk", "column", "parent_column"),
            "parent_in": ("fk", "parent_column", "values"), "status_agrees": ("fk", "states", "parent_states")}
    for j, k in enumerate(e.constraints):
        where = f"{path}.constraints[{j}]({k.kind})"
        problems += [(where, f"needs {attr!r}") for attr in need[k.kind] if not getattr(k, attr)]
        named = [*(x.split(".")[0] for x in k.key), k.start, k.end, k.column, k.fk]
        problems += [(where, f"{cn!r} is not a column") for cn in named if cn and cn not in cols]
        problems += [(where, f"unknown state {s!r}") for s in k.states if s not in states]
        fk = _col_of(e, k.fk)
        if k.fk and fk is not None and not fk.ref:
            problems.append((where, f"{k.fk!r} is not a reference"))
        parent = bp.entity(fk.ref) if fk is not None and fk.ref else None
        if parent is None:
            continue
        if k.parent_column and _col_of(parent, k.parent_column) is None:
            problems.append((where, f"{k.parent_column!r} is not a column of {parent.name}"))
        pstates = set(parent.lifecycle.states) if parent.lifecycle else set()
        problems += [(where, f"unknown {parent.name} state {s!r}")
                     for s in [*k.parent_states, k.otherwise, *k.follow.values()] if s and s not in pstates]
        problems += [(where, f"unknown state {s!r}") for s in k.follow if s not in states]
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

"""Pydantic models of a domain: tables, columns, tools with SQL contracts.

Contracts are SQL over the world with named parameters (``:name``) bound from the tool's
arguments, never formatted into the string:

* a **precondition** is a query that must return a row whose first column is truthy,
  otherwise the tool fails with the contract's declared error;
* an **effect** is a statement applied inside one savepoint (all or nothing);
* a **postcondition** is a query that must hold after the effects, else everything rolls back.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ColumnType = Literal["text", "integer", "real", "boolean", "date", "datetime", "json"]
MatchPolicy = Literal["exact", "semantic", "exempt"]
ParamType = Literal["string", "integer", "number", "boolean", "array"]
ItemType = Literal["string", "integer", "number", "boolean"]

TOOL_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
"""``^[A-Za-z_][A-Za-z0-9_]{0,63}$`` without ``$``'s trailing-newline loophole."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Column(_Model):
    """One typed column. ``foreign_key`` is ``"table.column"``; ``match`` drives the reward."""

    name: str
    type: ColumnType = "text"
    description: str = ""
    nullable: bool = False
    default: object = None
    enum: list[str] | None = None
    min: float | None = None
    max: float | None = None
    unique: bool = False
    foreign_key: str | None = None
    match: MatchPolicy = "exact"


class Table(_Model):
    """A table with a single-column primary key (``primary_key``)."""

    name: str
    description: str = ""
    primary_key: str = "id"
    columns: list[Column]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


class Param(_Model):
    """A flat tool parameter. ``column`` ("table.column") says which data it carries (used by the graph)."""

    name: str
    type: ParamType = "string"
    description: str = ""
    required: bool = True
    enum: list[Any] | None = None
    items: ItemType | None = None
    minimum: float | None = None
    maximum: float | None = None
    column: str | None = None


class Contract(_Model):
    """An executable pre- or postcondition: ``sql`` must return a row with a truthy first column."""

    sql: str
    error: str = "precondition_failed"
    message: str = ""


class ErrorSpec(_Model):
    code: str
    description: str = ""


class Generated(_Model):
    """A value the runtime computes before the effects and binds as ``:name``.

    ``next_id`` gives ``prefix`` + the next zero-padded number in ``table.column``;
    ``now``/``today`` read the world's fixed logical clock, so runs stay deterministic.
    """

    kind: Literal["next_id", "now", "today"]
    table: str | None = None
    column: str | None = None
    prefix: str = ""
    width: int = 4


class Returns(_Model):
    """What a tool returns: the rows of ``query`` (run after the effects), shaped by ``mode``."""

    description: str = ""
    query: str | None = None
    mode: Literal["one", "many", "scalar", "none"] = "one"
    table: str | None = None


class Implementation(_Model):
    """``sql``: the effects and the returns query are the implementation.
    ``python``: ``source`` defines ``run(db, args)`` over the world API; contracts still apply."""

    kind: Literal["sql", "python"] = "sql"
    source: str | None = None


class ToolSpec(_Model):
    name: str
    description: str
    kind: Literal["read", "write"] = "read"
    parameters: list[Param] = Field(default_factory=list)
    generated: dict[str, Generated] = Field(default_factory=dict)
    returns: Returns = Field(default_factory=Returns)
    preconditions: list[Contract] = Field(default_factory=list)
    effects: list[str] = Field(default_factory=list)
    postconditions: list[Contract] = Field(default_factory=list)
    errors: list[ErrorSpec] = Field(default_factory=list)
    implementation: Implementation = Field(default_factory=Implementation)
    meta: dict[str, Any] = Field(default_factory=dict)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.parameters if p.name == name), None)

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI function-calling schema (``{"type": "function", "function": {...}}``)."""
        props: dict[str, Any] = {}
        for p in self.parameters:
            prop: dict[str, Any] = {"type": p.type, "description": p.description or p.name}
            if p.enum is not None:
                prop["enum"] = list(p.enum)
            if p.type == "array":
                prop["items"] = {"type": p.items or "string"}
            if p.minimum is not None:
                prop["minimum"] = p.minimum
            if p.maximum is not None:
                prop["maximum"] = p.maximum
            props[p.name] = prop
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": [p.name for p in self.parameters if p.required],
                    "additionalProperties": False,
                },
            },
        }


class Invariant(_Model):
    """A rule every world of the domain obeys, checked by SQL over one table.

    * ``derived``: ``column`` always equals ``expr``, an SQL expression over the row that may read
      child tables (``(SELECT COUNT(*) FROM reservations r WHERE r.flight_id = flights.id)``);
      ``depends_on`` lists the ``child_table.fk_column`` links whose writes change it, so the world
      can keep it true with triggers;
    * ``row``: ``check`` (an SQL predicate over the row) holds on every row where ``when`` holds;
    * ``unique``: ``columns`` are unique together among the rows where ``when`` holds (one shirt
      number per club).

    Row predicates may use ``:now`` and ``:today``, bound from the domain's clock. A NULL predicate
    counts as a violation: write ``ends_on IS NULL OR ends_on >= starts_on`` where NULL is allowed.
    """

    name: str
    kind: Literal["derived", "row", "unique"]
    table: str
    description: str = ""
    column: str | None = None
    expr: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    check: str | None = None
    when: str | None = None
    columns: list[str] = Field(default_factory=list)
    fix: dict[str, Any] | None = None
    """How a generator may mend a row that breaks the rule: ``{"kind": "clock", "column", "side":
    "future"|"past"}``, ``{"kind": "set_in", "column", "states"}``, ``{"kind": "choice", "column",
    "key", "allowed": {key value: [values]}}``, ``{"kind": "fresh", "column"}`` (a new unused value),
    ``{"kind": "parent", "column", "table"}`` (another parent row; with ``"value": {"column", "op",
    "parent_column"}`` a value tied to the parent's, copied or drawn on the allowed side) or
    ``{"kind": "children", "table", "state_column", "states", "otherwise"}`` (a parent whose state
    says it has a child in ``table`` and has none goes back to ``otherwise``; kept once the
    children are drawn). Rules across rows and tables (no overlapping periods, at most N rows per
    key, a parent's status agreeing with its children) are ``row`` invariants whose ``check`` reads
    the other rows; blueprints declare them as ``constraints``."""


PolicyKind = Literal["identity", "confirmation", "eligibility", "limit", "scope"]


class PolicyRule(_Model):
    """One rule of a domain's policy, as the agent is told it (``text``).

    ``identity``: verify who the user is before the first change; ``confirmation``: get an explicit
    yes before each change (of ``tools``; empty: every write tool); ``eligibility`` and ``limit``:
    a call of one of ``tools`` is not allowed when ``forbid`` (SQL over the world before the call,
    named parameters bound from the call's arguments, ``:id`` the first argument, ``:today`` and
    ``:now`` the clock) returns a truthy first column, unless ``unless`` (the rule's exception, SQL
    bound the same way) returns one too; ``scope``: what the agent does not handle.
    ``enforced_by_tool`` says whether the tools refuse by themselves (else only the policy does);
    ``reason`` is the short phrase of ``text`` the agent tells the user when it refuses.
    """

    name: str
    kind: PolicyKind
    text: str
    tools: list[str] = Field(default_factory=list)
    forbid: str | None = None
    unless: str | None = None
    """The exception ("... unless it carries travel insurance"): a call that ``forbid`` covers is allowed
    after all when this returns a truthy first column. Said in ``text``."""
    reason: str = ""
    enforced_by_tool: bool = False

    @property
    def predicate(self) -> str | None:
        """One SELECT whose first column is 1 exactly when the rule forbids the call: ``forbid`` (no row or
        NULL allows) and not ``unless`` (no row or NULL does not waive)."""
        if self.forbid is None:
            return None
        if self.unless is None:
            return f"SELECT COALESCE(({self.forbid}), 0) != 0"
        return f"SELECT COALESCE(({self.forbid}), 0) != 0 AND COALESCE(({self.unless}), 0) = 0"


class Policy(_Model):
    """The rules the agent is told (some enforced by the tools, some only by the reward)."""

    rules: list[PolicyRule] = Field(default_factory=list)

    def rule(self, name: str) -> PolicyRule | None:
        return next((r for r in self.rules if r.name == name), None)

    def of_kind(self, *kinds: str) -> list[PolicyRule]:
        return [r for r in self.rules if r.kind in kinds]

    def checks(self, tool: str) -> list[PolicyRule]:
        """The eligibility and limit rules with a predicate that govern ``tool``."""
        return [r for r in self.rules if r.forbid and tool in r.tools and r.kind in ("eligibility", "limit")]

    def keep_tools(self, names: set[str]) -> Policy:
        """The policy over the tools of ``names`` only (a rule left with none keeps no predicate)."""
        rules = []
        for r in self.rules:
            tools = [t for t in r.tools if t in names]
            keep = bool(tools) or not r.tools
            rules.append(r.model_copy(update={"tools": tools, "forbid": r.forbid if keep else None,
                                              "unless": r.unless if keep else None}))
        return Policy(rules=rules)

    def document(self) -> str:
        """The policy as the agent reads it: one numbered rule per line."""
        return "\n".join(f"{i}. {r.text}" for i, r in enumerate(self.rules, 1))


class DomainSpec(_Model):
    """A whole domain: pure data, JSON round-trip, content-hashed."""

    name: str
    description: str = ""
    keywords: list[str] = Field(default_factory=list)
    tables: list[Table]
    tools: list[ToolSpec] = Field(default_factory=list)
    clock: str = "2026-06-15T09:00:00"
    invariants: list[Invariant] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    policy: Policy | None = None
    """The rules the agent is told (None: the domain has none)."""

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    def canonical_json(self) -> str:
        data = self.model_dump(mode="json")
        if not data["invariants"]:
            del data["invariants"]  # specs without invariants keep the hashes they always had
        if data.get("policy") is None:
            data.pop("policy", None)  # and specs without a policy too
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def content_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of a domain spec file."""
    return DomainSpec.model_json_schema()

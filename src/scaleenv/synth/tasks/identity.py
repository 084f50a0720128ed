"""The user's own record and the tools that find it by what the user knows.

A domain's policy asks the agent to look the customer up by name or e-mail before a write; a task
whose user is a customer therefore holds a *self finder* wherever the domain has one: a search tool
over the user's own table with a parameter for an attribute a person knows about themself (a name,
an e-mail, a phone number), and the user's profile knows that attribute's value. Used at build time
(:class:`~scaleenv.synth.tasks.reasons.Reason` ``no_self_finder``) and by ``scaleenv audit``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task

KNOWN_ATTRIBUTE = re.compile(r"(^|_)(name|full_name|display_name|email|e_mail|email_address|phone|phone_number|"
                             r"mobile|mobile_number|username|user_name|handle)$|^partner_(one|two|1|2)$")
"""Columns whose value a person knows about themself (their name, e-mail, phone, user name)."""

STAFF_PERSONA = "You are a staff member"


@dataclass(frozen=True)
class SelfFinder:
    """A read tool that finds a record of ``table`` by ``param`` (carrying ``column``); for a record the
    user owns (the line of a telecom customer), ``via`` is its foreign key to the user's table."""

    tool: str
    param: str
    column: str
    table: str = ""
    via: str | None = None


def self_finders(spec: DomainSpec, table: str) -> list[SelfFinder]:
    """The search tools over ``table`` that take an attribute a person knows (in tool order)."""
    out: list[SelfFinder] = []
    for tool in spec.tools:
        if tool.kind != "read" or tool.meta.get("family") != "search" or tool.meta.get("entity") != table:
            continue
        for p in tool.parameters:
            t, _, col = (p.column or "").partition(".")
            if t == table and col and KNOWN_ATTRIBUTE.search(col):
                out.append(SelfFinder(tool.name, p.name, col, table))
    return out


def owned_finders(spec: DomainSpec, table: str) -> list[SelfFinder]:
    """Where the user's table has no finder of its own: the search tools over a table that refers to it
    by a unique attribute a person knows (a line by its phone number: the line names its customer)."""
    owner = spec.table(table)
    if owner is None:
        return []
    ref = f"{table}.{owner.primary_key}"
    out: list[SelfFinder] = []
    for child in spec.tables:
        fk = next((c.name for c in child.columns if c.foreign_key == ref), None)
        if fk is None or child.name == table:
            continue
        unique = {c.name for c in child.columns if c.unique}
        for f in self_finders(spec, child.name):
            if f.column in unique and not f.column.endswith("name"):
                out.append(SelfFinder(f.tool, f.param, f.column, child.name, fk))
    return out


def finders_for(spec: DomainSpec, table: str) -> list[SelfFinder]:
    """The finders of the user's own record: its table's, else those of a record it owns."""
    return self_finders(spec, table) or owned_finders(spec, table)


def usable_finders(spec: DomainSpec, table: str, row: dict[str, Any]) -> list[SelfFinder]:
    """The finders of ``table``'s own records whose attribute ``row`` holds a value for."""
    return [f for f in self_finders(spec, table) if isinstance(row.get(f.column), str | int) and str(row[f.column]).strip()]


def fact_key(singular: str, column: str) -> str:
    """The profile's key for a fact of the user's record (``customer email``)."""
    return f"{singular.replace('_', ' ')} {column.replace('_', ' ')}"


def singular_of(spec: DomainSpec, table: str) -> str:
    names = spec.meta.get("singular") or {}
    return str(names.get(table) or table.removesuffix("s"))


def is_customer(task: Task) -> bool:
    """Whether the task's user speaks for themself (not a member of staff for a record)."""
    persona = task.user_profile.persona
    return bool(persona) and not persona.startswith(STAFF_PERSONA)


def user_tables(spec: DomainSpec, task: Task) -> list[str]:
    """The tables of the user's own record: those whose singular names an identity fact of the profile."""
    keys = list(task.user_profile.identity)
    out = []
    for t in spec.tables:
        sing = singular_of(spec, t.name).replace("_", " ")
        if any(k.startswith(sing + " ") for k in keys):
            out.append(t.name)
    return out


def finder_defect(spec: DomainSpec, task: Task) -> str | None:
    """Why a customer's task lacks a way to find the user's record by what the user knows (None: it has
    one, the user is staff, or the domain has no such finder)."""
    if not is_customer(task):
        return None
    known = task.user_profile.known
    tools = set(task.tools)
    missing: list[str] = []
    for table in user_tables(spec, task):
        finders = finders_for(spec, table)
        if not finders:
            continue
        if any(f.tool in tools and fact_key(singular_of(spec, f.table), f.column) in known for f in finders):
            return None
        names = sorted({f"{f.tool}({f.param})" for f in finders})
        missing.append(f"{table}: none of {', '.join(names)} in the tools with its attribute known")
    return missing[0] if missing else None

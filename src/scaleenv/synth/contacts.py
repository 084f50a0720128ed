"""An audit check: no two records of a task's initial world share a value that identifies one
person or object (an e-mail, a phone number, a passport, licence or plate number...).

Look-alikes share a name, never a contact value: two customers with one phone number are one
person to an agent that looks them up by it, and a task built on them is ambiguous. The columns
checked are those :func:`~scaleenv.synth.tasks.state.identity_columns` names, unique in the
schema or not."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.synth.tasks.state import identity_columns
from scaleenv.world.ddl import quote_ident
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

if TYPE_CHECKING:
    from scaleenv.synth.tasks.context import DomainContext

DEFECT = "shared_contact"
"""The audit class of a contact value held by two records of one initial world."""


def shared_contact_values(world: World, spec: DomainSpec) -> list[tuple[str, str, Any, list[Any]]]:
    """``(table, column, value, ids)`` for every contact value more than one row of ``world`` holds."""
    out: list[tuple[str, str, Any, list[Any]]] = []
    for table in spec.tables:
        pk = quote_ident(table.primary_key)
        for col in identity_columns(table):
            c = quote_ident(col)
            rows = world.conn.execute(
                f"SELECT {c}, json_group_array({pk}) FROM {quote_ident(table.name)} "
                f"WHERE {c} IS NOT NULL AND {c} != '' GROUP BY {c} HAVING count(*) > 1 ORDER BY 1").fetchall()
            out += [(table.name, col, v, sorted(json.loads(ids), key=str)) for v, ids in rows]
    return out


def shared_contacts(task: Task, ctx: DomainContext) -> list[tuple[str, str]]:
    """The audit hook: one ``shared_contact`` defect per contact value shared in ``task``'s initial world."""
    world = World.from_snapshot(ctx.spec, ctx.base)
    try:
        apply_patch(world, task.initial_patch)
        return [(DEFECT, f"{t}.{c}={v!r} is held by {', '.join(map(str, ids))}")
                for t, c, v, ids in shared_contact_values(world, ctx.spec)]
    finally:
        world.close()

"""Apply a task's initial patch (rows added to a domain's base world)."""

from __future__ import annotations

from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.world.world import World

_ORDER: dict[int, tuple[DomainSpec, list[str]]] = {}


def table_order(spec: DomainSpec) -> list[str]:
    """Tables with foreign-key parents first (computed once per spec object)."""
    hit = _ORDER.get(id(spec))
    if hit is not None and hit[0] is spec:
        return list(hit[1])
    order = _table_order(spec)
    if len(_ORDER) > 256:
        _ORDER.clear()
    _ORDER[id(spec)] = (spec, order)  # holds the spec, so its id cannot be reused while cached
    return list(order)


def _table_order(spec: DomainSpec) -> list[str]:
    done: list[str] = []
    pending = [t.name for t in spec.tables]
    while pending:
        for name in list(pending):
            t = spec.table(name)
            assert t is not None
            parents = {c.foreign_key.split(".")[0] for c in t.columns if c.foreign_key} - {name}
            if parents <= set(done):
                done.append(name)
                pending.remove(name)
                break
        else:
            done.extend(pending)
            break
    return done


def apply_patch(world: World, patch: dict[str, list[dict[str, Any]]]) -> None:
    """Insert the patch rows (parents first) and forget them in the change log.

    A world restored from a snapshot keeps that snapshot's row digests: only the patch rows are
    hashed, and the patched state's digests are known without a full scan.
    """
    world.prime_digests()
    if not any(patch.values()):
        world.clear_changes()
        return
    world.load_tables([(t, patch[t]) for t in table_order(world.spec) if patch.get(t)], log=True)
    world.clear_changes()

"""Apply a task's initial patch (rows added to a domain's base world)."""

from __future__ import annotations

from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.world.world import World


def table_order(spec: DomainSpec) -> list[str]:
    """Tables with foreign-key parents first."""
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
    for t in table_order(world.spec):
        if patch.get(t):
            world.load_rows(t, patch[t], log=True)
    world.clear_changes()

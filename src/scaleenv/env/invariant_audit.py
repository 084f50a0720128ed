"""Audit a built universe against its domains' invariants: each domain's base world and every task's
initial and expected worlds (the expected world is the initial one after the gold chain)."""

from __future__ import annotations

from typing import Any

from scaleenv.env.cache import build_worlds
from scaleenv.errors import ScaleEnvError
from scaleenv.world.invariants import check_connection, check_world
from scaleenv.world.world import World


def audit_invariants(universe: Any, *, domains: list[str] | None = None, limit: int = 20) -> dict[str, Any]:
    """Invariant violations of ``universe`` (a :class:`scaleenv.universe.Universe`).

    Returns ``{"violations": N, "worlds": W, "per_domain": [{"domain", "invariants", "worlds",
    "violations", "examples": [{"world", "invariant", "table", "key", "detail"}, ...]}]}`` where
    ``world`` is ``base`` or ``<task id>:initial`` / ``<task id>:expected``; ``examples`` keeps the
    first ``limit`` violations of each domain. A task whose worlds cannot be rebuilt is reported as a
    violation of the pseudo-invariant ``replay``.
    """
    per_domain = []
    total = worlds = 0
    for name in domains or universe.domains:
        spec = universe.spec(name)
        base = universe.base(name)
        found: list[dict[str, Any]] = []
        n_worlds = 1
        count = 0

        def record(world_name: str, violations: list[Any]) -> None:
            nonlocal count
            count += len(violations)
            for v in violations:
                if len(found) < limit:
                    found.append({"world": world_name, **v.to_json()})

        record("base", check_world(World.from_snapshot(spec, base)))
        if spec.invariants:
            for task in universe.tasks(name):
                n_worlds += 2
                try:
                    tw = build_worlds(spec, base, task, check_hashes=False)
                except ScaleEnvError as e:
                    count += 1
                    if len(found) < limit:
                        found.append({"world": f"{task.id}:initial", "invariant": "replay", "table": None,
                                      "key": None, "detail": str(e)})
                    continue
                initial = World.from_snapshot(spec, tw.initial)
                record(f"{task.id}:initial", check_world(initial))
                record(f"{task.id}:expected", check_connection(tw.expected.conn, spec))
        else:
            n_worlds += 2 * len(universe.tasks(name))
        per_domain.append({"domain": name, "invariants": len(spec.invariants), "worlds": n_worlds,
                           "violations": count, "examples": found})
        total += count
        worlds += n_worlds
    return {"violations": total, "worlds": worlds, "per_domain": per_domain}

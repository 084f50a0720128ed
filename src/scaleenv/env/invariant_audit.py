"""Audit a built universe against its domains' invariants: each domain's base world and every task's
initial and expected worlds (the expected world is the initial one after the gold chain)."""

from __future__ import annotations

from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.tools.replay import build_worlds
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
    per_domain = [_audit_domain(universe, name, limit) for name in (domains or universe.domains)]
    return {"violations": sum(d["violations"] for d in per_domain), "worlds": sum(d["worlds"] for d in per_domain),
            "per_domain": per_domain}


def _audit_domain(universe: Any, name: str, limit: int) -> dict[str, Any]:
    spec = universe.spec(name)
    base = universe.base(name)
    found: list[dict[str, Any]] = []
    count = 0

    def record(world_name: str, violations: list[Any]) -> None:
        nonlocal count
        count += len(violations)
        found.extend({"world": world_name, **v.to_json()} for v in violations[: max(0, limit - len(found))])

    record("base", check_world(World.from_snapshot(spec, base)))
    tasks = universe.tasks(name)
    if spec.invariants:
        for task in tasks:
            try:
                tw = build_worlds(spec, base, task, check_hashes=False)
            except ScaleEnvError as e:
                count += 1
                if len(found) < limit:
                    found.append({"world": f"{task.id}:initial", "invariant": "replay", "table": None, "key": None,
                                  "detail": str(e)})
                continue
            record(f"{task.id}:initial", check_world(World.from_snapshot(spec, tw.initial)))
            record(f"{task.id}:expected", check_connection(tw.expected.conn, spec))
    return {"domain": name, "invariants": len(spec.invariants), "worlds": 1 + 2 * len(tasks), "violations": count,
            "examples": found}

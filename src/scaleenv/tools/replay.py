"""A stored task's verified worlds: base world + the task's patch = its initial world; the gold
chain replayed on it = its expected world, both checked against the task's recorded hashes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scaleenv.errors import UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.tools.chain import ChainError, run_chain
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import HeldSnapshot, World


@dataclass
class TaskWorlds:
    """The verified worlds of a task, built once and shared by its episodes."""

    initial: bytes
    expected: World
    gold_keys: dict[str, list[Any]]
    outputs: list[Any]
    idle: dict[bool, list[Any]] = field(default_factory=dict)
    """Idle episodes kept for reuse by the task-world cache, by whether they offer every tool."""
    active: int = 0
    """Episodes of these worlds handed out by the task-world cache and not given back."""
    held: HeldSnapshot | None = None
    """``initial`` with its row digests, registered while these worlds (or an episode of them) live."""


def build_worlds(spec: DomainSpec, base: bytes, task: Task, *, check_hashes: bool = True) -> TaskWorlds:
    """Build and verify a task's initial and expected worlds (raises UniverseError on a mismatch)."""
    world = World.from_snapshot(spec, base)
    apply_patch(world, task.initial_patch)
    held = world.hold_snapshot()  # not the process-wide cache: it would keep every task's bytes alive
    initial = held.data
    if check_hashes and world.state_hash() != task.verification.initial_hash:
        raise UniverseError(f"task {task.id}: initial state does not match its recorded hash")
    try:
        outputs = run_chain(world, spec, task.gold_chain)
    except ChainError as e:
        raise UniverseError(f"task {task.id}: gold chain no longer replays ({e})") from None
    keys = {t: sorted(ks, key=str) for t, ks in world.touched().items()}
    world.clear_changes()  # hashes the chain's rows once: the check below and later hashes reuse them
    if check_hashes and world.state_hash() != task.verification.expected_hash:
        raise UniverseError(f"task {task.id}: expected state does not match its recorded hash")
    return TaskWorlds(initial, world, keys, outputs, held=held)

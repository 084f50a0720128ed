"""Turn a stored task into a live episode: base world + patch = initial; replayed gold = expected."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaleenv.episode.episode import Episode
from scaleenv.errors import UniverseError
from scaleenv.spec.models import DomainSpec
from scaleenv.tasks.chain import ChainError, run_chain
from scaleenv.tasks.model import Task
from scaleenv.tasks.state import apply_patch
from scaleenv.world.world import World


@dataclass
class TaskWorlds:
    """The verified worlds of a task, built once and shared by its episodes."""

    initial: bytes
    expected: World
    gold_keys: dict[str, list[Any]]
    outputs: list[Any]


def build_worlds(spec: DomainSpec, base: bytes, task: Task, *, check_hashes: bool = True) -> TaskWorlds:
    world = World.from_snapshot(spec, base)
    apply_patch(world, task.initial_patch)
    initial = world.snapshot()
    if check_hashes and world.state_hash() != task.verification.get("initial_hash"):
        raise UniverseError(f"task {task.id}: initial state does not match its recorded hash")
    try:
        outputs = run_chain(world, spec, task.gold_chain)
    except ChainError as e:
        raise UniverseError(f"task {task.id}: gold chain no longer replays ({e})") from None
    if check_hashes and world.state_hash() != task.verification.get("expected_hash"):
        raise UniverseError(f"task {task.id}: expected state does not match its recorded hash")
    keys = {t: sorted(ks, key=str) for t, ks in world.touched().items()}
    world.clear_changes()
    return TaskWorlds(initial, world, keys, outputs)


def make_episode(spec: DomainSpec, task: Task, worlds: TaskWorlds) -> Episode:
    return Episode(spec, worlds.initial, worlds.expected, answer_facts=task.answer_facts,
                   gold_keys=worlds.gold_keys, tools=task.tools)


class TaskLoader:
    """Caches per-task worlds so many episodes of the same task share one expected world."""

    def __init__(self, universe: Any):
        self.universe = universe
        self._cache: dict[str, TaskWorlds] = {}

    def episode(self, task: Task) -> Episode:
        spec = self.universe.spec(task.domain)
        if task.id not in self._cache:
            self._cache[task.id] = build_worlds(spec, self.universe.base(task.domain), task)
        return make_episode(spec, task, self._cache[task.id])

"""Turn a stored task into a live episode: base world + patch = initial; replayed gold = expected."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from scaleenv.env.episode import Episode
from scaleenv.errors import UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.tools.chain import ChainError, run_chain
from scaleenv.world.patch import apply_patch
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
    """Caches per-task worlds (least recently used first out) so many episodes of the same task share
    one expected world."""

    def __init__(self, universe: Any, max_tasks: int = 256):
        self.universe = universe
        self.max_tasks = max_tasks
        self._cache: OrderedDict[str, TaskWorlds] = OrderedDict()

    def worlds(self, task: Task) -> TaskWorlds:
        hit = self._cache.get(task.id)
        if hit is None:
            spec = self.universe.spec(task.domain)
            hit = self._cache[task.id] = build_worlds(spec, self.universe.base(task.domain), task)
            while len(self._cache) > self.max_tasks:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(task.id)
        return hit

    def episode(self, task: Task) -> Episode:
        return make_episode(self.universe.spec(task.domain), task, self.worlds(task))

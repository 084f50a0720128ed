"""The one cache of task worlds: a stored task becomes a live episode.

base world + the task's patch = its initial world; the gold chain replayed on it = its expected
world. Both are verified against the task's recorded hashes once per process and shared by every
episode of the task (rollouts, gates, ``scaleenv check``, MCP sessions, trainer adapters). Idle
episodes are kept for reuse, so a task's next episode costs a reset, not a new world.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from scaleenv.env.episode import Episode
from scaleenv.errors import UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.tools.replay import TaskWorlds, build_worlds
from scaleenv.universe import Universe

ENV_UNIVERSE = "SCALEENV_UNIVERSE"
"""The variable naming the universe directory where a caller gives none (trainer workers)."""


def make_episode(spec: DomainSpec, task: Task, worlds: TaskWorlds, *, all_tools: bool = False) -> Episode:
    """A new episode on a task's worlds; ``all_tools`` offers every tool of the domain, not only the task's."""
    return Episode(spec, worlds.initial, worlds.expected, answer_facts=task.answer_facts,
                   gold_keys=worlds.gold_keys, tools=None if all_tools else task.tools, held=worlds.held)


class TaskWorldCache:
    """Specs, base worlds, tasks and verified task worlds of one universe directory.

    Task worlds are kept least recently used first out (``max_tasks``), keyed by the task's id and
    content (a task given inline with the same id but another chain gets its own worlds). At most
    ``max_idle`` idle episodes per task wait for reuse. Thread-safe.
    """

    def __init__(self, universe: Universe | str | Path, *, max_tasks: int = 256, max_idle: int = 8):
        self.universe = universe if isinstance(universe, Universe) else Universe(universe)
        self.root = self.universe.root.resolve()
        self.max_tasks = max_tasks
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._worlds: OrderedDict[tuple[str, str, str], TaskWorlds] = OrderedDict()
        self._specs: dict[str, DomainSpec] = {}
        self._bases: dict[str, bytes] = {}
        self._tasks: dict[str, Task] | None = None
        self._keys: dict[int, tuple[Task, tuple[str, str, str]]] = {}

    # ------------------------------------------------------------------ the universe's files
    def spec(self, domain: str) -> DomainSpec:
        hit = self._specs.get(domain)
        if hit is None:
            if domain not in self.universe.domains:
                raise UniverseError(f"{self.root} has no domain {domain!r}; it has: {', '.join(self.universe.domains)}")
            hit = self._specs[domain] = self.universe.spec(domain)
        return hit

    def base(self, domain: str) -> bytes:
        hit = self._bases.get(domain)
        if hit is None:
            self.spec(domain)
            hit = self._bases[domain] = self.universe.base(domain)
        return hit

    def tasks(self, domain: str | None = None) -> list[Task]:
        return [t for t in self._all_tasks().values() if domain is None or t.domain == domain]

    def task(self, task_id: str) -> Task:
        task = self._all_tasks().get(task_id)
        if task is None:
            raise UniverseError(f"no task {task_id!r} in {self.root}; list ids with `scaleenv inspect {self.root} --json`")
        return task

    def _all_tasks(self) -> dict[str, Task]:
        with self._lock:
            if self._tasks is None:
                self._tasks = {t.id: t for t in self.universe.tasks()}
            return self._tasks

    # ------------------------------------------------------------------ worlds and episodes
    def worlds(self, task: Task) -> TaskWorlds:
        """The task's verified worlds (built on first use)."""
        key = self._key(task)
        with self._lock:
            hit = self._worlds.get(key)
            if hit is not None:
                self._worlds.move_to_end(key)
                return hit
        built = build_worlds(self.spec(task.domain), self.base(task.domain), task)
        with self._lock:
            hit = self._worlds.setdefault(key, built)
            while len(self._worlds) > self.max_tasks:
                _, old = self._worlds.popitem(last=False)
                for idle in old.idle.values():
                    for ep in idle:
                        ep.close()
        return hit

    def acquire(self, task: Task, *, all_tools: bool = False) -> Episode:
        """An episode of the task: an idle one if there is one, else a new one (reset it before use)."""
        worlds = self.worlds(task)
        with self._lock:
            worlds.active += 1
            idle = worlds.idle.get(all_tools)
            if idle:
                reused: Episode = idle.pop()
                return reused
        return make_episode(self.spec(task.domain), task, worlds, all_tools=all_tools)

    def release(self, task: Task, episode: Episode, *, all_tools: bool = False) -> None:
        """Give an episode back for reuse (closed when the task already has ``max_idle`` waiting).

        Waiting episodes park their worlds, and a task with no episode out suspends its expected
        world (kept as bytes): their connections, with the schema parsed and statements compiled,
        serve the next worlds of the domain instead of new connections."""
        key = self._key(task)
        with self._lock:
            worlds = self._worlds.get(key)
            if worlds is not None and worlds.expected is episode.expected:
                worlds.active = max(0, worlds.active - 1)
                if not worlds.active:
                    worlds.expected.suspend()
                idle = worlds.idle.setdefault(all_tools, [])
                if len(idle) < self.max_idle:
                    episode.park()
                    idle.append(episode)
                    return
        episode.close()

    def episode(self, task: Task, *, all_tools: bool = False) -> Episode:
        """A new episode of the task that the caller owns (not returned to the pool)."""
        worlds = self.worlds(task)
        with self._lock:
            worlds.active += 1  # never given back: the expected world stays live for it
        return make_episode(self.spec(task.domain), task, worlds, all_tools=all_tools)

    def _key(self, task: Task) -> tuple[str, str, str]:
        """The task's id and content: its gold chain's hash (computed once per task object)."""
        hit = self._keys.get(id(task))
        if hit is not None and hit[0] is task:
            return hit[1]
        key = (task.id, task.chain_hash(), task.verification.initial_hash)
        with self._lock:
            if len(self._keys) > 4 * self.max_tasks + 4096:
                self._keys.clear()
            self._keys[id(task)] = (task, key)  # holds the task, so its id cannot be reused while cached
        return key

    def clear(self) -> None:
        with self._lock:
            for worlds in self._worlds.values():
                for idle in worlds.idle.values():
                    for ep in idle:
                        ep.close()
            self._worlds.clear()


_CACHES: dict[str, TaskWorldCache] = {}
_CACHES_LOCK = threading.Lock()


def task_cache(root: str | Path | Universe | None = None) -> TaskWorldCache:
    """The per-process cache of a universe directory; ``None`` reads ``$SCALEENV_UNIVERSE``."""
    if isinstance(root, Universe):
        root = root.root
    root = root or os.environ.get(ENV_UNIVERSE)
    if not root:
        raise UniverseError(f"no universe directory: pass one or set {ENV_UNIVERSE}")
    key = str(Path(root).resolve())
    with _CACHES_LOCK:
        hit = _CACHES.get(key)
        if hit is None:
            hit = _CACHES[key] = TaskWorldCache(key)
        return hit

"""Ray actors, each owning one warm worker (and so its own worlds). Starts a local Ray instance
unless one is running or ``address`` names a cluster; shuts down only what it started."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.parallel.base import BatchWorker, Executor, Sink
from scaleenv.parallel.shipping import ShippedUniverse, ship_universe


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ScaleEnvError("the ray executor needs Ray: pip install 'scaleenv[ray]'") from None
    return ray


class _ActorImpl:
    def __init__(self, factory: Callable[[], BatchWorker]):
        self.worker = factory()

    def run_batch(self, batch: list[Any]) -> list[Any]:
        return self.worker.run_batch(batch)

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        self.worker.close()


class RayExecutor(Executor):
    kind = "ray"

    def __init__(self, factory: Callable[[], BatchWorker], workers: int = 2, address: str | None = None):
        self.factory = factory
        self.workers = max(1, workers)
        self.address = address
        self.actors: list[Any] = []
        self._started = False

    def ship(self, root: str | Path, domains: list[str] | None = None) -> ShippedUniverse:
        """Put the universe at ``root`` in Ray's object store (starting or joining Ray first) and return
        the :class:`~scaleenv.parallel.shipping.ShippedUniverse` that workers materialize locally, so
        that nodes need no shared filesystem."""
        self._init()
        return ship_universe(Path(root), domains)

    def _init(self) -> ModuleType:
        ray = require_ray()
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, num_cpus=None if self.address else self.workers,
                         include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
            except Exception as e:  # noqa: BLE001 - connection problems become one clear line
                raise ScaleEnvError(f"cannot start or reach Ray ({self.address or 'local'}): {e}") from None
            self._started = True
        return ray

    def _ensure(self) -> ModuleType:
        ray = self._init()
        if not self.actors:
            cpus = ray.cluster_resources().get("CPU", 0)
            opts = {"num_cpus": 1} if cpus >= self.workers else {}
            actor_cls = ray.remote(**opts)(_ActorImpl) if opts else ray.remote(_ActorImpl)
            self.actors = [actor_cls.remote(self.factory) for _ in range(self.workers)]
            ray.get([a.ping.remote() for a in self.actors])
        return ray

    def run(self, batches: Iterable[list[Any]], sink: Sink, tick: Callable[[], None] | None = None) -> None:
        ray = self._ensure()
        todo = iter(batches)
        owner: dict[Any, Any] = {}
        load = {id(a): 0 for a in self.actors}
        per_actor = 2
        try:
            while True:
                for a in self.actors:
                    while load[id(a)] < per_actor:
                        batch = next(todo, None)
                        if batch is None:
                            break
                        ref = a.run_batch.remote(batch)
                        owner[ref] = a
                        load[id(a)] += 1
                if not owner:
                    return
                done, _ = ray.wait(list(owner), num_returns=1)
                for ref in done:
                    a = owner.pop(ref)
                    load[id(a)] -= 1
                    try:
                        items = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        raise ScaleEnvError(f"a Ray worker failed: {str(e).splitlines()[0][:300]}") from None
                    for item in items:
                        sink(item)
        except BaseException:
            self._kill_actors()  # also drops the batches still running on them
            raise

    def _kill_actors(self) -> None:
        ray = require_ray()
        for a in self.actors:
            with contextlib.suppress(Exception):  # best effort
                ray.kill(a)
        self.actors = []

    def close(self) -> None:
        ray = require_ray() if (self.actors or self._started) else None
        if ray is None:
            return
        if self.actors and ray.is_initialized():
            with contextlib.suppress(Exception):  # closing is best effort
                ray.get([a.close.remote() for a in self.actors], timeout=30)
            self._kill_actors()
        if self._started:
            ray.shutdown()
            self._started = False

"""Run every batch in this process, on one warm worker."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from scaleenv.parallel.base import BatchWorker, Executor, Sink


class SerialExecutor(Executor):
    kind = "serial"

    def __init__(self, factory: Callable[[], BatchWorker]):
        self.factory = factory
        self.worker: BatchWorker | None = None

    def run(self, batches: Iterable[list[Any]], sink: Sink, tick: Callable[[], None] | None = None) -> None:
        if self.worker is None:
            self.worker = self.factory()
        for batch in batches:
            self.worker.run_batch(batch, sink)

    def close(self) -> None:
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.close()

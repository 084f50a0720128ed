"""The executor protocol.

A *worker* is built once per process (or Ray actor) by a picklable zero-argument ``factory`` and
keeps warm state (for rollouts: its own worlds). ``Executor.run(batches, sink)`` sends every batch
to some worker and calls ``sink(result)`` in the calling process for each result, as they arrive
(the serial executor calls it as each item finishes). Results arrive in no particular order.
A ``KeyboardInterrupt`` stops the run: results already passed to ``sink`` are the finished work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Protocol

Sink = Callable[[Any], None]


class BatchWorker(Protocol):
    def run_batch(self, batch: list[Any], sink: Sink | None = None) -> list[Any]: ...

    def close(self) -> None: ...


class Executor(ABC):
    kind = "base"
    workers = 1

    @abstractmethod
    def run(self, batches: Iterable[list[Any]], sink: Sink, tick: Callable[[], None] | None = None) -> None:
        """Run every batch and hand each finished item to ``sink``; ``tick`` (if given) is called
        now and then while waiting (to drain a progress queue)."""

    def close(self) -> None:  # noqa: B027 - optional hook: executors without resources keep this no-op
        """Release workers (processes, actors); a no-op for the serial executor."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

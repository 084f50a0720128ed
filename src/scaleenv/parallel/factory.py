"""Choose an executor by kind."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from scaleenv.errors import ScaleEnvError
from scaleenv.parallel.base import BatchWorker, Executor


class ExecutorKind(StrEnum):
    """Where batches run: in this process, in a process pool, or on Ray actors."""

    SERIAL = "serial"
    PROCESS = "process"
    RAY = "ray"


EXECUTORS = tuple(k.value for k in ExecutorKind)


def make_executor(kind: str, factory: Callable[[], BatchWorker], *, workers: int = 2,
                  ray_address: str | None = None) -> Executor:
    """An executor of ``kind`` whose workers are built by ``factory`` (picklable for process/ray)."""
    if kind not in EXECUTORS:
        raise ScaleEnvError(f"unknown executor {kind!r}; use serial, process or ray")
    if kind == "serial":
        from scaleenv.parallel.serial import SerialExecutor

        return SerialExecutor(factory)
    if kind == "process":
        from scaleenv.parallel.process import ProcessExecutor

        return ProcessExecutor(factory, workers=workers)
    from scaleenv.parallel.ray_executor import RayExecutor

    return RayExecutor(factory, workers=workers, address=ray_address)

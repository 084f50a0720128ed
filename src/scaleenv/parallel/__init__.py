"""Executors that run batches of work on warm workers: ``serial`` (in this process), ``process``
(a process pool) and ``ray`` (Ray actors). Ray is imported only when the ray executor is used."""

from scaleenv.parallel.base import BatchWorker, Executor
from scaleenv.parallel.factory import EXECUTORS, ExecutorKind, make_executor

__all__ = ["EXECUTORS", "BatchWorker", "Executor", "ExecutorKind", "make_executor"]

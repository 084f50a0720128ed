"""A process pool: each process builds one warm worker at start-up and runs batches on it.

Workers ignore SIGINT, so Ctrl-C reaches only the parent, which stops submitting, terminates the
workers it started and re-raises; results already delivered to ``sink`` are kept.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.parallel.base import BatchWorker, Executor, Sink
from scaleenv.parallel.lifeline import die_with_parent

_WORKER: BatchWorker | None = None

START_METHOD_ENV = "SCALEENV_MP_START"


def _init(factory: Callable[[], BatchWorker], parent: int | None = None) -> None:
    global _WORKER
    die_with_parent(parent)  # a parent killed with SIGKILL leaves no worker behind
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = factory()


def _run(batch: list[Any]) -> list[Any]:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.run_batch(batch)


def start_context(preload: tuple[str, ...] = ("scaleenv.run.rollout", "scaleenv.synth.build")) -> BaseContext:
    """``fork`` (fast start) while this process has a single thread; otherwise ``forkserver``, since
    forking a process whose other threads may hold locks (a progress bar's refresh thread writing to
    the terminal) can deadlock the child. ``$SCALEENV_MP_START`` overrides."""
    method = os.environ.get(START_METHOD_ENV)
    if method:
        return mp.get_context(method)
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return mp.get_context("fork")
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(preload))
        return ctx
    return mp.get_context()

STOP_GRACE = 10.0
"""Seconds the running batches get to finish when a run stops on an error (Ctrl-C reaches the workers too)."""


class ProcessExecutor(Executor):
    kind = "process"

    def __init__(self, factory: Callable[[], BatchWorker], workers: int = 2):
        self.factory = factory
        self.workers = max(1, workers)
        self.pool: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            ctx = start_context()
            parent = os.getpid() if ctx.get_start_method() == "fork" else None  # else: the fork server's child
            self.pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_init,
                                            initargs=(self.factory, parent))
        return self.pool

    def run(self, batches: Iterable[list[Any]], sink: Sink, tick: Callable[[], None] | None = None) -> None:
        pool = self._pool()
        todo = iter(batches)
        pending: set[Future[list[Any]]] = set()
        limit = 2 * self.workers
        try:
            while True:
                while len(pending) < limit:
                    batch = next(todo, None)
                    if batch is None:
                        break
                    pending.add(pool.submit(_run, batch))
                if not pending:
                    return
                done, pending = wait(pending, timeout=0.2 if tick else None, return_when=FIRST_COMPLETED)
                if tick:
                    tick()
                for f in done:
                    for item in f.result():
                        sink(item)
        except BrokenProcessPool as e:
            self._kill()
            raise ScaleEnvError(f"a worker process died ({e}); see its output above") from None
        except BaseException:
            for f in pending:
                f.cancel()
            self._kill()
            raise

    def _kill(self) -> None:
        """Stop the pool after an error: queued batches are cancelled and the running ones may finish
        (``STOP_GRACE`` seconds) before a worker still alive is terminated. A worker terminated while it
        writes its result leaves half a message in the result pipe, on which the pool's manager thread
        (and so the interpreter's exit, which joins it) would wait for ever."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + STOP_GRACE
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():  # hung in a batch: nothing it would send is wanted any more
                p.terminate()
                p.join(timeout=5)
        if manager is not None:
            manager.join(timeout=5)

    def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

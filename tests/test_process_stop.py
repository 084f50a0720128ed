"""Stopping a process run on an error leaves no thread behind: a worker killed while it wrote its result
left half a message in the result pipe, and the pool's manager thread (which the interpreter joins at
exit) waited on it for ever: a fresh-clone CI run hung after its last test."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scaleenv.parallel.process import START_METHOD_ENV, ProcessExecutor


class BigResults:
    """Each batch answers with a few MB, so results are often in the pipe when the run stops."""

    def run_batch(self, batch: list[Any], sink: Any = None) -> list[Any]:
        return ["x" * 4_000_000 for _ in batch]

    def close(self) -> None:
        pass


def _managers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if type(t).__name__ == "_ExecutorManagerThread" and t.is_alive()]


@pytest.mark.parametrize("round_", range(3))
def test_a_sink_error_stops_the_pool_and_its_manager_thread(monkeypatch, round_):
    monkeypatch.setenv(START_METHOD_ENV, "fork")
    before = set(_managers())
    executor = ProcessExecutor(BigResults, workers=2)

    def sink(item: Any) -> None:
        raise RuntimeError("the sink failed")

    with pytest.raises(RuntimeError, match="the sink failed"):
        executor.run(([i] for i in range(40)), sink)
    assert executor.pool is None
    assert [t for t in _managers() if t not in before] == []  # joined: the interpreter can exit

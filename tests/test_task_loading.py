"""Task loading through the task-world cache: episodes that wait and expected worlds nobody uses hand
their SQLite connections on, so a run over many tasks reuses a few warm connections; every reuse
still scores as a fresh world would."""

from __future__ import annotations

import json
from typing import Any

import pytest

import scaleenv.world.world as ww
from integrations_support import small_universe
from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.policies import answer_text
from scaleenv.formats.task import Task
from scaleenv.tools.chain import resolve_args
from scaleenv.world.world import World


def play_gold(ep: Any, task: Task) -> float:
    ep.reset()
    outputs: list[Any] = []
    for i, call in enumerate(task.gold_chain):
        res = ep.call_tool(call.tool, resolve_args(call, outputs, i))
        assert res.ok, res.output
        outputs.append(json.loads(res.output))
    text = answer_text(task)
    if text:
        ep.say(text)
    return ep.evaluate().score


def count_connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made = [0]
    real = World._connect

    def counted() -> Any:
        made[0] += 1
        return real()

    monkeypatch.setattr(World, "_connect", staticmethod(counted))
    return made


def test_a_run_over_many_tasks_reuses_a_few_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = TaskWorldCache(small_universe())
    tasks = cache.tasks()
    for domain in {t.domain for t in tasks}:
        cache.base(domain)  # loading and validating a spec opens worlds of its own
    ww.clear_connection_pool()
    made = count_connects(monkeypatch)
    scores = []
    for _ in range(3):
        for task in tasks:
            ep = cache.acquire(task)
            scores.append(play_gold(ep, task))
            cache.release(task, ep)
    assert scores == [1.0] * (3 * len(tasks))
    # each world (a task's build, its episode, the reward's initial world, the expected world) holds a
    # connection only while in use: three per domain, not three per task kept open (18 here before)
    assert made[0] <= 3 * len({t.domain for t in tasks}), made[0]
    cache.clear()


def test_waiting_worlds_hold_no_connection_and_come_back_intact() -> None:
    cache = TaskWorldCache(small_universe())
    task = cache.tasks()[0]
    ep = cache.acquire(task)
    assert play_gold(ep, task) == 1.0
    worlds = cache.worlds(task)
    expected_hash = worlds.expected.state_hash()
    cache.release(task, ep)
    assert worlds.active == 0
    assert worlds.expected._conn is ww._CLOSED and ep.world._conn is ww._CLOSED  # suspended, parked
    again = cache.acquire(task)
    assert again is ep and worlds.active == 1
    assert play_gold(again, task) == 1.0
    assert worlds.expected.state_hash() == expected_hash
    owned = cache.episode(task)  # the caller's: the expected world stays live for it
    cache.release(task, again)
    assert worlds.expected._conn is not ww._CLOSED
    assert play_gold(owned, task) == 1.0
    owned.close()
    cache.clear()


def test_a_task_key_is_computed_once_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = TaskWorldCache(small_universe())
    task = cache.tasks()[0]
    calls = []
    real = Task.chain_hash
    monkeypatch.setattr(Task, "chain_hash", lambda self: calls.append(1) or real(self))
    for _ in range(3):
        ep = cache.acquire(task)
        cache.release(task, ep)
    assert len(calls) == 1
    cache.clear()

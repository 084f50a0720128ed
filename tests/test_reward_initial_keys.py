"""The reward tells created rows from the initial state's row digests (no third world per task): the
same answers, row by row and reward by reward, as asking a world restored from the initial snapshot."""

from __future__ import annotations

import json
from typing import Any

from integrations_support import small_universe
from scaleenv.env.cache import TaskWorldCache, make_episode
from scaleenv.env.policies import answer_text
from scaleenv.formats.task import Task
from scaleenv.reward.state import RULES_KEPT, compute_reward, with_rules_kept
from scaleenv.tools.chain import ChainError, resolve_args
from scaleenv.world.world import SnapshotKeys, World, snapshot_keys


def play(ep: Any, task: Task, times: int = 1) -> None:
    """The gold chain ``times`` over (a second pass creates rows the expected world does not have,
    or fails where a precondition no longer holds: both are what a wrong agent does)."""
    for _ in range(times):
        outputs: list[Any] = []
        for i, call in enumerate(task.gold_chain):
            try:
                args = resolve_args(call, outputs, i)
            except ChainError:  # a second pass finds the record changed ("Cleo" moved to another owner)
                break
            res = ep.call_tool(call.tool, args)
            outputs.append(json.loads(res.output) if res.ok else {})
    text = answer_text(task)
    if text:
        ep.say(text)


def test_the_gold_run_scores_without_opening_the_initial_world() -> None:
    cache = TaskWorldCache(small_universe())
    for task in cache.tasks():
        ep = cache.episode(task)
        play(ep, task)
        assert ep.evaluate().score == 1.0
        assert ep._initial_world is None  # the digests answered; no world was restored for it
        ep.close()


def test_snapshot_keys_answer_as_the_initial_world_does() -> None:
    cache = TaskWorldCache(small_universe())
    checked = 0
    for task in cache.tasks():
        spec = cache.spec(task.domain)
        worlds = cache.worlds(task)
        keys = snapshot_keys(spec, worlds.initial)
        assert isinstance(keys, SnapshotKeys)
        initial = World.from_snapshot(spec, worlds.initial)
        try:
            for table in initial.table_names:
                present = [r[initial.primary_key(table)] for r in initial.rows(table)]
                for k in present:
                    assert keys.has_row(table, k) and initial.has_row(table, k)
                # keys the gold chain wrote (created ones among them) and keys no world has
                for k in [*worlds.gold_keys.get(table, []), "no-such-key", -987654321, None]:
                    assert keys.has_row(table, k) == initial.has_row(table, k), (task.id, table, k)
                    checked += 1
            assert not keys.has_row("no_such_table", 1)
        finally:
            initial.close()
    assert checked


def test_rewards_agree_with_the_initial_world_for_right_and_wrong_runs() -> None:
    cache = TaskWorldCache(small_universe())
    spec_tasks = cache.tasks()
    wrong = 0
    for task in spec_tasks:
        spec = cache.spec(task.domain)
        for times in (1, 2):
            ep = cache.episode(task)
            play(ep, task, times)
            fast = ep.evaluate()
            keys: dict[str, set[Any]] = {t: set(k) for t, k in ep.gold_keys.items()}
            for t, ks in ep.world.touched().items():
                keys.setdefault(t, set()).update(ks)
            initial = World.from_snapshot(spec, worlds_initial(cache, task))
            slow = compute_reward(ep.world, ep.expected, answer_facts=ep.answer_facts, said=list(ep.said),
                                  keys=keys, initial=initial)
            initial.close()
            if RULES_KEPT in fast.components:  # the policy's rules, checked as each write was made
                slow = with_rules_kept(slow, ep.broken)
            assert fast.to_json() == slow.to_json()
            assert fast.mismatched == slow.mismatched
            wrong += not fast.success
            ep.close()
    assert wrong  # some second passes were wrong: the comparison covered failing rewards too


def worlds_initial(cache: TaskWorldCache, task: Task) -> bytes:
    return cache.worlds(task).initial


def test_an_unregistered_snapshot_falls_back_to_the_initial_world() -> None:
    cache = TaskWorldCache(small_universe())
    task = cache.tasks()[0]
    spec = cache.spec(task.domain)
    worlds = cache.worlds(task)
    copy = bytes(bytearray(worlds.initial))  # equal content, another object: its digests are not registered
    assert snapshot_keys(spec, copy) is None
    ep = make_episode(spec, task, worlds)
    ep._initial = copy
    ep.reset()
    play(ep, task)
    assert ep.evaluate().score == 1.0
    assert ep._initial_world is not None  # the reward asked a restored world instead
    ep.close()


def test_task_snapshots_are_not_kept_by_the_process_wide_cache(monkeypatch: Any) -> None:
    import gc

    import scaleenv.world.world as ww
    from scaleenv.tools.replay import build_worlds

    cache = TaskWorldCache(small_universe())
    tasks = cache.tasks()
    bases = {t.domain: cache.base(t.domain) for t in tasks}
    ww.clear_hash_cache()
    for task in tasks:
        spec = cache.spec(task.domain)
        worlds = build_worlds(spec, bases[task.domain], task)
        ep = make_episode(spec, task, worlds)

        def no_scan(self: World) -> Any:
            raise AssertionError("a full scan: the initial snapshot's digests were not found")

        del worlds  # the episode alone keeps its initial digests registered
        with monkeypatch.context() as m:
            m.setattr(World, "_compute_base", no_scan)
            ep.reset()
            assert ep.state_hash() == task.verification.initial_hash
        ep.expected.close()
        ep.close()
        del ep
    gc.collect()
    # only the domains' base snapshots are in the cache (each under its id and its content), not a snapshot
    # per task; no holder outlived its owner
    assert ww._base_cache_bytes <= 2 * sum(len(b) for b in bases.values())
    assert not [h for h in ww._HELD.values() if h.spec in {cache.spec(t.domain) for t in tasks}]


def test_clearing_the_hash_cache_forgets_held_snapshots_too() -> None:
    from scaleenv.tools.replay import build_worlds
    from scaleenv.world.world import clear_hash_cache

    cache = TaskWorldCache(small_universe())
    task = cache.tasks()[0]
    spec = cache.spec(task.domain)
    worlds = build_worlds(spec, cache.base(task.domain), task)
    assert worlds.held is not None and snapshot_keys(spec, worlds.initial) is not None
    clear_hash_cache()  # benchmarks measure cold paths after it: nothing may answer from memory
    assert snapshot_keys(spec, worlds.initial) is None
    ep = make_episode(spec, task, worlds)
    assert ep.state_hash() == task.verification.initial_hash  # still right, from a scan
    ep.close()
    worlds.expected.close()

"""Row digests survive patches and snapshots: a task world built as base + patch is hashed without a full
scan, and every shortcut gives the same hash as reading every row."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleenv.world import World
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import clear_hash_cache
from test_core_world import PROP_SPEC, item_rows, texts

reals = st.one_of(st.none(), st.integers(-10, 10), st.floats(allow_nan=False),
                  st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


def full_hash(world: World) -> str:
    """The hash of ``world`` read from scratch: a new connection, no cache, every row."""
    clear_hash_cache()
    w = World.from_snapshot(world.spec, bytes(world.conn.serialize()))
    try:
        return w.state_hash()
    finally:
        w.close()


def reference_digests(world: World, table: str) -> dict[Any, int]:
    """The digest definition, written out plainly: BLAKE2b-128 of repr(canonical row), little-endian."""
    i = world._pk_index[table]
    return {r[i]: int.from_bytes(hashlib.blake2b(repr(r).encode(), digest_size=16).digest(), "little")
            for r in world.conn.execute(world._canon[table])}


def no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: World) -> None:
        raise AssertionError("full scan")

    monkeypatch.setattr(World, "_compute_base", boom)


def base_world() -> tuple[World, bytes]:
    w = World(PROP_SPEC)
    w.load_rows("items", [{"id": i, "label": f"i{i}", "price": i * 1.5, "qty": i, "flag": i % 2} for i in range(1, 40)])
    w.load_rows("tags", [{"id": f"t{i}", "item_id": i, "meta": {"a": i}} for i in range(1, 10)])
    snap = w.snapshot()
    w.close()
    return w, snap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=item_rows(), label=texts, price=reals)
def test_fast_digests_match_the_definition(rows: list[dict[str, Any]], label: str, price: Any) -> None:
    w = World(PROP_SPEC)
    w.load_rows("items", [*rows, {"id": 999, "label": label, "price": price, "qty": 0, "flag": False}])
    assert w._digests("items") == reference_digests(w, "items")
    w.close()


def test_patched_world_hashes_without_a_scan_and_agrees_with_a_full_scan(monkeypatch) -> None:
    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.state_hash()  # the base snapshot's digests: one scan, once
    no_scan(monkeypatch)
    patched = World.from_snapshot(PROP_SPEC, snap)
    apply_patch(patched, {"items": [{"id": 100, "label": "new", "price": 2.0, "qty": 1, "flag": True}],
                          "tags": [{"id": "t100", "item_id": 100, "meta": None}]})
    h = patched.state_hash()
    initial = patched.snapshot()
    # a brand-new world restored from the patched snapshot knows its digests too
    again = World.from_snapshot(PROP_SPEC, initial)
    assert again.state_hash() == h
    again.conn.execute("UPDATE items SET qty = qty + 1 WHERE id = 3")
    again.conn.execute("DELETE FROM tags WHERE id = 't1'")
    after = again.state_hash()
    monkeypatch.undo()
    assert h == full_hash(patched)
    assert after == full_hash(again)


def test_clear_changes_derives_digests_through_many_generations(monkeypatch) -> None:
    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.state_hash()
    no_scan(monkeypatch)
    for gen in range(9):  # past the chain depth where digest maps are flattened
        w.conn.execute("UPDATE items SET qty = ? WHERE id = ?", (gen * 7, gen + 1))
        w.conn.execute("DELETE FROM items WHERE id = ?", (30 + gen,))
        w.conn.execute("INSERT INTO items (id, label, price, qty, flag) VALUES (?, 'x', 1.0, 0, 0)", (200 + gen,))
        if gen % 3 == 0:  # a row removed and put back, and an added row removed again
            w.conn.execute("DELETE FROM items WHERE id = ?", (200 + gen,))
        w.clear_changes()
        h = w.state_hash()
        monkeypatch.undo()
        assert h == full_hash(w), gen
        w.state_hash()
        no_scan(monkeypatch)


def test_a_snapshot_with_pending_changes_is_not_registered(monkeypatch) -> None:
    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.state_hash()
    w.conn.execute("UPDATE items SET qty = 5 WHERE id = 2")
    dirty = w.snapshot()
    calls = []
    real = World._compute_base
    monkeypatch.setattr(World, "_compute_base", lambda self: calls.append(1) or real(self))
    other = World.from_snapshot(PROP_SPEC, dirty)
    assert other.state_hash() == w.state_hash()
    assert calls == [1]  # its digests were computed from its rows, not taken from the base

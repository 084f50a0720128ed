"""Closed and dropped worlds hand their SQLite connection to the next world of the same schema; a stale or
shared connection is never handed on."""

from __future__ import annotations

import sqlite3

import pytest

import scaleenv.world.world as ww
from scaleenv.world import World
from test_world_digests import PROP_SPEC, base_world


def pooled() -> int:
    return sum(len(v) for v in ww._POOL.values())


def test_a_closed_world_cannot_touch_the_reused_connection() -> None:
    ww.clear_connection_pool()
    _, snap = base_world()
    a = World.from_snapshot(PROP_SPEC, snap)
    conn = a.conn
    a.close()
    assert pooled() == 1
    with pytest.raises(sqlite3.ProgrammingError):
        a.conn.execute("SELECT 1")
    b = World.from_snapshot(PROP_SPEC, snap)
    assert b.conn is conn and pooled() == 0  # reused ...
    b.conn.execute("DELETE FROM tags")
    b.close()
    c = World.from_snapshot(PROP_SPEC, snap)
    assert c.count("tags") == 9  # ... and holding the new snapshot, not the last world's rows
    c.close()


def test_dropped_worlds_pool_only_connections_nobody_else_holds() -> None:
    ww.clear_connection_pool()
    _, snap = base_world()
    World.from_snapshot(PROP_SPEC, snap)  # dropped at once: no cycle keeps it alive
    assert pooled() == 1
    conn = World.from_snapshot(PROP_SPEC, snap).conn  # the world is gone, its connection in use here
    assert pooled() == 0
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 39
    w = World.from_snapshot(PROP_SPEC, snap)
    w.conn.execute("BEGIN")  # a connection inside a transaction is not clean
    w.close()
    assert pooled() == 0


def test_a_pooled_connection_keeps_its_compiled_statements_and_its_guard() -> None:
    """Handing a connection on must not re-install the authorizer (that recompiles every statement)
    unless the guard was replaced; either way the next world's connection is guarded."""
    ww.clear_connection_pool()
    _, snap = base_world()
    a = World.from_snapshot(PROP_SPEC, snap)
    conn = a.conn
    installs = []
    real = type(conn).set_authorizer
    type(conn).set_authorizer = lambda self, cb: (installs.append(cb), real(self, cb))[1]  # type: ignore[method-assign]
    try:
        a.close()
        assert installs == []
        b = World.from_snapshot(PROP_SPEC, snap)
        assert b.conn is conn
        b.conn.set_authorizer(None)  # a caller replaced the guard ...
        b.close()
        assert installs[-1] == conn.authorize  # ... so the pool put it back
    finally:
        type(conn).set_authorizer = real  # type: ignore[method-assign]
    c = World.from_snapshot(PROP_SPEC, snap)
    with pytest.raises(sqlite3.DatabaseError):
        c.conn.execute("ATTACH ':memory:' AS other")
    c.close()


def test_a_suspended_world_resumes_with_its_content_change_log_and_hash() -> None:
    ww.clear_connection_pool()
    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.conn.execute("UPDATE items SET qty = 77 WHERE id = 3")
    before = (w.dump(), w.touched(), w.state_hash())
    free = pooled()
    w.suspend()
    assert pooled() == free + 1  # its connection serves the next world meanwhile
    other = World.from_snapshot(PROP_SPEC, snap)
    other.conn.execute("DELETE FROM tags")
    other.close()
    assert (w.dump(), w.touched(), w.state_hash()) == before  # resumed on first use
    kept = w._kept
    w.suspend()
    assert w._kept is kept  # no write since it resumed: the same bytes, no serialize
    w.conn.execute("UPDATE items SET qty = 78 WHERE id = 3")
    w.suspend()
    assert w._kept is not kept and w.row("items", 3)["qty"] == 78
    w.close()
    with pytest.raises(sqlite3.ProgrammingError):
        w.conn.execute("SELECT 1")  # closed stays closed


def test_a_parked_world_is_unusable_until_restored() -> None:
    from scaleenv.errors import WorldError

    ww.clear_connection_pool()
    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.conn.execute("DELETE FROM tags")
    w.park()
    assert pooled() == 1
    with pytest.raises(sqlite3.ProgrammingError):
        w.conn.execute("SELECT 1")
    w.restore(snap)
    assert w.count("tags") == 9 and w.touched() == {} and pooled() == 0
    w.park()
    w.close()
    with pytest.raises(WorldError, match="closed"):
        w.restore(snap)  # a closed world is not brought back


def test_load_tables_is_all_or_nothing_across_tables() -> None:
    from scaleenv.errors import WorldError

    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    with pytest.raises(WorldError, match="tags"):
        w.load_tables([("items", [{"id": 500, "label": "x", "price": 1.0, "qty": 1, "flag": 0}]),
                       ("tags", [{"id": "t1", "item_id": 500}])], log=True)  # t1 exists already
    assert w.row("items", 500) is None and w.touched() == {}
    w.close()


def test_a_failed_write_after_a_restore_rolls_back_only_itself() -> None:
    """SQLite 3.40 empties the whole database when a statement compiled before ``deserialize`` is the
    first one after it, inside a savepoint that is then rolled back (a failed load or tool call after
    an episode's reset, or on a pooled connection)."""
    from scaleenv.errors import WorldError

    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    ok = [{"id": 500, "label": "x", "price": 1.0, "qty": 1, "flag": 0}, {"id": 501, "label": "y", "qty": 1, "flag": 0}]
    w.load_rows("items", ok, log=True)  # compiles both INSERTs on this connection
    w.restore(snap)
    with pytest.raises(WorldError, match="UNIQUE"):
        w.load_rows("items", [ok[0], {"id": 3, "label": "dup", "qty": 1, "flag": 0}], log=True)
    assert w.count("items") == 39 and w.row("items", 500) is None
    w.close()

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

"""SQLite 3.40 crashes (use-after-free) when a table-valued function such as json_each is prepared on a
connection after deserialize(). Worlds reset by deserializing, so such SQL must never run."""

from __future__ import annotations

import copy

from example_domain import SPEC, spec, world
from scaleenv.env import Episode
from scaleenv.formats.domain import DomainSpec
from scaleenv.validation.spec import spec_problems
from scaleenv.world.world import World


def test_validation_rejects_table_valued_functions():
    data = copy.deepcopy(SPEC)
    data["tools"][1]["returns"]["query"] = (
        "SELECT * FROM books WHERE id IN (SELECT value FROM json_each(:genre)) AND (:max_price IS NULL OR 1)"
    )
    problems = spec_problems(DomainSpec.model_validate(data))
    assert problems and problems[0][0] == "tools[1](search_books).returns.query"
    assert "json_each" in problems[0][1]


def test_python_tool_cannot_use_json_each_and_the_process_survives_resets():
    data = copy.deepcopy(SPEC)
    vip = next(t for t in data["tools"] if t["name"] == "set_vip")
    vip["implementation"]["source"] = (
        "def run(db, args):\n"
        "    db.query(\"SELECT value FROM json_each('[1,2]')\")\n"
        "    db.execute('UPDATE customers SET vip = :v WHERE id = :c', {'v': int(args['vip']), 'c': args['customer_id']})\n"
    )
    s = DomainSpec.model_validate(data)
    ep = Episode(s, world().snapshot())
    for _ in range(3):
        r = ep.call_tool("set_vip", {"customer_id": "C001", "vip": False})
        assert not r.ok and r.error == "internal_error"
        ep.reset()


def test_keyed_diff_after_many_resets_does_not_crash():
    w = world()
    snap = w.snapshot()
    other = World.from_snapshot(spec(), snap)
    for i in range(20):
        other.restore(snap)
        other.conn.execute("UPDATE books SET stock = ? WHERE id = 'B001'", (i + 10,))
        changes = w.diff(other, {"books": ["B001", "B002"], "orders": ["O001"]})
        assert [c.key for c in changes] == ["B001"]


def test_validation_rejects_escapes_and_internal_tables():
    import pytest

    cases = {
        "ATTACH DATABASE '/tmp/x.db' AS x": "attach",
        "PRAGMA foreign_keys = OFF": "pragma",
        "DELETE FROM _changes": "internal table _changes",
        "DROP TABLE books": "drop table",
        "UPDATE _meta SET value = 'x'": "internal table _meta",
    }
    for stmt, needle in cases.items():
        data = copy.deepcopy(SPEC)
        tool = next(t for t in data["tools"] if t["name"] == "refund_payment")
        tool["effects"] = [stmt, *tool["effects"]]
        problems = spec_problems(DomainSpec.model_validate(data))
        hits = [r for p, r in problems if p.endswith("effects[0]")]
        if not hits:
            pytest.fail(f"{stmt!r} was not rejected: {problems}")
        assert needle in hits[0], (stmt, hits)


def test_runaway_sql_is_stopped_and_leaves_the_world_unchanged(monkeypatch):
    from scaleenv.tools import runtime

    monkeypatch.setattr(runtime, "TOOL_TIME_LIMIT_S", 0.2)
    data = copy.deepcopy(SPEC)
    search = next(t for t in data["tools"] if t["name"] == "search_books")
    search["returns"]["query"] = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT * FROM books WHERE (:genre IS NULL OR 1) AND (:max_price IS NULL OR 1) "
        "AND id IN (SELECT 'B' || x FROM c)"
    )
    s = DomainSpec.model_validate(data)
    ep = Episode(s, world().snapshot())
    before = ep.state_hash()
    r = ep.call_tool("search_books", {})
    assert not r.ok and r.error == "internal_error" and "longer than" in r.message
    assert ep.state_hash() == before
    assert ep.call_tool("get_book", {"book_id": "B001"}).ok  # the world still works

"""Hostile SQL is contained at run time (the guard on every world connection) and refused by
validation, both by ``validate`` and when a universe's spec is loaded."""

from __future__ import annotations

import copy
import json
import sqlite3
import time
from pathlib import Path

import pytest

from example_domain import SPEC, world
from scaleenv.env import Episode
from scaleenv.errors import UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.validation.spec import spec_problems
from scaleenv.world import guard
from scaleenv.world.world import World


def _with_effect(stmt: str, tool: str = "refund_payment") -> DomainSpec:
    data = copy.deepcopy(SPEC)
    t = next(t for t in data["tools"] if t["name"] == tool)
    t["effects"] = [stmt, *t["effects"]]
    return DomainSpec.model_validate(data)  # no validation: what a tampered spec.json gives


def _with_returns(query: str) -> DomainSpec:
    data = copy.deepcopy(SPEC)
    t = next(t for t in data["tools"] if t["name"] == "search_books")
    t["returns"]["query"] = query
    return DomainSpec.model_validate(data)


ESCAPES = {
    "attach": "ATTACH DATABASE '{f}' AS x",
    "vacuum_into": "VACUUM INTO '{f}'",
    "pragma_write": "PRAGMA foreign_keys = OFF",
    "pragma_other": "PRAGMA writable_schema = 1",
    "create": "CREATE TABLE evil (x)",
    "temp": "CREATE TEMP TABLE evil (x)",
    "drop": "DROP TABLE orders",
    "trigger": "DROP TRIGGER _log_update_books",
    "alter": "ALTER TABLE books ADD COLUMN evil TEXT",
    "sqlite_master": "UPDATE sqlite_master SET sql = 'x'",
    "load_extension": "SELECT load_extension('/tmp/evil.so')",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_world_connection_refuses_escapes(name: str, tmp_path: Path) -> None:
    target = tmp_path / "stolen.db"
    w = world()
    before = w.state_hash()
    with pytest.raises(sqlite3.DatabaseError):
        w.conn.execute(ESCAPES[name].format(f=target))
    assert not target.exists()
    assert w.state_hash() == before
    assert w.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


@pytest.mark.parametrize("name", ["attach", "vacuum_into", "pragma_write", "drop", "sqlite_master"])
def test_tampered_spec_effects_fail_in_an_episode_and_write_no_file(name: str, tmp_path: Path) -> None:
    target = tmp_path / "stolen.db"
    spec = _with_effect(ESCAPES[name].format(f=target))
    ep = Episode(spec, world().snapshot())
    before = ep.state_hash()
    res = ep.call_tool("refund_payment", {"payment_id": 2, "amount": 1})
    assert not res.ok and res.error == "internal_error", res.output
    assert not target.exists()
    assert ep.state_hash() == before


def test_restored_worlds_keep_the_guard(tmp_path: Path) -> None:
    w = world()
    clone = World.from_snapshot(w.spec, w.snapshot())
    clone.restore(w.snapshot())
    with pytest.raises(sqlite3.DatabaseError):
        clone.conn.execute(f"VACUUM INTO '{tmp_path / 'x.db'}'")
    assert not (tmp_path / "x.db").exists()


def test_size_limits() -> None:
    w = world()
    with pytest.raises(sqlite3.DataError):
        w.conn.execute("SELECT length(randomblob(300000000))").fetchone()
    with pytest.raises(sqlite3.DataError):
        w.conn.execute("SELECT length(zeroblob(300000000))").fetchone()
    with pytest.raises(sqlite3.OperationalError, match="pattern too complex"):
        w.conn.execute("SELECT 'a' LIKE ?", ("%" + "a" * 5000 + "%",)).fetchone()
    deep = " + ".join(["1"] * 300)  # a left-deep tree 300 levels deep
    with pytest.raises(sqlite3.OperationalError, match="depth"):
        w.conn.execute(f"SELECT {deep}").fetchone()
    assert w.conn.getlimit(sqlite3.SQLITE_LIMIT_ATTACHED) == 0
    assert [r[1] for r in w.conn.execute("PRAGMA table_info(books)")][:2] == ["id", "title"]  # reports still work


def test_every_statement_is_bounded_without_a_tool_deadline(monkeypatch) -> None:
    monkeypatch.setattr(guard, "STATEMENT_LIMIT_S", 0.2)
    w = world()
    assert w.deadline is None
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="interrupt"):
        w.conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
                       ).fetchone()
    assert time.monotonic() - t0 < 30  # generous: it stops, it does not hang
    assert w.conn.execute("SELECT 1").fetchone() == (1,)  # the next statement gets a fresh budget


def test_recursive_precondition_in_the_sampler_and_gates_path_stops(monkeypatch) -> None:
    from scaleenv.tools.runtime import bind_params, first_failing_precondition

    monkeypatch.setattr(guard, "STATEMENT_LIMIT_S", 0.2)
    data = copy.deepcopy(SPEC)
    t = next(t for t in data["tools"] if t["name"] == "refund_payment")
    t["preconditions"].insert(0, {"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                         "SELECT count(*) > 0 FROM c WHERE :payment_id IS NOT NULL",
                                  "error": "not_found"})
    spec = DomainSpec.model_validate(data)
    w = World.from_snapshot(spec, world().snapshot())
    tool = spec.tool("refund_payment")
    params = bind_params(w, tool, {"payment_id": 2, "amount": 1})
    assert first_failing_precondition(w, tool, params) == 0


def test_the_long_like_attack_is_refused_fast() -> None:
    """The issue's attack: a 10 KB LIKE pattern over rows of 10 KB text (18 s before)."""
    data = copy.deepcopy(SPEC)
    data["tools"].append({
        "name": "find_titles", "description": "Books whose title contains a text.", "kind": "read",
        "parameters": [{"name": "q", "type": "string"}],
        "returns": {"query": "SELECT id FROM books WHERE title LIKE '%' || :q || '%'", "mode": "many"}})
    spec = DomainSpec.model_validate(data)
    w = world()
    for i in range(43):
        w.conn.execute("INSERT INTO books VALUES (?, ?, 1, 1, 'fiction')", (f"X{i:03d}", "a" * 10_000))
    ep = Episode(spec, w.snapshot())
    res = ep.call_tool("find_titles", {"q": "a" * 9_998 + "b"})
    assert not res.ok and res.error == "internal_error" and "pattern" in res.message


# --- validation -----------------------------------------------------------------------------

HOSTILE_SQL = {
    "vacuum": ("effects", "VACUUM INTO '/tmp/scaleenv_stolen.db'", "vacuum"),
    "vacuum_comment": ("effects", "/* hi */ -- there\n vacuum", "vacuum"),
    "load_extension": ("returns", "SELECT load_extension('/tmp/x.so') AS x FROM books WHERE "
                                  "(:genre IS NULL OR 1) AND (:max_price IS NULL OR 1)", "load_extension"),
    "recursive": ("returns", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c "
                             "WHERE (:genre IS NULL OR 1) AND (:max_price IS NULL OR 1)", "recursive"),
    "randomblob": ("returns", "SELECT randomblob(300000000) AS b FROM books WHERE (:genre IS NULL OR 1) AND "
                              "(:max_price IS NULL OR 1)", "randomblob"),
    "zeroblob": ("returns", "SELECT zeroblob(300000000) AS b FROM books WHERE (:genre IS NULL OR 1) AND "
                            "(:max_price IS NULL OR 1)", "zeroblob"),
    "cte_internal": ("returns", "WITH x AS (SELECT * FROM _changes) SELECT * FROM x WHERE (:genre IS NULL OR 1) "
                                "AND (:max_price IS NULL OR 1)", "_changes"),
}


def _hostile_spec(name: str) -> DomainSpec:
    where, sql, _ = HOSTILE_SQL[name]
    return _with_effect(sql) if where == "effects" else _with_returns(sql)


@pytest.mark.parametrize("name", sorted(HOSTILE_SQL))
def test_validation_rejects_hostile_sql(name: str) -> None:
    problems = spec_problems(_hostile_spec(name))
    assert any(HOSTILE_SQL[name][2] in reason for _, reason in problems), problems


@pytest.mark.parametrize("name", ["vacuum", "recursive", "randomblob"])
def test_validate_command_rejects_hostile_sql(name: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scaleenv.cli import app

    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_hostile_spec(name).model_dump(mode="json")))
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


def _universe_with_spec(tmp_path: Path, spec: DomainSpec) -> Path:
    from scaleenv.universe import FORMAT, write_json

    root = tmp_path / "u"
    d = root / "domains" / spec.name
    d.mkdir(parents=True)
    write_json(root / "universe.json", {"format": FORMAT, "domains": [spec.name]})
    write_json(d / "spec.json", spec.model_dump(mode="json"))
    write_json(d / "done.json", {"spec_hash": spec.content_hash(), "tools": len(spec.tools)})
    (d / "base.sqlite").write_bytes(world().snapshot())
    return root


@pytest.mark.parametrize("name", ["vacuum", "load_extension", "recursive"])
def test_universe_spec_is_validated_on_load(name: str, tmp_path: Path) -> None:
    from scaleenv.universe import Universe

    root = _universe_with_spec(tmp_path, _hostile_spec(name))
    with pytest.raises(UniverseError, match=HOSTILE_SQL[name][2]):
        Universe(root).spec("bookshop")


def test_universe_spec_loads_when_valid(tmp_path: Path) -> None:
    from scaleenv.universe import Universe

    root = _universe_with_spec(tmp_path, DomainSpec.model_validate(SPEC))
    assert Universe(root).spec("bookshop").name == "bookshop"

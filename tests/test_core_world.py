"""SQLite world: build, load, snapshot/restore, canonical hash (property-based), structured diff vs a naive
reference (property-based)."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import example_domain
from scaleenv.errors import WorldError
from scaleenv.formats.domain import DomainSpec
from scaleenv.world import World
from scaleenv.world.world import norm_value

# A small domain for the properties: an integer-keyed and a text-keyed table with every plain type.
PROP_SPEC = DomainSpec.model_validate(
    {
        "name": "props",
        "tables": [
            {
                "name": "items",
                "columns": [
                    {"name": "id", "type": "integer"},
                    {"name": "label", "type": "text"},
                    {"name": "price", "type": "real", "nullable": True},
                    {"name": "qty", "type": "integer"},
                    {"name": "flag", "type": "boolean"},
                ],
            },
            {
                "name": "tags",
                "columns": [
                    {"name": "id", "type": "text"},
                    {"name": "item_id", "type": "integer", "nullable": True, "foreign_key": "items.id"},
                    {"name": "meta", "type": "json", "nullable": True},
                ],
            },
        ],
    }
)

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
prices = st.one_of(st.none(), st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@st.composite
def item_rows(draw: Any) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.integers(1, 60), unique=True, max_size=12))
    return [
        {"id": i, "label": draw(texts), "price": draw(prices), "qty": draw(st.integers(-(2**40), 2**40)),
         "flag": draw(st.booleans())}
        for i in ids
    ]


@st.composite
def tag_rows(draw: Any, item_ids: list[int]) -> list[dict[str, Any]]:
    keys = draw(st.lists(st.text(alphabet="abcxyz", min_size=1, max_size=3), unique=True, max_size=8))
    return [
        {"id": k, "item_id": draw(st.sampled_from(item_ids)) if item_ids and draw(st.booleans()) else None,
         "meta": draw(st.one_of(st.none(), st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2)))}
        for k in keys
    ]


def fresh(rows: dict[str, list[dict[str, Any]]]) -> World:
    w = World(PROP_SPEC)
    w.load_rows("items", rows.get("items", []))
    w.load_rows("tags", rows.get("tags", []))
    return w


# --- build, load, snapshot -------------------------------------------------------------------------


def test_build_and_load_example_world() -> None:
    w = example_domain.world()
    assert w.table_names == ["books", "customers", "orders", "payments"]
    assert w.count("books") == 3 and w.count("orders") == 2
    assert w.row("books", "B003") == {"id": "B003", "title": "SPQR", "price": 15.25, "stock": 7, "genre": "history"}
    ada = w.row("customers", "C001")
    assert ada["vip"] == 1 and ada["prefs"] == '{"genre": "science"}'
    assert w.row("books", "nope") is None
    assert [r["id"] for r in w.rows("orders")] == ["O001", "O002"]
    assert w.clock == "2026-06-15T09:00:00"
    assert w.touched() == {}, "rows loaded without log=True are the baseline"


def test_load_rows_unknown_table_or_column() -> None:
    w = World(example_domain.spec())
    with pytest.raises(WorldError, match="unknown table 'authors'"):
        w.load_rows("authors", [{"id": "A1"}])
    with pytest.raises(WorldError, match=r"unknown column\(s\) \['isbn'\]"):
        w.load_rows("books", [{"id": "B1", "title": "T", "price": 1, "stock": 1, "genre": "fiction", "isbn": "x"}])
    assert w.count("books") == 0


@pytest.mark.parametrize(
    "row, needle",
    [
        ({"id": "B9", "title": "T", "price": -1, "stock": 1, "genre": "fiction"}, "CHECK"),  # min
        ({"id": "B9", "title": "T", "price": 1, "stock": 1, "genre": "poetry"}, "CHECK"),  # enum
        ({"id": "B9", "title": "T", "price": 1, "stock": 1.5, "genre": "fiction"}, "CHECK"),  # integer type
        ({"id": "B9", "title": "T", "price": "cheap", "stock": 1, "genre": "fiction"}, "CHECK"),  # real type
        ({"id": "B9", "price": 1, "stock": 1, "genre": "fiction"}, "NOT NULL"),  # missing required
        ({"id": None, "title": "T", "price": 1, "stock": 1, "genre": "fiction"}, "NOT NULL"),  # null key
    ],
)
def test_load_rows_enforces_column_constraints(row: dict, needle: str) -> None:
    w = example_domain.world()
    before = w.state_hash()
    with pytest.raises(WorldError, match=needle):
        w.load_rows("books", [{"id": "B8", "title": "ok", "price": 1, "stock": 1, "genre": "fiction"}, row])
    assert w.row("books", "B8") is None, "load_rows is all or nothing"
    assert w.state_hash() == before


def test_text_column_stores_numbers_as_text() -> None:
    w = example_domain.world()
    w.load_rows("books", [{"id": "B9", "title": 7, "price": 1, "stock": 1, "genre": "fiction"}])
    assert w.row("books", "B9")["title"] == "7"


def test_load_rows_enforces_foreign_keys_and_types() -> None:
    w = example_domain.world()
    with pytest.raises(WorldError, match="FOREIGN KEY"):
        w.load_rows("orders", [{"id": "O9", "customer_id": "C404", "book_id": "B001", "quantity": 1, "total": 1,
                                "created_at": "2026-01-01T00:00:00"}])
    with pytest.raises(WorldError, match="CHECK"):
        w.load_rows("customers", [{"id": "C9", "name": "X", "email": "x@x", "joined": "yesterday"}])
    with pytest.raises(WorldError, match="CHECK"):
        w.load_rows("customers", [{"id": "C9", "name": "X", "email": "x@x", "joined": "2024-01-01",
                                   "prefs": "{not json"}])


def test_load_rows_with_log_is_touched() -> None:
    w = example_domain.world()
    w.load_rows("books", [{"id": "B9", "title": "T", "price": 1, "stock": 1, "genre": "fiction"}], log=True)
    assert w.touched() == {"books": {"B9"}}
    w.clear_changes()
    assert w.touched() == {}


def test_snapshot_restore_round_trip() -> None:
    w = example_domain.world()
    snap = w.snapshot()
    dump, h = w.dump(), w.state_hash()
    w.conn.execute("UPDATE books SET stock = 0")
    w.conn.execute("DELETE FROM payments WHERE id = 2")
    assert w.state_hash() != h and w.dump() != dump
    w.restore(snap)
    assert w.dump() == dump and w.state_hash() == h
    other = World.from_snapshot(w.spec, snap)
    assert other.dump() == dump and other.state_hash() == h
    assert other.snapshot() == snap
    clone = w.clone()
    clone.conn.execute("UPDATE books SET stock = 99")
    assert w.row("books", "B001")["stock"] == 3, "a clone is independent"


def test_restore_bad_snapshot_raises_world_error() -> None:
    w = example_domain.world()
    with pytest.raises(WorldError):
        w.restore("not bytes")  # type: ignore[arg-type]
    with pytest.raises(WorldError):
        World.from_snapshot(w.spec, 12)  # type: ignore[arg-type]
    with pytest.raises(WorldError, match="not a snapshot"):
        w.restore(b"garbage" * 100)
    assert w.count("books") == 3, "a rejected snapshot leaves the world as it was"


def test_bad_schema_raises_world_error() -> None:
    spec = DomainSpec.model_validate(
        {"name": "bad", "tables": [{"name": "t", "columns": [{"name": "id", "type": "real", "default": "x'"}]}]}
    )
    # A default that is not valid for the column is caught when rows arrive, not silently accepted.
    w = World(spec)
    with pytest.raises(WorldError):
        w.load_rows("t", [{}])


def test_foreign_key_columns_are_indexed() -> None:
    w = example_domain.world()
    plan = w.conn.execute("EXPLAIN QUERY PLAN SELECT * FROM orders WHERE customer_id = 'C001'").fetchall()
    assert any("USING INDEX" in row[-1] for row in plan), plan


# --- canonical hash ------------------------------------------------------------------------------------


def test_hash_distinguishes_content() -> None:
    w = example_domain.world()
    h = w.state_hash()
    assert len(h) == 32 and int(h, 16) >= 0
    w.conn.execute("UPDATE books SET price = 9.51 WHERE id = 'B001'")
    h2 = w.state_hash()
    assert h2 != h
    w.conn.execute("UPDATE books SET price = 9.5 WHERE id = 'B001'")
    assert w.state_hash() == h


def test_hash_covers_every_table() -> None:
    w = example_domain.world()
    seen = {w.state_hash()}
    for sql in ("UPDATE customers SET vip = 0 WHERE id = 'C001'", "UPDATE orders SET note = 'x' WHERE id = 'O001'",
                "UPDATE payments SET refunded = 1 WHERE id = 1", "UPDATE books SET stock = 4 WHERE id = 'B001'"):
        w.conn.execute(sql)
        seen.add(w.state_hash())
    assert len(seen) == 5


def test_hash_swapping_values_between_rows_changes_it() -> None:
    w = fresh({"items": [{"id": 1, "label": "a", "price": 1.0, "qty": 2, "flag": True},
                         {"id": 2, "label": "b", "price": 2.0, "qty": 1, "flag": False}]})
    h = w.state_hash()
    w.conn.execute("UPDATE items SET label = CASE id WHEN 1 THEN 'b' ELSE 'a' END")
    assert w.state_hash() != h


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=item_rows(), data=st.data())
def test_hash_invariant_under_insertion_order_and_number_spelling(items: list[dict], data: Any) -> None:
    tags = data.draw(tag_rows([r["id"] for r in items]))
    a = fresh({"items": items, "tags": tags})
    perm = data.draw(st.permutations(range(len(items))))
    respelled = []
    for i in perm:
        row = dict(items[i])
        p = row["price"]
        if isinstance(p, float) and p.is_integer() and abs(p) < 2**53:
            row["price"] = int(p)  # 3.0 -> 3
        elif isinstance(p, int):
            row["price"] = float(p)  # 3 -> 3.0
        respelled.append(row)
    b = fresh({"items": respelled, "tags": data.draw(st.permutations(tags))})
    assert a.state_hash() == b.state_hash()
    # The same content reached by deletes and re-inserts hashes the same, too.
    if items:
        victim = items[0]
        b.conn.execute("DELETE FROM tags WHERE item_id = ?", (victim["id"],))
        b.conn.execute("DELETE FROM items WHERE id = ?", (victim["id"],))
        b.load_rows("items", [victim], log=True)
        b.load_rows("tags", [t for t in tags if t["item_id"] == victim["id"]], log=True)
        assert b.state_hash() == a.state_hash()


# --- random write sequences ----------------------------------------------------------------------------


@st.composite
def operations(draw: Any) -> list[tuple]:
    ops = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["insert", "update", "delete", "update_key"]))
        ops.append((kind, draw(st.integers(1, 70)), draw(texts), draw(prices), draw(st.integers(-5, 5))))
    return ops


def apply(world: World, ops: list[tuple]) -> None:
    for kind, key, label, price, qty in ops:
        try:
            if kind == "insert":
                world.conn.execute("INSERT INTO items (id, label, price, qty, flag) VALUES (?, ?, ?, ?, 0)",
                                   (key, label, price, qty))
            elif kind == "update":
                world.conn.execute("UPDATE items SET label = ?, price = ? WHERE id = ?", (label, price, key))
            elif kind == "delete":
                world.conn.execute("DELETE FROM tags WHERE item_id = ?", (key,))
                world.conn.execute("DELETE FROM items WHERE id = ?", (key,))
            else:
                world.conn.execute("UPDATE items SET id = id + 100 WHERE id = ? AND id + 100 NOT IN "
                                   "(SELECT id FROM items) AND id NOT IN (SELECT item_id FROM tags "
                                   "WHERE item_id IS NOT NULL)", (key,))
        except sqlite3.IntegrityError:
            pass


def naive_diff(before: dict[str, list[dict]], after: dict[str, list[dict]],
               keys: dict[str, set] | None = None) -> set[tuple]:
    out = set()
    for table in sorted(set(before) | set(after)):
        pk = "id"
        a = {r[pk]: r for r in before.get(table, [])}
        b = {r[pk]: r for r in after.get(table, [])}
        ks = a.keys() | b.keys()
        if keys is not None:
            ks = ks & keys.get(table, set())
        for k in ks:
            if k not in a:
                out.add((table, k, "added", ()))
            elif k not in b:
                out.add((table, k, "removed", ()))
            else:
                cols = tuple(sorted(c for c in a[k] if norm_value(a[k][c]) != norm_value(b[k][c])))
                if cols:
                    out.add((table, k, "changed", cols))
    return out


def as_set(changes: list) -> set[tuple]:
    return {(c.table, c.key, c.kind, tuple(sorted(c.columns))) for c in changes}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=item_rows(), ops=operations(), data=st.data())
def test_diff_matches_naive_reference(items: list[dict], ops: list[tuple], data: Any) -> None:
    before = fresh({"items": items})
    after = before.clone()
    apply(after, ops)
    want = naive_diff(before.dump(), after.dump())
    changes = before.diff(after)
    assert as_set(changes) == want
    for c in changes:  # before/after/columns carry the real values
        if c.kind == "changed":
            for col, (b, a) in c.columns.items():
                assert c.before[col] == b and c.after[col] == a and norm_value(a) != norm_value(b)
        elif c.kind == "added":
            assert c.after is not None and c.before is None and c.after["id"] == c.key
        else:
            assert c.before is not None and c.after is None and c.before["id"] == c.key
    # Fast path: the touched keys give exactly the full diff.
    touched = after.touched()
    assert as_set(before.diff(after, keys=touched)) == want
    # Restricted to any subset of keys, it is the naive diff restricted to those keys.
    all_keys = {r["id"] for r in before.dump()["items"]} | {r["id"] for r in after.dump()["items"]} | {999}
    subset = set(data.draw(st.lists(st.sampled_from(sorted(all_keys)), max_size=6)))
    assert as_set(before.diff(after, keys={"items": subset})) == naive_diff(
        before.dump(), after.dump(), {"items": subset}
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=item_rows(), ops1=operations(), ops2=operations())
def test_incremental_hash_equals_full_hash(items: list[dict], ops1: list[tuple], ops2: list[tuple]) -> None:
    w = fresh({"items": items})
    snap = w.snapshot()
    w.state_hash()  # establish a base, then write
    apply(w, ops1)
    h1 = w.state_hash()
    rebuilt = fresh(w.dump())  # same content, built from scratch: a full hash
    assert h1 == rebuilt.state_hash()
    apply(w, ops2)
    assert w.state_hash() == fresh(w.dump()).state_hash()
    # Restored worlds share the snapshot's cached base; their hashes stay exact.
    e = World.from_snapshot(PROP_SPEC, snap)
    assert e.state_hash() == fresh({"items": items}).state_hash()
    apply(e, ops1)
    assert e.state_hash() == h1
    e.restore(snap)
    apply(e, ops2)
    assert e.state_hash() == fresh(e.dump()).state_hash()


def test_hash_after_clear_changes_stays_exact() -> None:
    w = fresh({"items": [{"id": i, "label": str(i), "price": i / 2, "qty": i, "flag": i % 2 == 0}
                         for i in range(1, 30)]})
    w.state_hash()
    rng = random.Random(7)
    for step in range(20):
        k = rng.randint(1, 40)
        w.conn.execute("UPDATE items SET qty = qty + 1 WHERE id = ?", (k,))
        if step % 5 == 0:
            w.clear_changes()
        assert w.state_hash() == fresh(w.dump()).state_hash()


def test_diff_example_structure() -> None:
    before = example_domain.world()
    after = before.clone()
    after.conn.execute("UPDATE books SET stock = 2, price = 9.5 WHERE id = 'B001'")
    after.conn.execute("DELETE FROM payments WHERE id = 2")
    after.load_rows("payments", [{"id": 3, "order_id": "O001", "amount": 1.0}], log=True)
    changes = before.diff(after)
    assert [c.to_json() for c in changes] == [
        {"table": "books", "key": "B001", "kind": "changed", "columns": {"stock": [3, 2]}},
        {"table": "payments", "key": 2, "kind": "removed", "columns": {}},
        {"table": "payments", "key": 3, "kind": "added", "columns": {}},
    ]
    assert changes[2].after == {"id": 3, "order_id": "O001", "amount": 1.0, "refunded": 0.0}
    assert changes[1].before["amount"] == 30.5
    assert after.touched() == {"books": {"B001"}, "payments": {2, 3}}

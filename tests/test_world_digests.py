"""Row digests survive patches and snapshots: a task world built as base + patch is hashed without a full
scan, and every shortcut gives the same hash as reading every row."""

from __future__ import annotations

import json
from typing import Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleenv.formats.domain import DomainSpec
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


def canonical(v: Any) -> Any:
    """The canonical form of a value, written out plainly (``world/canon.py``'s definition)."""
    if isinstance(v, float):
        if abs(v) <= 2**31:
            r = v * 1e6
            n = int(r + (-0.5 if r < 0 else 0.5))  # the nearest whole number of millionths
            if n / 10**6 == v:  # int / int: the correctly rounded quotient, as IEEE's float(n) / 1e6
                return n
        return repr(v)
    return v


def reference_digests(world: World, table: str) -> dict[Any, int]:
    """The digest definition, written out plainly: XXH3-128 (seed 0) of the row's canonical JSON text, as an
    integer; the text of the last json column that is not the key, when it is a text, follows the array."""
    spec = world.spec.table(table)
    cols = [c.name for c in spec.columns]
    i = cols.index(world.primary_key(table))
    tails = [j for j, c in enumerate(spec.columns) if c.type == "json" and j != i]
    out = {}
    for r in world.conn.execute(f"SELECT {', '.join(cols)} FROM {table}"):
        values, tail = list(r), b""
        if tails and isinstance(values[tails[-1]], str):
            tail = values.pop(tails[-1]).encode()
        text = json.dumps([canonical(v) for v in values], ensure_ascii=False, separators=(",", ":")).encode() + tail
        out[r[i]] = xxhash.xxh3_128_intdigest(text)
    return out


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


# --- the canonical encoding (world/canon.py): SQLite's fast path, the Python definition, the fallbacks ----

money = st.builds(lambda cents, scale: cents / scale, st.integers(-10**9, 10**9), st.sampled_from([1, 10, 100, 10**4, 10**6]))
any_real = st.one_of(reals, money, st.floats(-2.0**33, 2.0**33, allow_nan=False), st.sampled_from(
    [2.0**53, -(2.0**53) + 1, 2.0**32 - 1e-6, 2.0**32 + 0.5, 2.0**31 - 1e-6, 2.0**31, -(2.0**31), 2.0**31 + 1e-6, -(2.0**31) + 0.5, 1e-7, 5e-7,
     0.29, -1e-300, 0.1 + 0.2, -0.0]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=item_rows(), prices=st.lists(any_real, min_size=1, max_size=10), label=texts)
def test_sqlite_and_python_paths_agree_with_the_definition(rows: list[dict[str, Any]], prices: list[Any],
                                                           label: str) -> None:
    from scaleenv.world import canon

    w = World(PROP_SPEC)
    extra = [{"id": 1000 + i, "label": label, "price": p, "qty": i, "flag": i % 2} for i, p in enumerate(prices)]
    w.load_rows("items", [*rows, *extra])
    codec = w._codecs["items"]
    ref = reference_digests(w, "items")
    keys = [r["id"] for r in extra[::2]] + [-5]  # a key with no row: absent from the answer
    assert canon._fast(w.conn, codec, None) == ref
    assert canon._slow(w.conn, codec, None) == ref
    assert canon._fast(w.conn, codec, keys) == canon._slow(w.conn, codec, keys) == {k: ref[k] for k in keys if k in ref}
    w.close()


def test_sqlite_here_writes_rows_as_the_definition() -> None:
    from scaleenv.world import canon

    assert canon.sqlite_matches_definition()  # else every hash takes the (correct, slower) Python path


def test_python_path_gives_the_same_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where SQLite writes rows otherwise (another version), hashes are still those of the definition."""
    from scaleenv.world import canon

    _, snap = base_world()
    fast = full_hash(World.from_snapshot(PROP_SPEC, snap))
    monkeypatch.setattr(canon, "_matches", False)
    assert full_hash(World.from_snapshot(PROP_SPEC, snap)) == fast


def test_the_encoding_is_pinned() -> None:
    """A change to these bytes changes every built task's recorded hashes: make it deliberately, with
    a new ``HASH_VERSION``."""
    from scaleenv.world.canon import HASH_VERSION, row_digest, row_text

    assert HASH_VERSION == 5
    assert row_digest(b'[1,"a",null]') == 86162055766444874481767597836820432505  # XXH3-128, seed 0
    assert row_text([1, "a\n\"é", None, 2.0, 12.99, -0.29, 0.1 + 0.2, 1e20, 2.0**31, 2.0**31 + 0.5, b"\x00\xff"]) == (
        '[1,"a\\n\\"é",null,2000000,12990000,-290000,"0.30000000000000004","1e+20",2147483648000000,'
        '"2147483648.5",{"blob":"00ff"}]').encode()
    # the tail: a json column's text follows the array as it is; a NULL there stays in the array
    assert row_text(["t1", '{"a": "\\u00e9 é"}', 1.5], tail=1) == '["t1",1500000]{"a": "\\u00e9 é"}'.encode()
    assert row_text(["t1", None, 1.5], tail=1) == b'["t1",null,1500000]'
    _, snap = base_world()
    assert full_hash(World.from_snapshot(PROP_SPEC, snap)) == PINNED_HASH


PINNED_HASH = "fd062704a13ccc8ff6c4db11a5b176af"  # base_world() under HASH_VERSION 5 (4: cffabef1..., 3: a30c1c66..., 2: 7bd9e52f...)


WIDE_SPEC = DomainSpec.model_validate({"name": "wide", "tables": [
    {"name": "wide", "columns": [{"name": "id", "type": "integer"}, *[{"name": f"c{i}", "type": "real"} for i in range(70)]]},
    {"name": "by_real", "primary_key": "k", "columns": [{"name": "k", "type": "real"}, {"name": "v", "type": "text"}]},
]})


def test_tables_off_the_fast_path_hash_exactly() -> None:
    """Wider than the guard's 64 function arguments, or keyed by a real (json would round the key)."""
    w = World(WIDE_SPEC)
    assert not w._codecs["wide"].fast and not w._codecs["by_real"].fast
    w.load_rows("wide", [{"id": i, **{f"c{j}": i * j / 7 for j in range(70)}} for i in range(5)])
    w.load_rows("by_real", [{"k": 0.1 + 0.2 * i, "v": str(i)} for i in range(5)])
    w.state_hash()
    w.conn.execute("UPDATE wide SET c3 = 1.5 WHERE id = 2")
    w.conn.execute("UPDATE by_real SET v = 'x' WHERE k = ?", (0.1 + 0.2,))
    assert w.state_hash() == full_hash(w)
    assert reference_digests(w, "by_real") == w._digests("by_real")
    w.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_universe_of_an_old_encoding_is_refused_in_one_line(tmp_path, version: int) -> None:
    from scaleenv.errors import UniverseError
    from scaleenv.universe import Universe

    (tmp_path / "universe.json").write_text(f'{{"format": "scaleenv-universe/{version}", "domains": []}}')
    with pytest.raises(UniverseError, match=f"older scaleenv .*encoding {version}.*rebuild it"):
        Universe(tmp_path).manifest  # noqa: B018


def test_rows_named_by_the_change_log_hash_as_rows_named_by_key() -> None:
    """``changed_digests`` selects the touched rows through the change log; the digests are those of the
    same rows selected by binding their keys, for integer and text keys, inserts, updates and deletes."""
    from scaleenv.world.canon import changed_digests, table_digests

    w, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.state_hash()
    w.conn.execute("UPDATE items SET price = 0.1 + 0.2, label = 'x\"y' WHERE id IN (3, 4)")
    w.conn.execute("DELETE FROM tags WHERE id = 't2'")
    w.conn.execute("UPDATE tags SET meta = '{\"b\": 1}' WHERE id = 't5'")
    w.load_rows("items", [{"id": 100, "label": "new", "price": 2.5, "qty": 1, "flag": True}], log=True)
    touched = w.touched()
    assert touched == {"items": {3, 4, 100}, "tags": {"t2", "t5"}}
    for t, ks in touched.items():
        codec = w._codecs[t]
        got = changed_digests(w.conn, codec, list(ks))
        assert got == table_digests(w.conn, codec, list(ks)) == {
            k: v for k, v in reference_digests(w, t).items() if k in ks}
        assert set(got) == ks - {"t2"}
    before = w.state_hash()
    assert before == full_hash(w)
    w.clear_changes()
    assert w.state_hash() == before
    w.close()


def test_a_full_scan_builds_its_key_map_only_when_a_row_is_looked_up() -> None:
    """A first hash needs the digests' sum and count; the ``{pk: digest}`` map waits for an incremental
    update, and then holds exactly the definition's digests."""
    from scaleenv.world.canon import ScanDigests

    _, snap = base_world()
    clear_hash_cache()
    w = World.from_snapshot(PROP_SPEC, snap)
    first = w.state_hash()
    items = w._base.rows["items"]
    assert type(items) is ScanDigests and items._map is None and len(items) == 39
    w.conn.execute("UPDATE items SET qty = 7 WHERE id = 5")
    assert w.state_hash() != first and items._map is not None
    assert dict(items) == reference_digests(World.from_snapshot(PROP_SPEC, snap), "items")
    assert w.state_hash() == full_hash(w)
    w.close()


@settings(max_examples=60, deadline=None)
@given(digests=st.lists(st.one_of(st.integers(0, 2**128 - 1), st.sampled_from([0, 1, 2**128 - 1, 2**128 - 2])),
                        max_size=300))
def test_a_scans_joined_digests_sum_as_their_integers(digests: list[int]) -> None:
    """``digest_sum`` reads the joined 16-byte digests as one integer and folds it: the same as adding the
    digests one by one modulo 2**128 - 1 (the fold is exact past every power-of-two length)."""
    from scaleenv.world.canon import DIGEST_MOD, digest_sum

    joined = b"".join(d.to_bytes(16, "big") for d in digests)
    assert digest_sum(joined) == sum(digests) % DIGEST_MOD


def test_a_scan_keeps_the_definitions_digests_and_their_sum() -> None:
    """A full scan's sum and its lazily built map hold the definition's digests (16-byte forms read back)."""
    from scaleenv.world.canon import DIGEST_MOD, scan_digests

    w, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    for t in ("items", "tags"):
        ref = reference_digests(w, t)
        scan = scan_digests(w.conn, w._codecs[t])
        assert scan.total == sum(ref.values()) % DIGEST_MOD and len(scan) == len(ref)  # type: ignore[attr-defined]
        assert dict(scan) == ref
    w.close()


def test_a_full_scan_leaves_the_guards_deadline_in_force() -> None:
    """The scans run without the progress handler; it is back as soon as they end, so a statement past
    the world's deadline is still interrupted."""
    import sqlite3
    import time

    _, snap = base_world()
    clear_hash_cache()
    w = World.from_snapshot(PROP_SPEC, snap)
    w.clear_changes()
    w.state_hash()  # a full scan
    w.deadline = time.monotonic() - 1
    with pytest.raises(sqlite3.OperationalError, match="interrupt"):
        w.conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                       "SELECT count(*) FROM (SELECT i FROM n LIMIT 10000000)").fetchone()
    w.close()


# --- encoding 5: a json column's text follows the array (the tail) ------------------------------------------

json_texts = st.one_of(
    st.none(),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
                 lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3), max_leaves=6
                 ).flatmap(lambda v: st.sampled_from([json.dumps(v), json.dumps(v, ensure_ascii=False, indent=1),
                                                       json.dumps(v, separators=(",", ":"))])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metas=st.lists(json_texts, min_size=1, max_size=8), ids=st.lists(texts, min_size=8, max_size=8, unique=True))
def test_a_json_tail_hashes_as_the_definition(metas: list[str | None], ids: list[str]) -> None:
    """Any JSON text (escapes, raw non-ASCII, whitespace) or NULL in the tail column: SQLite's scan, its rows
    named by key and the Python path give the definition's digests."""
    from scaleenv.world import canon

    w = World(PROP_SPEC)
    ids = ids[:len(metas)]
    w.load_rows("tags", [{"id": k, "item_id": None, "meta": m} for k, m in zip(ids, metas, strict=True)])  # stored as given
    ref = reference_digests(w, "tags")
    codec = w._codecs["tags"]
    assert codec.tail == 2
    assert dict(canon.scan_digests(w.conn, codec)) == ref
    assert canon._fast(w.conn, codec, ids) == canon._slow(w.conn, codec, None) == ref
    w.close()


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(), texts, st.floats(allow_nan=False)), min_size=1, max_size=5),
       tail=st.one_of(st.none(), texts, st.just("")), at=st.integers(0, 5))
def test_a_rows_text_parses_back_to_its_values(values: list[Any], tail: str | None, at: int) -> None:
    """The docstring's argument, run: the array is read from the start to its closing bracket, the rest is the
    tail, and the array's length says whether a tail follows (so NULL and an empty text never meet)."""
    from scaleenv.world.canon import canon_value, row_text

    at = min(at, len(values))
    row = [*values[:at], tail, *values[at:]]
    text = row_text(row, tail=at).decode()
    array, end = json.JSONDecoder().raw_decode(text)
    if len(array) == len(row):
        assert end == len(text) and tail is None and array[at] is None
    else:
        assert len(array) == len(row) - 1 and text[end:] == tail
    assert array == [canon_value(v) for i, v in enumerate(row) if i != at or len(array) == len(row)]


def test_a_tail_holding_the_row_separator_takes_the_python_path() -> None:
    """SQLite 3.40 refuses a raw control character in JSON, later versions (JSON5) do not: a tail with 0x1E
    would split into more parts than rows, so the scan leaves the table to the definition's Python path."""
    from scaleenv.world import canon

    _, snap = base_world()
    w = World.from_snapshot(PROP_SPEC, snap)
    with w.trusted():
        w.conn.execute("PRAGMA ignore_check_constraints = ON")
        w.conn.execute("UPDATE tags SET meta = '[\"a' || char(30) || 'b\"]' WHERE id = 't3'")
        w.conn.execute("PRAGMA ignore_check_constraints = OFF")
    codec = w._codecs["tags"]
    with pytest.raises(Exception, match="separator"):
        canon._scan(w.conn, codec)
    ref = reference_digests(w, "tags")
    assert dict(canon.scan_digests(w.conn, codec)) == ref
    assert full_hash(w) == World.from_snapshot(PROP_SPEC, w.snapshot()).state_hash()
    w.close()


def test_the_probe_checks_the_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQL that left the tail inside the array would fail the once-per-process probe (then every table takes
    the Python path), so the fast path is only used where SQLite writes the definition's tail."""
    from scaleenv.world import canon

    monkeypatch.setattr(canon, "_matches", None)
    assert canon.sqlite_matches_definition()
    whole = canon._row_sql
    monkeypatch.setattr(canon, "_row_sql", lambda table, tail: whole(table, None))
    monkeypatch.setattr(canon, "_matches", None)
    assert not canon.sqlite_matches_definition()

"""One in-memory SQLite database per episode."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import sys
import threading
import time
import weakref
from collections import ChainMap, OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scaleenv.errors import WorldError
from scaleenv.formats.domain import DomainSpec, Table
from scaleenv.world.canon import (
    DIGEST_MOD,
    HASH_VERSION,
    ScanDigests,
    TableCodec,
    changed_digests,
    register,
    scan_digests,
    select_by_keys,
    table_digests,
)
from scaleenv.world.ddl import CHANGES_TABLE, META_TABLE, quote_ident, schema_ddl
from scaleenv.world.guard import PROGRESS_STEPS, GuardedConnection, guarded_connect

Cell = str | int | float | bytes | None
"""One value SQLite stores (a row's key among them)."""


_V = TypeVar("_V")


def norm_value(v: _V) -> _V | int:
    """Canonical form of a stored value: integral floats become ints (1.0 == 1)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


@dataclass
class RowChange:
    """One row that differs between two worlds: ``kind`` is added, removed or changed."""

    table: str
    key: Cell
    kind: str
    columns: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "key": self.key,
            "kind": self.kind,
            "columns": {c: [b, a] for c, (b, a) in self.columns.items()},
        }


# --- canonical hashing ----------------------------------------------------------------------
#
# The state hash is a multiset hash: every row gets a 128-bit digest of its canonical text, and a
# table's hash is the sum of its rows' digests modulo 2**128 - 1 (plus the row count). A sum does not
# depend on the order rows were inserted in, and it can be updated in O(changed rows): subtract the
# digests the touched rows had in a known base state and add the digests they have now. The change
# log (``_changes``, filled by triggers) says which rows were touched since that base.
#
# The base state of a world restored from a snapshot is the snapshot itself; its per-row digests are
# computed once and shared by every world restored from the same ``bytes`` object (a small LRU
# cache), so a hash after a few tool calls costs microseconds, not a full scan.

_MOD = DIGEST_MOD  # canon.digest_sum reduces a full scan's digests by the same modulus
_PERSON = f"scaleenv-state{HASH_VERSION}".encode()  # the encoding's version is part of every state hash


def _sum(rows: Mapping[Any, int | None]) -> int:
    """The sum of a table's row digests, mod 2**128 - 1 (a scan's is known; a plain dict of one holds no None)."""
    if type(rows) is ScanDigests:
        return rows.total % _MOD
    if type(rows) is dict:
        return sum(rows.values()) % _MOD
    return sum(v for v in rows.values() if v is not None) % _MOD


class _HashBase:
    """Per-row digests (``rows[table][pk]``) and per-table sums/counts of one world state.

    A base derived from another (:meth:`derive`) shares the parent's digest maps and stores only
    the rows that differ (a removed row maps to ``None``), so a task world built as "base + patch"
    costs its patch, not a copy of the base.
    """

    __slots__ = ("counts", "rows", "sums")

    def __init__(self, rows: Mapping[str, Mapping[Any, int | None]], sums: dict[str, int] | None = None,
                 counts: dict[str, int] | None = None):
        self.rows = rows
        # A plain dict (a full scan's digests) holds no None: sum its values in C, without a generator.
        self.sums = sums if sums is not None else {t: _sum(d) for t, d in rows.items()}
        self.counts = counts if counts is not None else {t: len(d) for t, d in rows.items()}

    def derive(self, now: Mapping[str, Mapping[Any, int | None]]) -> _HashBase:
        """This state with the rows in ``now`` replaced (``None``: the row is gone)."""
        rows = dict(self.rows)
        sums, counts = dict(self.sums), dict(self.counts)
        for t, changed in now.items():
            if t not in rows:
                continue
            old = rows[t]
            s, n = sums[t], counts[t]
            for k, d in changed.items():
                was = old.get(k)
                if was is not None:
                    s -= was
                    n -= 1
                if d is not None:
                    s += d
                    n += 1
            sums[t], counts[t] = s % _MOD, n
            if not changed:
                continue
            if isinstance(old, ChainMap) and len(old.maps) >= 4:  # chains stay short: flatten
                flat = {k: v for k, v in old.items() if v is not None}
                for k, d in changed.items():
                    if d is None:
                        flat.pop(k, None)
                    else:
                        flat[k] = d
                rows[t] = flat
            else:
                rows[t] = ChainMap(dict(changed), old)  # type: ignore[arg-type] # ChainMap only reads its parents
        return _HashBase(rows, sums, counts)


# Digests of known snapshots, so that a world restored from them hashes without a scan. Keyed by
# the bytes object itself (the entry holds it, so an ``is`` check makes the id key safe) and by
# content (sha1 of the bytes, for an equal snapshot arriving as a new object). Bounded by entry
# count and by the bytes the entries keep alive.
_BASE_CACHE: OrderedDict[tuple[Any, ...], tuple[bytes, DomainSpec, _HashBase]] = OrderedDict()
_BASE_CACHE_SIZE = 256
_BASE_CACHE_BYTES = 512 * 10**6
_base_cache_bytes = 0
_BASE_LOCK = threading.Lock()


def _cache_put(key: tuple[Any, ...], snap: bytes, spec: DomainSpec, base: _HashBase) -> None:
    """Insert under ``_BASE_LOCK``; evicts the least recently used entries past the bounds."""
    global _base_cache_bytes
    old = _BASE_CACHE.pop(key, None)
    if old is not None:
        _base_cache_bytes -= len(old[0])
    _BASE_CACHE[key] = (snap, spec, base)
    _base_cache_bytes += len(snap)
    while len(_BASE_CACHE) > 1 and (len(_BASE_CACHE) > _BASE_CACHE_SIZE or _base_cache_bytes > _BASE_CACHE_BYTES):
        _, gone = _BASE_CACHE.popitem(last=False)
        _base_cache_bytes -= len(gone[0])


def clear_hash_cache() -> None:
    """Forget every registered snapshot digest (benchmarks use it to measure cold paths)."""
    global _base_cache_bytes
    with _BASE_LOCK:
        _BASE_CACHE.clear()
        _base_cache_bytes = 0
    _HELD.clear()  # held snapshots too: their holders live on, unregistered


def register_snapshot(world: World, snap: bytes) -> None:
    """Record that ``snap`` holds ``world``'s current, hashed state (no pending changes)."""
    base = world._base
    if base is None or type(snap) is not bytes:
        return
    with _BASE_LOCK:
        _cache_put(("id", id(snap), id(world.spec)), snap, world.spec, base)


class HeldSnapshot:
    """A snapshot (``data``) and the row digests of the state it holds, registered for exactly as long
    as this object lives (:meth:`World.hold_snapshot`).

    Worlds restored from ``data`` while it lives hash without a scan, like a snapshot in the
    process-wide digest cache, but the cache does not keep the bytes alive: a task's snapshot goes
    when its owner drops it (a long run over many tasks does not grow by a snapshot per task)."""

    __slots__ = ("__weakref__", "base", "data", "spec")

    def __init__(self, data: bytes, spec: DomainSpec, base: _HashBase | None):
        self.data, self.spec, self.base = data, spec, base


# id(data), id(spec) -> its holder; an entry lives as long as its holder, which holds ``data``, so the
# ids cannot be reused while the entry exists
_HELD: weakref.WeakValueDictionary[tuple[int, int], HeldSnapshot] = weakref.WeakValueDictionary()


def _lookup(spec: DomainSpec, snap: bytes) -> _HashBase | None:
    """The registered digests of this very bytes object and spec (the cache, then the holders)."""
    by_id = ("id", id(snap), id(spec))
    with _BASE_LOCK:
        hit = _BASE_CACHE.get(by_id)
        if hit is not None and hit[0] is snap and hit[1] is spec:
            _BASE_CACHE.move_to_end(by_id)
            return hit[2]
    held = _HELD.get((id(snap), id(spec)))
    if held is not None and held.data is snap and held.spec is spec:
        return held.base
    return None


class SnapshotKeys:
    """Which rows a registered snapshot holds, read from its row digests (no database, no SQL).

    Answers :meth:`World.has_row` for the snapshot's state: the digests are keyed by the stored
    primary-key values, as the change log records them."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Mapping[str, Mapping[Any, int | None]]):
        self._rows = rows

    def has_row(self, table: str, key: object) -> bool:
        """Whether the snapshot has a row with primary key ``key`` in ``table``."""
        rows = self._rows.get(table)
        return rows is not None and rows.get(key) is not None


def snapshot_keys(spec: DomainSpec, snap: bytes) -> SnapshotKeys | None:
    """The rows of ``snap`` when its digests are registered for this very bytes object and spec (a
    snapshot taken of a hashed world, :meth:`World.snapshot`), else None."""
    base = _lookup(spec, snap)
    return None if base is None else SnapshotKeys(base.rows)


@dataclass(frozen=True)
class _SpecSetup:
    """What every world of one spec needs, computed once per spec object and shared."""

    tables: dict[str, Table]
    order: list[str]
    codecs: dict[str, TableCodec]
    pk_index: dict[str, int]
    columns: dict[str, list[str]]
    content_hash: str
    inserts: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)
    """INSERT statements by table and column set, made on first use."""


_SETUP: dict[int, tuple[DomainSpec, _SpecSetup]] = {}
_SETUP_LOCK = threading.Lock()


def _setup(spec: DomainSpec) -> _SpecSetup:
    hit = _SETUP.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    tables = {t.name: t for t in spec.tables}
    setup = _SpecSetup(
        tables=tables,
        order=sorted(tables),
        codecs={t.name: TableCodec(t) for t in spec.tables},
        pk_index={t.name: [c.name for c in t.columns].index(t.primary_key) if t.column(t.primary_key) else 0
                  for t in spec.tables},
        columns={t.name: [c.name for c in t.columns] for t in spec.tables},
        content_hash=spec.content_hash(),
    )
    with _SETUP_LOCK:
        if len(_SETUP) > 256:
            _SETUP.clear()
        _SETUP[id(spec)] = (spec, setup)  # holds the spec, so its id cannot be reused while cached
    return setup


# Closed worlds hand their connection back here, per schema; a world restored from a snapshot takes
# one. SQLite keeps a connection's parsed schema and compiled statements across deserialize() when
# the schema is the same, so a pooled connection skips the ~0.4 ms schema parse (and the statement
# compiles) that the first query on a brand-new connection pays.
_POOL: dict[str, list[sqlite3.Connection]] = {}
_POOL_PER_SCHEMA = 8
_POOL_LOCK = threading.RLock()  # re-entrant: a finalizer (World.__del__) may run while it is held
_CLOSED = sqlite3.connect(":memory:")
_LONE_REFS = sys.getrefcount(_CLOSED)  # a connection held by one name (its statement cache holds it too)
_CLOSED.close()  # what a closed world's ``conn`` is: any use raises sqlite3.ProgrammingError
_PROBE = guarded_connect()
_LONE_GUARDED_REFS = sys.getrefcount(_PROBE)  # the guard's own hooks hold a guarded connection too
_PROBE.close()
del _PROBE


def clear_connection_pool() -> None:
    """Close every pooled connection (benchmarks use it to measure a brand-new connection)."""
    with _POOL_LOCK:
        conns = [c for free in _POOL.values() for c in free]
        _POOL.clear()
    for c in conns:
        c.close()


def _pool_take(key: str) -> sqlite3.Connection | None:
    with _POOL_LOCK:
        free = _POOL.get(key)
        return free.pop() if free else None


def _pool_give(key: str, conn: sqlite3.Connection) -> bool:
    """Keep ``conn`` for reuse if it is clean (no transaction, no temp objects, nothing attached)."""
    try:
        if conn.in_transaction:
            return False
        if conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0]:
            return False
        if len(conn.execute("PRAGMA database_list").fetchall()) > 2:
            return False
        if isinstance(conn, GuardedConnection):  # the guard stays; only this world's hooks go
            conn.owner_deadline = None
            conn.extra_authorizer = None  # statements compiled under it passed stricter rules: they stay
            conn.building = False
            if not conn.guard_installed:  # re-installing expires every compiled statement: only when needed
                conn.set_authorizer(conn.authorize)
        else:
            conn.set_progress_handler(None, 0)
            conn.set_authorizer(None)
    except sqlite3.Error:
        return False
    with _POOL_LOCK:
        free = _POOL.setdefault(key, [])
        if len(free) >= _POOL_PER_SCHEMA:
            return False
        free.append(conn)
    return True


def _weak_deadline(ref: weakref.ReferenceType[World]) -> float | None:
    """The tool deadline of the world ``ref`` points at (None once it is gone)."""
    world = ref()
    return None if world is None else world.deadline


class World:
    """An in-memory SQLite world built from a :class:`DomainSpec`.

    Writes go through tools; every insert/update/delete is logged by triggers into ``_changes``
    so that a reward (and the incremental state hash) only inspects the touched rows.
    """

    def __init__(self, spec: DomainSpec, conn: sqlite3.Connection | None = None):
        self.spec = spec
        setup = self._setup = _setup(spec)
        self._tables = setup.tables
        self._order = setup.order
        self._codecs = setup.codecs
        self._pk_index = setup.pk_index
        if conn is None:
            conn = self._connect()
            conn.building = True  # the guard lets the world's own DDL through, nothing else
            try:
                for stmt in schema_ddl(spec):
                    conn.execute(stmt)
                conn.execute(f"INSERT INTO {META_TABLE} VALUES ('clock', ?)", (spec.clock,))
            except sqlite3.Error as e:
                raise WorldError(f"cannot build schema for domain {spec.name!r}: {e}") from e
            finally:
                conn.building = False
        self._conn = conn
        self._snap: bytes | None = None
        self._base: _HashBase | None = None
        self._parked = False  # park(): content dropped until restore()
        self._kept: bytes | None = None  # suspend(): the content while no connection holds it
        self._kept_mark = -1  # the connection's total_changes when it took the kept content back
        # The connection's total_changes (which counts every row written, triggers included) right
        # after the change log was emptied: while it stays equal, the log is empty without a query.
        self._clean_mark = -1
        self._adopt(conn)
        self.deadline: float | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The world's SQLite connection (a suspended world takes one again here, transparently)."""
        conn = self._conn
        if conn is _CLOSED and self._kept is not None:
            return self._resume()
        return conn

    @conn.setter
    def conn(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _adopt(self, conn: sqlite3.Connection) -> None:
        self._clean_mark = -1
        if isinstance(conn, GuardedConnection):
            # a weak reference: the connection must not keep its world alive (no reference cycle), so a
            # world nobody holds is freed at once and its connection goes back to the pool (__del__)
            conn.owner_deadline = functools.partial(_weak_deadline, weakref.ref(self))
        else:  # a caller's own connection: at least bound its statements by the tool deadline
            conn.set_progress_handler(self._over_deadline, PROGRESS_STEPS)
            register(conn)  # guarded connections have the hash's SQL function from guarded_connect

    @staticmethod
    def _connect() -> GuardedConnection:
        return guarded_connect()

    def _deadline_of(self) -> float | None:
        return self.deadline

    @classmethod
    def from_snapshot(cls, spec: DomainSpec, data: bytes) -> World:
        _check_snapshot(spec, data)
        conn = _pool_take(_setup(spec).content_hash) or cls._connect()
        try:
            _deserialize(conn, data)
        except (sqlite3.Error, TypeError, ValueError, OverflowError) as e:
            conn.close()
            raise WorldError(f"cannot restore a world of domain {spec.name!r} from a snapshot: {e}") from e
        world = cls(spec, conn)
        world._snap = data if type(data) is bytes else None
        return world

    def __del__(self) -> None:
        conn = self.__dict__.get("_conn")
        if conn is None or conn is _CLOSED:
            return
        try:
            # Only a connection nobody else holds is reused (this world's dict and the local are the
            # one reference more than a lone connection has); one still referenced elsewhere
            # (``conn = World(spec).conn``, a live cursor) is left alone.
            lone = _LONE_GUARDED_REFS if isinstance(conn, GuardedConnection) else _LONE_REFS
            if sys.getrefcount(conn) <= lone + 1 and _pool_give(self._setup.content_hash, conn):
                self._conn = _CLOSED
        except Exception:  # noqa: BLE001, S110 - finalizers must not raise (e.g. at interpreter exit)
            pass

    def _over_deadline(self) -> int:
        """The progress handler of a connection the caller made: a non-zero answer interrupts the
        running statement. The tool runtime sets ``deadline`` for the length of one call, so runaway
        SQL cannot hang an episode (guarded connections also bound every statement; see guard.py)."""
        return 1 if self.deadline is not None and time.monotonic() > self.deadline else 0

    # --- data -----------------------------------------------------------------
    @property
    def table_names(self) -> list[str]:
        return self._order

    def primary_key(self, table: str) -> str:
        return self._tables[table].primary_key

    @contextmanager
    def trusted(self) -> Iterator[None]:
        """Build-time code only (seeding, loading): the connection guard lets pragmas such as
        ``defer_foreign_keys`` through. Never entered while an agent's tool call runs."""
        conn = self.conn
        if not isinstance(conn, GuardedConnection):
            yield
            return
        before = conn.building
        conn.building = True
        try:
            yield
        finally:
            conn.building = before

    def load_rows(self, table: str, rows: Iterable[Mapping[str, Any]], *, log: bool = False) -> int:
        """Insert rows (dicts keyed by column). Unknown tables/columns raise WorldError.

        All or nothing: if any row is rejected, none of them is inserted. With ``log=False`` (the
        default) the change log is cleared afterwards, so the loaded rows become the baseline.
        """
        return self.load_tables([(table, rows)], log=log)

    def load_tables(self, tables: Iterable[tuple[str, Iterable[Mapping[str, Any]]]], *, log: bool = False) -> int:
        """:meth:`load_rows` for several tables in order, all or nothing across them (one savepoint)."""
        conn = self.conn
        table = ""
        n = 0
        try:
            conn.execute("SAVEPOINT load")
            for table, rows in tables:
                n += self._insert(conn, table, rows)
            if not log:
                self.clear_changes()
            conn.execute("RELEASE load")
        except (sqlite3.Error, WorldError, TypeError, ValueError, OverflowError) as e:
            conn.execute("ROLLBACK TO load")
            conn.execute("RELEASE load")
            if isinstance(e, WorldError):
                raise
            raise WorldError(f"cannot load rows into {table}: {e}") from e
        return n

    def _insert(self, conn: sqlite3.Connection, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        t = self._tables.get(table)
        if t is None:
            raise WorldError(f"unknown table {table!r}")
        names = self._setup.columns[table]
        known = set(names)
        cols_for: dict[tuple[Any, ...], tuple[str, ...]] = {}
        pending: list[list[Any]] = []
        current: tuple[str, ...] | None = None
        n = 0
        for row in rows:
            if not isinstance(row, Mapping):
                raise WorldError(f"{table}: row {n} is not a mapping of column -> value")
            rk = tuple(row)
            cols = cols_for.get(rk)
            if cols is None:
                extra = set(rk) - known
                if extra:
                    raise WorldError(f"{table}: unknown column(s) {sorted(map(str, extra))}")
                cols = cols_for[rk] = tuple(c for c in names if c in row)
            if cols != current:
                if pending:
                    conn.executemany(self._insert_sql(table, current), pending)  # type: ignore[arg-type]
                    pending = []
                current = cols
            pending.append([_to_sql(row[c]) for c in cols])
            n += 1
        if pending:
            conn.executemany(self._insert_sql(table, current), pending)  # type: ignore[arg-type]
        return n

    def _insert_sql(self, table: str, cols: tuple[str, ...]) -> str:
        cache = self._setup.inserts
        sql = cache.get((table, cols))
        if sql is None:
            sql = cache[(table, cols)] = (f"INSERT INTO {quote_ident(table)} ({', '.join(map(quote_ident, cols))}) "
                                          f"VALUES ({', '.join('?' * len(cols))})")
        return sql

    def rows(self, table: str) -> list[dict[str, Any]]:
        pk = self.primary_key(table)
        cur = self.conn.execute(f"SELECT * FROM {quote_ident(table)} ORDER BY {quote_ident(pk)}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def row(self, table: str, key: object) -> dict[str, Any] | None:
        pk = self.primary_key(table)
        cur = self.conn.execute(f"SELECT * FROM {quote_ident(table)} WHERE {quote_ident(pk)} = ?", (key,))
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r, strict=True))

    def has_row(self, table: str, key: object) -> bool:
        """Whether ``table`` has a row with primary key ``key``."""
        pk = self.primary_key(table)
        return self.conn.execute(f"SELECT 1 FROM {quote_ident(table)} WHERE {quote_ident(pk)} = ?",
                                 (key,)).fetchone() is not None

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {quote_ident(table)}").fetchone()[0])

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        return {t: self.rows(t) for t in self._order}

    @property
    def clock(self) -> str:
        """The world's fixed logical clock (``now`` for generated values)."""
        return str(self.conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'clock'").fetchone()[0])

    # --- snapshots --------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole database as bytes (``sqlite3.Connection.serialize``).

        A world whose digests are known and which has no pending changes registers them for the
        snapshot, so worlds restored from it later hash without a scan.
        """
        data = self.conn.serialize()
        if self._base is not None and self._log_empty():
            register_snapshot(self, data)
        return data

    def hold_snapshot(self) -> HeldSnapshot:
        """:meth:`snapshot`, its digests registered only while the returned holder lives (a world whose
        digests are known and which has no pending changes; otherwise the holder registers nothing)."""
        data = self.conn.serialize()
        base = self._base if self._base is not None and self._log_empty() else None
        held = HeldSnapshot(data, self.spec, base)
        if base is not None:
            _HELD[(id(data), id(self.spec))] = held
        return held

    def restore(self, data: bytes) -> None:
        """Reset to a snapshot without re-parsing anything (``deserialize``); a parked world takes a
        connection again first."""
        _check_snapshot(self.spec, data)
        self._kept = None
        self._clean_mark = -1  # the snapshot brings its own change log
        if self._parked:
            conn = _pool_take(self._setup.content_hash) or self._connect()
            self._adopt(conn)
            self._conn, self._parked = conn, False
        try:
            _deserialize(self.conn, data)
        except (sqlite3.Error, TypeError, ValueError, OverflowError) as e:
            raise WorldError(f"cannot restore a world of domain {self.spec.name!r} from a snapshot: {e}") from e
        self._snap = data if type(data) is bytes else None
        self._base = None

    def clone(self) -> World:
        return World.from_snapshot(self.spec, self.snapshot())

    # --- change log -------------------------------------------------------------
    def touched(self) -> dict[str, set[Any]]:
        """Primary keys touched by writes since the change log was last cleared."""
        out: dict[str, set[Any]] = {}
        conn = self.conn
        if conn.total_changes == self._clean_mark:
            return out
        for tbl, pk in conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}"):
            out.setdefault(tbl, set()).add(pk)
        return out

    def clear_changes(self) -> None:
        """Forget the change log: the current state becomes the baseline.

        When the digests of the previous baseline are known, the new baseline's are derived from
        them by re-hashing only the touched rows (no full scan later).
        """
        base = self._base
        if base is None and self._snap is not None:
            base = self._cached_base(self._snap)
        if base is not None:
            touched = self.touched()
            if touched:
                base = base.derive({t: self._digests_now(t, ks) for t, ks in touched.items() if t in self._tables})
        conn = self.conn
        conn.execute(f"DELETE FROM {CHANGES_TABLE}")
        self._clean_mark = conn.total_changes
        self._snap = None
        self._base = base

    def _log_empty(self) -> bool:
        conn = self.conn
        if conn.total_changes == self._clean_mark:
            return True
        return conn.execute(f"SELECT 1 FROM {CHANGES_TABLE} LIMIT 1").fetchone() is None

    def _digests_now(self, table: str, keys: Iterable[Any]) -> dict[Any, int | None]:
        """Current digests of ``keys`` (the table's keys in the change log) in ``table``; ``None`` for the
        keys that have no row now."""
        ks = list(keys)
        now: dict[Any, int | None] = dict.fromkeys(ks)
        now.update(changed_digests(self.conn, self._codecs[table], ks))
        return now

    def _forget_base(self) -> None:
        self._snap = None
        self._base = None

    def prime_digests(self) -> None:
        """For a world restored from a snapshot: find (or compute once) that snapshot's row digests,
        so that later patches and writes are hashed row by row instead of by a full scan."""
        if self._base is None and self._snap is not None:
            self._hash_base()

    # --- hash and diff ------------------------------------------------------------
    def state_hash(self) -> str:
        """Canonical content hash: independent of insertion order and of 1 vs 1.0.

        Incremental: after the first call (or once per distinct snapshot), only the rows touched
        since the base state are re-read.
        """
        base = self._hash_base()
        sums, counts = base.sums, base.counts
        touched = self.touched()
        if touched:
            sums, counts = dict(sums), dict(counts)
            for t, ks in touched.items():
                if t not in self._tables:
                    continue
                old = base.rows[t]
                now = changed_digests(self.conn, self._codecs[t], list(ks))
                s, n = sums[t], counts[t]
                for k in ks:
                    d = old.get(k)
                    if d is not None:
                        s -= d
                        n -= 1
                    d = now.get(k)
                    if d is not None:
                        s += d
                        n += 1
                sums[t], counts[t] = s % _MOD, n
        h = hashlib.blake2b(digest_size=16, person=_PERSON)
        for t in self._order:
            h.update(f"\x00{t}\x00{counts[t]}\x00{sums[t]:032x}".encode())
        return h.hexdigest()

    def _hash_base(self) -> _HashBase:
        if self._base is not None:
            return self._base
        snap = self._snap
        if snap is None:
            # The current state becomes the base; later changes are in the change log.
            self._base = self._compute_base()
            return self._base
        base = self._cached_base(snap)
        if base is None:
            # Content key: a ~2 ms digest that still beats re-reading every row when an equal
            # snapshot arrives as a new object.
            by_content = ("content", hashlib.sha1(snap).digest(), self._setup.content_hash)
            with _BASE_LOCK:
                hit = _BASE_CACHE.get(by_content)
            if hit is not None:
                base = hit[2]
            elif self._log_empty():
                base = self._compute_base()  # this world still holds exactly the snapshot
            else:
                other = World.from_snapshot(self.spec, snap)
                try:
                    base = other._compute_base()
                finally:
                    other.close()
            with _BASE_LOCK:
                _cache_put(by_content, snap, self.spec, base)
                _cache_put(("id", id(snap), id(self.spec)), snap, self.spec, base)
        self._base = base
        return base

    def _cached_base(self, snap: bytes) -> _HashBase | None:
        """The registered digests of this very bytes object, if any (no hashing)."""
        return _lookup(self.spec, snap)

    def _compute_base(self) -> _HashBase:
        conn = self.conn
        if not isinstance(conn, GuardedConnection):
            return _HashBase({t: scan_digests(conn, self._codecs[t]) for t in self._order})
        # The scans are the world's own SQL, one pass over each table: the guard's progress handler (a
        # Python call every PROGRESS_STEPS VM steps, about 2.5 % of a cold hash) is off while they run.
        conn.set_progress_handler(None, 0)
        try:
            return _HashBase({t: scan_digests(conn, self._codecs[t]) for t in self._order})
        finally:
            conn.set_progress_handler(conn.progress, PROGRESS_STEPS)

    def _digests(self, table: str, keys: list[Any] | None = None) -> dict[Any, int]:
        """``{pk: digest}`` for every row of ``table`` (or only the rows with those keys): the XXH3-128
        of the row's canonical text (``world/canon.py``)."""
        return table_digests(self.conn, self._codecs[table], keys)

    def _select(self, table: str, keys: list[Any] | None, q: str | None = None) -> Iterable[tuple[Any, ...]]:
        q = q or f"SELECT * FROM {quote_ident(table)}"
        if keys is None:
            return self.conn.execute(q)
        return select_by_keys(self.conn, q, self._codecs[table].pk_sql, keys)

    def diff(self, other: World, keys: Mapping[str, Iterable[Any]] | None = None) -> list[RowChange]:
        """Rows of ``other`` that differ from ``self`` (self = before, other = after).

        With ``keys`` only those primary keys are compared (the fast path used by rewards).
        """
        out: list[RowChange] = []
        tables = self._order if keys is None else sorted(t for t in keys if t in self._tables)
        for t in tables:
            if keys is None:
                a, b = self._keyed(t), other._keyed(t)
                all_keys = a.keys() | b.keys()
            else:
                ks = list(keys[t])
                a, b = self._keyed(t, ks), other._keyed(t, ks)
                all_keys = a.keys() | b.keys()
            for k in sorted(all_keys, key=_sort_key):
                ra, rb = a.get(k), b.get(k)
                if ra is None:
                    out.append(RowChange(t, k, "added", after=rb))
                elif rb is None:
                    out.append(RowChange(t, k, "removed", before=ra))
                else:
                    cols = {c: (v, rb.get(c)) for c, v in ra.items() if norm_value(v) != norm_value(rb.get(c))}
                    if cols:
                        out.append(RowChange(t, k, "changed", cols, before=ra, after=rb))
        return out

    def _keyed(self, table: str, keys: list[Any] | None = None) -> dict[Any, dict[str, Any]]:
        names = [c.name for c in self._tables[table].columns]
        i = names.index(self.primary_key(table))
        return {r[i]: dict(zip(names, r, strict=True)) for r in self._select(table, keys)}

    def park(self) -> None:
        """Hand the connection to the next world of this schema while this one waits, dropping the
        content: until the next :meth:`restore` (which takes a connection again) the world is as
        unusable as a closed one. Idle episodes park, so that a long run reuses warm connections
        (schema parsed, statements compiled) instead of opening new ones."""
        if self._conn is _CLOSED:
            return
        self._give_back()
        self._parked = True
        self._snap = self._base = None

    def suspend(self) -> None:
        """Hand the connection on but keep the content: the next use of :attr:`conn` takes a connection
        again and restores it (one ``deserialize``), hashes and change log included. A world suspended
        again without writes in between keeps the bytes it had (no ``serialize``)."""
        conn = self._conn
        if conn is _CLOSED:
            return
        if self._kept is None or conn.total_changes != self._kept_mark:
            self._kept = conn.serialize()
        self._give_back()

    def _resume(self) -> sqlite3.Connection:
        with _POOL_LOCK:  # two threads using a suspended world at once resume it once
            if self._conn is not _CLOSED or self._kept is None:
                return self._conn
            conn = _pool_take(self._setup.content_hash) or self._connect()
            try:
                _deserialize(conn, self._kept)
            except sqlite3.Error as e:
                conn.close()
                raise WorldError(f"cannot resume a suspended world of domain {self.spec.name!r}: {e}") from e
            self._adopt(conn)
            self._kept_mark = conn.total_changes
            self._conn = conn
            return conn

    def _give_back(self) -> None:
        conn, self._conn = self._conn, _CLOSED
        if conn is not _CLOSED and not _pool_give(self._setup.content_hash, conn):
            conn.close()

    def close(self) -> None:
        """Release the world. Its connection may be reused by a later world of the same spec; this
        world's ``conn`` becomes a closed connection, so a stale use fails as it always did."""
        self._parked = False
        self._kept = None
        self._give_back()


_SQLITE_HEADER = b"SQLite format 3\x00"


def _deserialize(conn: sqlite3.Connection, data: bytes) -> None:
    """``deserialize`` runs an internal ``ATTACH ... AS main``, which the guard otherwise refuses.

    Then one statement reads the schema, outside any savepoint: in SQLite 3.40, when the first
    statement after ``deserialize`` is a compiled one reused inside a savepoint, ``ROLLBACK TO`` that
    savepoint empties the whole database (a failed tool call or load after a reset would wipe the world).
    """
    if isinstance(conn, GuardedConnection):
        conn.building = True
        try:
            conn.deserialize(data)
        finally:
            conn.building = False
    else:
        conn.deserialize(data)
    conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()


def _check_snapshot(spec: DomainSpec, data: object) -> None:
    """Reject what is not an SQLite image before it replaces a world's database."""
    if not isinstance(data, bytes | bytearray | memoryview) or bytes(data[:16]) != _SQLITE_HEADER:
        raise WorldError(f"not a snapshot of a {spec.name!r} world (expected the bytes of World.snapshot())")


def _sort_key(k: object) -> tuple[int, float | str]:
    if isinstance(k, int | float) and not isinstance(k, bool):
        return (0, k)
    return (1, str(k))


def _to_sql(v: object) -> object:
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return int(v)
    return v

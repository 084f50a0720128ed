"""One in-memory SQLite database per episode."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaleenv.errors import WorldError
from scaleenv.spec.models import DomainSpec
from scaleenv.world.ddl import CHANGES_TABLE, META_TABLE, quote_ident, schema_ddl


def norm_value(v: Any) -> Any:
    """Canonical form of a stored value: integral floats become ints (1.0 == 1)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


@dataclass
class RowChange:
    """One row that differs between two worlds: ``kind`` is added, removed or changed."""

    table: str
    key: Any
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


class World:
    """An in-memory SQLite world built from a :class:`DomainSpec`.

    Writes go through tools; every insert/update/delete is logged by triggers into ``_changes``
    so that a reward can compare only the touched rows.
    """

    def __init__(self, spec: DomainSpec, conn: sqlite3.Connection | None = None):
        self.spec = spec
        self._tables = {t.name: t for t in spec.tables}
        self._order = sorted(self._tables)
        if conn is None:
            conn = self._connect()
            try:
                for stmt in schema_ddl(spec):
                    conn.execute(stmt)
                conn.execute(f"INSERT INTO {META_TABLE} VALUES ('clock', ?)", (spec.clock,))
            except sqlite3.Error as e:
                raise WorldError(f"cannot build schema for domain {spec.name!r}: {e}") from e
        self.conn = conn

    @staticmethod
    def _connect() -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    @classmethod
    def from_snapshot(cls, spec: DomainSpec, data: bytes) -> World:
        conn = cls._connect()
        conn.deserialize(data)
        return cls(spec, conn)

    # --- data -----------------------------------------------------------------
    @property
    def table_names(self) -> list[str]:
        return self._order

    def primary_key(self, table: str) -> str:
        return self._tables[table].primary_key

    def load_rows(self, table: str, rows: Iterable[Mapping[str, Any]], *, log: bool = False) -> int:
        """Insert rows (dicts keyed by column). Unknown tables/columns raise WorldError."""
        t = self._tables.get(table)
        if t is None:
            raise WorldError(f"unknown table {table!r}")
        names = [c.name for c in t.columns]
        known = set(names)
        n = 0
        try:
            self.conn.execute("SAVEPOINT load")
            for row in rows:
                extra = set(row) - known
                if extra:
                    raise WorldError(f"{table}: unknown column(s) {sorted(extra)}")
                cols = [c for c in names if c in row]
                sql = (
                    f"INSERT INTO {quote_ident(table)} ({', '.join(map(quote_ident, cols))}) "
                    f"VALUES ({', '.join('?' * len(cols))})"
                )
                self.conn.execute(sql, [_to_sql(row[c]) for c in cols])
                n += 1
            if not log:
                self.conn.execute(f"DELETE FROM {CHANGES_TABLE}")
            self.conn.execute("RELEASE load")
        except (sqlite3.Error, WorldError) as e:
            self.conn.execute("ROLLBACK TO load")
            self.conn.execute("RELEASE load")
            if isinstance(e, WorldError):
                raise
            raise WorldError(f"cannot load rows into {table}: {e}") from e
        return n

    def rows(self, table: str) -> list[dict[str, Any]]:
        pk = self.primary_key(table)
        cur = self.conn.execute(f"SELECT * FROM {quote_ident(table)} ORDER BY {quote_ident(pk)}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def row(self, table: str, key: Any) -> dict[str, Any] | None:
        pk = self.primary_key(table)
        cur = self.conn.execute(f"SELECT * FROM {quote_ident(table)} WHERE {quote_ident(pk)} = ?", (key,))
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r, strict=True))

    def count(self, table: str) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM {quote_ident(table)}").fetchone()[0]

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        return {t: self.rows(t) for t in self._order}

    @property
    def clock(self) -> str:
        return self.conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'clock'").fetchone()[0]

    # --- snapshots --------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole database as bytes (``sqlite3.Connection.serialize``)."""
        return self.conn.serialize()

    def restore(self, data: bytes) -> None:
        """Reset to a snapshot without re-parsing anything (``deserialize``)."""
        self.conn.deserialize(data)

    def clone(self) -> World:
        return World.from_snapshot(self.spec, self.snapshot())

    # --- change log -------------------------------------------------------------
    def touched(self) -> dict[str, set[Any]]:
        """Primary keys touched by writes since the last snapshot was taken clean."""
        out: dict[str, set[Any]] = {}
        for tbl, pk in self.conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}"):
            out.setdefault(tbl, set()).add(pk)
        return out

    def clear_changes(self) -> None:
        self.conn.execute(f"DELETE FROM {CHANGES_TABLE}")

    # --- hash and diff ------------------------------------------------------------
    def state_hash(self) -> str:
        """Canonical content hash: independent of insertion order and of 1 vs 1.0."""
        h = hashlib.blake2b(digest_size=16)
        for t in self._order:
            h.update(b"\x00T" + t.encode())
            pk = quote_ident(self.primary_key(t))
            for row in self.conn.execute(f"SELECT * FROM {quote_ident(t)} ORDER BY {pk}"):
                h.update(repr(tuple(map(norm_value, row))).encode())
        return h.hexdigest()

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
                all_keys = set(ks)
            for k in sorted(all_keys, key=_sort_key):
                ra, rb = a.get(k), b.get(k)
                if ra is None and rb is None:
                    continue
                if ra is None:
                    out.append(RowChange(t, k, "added", after=rb))
                elif rb is None:
                    out.append(RowChange(t, k, "removed", before=ra))
                else:
                    cols = {
                        c: (ra[c], rb[c]) for c in ra if norm_value(ra[c]) != norm_value(rb.get(c))
                    }
                    if cols:
                        out.append(RowChange(t, k, "changed", cols, before=ra, after=rb))
        return out

    def _keyed(self, table: str, keys: list[Any] | None = None) -> dict[Any, dict[str, Any]]:
        pk = self.primary_key(table)
        q = f"SELECT * FROM {quote_ident(table)}"
        if keys is None:
            cur = self.conn.execute(q)
        else:
            if not keys:
                return {}
            cur = self.conn.execute(
                f"{q} WHERE {quote_ident(pk)} IN (SELECT value FROM json_each(?))", (_json_keys(keys),)
            )
        names = [d[0] for d in cur.description]
        i = names.index(pk)
        return {r[i]: dict(zip(names, r, strict=True)) for r in cur}

    def close(self) -> None:
        self.conn.close()


def _json_keys(keys: list[Any]) -> str:
    import json

    return json.dumps(keys)


def _sort_key(k: Any) -> tuple[int, Any]:
    return (0, k) if isinstance(k, int | float) else (1, str(k))


def _to_sql(v: Any) -> Any:
    if isinstance(v, dict | list):
        import json

        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return int(v)
    return v

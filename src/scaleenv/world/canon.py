"""The canonical encoding of a row for the state hash (encoding version :data:`HASH_VERSION`).

A row's canonical text is, by definition, :func:`row_text`: the JSON array of its values in column
order (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``), each value in canonical form
(:func:`canon_value`): integers, text and NULL as they are; a real that is integral (below 2**53) as that
integer (``1.0 == 1``); a real ``x`` equal to ``n / 1e6`` for ``n = trunc(x * 1e6)`` (or the integer one
further from zero), with ``|x| < 2**32``, as the string ``"<n>e-6"`` (prices, rates: exact, and computed
with IEEE operations that every platform rounds alike); any other real as the string of its ``repr``;
a blob as ``{"blob": HEX}``. A row's digest is the XXH3-128 (seed 0) of that text, as an unsigned
integer (``xxhash.xxh3_128_intdigest``).

Why a non-cryptographic digest is enough: no reward reads the state hash. An episode is scored by
comparing the touched rows themselves with the task's expected world (``World.diff``), so an agent
whose tool calls forged a colliding row would gain nothing. The hashes check that a stored task still
replays to the states its build recorded (the rows and chains are the build's own, not an agent's)
and fingerprint a state for callers; against accidents, a 128-bit digest summed over n rows collides
with probability about n**2 / 2**128. XXH3 returns that integer from C directly, at a fifteenth of the
cost of BLAKE2b-128 plus ``int.from_bytes`` per row (measured: 1.1 ms against 18 ms for 7,412 rows).

Computing that text row by row in Python costs most of a full scan, so :func:`table_digests` has SQLite
build it instead: one ``json_array`` per row (only non-integral reals call back into Python, for their
``repr``) and one aggregate per table that returns every row's text in a single value, split here and
hashed in one ``map``. Only real columns get the canonical-real expression: the schema's CHECK constraints
keep reals out of every other column. SQLite's ``json_array`` writes integers, NULL and text exactly as
``json.dumps`` does; :func:`sqlite_matches_definition` checks that on probe values once per process, and where it does
not hold (another SQLite) or a table's values cannot take the fast path (a blob, a real primary key, a
table wider than the guard's function-argument limit), the rows are encoded in Python by the definition.
Both paths give the same bytes, so hashes agree across machines, executors and runs.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from xxhash import xxh3_128_intdigest

from scaleenv.formats.domain import Table
from scaleenv.world.ddl import CHANGES_TABLE, quote_ident

HASH_VERSION = 3
"""Version of the row encoding and of the way row digests combine into a state hash. Version 1 was the
BLAKE2b-128 of ``repr`` of the row tuple; 2 the BLAKE2b-128 of this module's JSON text; 3 the XXH3-128
of that text. Recorded task hashes are of one version: a universe built with another one is refused on
load (rebuild it)."""

REAL_FUNCTION = "_scaleenv_canon_real"
"""The SQL function (registered on world connections) that writes a non-integral real as its ``repr``."""

_INT_LIMIT = 1 << 53  # every integral double below this is exactly an int64 and back
_INT_LIMIT_SQL = "9007199254740992.0"
_MICRO_LIMIT = 1 << 32  # below this, x * 1e6 and its truncation are exact integers in a double
_MICRO_LIMIT_SQL = "4294967296.0"
_ROW_SEP = b"\x1e"  # never raw in json_array's text: JSON escapes every character below 0x20
_MAX_ARGS = 64  # the guard's SQLITE_LIMIT_FUNCTION_ARG: wider tables take the Python path
_SCAN_LENGTH = 1_000_000_000  # the value-length limit while a table's text is aggregated (SQLite's maximum)


def canon_value(v: Any) -> Any:
    """A stored value in canonical form (see the module docstring)."""
    if isinstance(v, float):
        if v.is_integer() and -_INT_LIMIT < v < _INT_LIMIT:
            return int(v)
        if -_MICRO_LIMIT < v < _MICRO_LIMIT:
            t = int(v * 1e6)
            for n in (t, t + 1 if v > 0 else t - 1):
                if n / 1e6 == v:
                    return f"{n}e-6"
        return repr(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return {"blob": bytes(v).hex()}
    return v


def row_text(row: Iterable[Any]) -> bytes:
    """The canonical text of a row, by definition (UTF-8)."""
    return json.dumps([canon_value(v) for v in row], ensure_ascii=False, separators=(",", ":")).encode()


def row_digest(text: bytes) -> int:
    """The 128-bit digest of a row's canonical text (XXH3-128, seed 0, as an unsigned integer)."""
    return xxh3_128_intdigest(text)


def _real_repr(v: Any) -> Any:
    return repr(v) if isinstance(v, float) else v


def register(conn: sqlite3.Connection) -> None:
    """Make :data:`REAL_FUNCTION` available on ``conn`` (once per connection: re-registering a function
    expires the connection's compiled statements)."""
    conn.create_function(REAL_FUNCTION, 1, _real_repr, deterministic=True)


def _real_sql(col: str) -> str:
    """A real column's value in canonical form, in SQL (the branches of :func:`canon_value`, in order)."""
    q = quote_ident(col)
    n = f"CAST({q} * 1000000.0 AS INTEGER)"
    n2 = f"({n} + iif({q} > 0, 1, -1))"
    small = f"abs({q}) < {_MICRO_LIMIT_SQL}"
    return (f"CASE WHEN typeof({q}) = 'real' THEN CASE "
            f"WHEN {q} = CAST({q} AS INTEGER) AND abs({q}) < {_INT_LIMIT_SQL} THEN CAST({q} AS INTEGER) "
            f"WHEN {small} AND {n} / 1000000.0 = {q} THEN {n} || 'e-6' "
            f"WHEN {small} AND {n2} / 1000000.0 = {q} THEN {n2} || 'e-6' "
            f"ELSE {REAL_FUNCTION}({q}) END ELSE {q} END")


class TableCodec:
    """The SQL of one table's canonical rows: every row at once, or the rows with given keys."""

    __slots__ = ("changed_sql", "fast", "name", "pk", "pk_sql", "raw_select", "row_sql", "scan_sql")

    def __init__(self, table: Table):
        self.name = table.name
        names = [c.name for c in table.columns]
        self.pk = names.index(table.primary_key) if table.primary_key in names else 0
        pk_col = table.column(table.primary_key)
        # json_group_array would round a real key to 15 digits: such tables take the exact Python path
        self.fast = len(names) <= _MAX_ARGS and (pk_col is None or pk_col.type != "real")
        t, pk = quote_ident(table.name), quote_ident(names[self.pk])
        self.pk_sql = pk
        row = f"json_array({', '.join(_real_sql(c.name) if c.type == 'real' else quote_ident(c.name) for c in table.columns)})"
        self.scan_sql = f"SELECT json_group_array({pk}), CAST(group_concat({row}, char(30)) AS BLOB) FROM {t}"
        self.row_sql = f"SELECT {pk}, CAST({row} AS BLOB) FROM {t}"
        # The rows the change log names: one statement per table, no key list to bind or pad.
        self.changed_sql = (f"{self.row_sql} WHERE {pk} IN (SELECT pk FROM {CHANGES_TABLE} WHERE tbl = "
                            f"'{table.name.replace(chr(39), chr(39) * 2)}')")
        self.raw_select = f"SELECT {', '.join(map(quote_ident, names))} FROM {t}"


def table_digests(conn: sqlite3.Connection, codec: TableCodec, keys: Sequence[Any] | None = None) -> dict[Any, int]:
    """``{pk: digest}`` of every row of the table (``keys=None``) or of the rows with those keys."""
    if codec.fast and sqlite_matches_definition():
        try:
            return _fast(conn, codec, keys)
        except sqlite3.OperationalError:  # a blob (json_array refuses it), a value past the length limit
            pass
    return _slow(conn, codec, keys)


def _fast(conn: sqlite3.Connection, codec: TableCodec, keys: Sequence[Any] | None) -> dict[Any, int]:
    if keys is not None:
        return {k: xxh3_128_intdigest(text) for k, text in _by_keys(conn, codec, codec.row_sql, keys)}
    scan = _scan(conn, codec)
    return {} if scan is None else scan.mapping()


def _scan(conn: sqlite3.Connection, codec: TableCodec) -> ScanDigests | None:
    """Every row's digest from one aggregate (None: the table is empty); raises OperationalError where
    SQLite cannot build the text (a blob, a value past the length limit)."""
    old = conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _SCAN_LENGTH)
    try:
        pks, texts = conn.execute(codec.scan_sql).fetchone()
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, old)
    if texts is None:
        return None
    return ScanDigests(pks, list(map(xxh3_128_intdigest, texts.split(_ROW_SEP))))


def changed_digests(conn: sqlite3.Connection, codec: TableCodec, keys: Sequence[Any]) -> dict[Any, int]:
    """:func:`table_digests` of the rows with ``keys``, where ``keys`` are exactly the table's keys in the
    change log (``World.touched``): the rows are selected through the log, not by binding the keys."""
    if codec.fast and sqlite_matches_definition():
        try:
            return {k: xxh3_128_intdigest(text) for k, text in conn.execute(codec.changed_sql)}
        except sqlite3.OperationalError:
            pass
    return _slow(conn, codec, keys)


class ScanDigests(Mapping[Any, int]):
    """A full scan's ``{pk: digest}``: the row count and the digests' sum at once, the map itself only when
    first read (an incremental update looks rows up by key; a first hash needs only the sum). Read-only."""

    __slots__ = ("_digests", "_map", "_pks", "count", "total")

    def __init__(self, pks: str | bytes, digests: list[int]):
        self._pks, self._digests = pks, digests
        self._map: dict[Any, int] | None = None
        self.count = len(digests)
        self.total = sum(digests)

    def mapping(self) -> dict[Any, int]:
        """The digests by key (built once; two threads building it at once build equal maps)."""
        m = self._map
        if m is None:
            m = dict(zip(json.loads(self._pks), self._digests, strict=True))
            self._map = m
        return m

    def __getitem__(self, key: object) -> int:
        return self.mapping()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.mapping()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.mapping())

    def __len__(self) -> int:
        return self.count


def scan_digests(conn: sqlite3.Connection, codec: TableCodec) -> Mapping[Any, int]:
    """:func:`table_digests` of every row, as a :class:`ScanDigests` where SQLite builds the text."""
    if codec.fast and sqlite_matches_definition():
        try:
            scan = _scan(conn, codec)
            return {} if scan is None else scan
        except sqlite3.OperationalError:
            pass
    return _slow(conn, codec, None)


def _slow(conn: sqlite3.Connection, codec: TableCodec, keys: Sequence[Any] | None) -> dict[Any, int]:
    i = codec.pk
    rows = conn.execute(codec.raw_select) if keys is None else _by_keys(conn, codec, codec.raw_select, keys)
    return {r[i]: row_digest(row_text(r)) for r in rows}


def _by_keys(conn: sqlite3.Connection, codec: TableCodec, sql: str, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
    return select_by_keys(conn, sql, codec.pk_sql, keys)


_CHUNK = 512


def select_by_keys(conn: sqlite3.Connection, sql: str, pk_sql: str, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (a ``SELECT ... FROM table``) whose key column ``pk_sql`` is one of ``keys``.

    The key lists are padded (repeating a key) to a power of two, so that a connection compiles a
    handful of statements per table instead of one per list length (its statement cache is small).
    """
    out: list[tuple[Any, ...]] = []
    # Plain placeholders, not json_each: SQLite 3.40 keeps eponymous virtual tables pointing at the
    # schema that deserialize() frees, and a later prepare crashes (use-after-free).
    for i in range(0, len(keys), _CHUNK):
        chunk = list(keys[i : i + _CHUNK])
        n = 1 << (len(chunk) - 1).bit_length()
        chunk.extend(chunk[-1:] * (n - len(chunk)))
        out.extend(conn.execute(f"{sql} WHERE {pk_sql} IN ({', '.join('?' * n)})", chunk))
    return out


_PROBE_VALUES: tuple[Any, ...] = (
    "".join(map(chr, range(0x80))) + "é€😀\u2028\u2029\ufeff\\\"/",
    "", 0, -1, 9223372036854775807, -9223372036854775808, None, 1.0, -0.0, 2.5, 0.1 + 0.2, 1e300, -1e-300,
    float("inf"), float("-inf"), 9007199254740992.0, -9007199254740991.0, 12.99, -12.345678, 0.000001, -1e-7,
    4294967295.999999, 4294967296.5, 1234.5678901,
)
_matches: bool | None = None
_matches_lock = threading.Lock()


def sqlite_matches_definition() -> bool:
    """Whether this process's SQLite writes the probe values exactly as :func:`row_text` does (checked once)."""
    global _matches
    if _matches is None:
        with _matches_lock:
            if _matches is None:
                conn = sqlite3.connect(":memory:")
                try:
                    register(conn)
                    cols = [f"c{i}" for i in range(len(_PROBE_VALUES))]
                    conn.execute(f"CREATE TABLE p ({', '.join(cols)})")
                    conn.execute(f"INSERT INTO p VALUES ({', '.join('?' * len(cols))})", _PROBE_VALUES)
                    got = conn.execute(f"SELECT CAST(json_array({', '.join(map(_real_sql, cols))}) AS BLOB) FROM p"
                                       ).fetchone()[0]
                    _matches = got == row_text(_PROBE_VALUES)
                except sqlite3.Error:
                    _matches = False
                finally:
                    conn.close()
    return _matches

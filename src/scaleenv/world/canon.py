"""The canonical encoding of a row for the state hash (encoding version :data:`HASH_VERSION`).

A row's canonical text is, by definition, :func:`row_text`: the JSON array of its values in column
order (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``), each value in canonical form
(:func:`canon_value`): integers, text and NULL as they are; a real ``x`` with ``|x| <= 2**31`` that is a
whole number of millionths, ``x == n / 1e6`` for ``n = trunc(r + 0.5)`` where ``r = x * 1e6`` (``- 0.5``
when ``r < 0``), as that integer ``n`` (prices, rates, ``1.0`` as ``1000000``: exact, and computed with
IEEE operations that every platform rounds alike; for ``x`` the double nearest ``m / 1e6``, ``r`` is
within 0.477 of ``m``, so ``n`` is ``m``); any other real as the string of its ``repr``; a blob as
``{"blob": HEX}``. One exception, the *tail*: in a table with a column of type json that is not its
primary key (the last such column, :attr:`TableCodec.tail`), a row whose value there is a text leaves
that value out of the array and has its UTF-8 bytes, as they are, follow the array's closing bracket.
A value in a real column is taken as a real (SQLite's REAL affinity stores every number there as one).
A row's digest is the XXH3-128 (seed 0) of that text, as an unsigned integer
(``xxhash.xxh3_128_intdigest``); a table's digests combine as their sum modulo ``2**128 - 1`` (``world.py``).

Why no two different rows of a table give the same text: the schema fixes each column's type (its CHECK
constraints and affinity), so each position of the array holds one kind of value. JSON writes every string
escaped and quoted, so the array parses back to exactly its values. In a real column the text is NULL, a
JSON integer or a JSON string: a JSON integer ``n`` is written only when ``n / 1e6`` (one correctly
rounded division) is the real, so ``n`` determines the real; a string is ``repr``, which round-trips.
A JSON array is self-delimiting (reading from the start, its closing bracket is known), so a tail, which
follows it, is exactly the bytes after that bracket, whatever they hold; the array has one value fewer
when a tail follows than when the tail column's value is in it, so the two forms never meet.
Two rows with the same text therefore hold the same values.

Why a non-cryptographic digest is enough: no reward reads the state hash. An episode is scored by
comparing the touched rows themselves with the task's expected world (``World.diff``), so an agent
whose tool calls forged a colliding row would gain nothing. The hashes check that a stored task still
replays to the states its build recorded (the rows and chains are the build's own, not an agent's)
and fingerprint a state for callers; against accidents, a 128-bit digest summed over n rows collides
with probability about n**2 / 2**128. XXH3 returns that integer from C directly, at a fifteenth of the
cost of BLAKE2b-128 plus ``int.from_bytes`` per row (measured: 1.1 ms against 18 ms for 7,412 rows).

Computing that text row by row in Python costs most of a full scan, so :func:`table_digests` has SQLite
build it instead: one ``json_array`` per row (only reals that are no whole number of millionths call back
into Python, for their ``repr``) and one aggregate per table that returns every row's text in a single
value, split here (the separator, 0x1E, is never raw in JSON text; a tail holding one makes more parts
than rows, and the table takes the Python path) and hashed in one ``map``. A full scan
adds the digests up without making an integer of each: the digests' bytes, joined, are one big integer
whose value modulo ``2**128 - 1`` is their sum (``2**128`` is 1 modulo ``2**128 - 1``). Only real columns get the
canonical-real expression: the schema's CHECK constraints keep reals out of every other column. SQLite's
``json_array`` writes integers, NULL and text exactly as ``json.dumps`` does; :func:`sqlite_matches_definition`
checks that on probe values once per process, and where it does not hold (another SQLite) or a table's
values cannot take the fast path (a blob, a real primary key, a table wider than the guard's
function-argument limit), the rows are encoded in Python by the definition. Both paths give the same
bytes, so hashes agree across machines, executors and runs.

Where the time of a cold full scan goes (``benchmarks/retail_world.py``, 8,828 rows, 2-core machine):
SQLite reading every value and writing the JSON text is most of it; in encoding 3 a real cost about
twice an integer (SQLite formats it with ``printf``, and the ``"<n>e-6"`` string was one more
concatenation), and ``char(30)`` as the separator was evaluated once per row. In encoding 4 escaping
the JSON columns' text (every quote of ``{"color": "red"}`` written as ``\\"``) was about a sixth of the
SQL; the tail appends that text with one concatenation instead.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from xxhash import xxh3_128_digest, xxh3_128_intdigest

from scaleenv.formats.domain import Column, Table
from scaleenv.world.ddl import CHANGES_TABLE, quote_ident

HASH_VERSION = 5
"""Version of the row encoding and of the way row digests combine into a state hash. Version 1 was the
BLAKE2b-128 of ``repr`` of the row tuple; 2 the BLAKE2b-128 of this module's JSON text; 3 the XXH3-128
of that text, with reals as ``"<n>e-6"`` strings, summed modulo ``2**128``; 4 writes a real that is a
whole number of millionths as that integer and sums modulo ``2**128 - 1``; 5 writes a json column's
text after the array (the tail) instead of escaping it inside. Recorded task hashes are of one version:
a universe built with another one is refused on load (rebuild it)."""

REAL_FUNCTION = "_scaleenv_canon_real"
"""The SQL function (registered on world connections) that writes a real that is no whole number of
millionths as its ``repr``."""

DIGEST_MOD = (1 << 128) - 1
"""A table's row digests combine as their sum modulo this (see :func:`digest_sum`)."""

_MICRO_LIMIT = 1 << 31  # up to this, x * 1e6 is within 0.5 of the whole count of millionths x rounds (see canon_value)
_MICRO_LIMIT_SQL = "2147483648.0"
_ROW_SEP = b"\x1e"  # never raw in json_array's text: JSON escapes every character below 0x20
_ROW_SEP_SQL = "'\x1e'"  # a literal: char(30) would be called once per row
_MAX_ARGS = 64  # the guard's SQLITE_LIMIT_FUNCTION_ARG: wider tables take the Python path
_SCAN_LENGTH = 1_000_000_000  # the value-length limit while a table's text is aggregated (SQLite's maximum)
_DIGEST_BYTES = 16


def canon_value(v: Any) -> Any:
    """A stored value in canonical form (see the module docstring)."""
    if isinstance(v, float):
        if -_MICRO_LIMIT <= v <= _MICRO_LIMIT:
            r = v * 1e6
            n = int(r + (-0.5 if r < 0 else 0.5))
            if n / 1e6 == v:
                return n
        return repr(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return {"blob": bytes(v).hex()}
    return v


def row_text(row: Iterable[Any], tail: int | None = None) -> bytes:
    """The canonical text of a row, by definition (UTF-8); ``tail``: the index of the table's tail column
    (:attr:`TableCodec.tail`), whose value, when it is a text, follows the array instead of being in it."""
    values = list(row)
    after = b""
    if tail is not None and type(values[tail]) is str:
        after = str(values.pop(tail)).encode()
    return json.dumps([canon_value(v) for v in values], ensure_ascii=False, separators=(",", ":")).encode() + after


def row_digest(text: bytes) -> int:
    """The 128-bit digest of a row's canonical text (XXH3-128, seed 0, as an unsigned integer)."""
    return xxh3_128_intdigest(text)


def digest_sum(joined: bytes) -> int:
    """The sum modulo :data:`DIGEST_MOD` of the digests whose 16-byte big-endian forms ``joined`` holds end to end.

    Read as one integer, ``joined`` is the sum of ``d_i * 2**(128 * k_i)``; as ``2**128`` is 1 modulo
    ``2**128 - 1``, that is the digests' sum modulo it. Halves are folded (``2**128 - 1`` divides
    ``2**(128 k) - 1``), so the reduction costs a few passes over the bytes, not a long division.
    """
    x = int.from_bytes(joined, "big")
    while x.bit_length() > 256:
        k = (x.bit_length() + 255) // 256 * 128  # about half the bits, a multiple of 128
        x = (x >> k) + (x & ((1 << k) - 1))
    return x % DIGEST_MOD


def _real_repr(v: Any) -> Any:
    return repr(float(v)) if type(v) in (int, float) else v


def register(conn: sqlite3.Connection) -> None:
    """Make :data:`REAL_FUNCTION` available on ``conn`` (once per connection: re-registering a function
    expires the connection's compiled statements)."""
    conn.create_function(REAL_FUNCTION, 1, _real_repr, deterministic=True)


def _real_sql(col: str, nullable: bool = True) -> str:
    """A real column's value in canonical form, in SQL (the branches of :func:`canon_value`, in order).

    ``round(r)`` is SQLite's ``trunc(r + 0.5)`` (``- 0.5`` below zero) for ``|r| < 2**52``, the same IEEE
    operations as the definition. A column declared NOT NULL skips the NULL test (a NULL there would
    still be written right, through the Python function). The millionths' count is computed in both the
    test and the value (SQLite has no common subexpressions); each reading of the column is a record
    lookup, so the expression names it as few times as it can.
    """
    q = quote_ident(col)
    r = f"round({q} * 1000000.0)"
    null = f"WHEN {q} IS NULL THEN NULL " if nullable else ""
    return (f"CASE {null}WHEN {q} BETWEEN -{_MICRO_LIMIT_SQL} AND {_MICRO_LIMIT_SQL} AND {r} / 1000000.0 = {q} "
            f"THEN CAST({r} AS INTEGER) ELSE {REAL_FUNCTION}({q}) END")


def _row_sql(table: Table, tail: int | None) -> str:
    """A row's canonical text, in SQL: ``json_array`` of the values, with the tail after it when it is a text.

    ``v >= '' AND v < x''`` is ``typeof(v) = 'text'`` without a function call: SQLite orders NULL and
    numbers before every text and every text before every blob, and ``x''`` is the least blob. A NULL
    (a nullable column) or any other value (a database whose constraints were bypassed) in the tail
    column stays in the array, as in the definition.
    """
    cols = [_real_sql(c.name, c.nullable and c.name != table.primary_key) if c.type == "real" else quote_ident(c.name)
            for c in table.columns]
    whole = f"json_array({', '.join(cols)})"
    if tail is None:
        return whole
    v = cols[tail]
    head = f"json_array({', '.join(cols[:tail] + cols[tail + 1:])})"
    return f"CASE WHEN {v} >= '' AND {v} < x'' THEN {head} || {v} ELSE {whole} END"


class TableCodec:
    """The SQL of one table's canonical rows: every row at once, or the rows with given keys."""

    __slots__ = ("changed_sql", "fast", "name", "pk", "pk_sql", "raw_select", "reals", "row_sql", "scan_sql", "tail")

    def __init__(self, table: Table):
        self.name = table.name
        names = [c.name for c in table.columns]
        self.pk = names.index(table.primary_key) if table.primary_key in names else 0
        self.reals = tuple(i for i, c in enumerate(table.columns) if c.type == "real")
        tails = [i for i, c in enumerate(table.columns) if c.type == "json" and i != self.pk]
        self.tail: int | None = tails[-1] if tails else None
        """The index of the tail column (the module docstring), None for a table without one."""
        pk_col = table.column(table.primary_key)
        # json_group_array would round a real key to 15 digits: such tables take the exact Python path
        self.fast = len(names) <= _MAX_ARGS and (pk_col is None or pk_col.type != "real")
        t, pk = quote_ident(table.name), quote_ident(names[self.pk])
        self.pk_sql = pk
        row = _row_sql(table, self.tail)
        # count(*): a tail holding the separator would split into more parts than rows (then the Python path);
        # json_array's text never holds it raw, so a table without a tail is not counted (10 ns a row)
        count = "NULL" if self.tail is None else "count(*)"
        self.scan_sql = (f"SELECT {count}, json_group_array({pk}), CAST(group_concat({row}, {_ROW_SEP_SQL}) AS BLOB) "
                         f"FROM {t}")
        self.row_sql = f"SELECT {pk}, CAST({row} AS BLOB) FROM {t}"
        # The rows the change log names: one statement per table, no key list to bind or pad.
        self.changed_sql = (f"{self.row_sql} WHERE {pk} IN (SELECT pk FROM {CHANGES_TABLE} WHERE tbl = "
                            f"'{table.name.replace(chr(39), chr(39) * 2)}')")
        self.raw_select = f"SELECT {', '.join(map(quote_ident, names))} FROM {t}"

    def canon_row(self, row: Sequence[Any]) -> bytes:
        """The canonical text of a fetched row (a number in a real column taken as a real)."""
        if self.reals:
            row = list(row)
            for i in self.reals:
                v = row[i]
                if type(v) is int:
                    row[i] = float(v)
        return row_text(row, self.tail)


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
        n, pks, texts = conn.execute(codec.scan_sql).fetchone()
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, old)
    if texts is None:
        return None
    parts = texts.split(_ROW_SEP)
    if n is not None and len(parts) != n:
        raise sqlite3.OperationalError(f"{codec.name}: a tail holds the row separator")
    return ScanDigests(pks, b"".join(map(xxh3_128_digest, parts)))


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
    first read (an incremental update looks rows up by key; a first hash needs only the sum). Read-only.

    The digests stay as their joined 16-byte forms until then: a first hash makes no integer per row.
    """

    __slots__ = ("_digests", "_map", "_pks", "count", "total")

    def __init__(self, pks: str | bytes, digests: bytes):
        self._pks, self._digests = pks, digests
        self._map: dict[Any, int] | None = None
        self.count = len(digests) // _DIGEST_BYTES
        self.total = digest_sum(digests)

    def mapping(self) -> dict[Any, int]:
        """The digests by key (built once; two threads building it at once build equal maps)."""
        m = self._map
        if m is None:
            d = self._digests
            ints = (int.from_bytes(d[i : i + _DIGEST_BYTES], "big") for i in range(0, len(d), _DIGEST_BYTES))
            m = dict(zip(json.loads(self._pks), ints, strict=True))
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
    return {r[i]: row_digest(codec.canon_row(r)) for r in rows}


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
    "".join(map(chr, range(0x80))) + "é€😀\u2028\u2029\ufeff\\\"/", "", 0, -1, 9223372036854775807,
    -9223372036854775808, None,
)
_PROBE_REALS: tuple[Any, ...] = (  # in a REAL column, through the canonical-real expression
    None, 7, -3, 1.0, -0.0, 2.5, 0.1 + 0.2, 1e300, -1e-300, float("inf"), float("-inf"), 9007199254740992.0,
    -9007199254740991.0, 12.99, 0.29, -12.345678, 0.000001, 0.0000005, -1e-7, 2147483647.999999, 2147483648.5,
    -2147483647.5, 2147483648.0, -2147483648.0, 2147483648.000001, 4294967295.999999, 1234.5678901,
)
_PROBE_TAILS: tuple[Any, ...] = ('{"a": "x\\"y\\u00e9", "b": [1, 2.5e3, null]}', None)  # one row each
_matches: bool | None = None
_matches_lock = threading.Lock()


def sqlite_matches_definition() -> bool:
    """Whether this process's SQLite writes the probe values exactly as :func:`row_text` does (checked once):
    every kind of value in a row with a tail and in one whose tail column holds NULL."""
    global _matches
    if _matches is None:
        with _matches_lock:
            if _matches is None:
                conn = sqlite3.connect(":memory:")
                try:
                    register(conn)
                    plain = [f"c{i}" for i in range(len(_PROBE_VALUES))]
                    reals = [f"r{i}" for i in range(len(_PROBE_REALS))]
                    table = Table(name="p", primary_key="c0", columns=[
                        *(Column(name=c) for c in plain), Column(name="j", type="json", nullable=True),
                        *(Column(name=r, type="real", nullable=True) for r in reals)])
                    codec = TableCodec(table)
                    conn.execute(f"CREATE TABLE p ({', '.join([*plain, 'j', *(f'{r} REAL' for r in reals)])})")
                    for tail in _PROBE_TAILS:
                        conn.execute(f"INSERT INTO p VALUES ({', '.join('?' * (len(plain) + 1 + len(reals)))})",
                                     (*_PROBE_VALUES, tail, *_PROBE_REALS))
                    got = conn.execute(f"SELECT CAST(group_concat({_row_sql(table, codec.tail)}, {_ROW_SEP_SQL}) AS BLOB) "
                                       "FROM p").fetchone()[0]
                    fixed = (*(None if v is None else float(v) for v in _PROBE_REALS),)
                    want = _ROW_SEP.join(row_text((*_PROBE_VALUES, tail, *fixed), codec.tail) for tail in _PROBE_TAILS)
                    _matches = got == want
                except sqlite3.Error:
                    _matches = False
                finally:
                    conn.close()
    return _matches

#!/usr/bin/env python3
"""Where a cold full state hash spends its time, table by table and step by step.

    python benchmarks/hash_breakdown.py [--world bench | --world UNIVERSE] [--reps 40]

For each table: its rows, the full-scan aggregate SQLite runs (``TableCodec.scan_sql``), the same
aggregate with raw column values in one ``json_array`` (no canonical reals and no tail: what those two
change), and the floor of reading every value (``length()`` of each column, no text built); then the Python steps over
every table's text (split, digests, their sum) and the whole cold ``state_hash``. Best of ``--reps``, so
that a loaded machine's pauses drop out; compare figures within one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _best(fn: Callable[[], Any], reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out) * 1e3


def _world(world: str) -> tuple[Any, bytes]:
    from scaleenv.formats.domain import DomainSpec
    from scaleenv.validation import validate_spec

    if world != "bench":
        d = Path(world) / "domains" / "retail"
        return validate_spec(DomainSpec.model_validate_json((d / "spec.json").read_text())), (d / "base.sqlite").read_bytes()
    mod_spec = importlib.util.spec_from_file_location("hash_breakdown_retail_world", HERE.with_name("retail_world.py"))
    assert mod_spec is not None and mod_spec.loader is not None
    rw = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(rw)
    w, _ = rw.build_world(0)
    snap = w.snapshot()
    w.close()
    return w.spec, snap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", default="bench", help="'bench' (retail_world.py) or a universe directory with retail")
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args()
    from xxhash import xxh3_128_digest

    from scaleenv.world import World, canon
    from scaleenv.world.ddl import quote_ident
    from scaleenv.world.world import clear_hash_cache

    spec, snap = _world(a.world if a.world == "bench" else str(Path(a.world).resolve()))
    probe = World.from_snapshot(spec, snap)
    conn = probe.conn
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)
    conn.set_progress_handler(None, 0)
    sep = "'\x1e'"
    print(f"{'table':18s} {'rows':>6s} {'cols':>4s} {'text KB':>8s} {'scan ms':>8s} {'raw json':>8s} {'floor':>8s}")
    texts = []
    totals = [0.0, 0.0, 0.0]
    for table in spec.tables:
        codec = probe._codecs[table.name]
        t = quote_ident(table.name)
        cols = [quote_ident(c.name) for c in table.columns]
        raw = f"SELECT CAST(group_concat(json_array({', '.join(cols)}), {sep}) AS BLOB) FROM {t}"
        floor = f"SELECT sum({' + '.join(f'length(CAST({c} AS BLOB))' for c in cols)}) FROM {t}"
        figures = [_best(lambda q=q: conn.execute(q).fetchone(), a.reps) for q in (codec.scan_sql, raw, floor)]
        totals = [x + y for x, y in zip(totals, figures, strict=True)]
        text = conn.execute(codec.scan_sql).fetchone()[-1] or b""
        texts.append(text)
        n = conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        print(f"{table.name:18s} {n:6d} {len(cols):4d} {len(text) / 1e3:8.1f} " + " ".join(f"{x:8.3f}" for x in figures))
    print(f"{'all tables':18s} {'':6s} {'':4s} {sum(map(len, texts)) / 1e3:8.1f} " + " ".join(f"{x:8.3f}" for x in totals))
    parts = [t.split(b"\x1e") for t in texts if t]
    joined = [b"".join(map(xxh3_128_digest, p)) for p in parts]
    split = _best(lambda: [t.split(b"\x1e") for t in texts if t], a.reps)
    digests = _best(lambda: [b"".join(map(xxh3_128_digest, p)) for p in parts], a.reps)
    total = _best(lambda: [canon.digest_sum(j) for j in joined], a.reps)
    print(f"python: split {split:.3f} ms, digests {digests:.3f} ms, sum {total:.3f} ms")
    probe.close()

    def cold() -> float:
        fresh = World.from_snapshot(spec, snap)
        clear_hash_cache()
        fresh.clear_changes()
        t0 = time.perf_counter()
        fresh.state_hash()
        dt = time.perf_counter() - t0
        fresh.close()
        return dt

    print(f"cold state_hash: best {min(cold() for _ in range(a.reps)) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()

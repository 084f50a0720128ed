"""Seed every catalog domain at many seeds: does seeding ever fail, and does every seeded world obey
its domain's invariants?

    python benchmarks/seed_sweep.py --seeds 100 [--start 0] [--domain NAME ...] [--json out.json]

Prints one line per failing (domain, seed) and a summary: domains x seeds, seeding failures,
worlds with invariant violations (by invariant), and the seconds it took.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from scaleenv.errors import ScaleEnvError
from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.world.invariants import check_world


def sweep(names: list[str], seeds: range) -> dict[str, object]:
    """Seed each domain at each seed; collect failures and violated invariants."""
    failures: list[dict[str, object]] = []
    violated: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    for name in names:
        bp = catalog()[name]
        for seed in seeds:
            spec = derive_spec(bp, seed)
            try:
                world = seed_world(spec, bp, seed)
            except ScaleEnvError as e:
                failures.append({"domain": name, "seed": seed, "error": str(e)})
                print(f"FAIL {name} seed={seed}: {e}", flush=True)
                continue
            bad = check_world(world, limit=1)
            world.close()
            for v in bad:
                violated[f"{name}:{v.invariant}"] += 1
            if bad:
                print(f"VIOLATES {name} seed={seed}: {bad[0]}", flush=True)
    return {"domains": len(names), "seeds": len(seeds), "worlds": len(names) * len(seeds),
            "seed_failures": len(failures), "failures": failures,
            "worlds_with_violations": sum(violated.values()), "violated": dict(sorted(violated.items())),
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--domain", action="append", default=[])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = args.domain or sorted(catalog())
    unknown = [n for n in names if n not in catalog()]
    if unknown:
        print(f"unknown domain {unknown[0]!r}", file=sys.stderr)
        return 2
    result = sweep(names, range(args.start, args.start + args.seeds))
    print(f"{result['domains']} domains x {result['seeds']} seeds = {result['worlds']} worlds: "
          f"{result['seed_failures']} seeding failures, {result['worlds_with_violations']} invariant violations "
          f"({result['seconds']} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 1 if result["seed_failures"] or result["worlds_with_violations"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

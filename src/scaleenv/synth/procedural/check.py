"""Check catalog blueprints: ``python -m scaleenv.synth.procedural.check [NAME ...]``.

Prints tool counts, rejected tools with reasons, and untested preconditions, and exits non-zero
if a blueprint fails the catalog rules (>= 5 tables, 25-70 admitted tools, no rejected tool,
every write tool with a negative test).
"""

from __future__ import annotations

import sys
import time

from scaleenv.errors import ScaleEnvError
from scaleenv.synth.procedural.blueprint import catalog


def check(name: str, seeds: tuple[int, ...] = (0, 1)) -> list[str]:
    from scaleenv.synth.procedural.domain import build_domain

    bp = catalog()[name]
    problems = []
    if not 5 <= len(bp.entities) <= 22:
        problems.append(f"{len(bp.entities)} entities (need 5-22)")
    for seed in seeds:
        t0 = time.perf_counter()
        try:
            d = build_domain(bp, seed)
        except ScaleEnvError as e:
            return [f"seed {seed}: {e}"]
        dt = time.perf_counter() - t0
        rep = d.tests
        print(f"{name} seed={seed}: {d.derived_tools} derived, {rep['admitted']} admitted, "
              f"counts={rep['counts']}, graph={d.graph.stats()['edges_by_kind']}, {dt:.2f}s")
        if not 25 <= rep["admitted"] <= 70:
            problems.append(f"seed {seed}: {rep['admitted']} admitted tools (need 25-70)")
        for r in rep["reports"]:
            for f in r["failures"]:
                problems.append(f"seed {seed}: {r['tool']}: {f['kind']}: {f['reason']} args={f['args']}")
            tool = d.spec.tool(r["tool"])
            if tool is not None and tool.kind == "write" and r["negative_tests"] == 0:
                problems.append(f"seed {seed}: write tool {r['tool']} has no negative test")
            if tool is not None and tool.kind == "write" and not (tool.preconditions and tool.effects
                                                                   and tool.postconditions and tool.errors):
                problems.append(f"seed {seed}: write tool {r['tool']} needs preconditions, effects, "
                                "postconditions and declared errors")
            if r["untested_preconditions"]:
                print(f"  note: {r['tool']}: no violating arguments found for preconditions "
                      f"{r['untested_preconditions']}")
    return problems


def main(argv: list[str]) -> int:
    names = argv or sorted(catalog())
    bad = 0
    for name in names:
        if name not in catalog():
            print(f"unknown blueprint {name!r}; known: {', '.join(sorted(catalog()))}")
            return 2
        problems = check(name)
        for p in problems:
            print(f"  PROBLEM {p}")
        bad += bool(problems)
    print(f"{len(names) - bad}/{len(names)} blueprints OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

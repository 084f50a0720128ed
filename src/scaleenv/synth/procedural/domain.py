"""Phase 1 for one catalog domain: derive the spec, seed the world, test every tool, keep the
admitted ones, and build the tool dependency graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.synth.graph.build import ToolGraph, build_graph
from scaleenv.synth.procedural.blueprint import Blueprint
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.seeddata import SeedGenerator
from scaleenv.tools.testing import test_domain, tests_summary
from scaleenv.validation.spec import validate_spec
from scaleenv.world.world import World


@dataclass
class BuiltDomain:
    """Everything Phase 1 produces for a domain."""

    spec: DomainSpec  # admitted tools only
    base: bytes  # the seeded world (SQLite snapshot)
    tests: dict[str, Any]
    graph: ToolGraph
    derived_tools: int


def seed_world(spec: DomainSpec, bp: Blueprint, seed: int, scale: float = 1.0) -> World:
    gen = SeedGenerator(bp, seed, scale)
    rows = gen.rows()
    world = World(spec)
    for ent in gen.order():
        world.load_rows(ent.name, rows[ent.name])
    return world


def build_domain(bp: Blueprint, seed: int = 0, scale: float = 1.0) -> BuiltDomain:
    """Run Phase 1 for ``bp``. Raises SpecError if the derived spec is inconsistent."""
    full = validate_spec(derive_spec(bp, seed))
    world = seed_world(full, bp, seed, scale)
    reports = test_domain(full, world, seed)
    admitted = {r.tool for r in reports if r.admitted}
    spec = full.model_copy(update={"tools": [t for t in full.tools if t.name in admitted],
                                   "policy": full.policy.keep_tools(admitted) if full.policy else None})
    return BuiltDomain(spec, world.snapshot(), tests_summary(full, reports), build_graph(spec), len(full.tools))

"""Shared, cached fixtures for synthesis and task tests (building a domain takes ~1 s)."""

from __future__ import annotations

from functools import cache

from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.domain import BuiltDomain, build_domain
from scaleenv.synth.tasks.context import DomainContext


@cache
def built(name: str, seed: int = 0) -> BuiltDomain:
    return build_domain(catalog()[name], seed)


@cache
def context(name: str, seed: int = 0) -> DomainContext:
    d = built(name, seed)
    positive = {r["tool"]: r.get("positive_args") for r in d.tests["reports"] if r["admitted"]}
    return DomainContext(d.spec, d.base, d.graph, positive)

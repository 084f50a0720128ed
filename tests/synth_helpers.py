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


def family_tasks(name: str, family: str, n: int) -> list:
    """Up to ``n`` tasks of one family for the catalog domain ``name`` (seed 0, 15 attempts a task)."""
    import contextlib

    from scaleenv.synth.tasks.families import generate_task
    from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected

    ctx = context(name)
    out: list = []
    attempt = 0
    while len(out) < n and attempt < 15 * n:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, 0, attempt, ChainConfig(family_mix={family: 1.0})))
        attempt += 1
    return out


def scripted_reply(task, spec, text: str) -> str:
    """What a fresh scripted user of ``task`` answers to ``text``, right after its opening request."""
    import asyncio
    import random

    from scaleenv.env.users import ScriptedUser, UserContext

    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=spec))
    asyncio.run(user.opening())
    return asyncio.run(user.reply(text))


def built_cache(out, domains: list[str], tasks_per_domain: int, seed: int):
    """A universe built at ``out`` (a fresh directory) for ``domains``, and its task-world cache."""
    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build
    from scaleenv.universe import Universe

    cfg = BuildConfig(out=out, domains=domains, tasks_per_domain=tasks_per_domain, seed=seed)
    prepare_out(cfg)
    run_build(cfg)
    return TaskWorldCache(Universe(out))

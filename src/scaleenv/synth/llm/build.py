"""The LLM back end end to end: a bare domain name in, the same universe artifacts out.

Phase 1 (:func:`synthesize_domain`) returns a :class:`~scaleenv.synth.procedural.domain.BuiltDomain`
exactly like the procedural back end, and Phase 2 writes tasks in the same format, judged by the
same verification and gates, so ``scaleenv check`` treats both alike. :class:`scaleenv.synth.llm.backend.LLMBackend`
is the back end the build uses when its settings carry ``llm``.

Extra files per domain: ``tokens.json`` (token accounting per role, phase and task: what building
the domain took, cached answers included) and ``llm_runs.jsonl`` (per run: requests, retries, cache
hits, fresh tokens).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.llm.base import ChatModel
from scaleenv.llm.session import LLMConfig, LLMSession, Scoped, default_cache_dir
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.deps import dependency_graph
from scaleenv.synth.llm.design import design_database, design_tools, domain_profile
from scaleenv.synth.llm.filter import check_domain
from scaleenv.synth.llm.implement import ToolImplementer, ToolProgress
from scaleenv.synth.llm.policy import design_policy
from scaleenv.synth.llm.seedrows import infer_invariants, seed_world
from scaleenv.synth.procedural.domain import BuiltDomain
from scaleenv.tools.testing import tests_summary
from scaleenv.validation.spec import validate_spec


def synthesize_domain(name: str, ask: Scoped, seed: int = 0, scale: float = 1.0, cfg: SynthConfig | None = None, *,
                      description: str = "", keywords: list[str] | None = None,
                      progress: ToolProgress | None = None) -> BuiltDomain:
    """Phase 1 from a bare domain name: tools, tables, tested code, graph. Raises ScaleEnvError."""
    cfg = cfg or SynthConfig()
    check_domain(name.replace("_", " "), description, keywords)
    profile = domain_profile(ask, name, description, keywords)
    check_domain(profile.title, profile.description, profile.keywords)
    abstracts = design_tools(ask, profile, cfg)
    design = design_database(ask, profile, abstracts, cfg)
    meta = {"backend": "llm", "title": profile.title, **design.meta}
    tables_spec = DomainSpec(name=profile.name, description=profile.description, keywords=profile.keywords,
                             tables=design.tables, meta=meta)
    base0 = seed_world(tables_spec, seed, scale).snapshot()
    implementer = ToolImplementer(ask, profile.title, tables_spec, base0, design.tool_tables, design.param_columns,
                                  cfg, seed)
    builds = implementer.build_all(abstracts, progress)
    admitted = [b.tool for b in builds if b.admitted and b.tool is not None]
    if not admitted:
        raise ScaleEnvError(f"domain {name!r}: no generated tool passed its tests; see the model's output")
    dropped = [{"tool": b.name, "rounds": b.rounds, "reason": (b.history[-1]["failures"][:3] if b.history else [])}
               for b in builds if not b.admitted]
    # the rules the schema implies are stored in the spec, so every world of the domain (base, each
    # task's initial and expected states) is checked against them by the build and by the audit
    spec = validate_spec(tables_spec.model_copy(update={
        "tools": admitted, "invariants": infer_invariants(tables_spec),
        "meta": {**meta, "dropped_tools": [d["tool"] for d in dropped]}}))
    base = seed_world(spec, seed, scale).snapshot()
    spec = spec.model_copy(update={"policy": design_policy(ask, profile.title, spec, base)})
    graph, dep_stats = dependency_graph(ask, profile.title, spec, design.tool_tables, cfg)
    tested = tables_spec.model_copy(update={"tools": [b.tool for b in builds if b.tool is not None]})
    tests = tests_summary(tested, [b.report for b in builds])
    tests["tools"] = len(abstracts)
    tests["llm"] = {"rounds": {b.name: b.rounds for b in builds}, "dropped": dropped,
                    "history": {b.name: b.history for b in builds if b.rounds > 1 or not b.admitted},
                    "dependency": dep_stats,
                    # each admitted tool's test fixture: rows on which its positive test ran, which Phase 2
                    # lends a task world (re-keyed) where no row there lets the tool run
                    "fixtures": {b.name: b.fixture for b in builds if b.admitted and b.fixture},
                    "edges_by_source": dict(Counter(d.get("source", "computed") for _, _, d in graph.edges()))}
    return BuiltDomain(spec, base, tests, graph, len(abstracts))


def make_session(llm: dict[str, Any], root: Path) -> LLMSession:
    config = LLMConfig.from_json(llm)
    if not config.cache_dir:
        config.cache_dir = str(default_cache_dir(root))
    backend: ChatModel | None = llm.get("backend")
    return LLMSession.from_config(config, backend)


class AttemptsAhead:
    """``make_task(attempt)`` for the attempt loop, with the next attempts already running in threads.

    Attempts are independent (each has its own seed and worlds), so up to ``workers`` run at once;
    the loop still takes their results in attempt order, so the universe is the same at any
    concurrency, and a crash loses only unrecorded attempts (their answers are in the cache). No
    more attempts are started ahead than tasks are still ``needed()``, which bounds the waste.
    """

    def __init__(self, make_task: Callable[[int], Task], workers: int, needed: Callable[[], int], max_attempts: int):
        self.make_task = make_task
        self.workers = max(1, int(workers))
        self.needed = needed
        self.max_attempts = max_attempts
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="task") if self.workers > 1 else None
        self.futures: dict[int, Future[Task]] = {}

    def __call__(self, attempt: int) -> Task:
        if self.pool is None:
            return self.make_task(attempt)
        ahead = max(1, min(self.workers, self.needed()))
        for a in range(attempt, min(attempt + ahead, self.max_attempts)):
            if a not in self.futures:
                self.futures[a] = self.pool.submit(self.make_task, a)
        fut = self.futures.pop(attempt, None) or self.pool.submit(self.make_task, attempt)
        return fut.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.futures.clear()


def cli_settings(model: str | None, base_url: str | None, api_key_env: str, roles: list[str],
                 cache: Path | None, config: Path | None = None, concurrency: int | None = None) -> dict[str, Any]:
    """The ``llm`` build settings from the command line's flags (ScaleEnvError on bad input).

    ``config`` is an optional JSON file of further settings: LLMConfig fields (``concurrency``,
    ``timeout``, ``max_retries``, ``temperature``, ``role_models``, ...), ``description`` (of the domain),
    ``max_attempts`` and ``synth`` (SynthConfig fields: sizes, rounds, sandbox limits, ``tau``, ...).
    """
    import importlib.util

    from scaleenv.synth.llm.prompts import ROLES

    if not model:
        raise ScaleEnvError("--base-url needs --llm MODEL (the model to synthesize with)")
    if importlib.util.find_spec("openai") is None:
        raise ScaleEnvError("--llm needs the openai SDK: pip install 'scaleenv[llm]'")
    if not api_key_env or not api_key_env.replace("_", "").isalnum():
        raise ScaleEnvError(f"--api-key-env must name an environment variable, got {api_key_env!r}")
    if base_url is None and not os.environ.get(api_key_env):
        raise ScaleEnvError(f"--llm {model}: set {api_key_env} (or --api-key-env NAME), or pass --base-url "
                            "for a local endpoint that needs no key")
    role_models: dict[str, str] = {}
    for r in roles:
        role, sep, m = r.partition("=")
        if not sep or role not in ROLES or not m:
            raise ScaleEnvError(f"--llm-role must be ROLE=MODEL with ROLE one of {', '.join(ROLES)}, got {r!r}")
        role_models[role] = m
    extra: dict[str, Any] = {}
    if config is not None:
        try:
            extra = json.loads(Path(config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ScaleEnvError(f"--llm-config {config}: cannot read a JSON object ({e})") from None
        if not isinstance(extra, dict):
            raise ScaleEnvError(f"--llm-config {config}: must hold a JSON object")
        allowed = set(LLMConfig.__dataclass_fields__) | {"synth", "description", "max_attempts"}
        unknown = sorted(set(extra) - allowed)
        if unknown:
            raise ScaleEnvError(f"--llm-config {config}: unknown setting(s) {unknown}; known: {sorted(allowed)}")
        try:
            SynthConfig.from_json(extra.get("synth"), strict=True)
            LLMConfig.from_json({"model": model, **extra})
        except (TypeError, ValueError) as e:
            raise ScaleEnvError(f"--llm-config {config}: {e}") from None
    if concurrency is not None:
        if concurrency < 1:
            raise ScaleEnvError(f"--llm-concurrency must be at least 1, got {concurrency}")
        extra["concurrency"] = concurrency
    return {**extra, "model": model, "base_url": base_url, "api_key_env": api_key_env,
            "role_models": {**(extra.get("role_models") or {}), **role_models},
            "cache_dir": str(cache) if cache else extra.get("cache_dir")}

"""``scaleenv build``: Phase 1 (domains) and Phase 2 (tasks) for many domains, resumable, on a
serial, process or Ray executor. The work unit is one domain; every executor gives the same bytes."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaleenv import __version__
from scaleenv.errors import ScaleEnvError, UniverseError
from scaleenv.universe import FORMAT, read_json, read_tasks, write_domain, write_json

Progress = Callable[[str, str, int, int], None]  # (domain, stage, done, total)


@dataclass
class BuildConfig:
    out: Path
    domains: list[str]
    tasks_per_domain: int = 64
    seed: int = 0
    scale: float = 1.0
    resume: bool = False
    executor: str = "serial"
    workers: int = 2
    ray_address: str | None = None
    chain_length: tuple[int, int] = (3, 8)
    llm: dict[str, Any] | None = None  # the LLM back end's settings (scaleenv.llm.session.LLMConfig fields)

    def manifest_key(self) -> dict[str, Any]:
        key = {"seed": self.seed, "scale": self.scale, "tasks_per_domain": self.tasks_per_domain,
               "domains": self.domains, "chain_length": list(self.chain_length)}
        if self.llm:
            key["llm"] = {"model": self.llm.get("model"), "role_models": self.llm.get("role_models") or {}}
        return key

    @property
    def backend(self) -> str:
        return "llm" if self.llm else "procedural"


@dataclass
class DomainResult:
    domain: str
    tables: int
    tools: int
    derived_tools: int
    edges: int
    tasks: int
    attempts: int
    rejections: dict[str, int]
    phase1_s: float
    phase2_s: float
    skipped: list[str] = field(default_factory=list)
    stage_s: dict[str, float] = field(default_factory=dict)


def _load_attempt_log(path: Path) -> tuple[int, Counter]:
    nxt, rej = 0, Counter()
    if not path.exists():
        return nxt, rej
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line after a crash
        nxt = max(nxt, rec["attempt"] + 1)
        if rec.get("rejected"):
            rej[rec["rejected"]] += 1
    return nxt, rej


def load_phase1(ddir: Path) -> tuple[Any, bytes, dict[str, Any], Any, int]:
    """A finished domain's Phase 1 artifacts: (spec, base snapshot, tests report, graph, derived tools)."""
    from scaleenv.formats.domain import DomainSpec
    from scaleenv.synth.graph.build import ToolGraph

    spec = DomainSpec.model_validate(read_json(ddir / "spec.json"))
    base = (ddir / "base.sqlite").read_bytes()
    tests = read_json(ddir / "tests.json")
    return spec, base, tests, ToolGraph.from_json(read_json(ddir / "graph.json")), tests["tools"]


def run_task_attempts(root: Path, name: str, k: int, resume: bool, make_task: Callable[[int], Any],
                      max_attempts: int, progress: Progress | None = None,
                      after_attempt: Callable[[int], None] | None = None) -> tuple[list[Any], int, Counter, bool]:
    """Phase 2's attempt loop, shared by both back ends: call ``make_task(attempt)`` until ``k`` tasks
    are accepted (or ``max_attempts`` are spent), dropping duplicates and counting every rejection.

    Each accepted task is flushed to ``tasks/<d>.partial.jsonl`` and each attempt to
    ``domains/<d>/attempts.jsonl`` as it happens, so a crash loses nothing; with ``resume`` the loop
    continues where they stop. Returns (tasks, attempts, rejections, whether Phase 2 was already done).
    """
    from scaleenv.synth.tasks.generate import TaskRejected

    ddir, tdir = root / "domains" / name, root / "tasks"
    final, partial, log = tdir / f"{name}.jsonl", tdir / f"{name}.partial.jsonl", ddir / "attempts.jsonl"
    if resume and final.exists():
        attempt, rejections = _load_attempt_log(log)
        return list(read_tasks(final)), attempt, rejections, True
    tdir.mkdir(parents=True, exist_ok=True)
    tasks: list[Any] = []
    if resume and partial.exists():
        tasks = list(read_tasks(partial, tolerate_torn_tail=True))
        attempt, rejections = _load_attempt_log(log)
        if tasks:
            attempt = max(attempt, tasks[-1].attempt + 1)
    else:
        attempt, rejections = 0, Counter()
        log.unlink(missing_ok=True)
    # rewrite the partial file with only whole lines (drops a torn tail)
    partial.write_text("".join(t.to_jsonl() + "\n" for t in tasks), encoding="utf-8")
    seen = {t.dedup_key() for t in tasks}
    with partial.open("a", encoding="utf-8") as out, log.open("a", encoding="utf-8") as logf:
        while len(tasks) < k and attempt < max_attempts:
            rec: dict[str, Any] = {"attempt": attempt}
            try:
                task = make_task(attempt)
                if task.dedup_key() in seen:
                    raise TaskRejected("duplicate")
                seen.add(task.dedup_key())
                out.write(task.to_jsonl() + "\n")
                out.flush()
                tasks.append(task)
                rec["task"] = task.id
            except TaskRejected as e:
                rejections[e.reason] += 1
                rec["rejected"] = e.reason
            logf.write(json.dumps(rec, sort_keys=True) + "\n")
            logf.flush()
            attempt += 1
            if after_attempt:
                after_attempt(len(tasks))
            if progress:
                progress(name, "tasks", len(tasks), k)
    os.replace(partial, final)
    return tasks, attempt, rejections, False


def build_one_domain(root: Path, name: str, cfg: dict[str, Any], progress: Progress | None = None) -> DomainResult:
    """Phase 1 and Phase 2 for one domain, writing into ``root``; resumable at task granularity."""
    from scaleenv.synth.procedural.blueprint import catalog
    from scaleenv.synth.procedural.domain import build_domain
    from scaleenv.synth.tasks.context import DomainContext
    from scaleenv.synth.tasks.generate import STAGE_SECONDS, ChainConfig, generate_task

    if cfg.get("llm"):
        from scaleenv.synth.llm.build import build_llm_domain

        return build_llm_domain(root, name, cfg, progress)
    seed, k, resume = cfg["seed"], cfg["tasks_per_domain"], cfg["resume"]
    ddir = root / "domains" / name
    t0 = time.perf_counter()
    skipped = []
    if resume and (ddir / "done.json").exists():
        spec, base, tests, graph, derived = load_phase1(ddir)
        skipped.append("phase1")
    else:
        built = build_domain(catalog()[name], seed, cfg["scale"])
        write_domain(root, built)
        spec, base, tests, graph, derived = built.spec, built.base, built.tests, built.graph, built.derived_tools
    t1 = time.perf_counter()
    if progress:
        progress(name, "tools", 1, 1)
    stages_before = dict(STAGE_SECONDS)
    positive = {r["tool"]: r.get("positive_args") for r in tests["reports"] if r.get("admitted")}
    ctx = DomainContext(spec, base, graph, positive)
    lo, hi = cfg.get("chain_length", (3, 8))
    chain_cfg = ChainConfig(min_length=lo, max_length=hi)
    tasks, attempt, rejections, done_before = run_task_attempts(
        root, name, k, resume, lambda n: generate_task(ctx, seed, n, chain_cfg), 10 * k + 20, progress)
    if done_before:
        skipped.append("phase2")
    t2 = time.perf_counter()
    stage_s = {st: round(v - stages_before.get(st, 0.0), 3) for st, v in STAGE_SECONDS.items()}
    write_json(ddir / "tasks_report.json", {"attempts": attempt, "accepted": len(tasks),
                                             "rejections": dict(sorted(rejections.items()))})
    stats = graph.stats()
    return DomainResult(name, len(spec.tables), len(spec.tools), derived, stats["edges"], len(tasks), attempt,
                        dict(sorted(rejections.items())), round(t1 - t0, 3), round(t2 - t1, 3), skipped,
                        dict(sorted(stage_s.items())))


def _job(args: tuple[str, str, dict[str, Any], Any]) -> DomainResult:
    root, name, cfg, queue = args

    def progress(d: str, stage: str, done: int, total: int) -> None:
        if queue is not None:
            queue.put((d, stage, done, total))

    return build_one_domain(Path(root), name, cfg, progress)


def _job_shipped(args: tuple[str, dict[str, Any], bytes | None]) -> tuple[DomainResult, bytes]:
    """A Ray build worker without the driver's disk: build the domain in a temporary directory of its
    own (seeded with the driver's partial files when resuming) and return the files it wrote."""
    import tempfile

    from scaleenv.parallel.shipping import pack_tree, unpack_tree

    name, cfg, seed = args
    with tempfile.TemporaryDirectory(prefix="scaleenv-build-") as tmp:
        root = Path(tmp)
        if seed:
            unpack_tree(seed, root)
        result = build_one_domain(root, name, cfg, None)
        return result, pack_tree(root, "")


def _domain_files(out: Path, name: str) -> list[str]:
    """The files of one domain already in a universe (what a resumed shipped build starts from)."""
    rels = [p.relative_to(out).as_posix() for p in (out / "domains" / name).rglob("*") if p.is_file()]
    return rels + [p.relative_to(out).as_posix() for p in (out / "tasks").glob(f"{name}.*") if p.is_file()]


def prepare_out(cfg: BuildConfig, force: bool = False) -> None:
    manifest = cfg.out / "universe.json"
    if manifest.exists():
        old = read_json(manifest)
        if cfg.resume:
            prev = old.get("build", {})
            if prev and prev != cfg.manifest_key():
                raise UniverseError(f"{cfg.out} was built with different settings ({prev}); "
                                    "resume with the same flags or pick another --out")
        elif force:
            shutil.rmtree(cfg.out)
        else:
            raise UniverseError(f"{cfg.out} already holds a universe; pass --resume to continue it, "
                                "--force to overwrite it, or another --out")
    elif cfg.out.exists() and any(cfg.out.iterdir()) and not force:
        raise UniverseError(f"{cfg.out} exists and is not empty; pick another --out or pass --force")
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_json(manifest, {"format": FORMAT, "status": "building", "backend": cfg.backend,
                          "scaleenv": __version__, "domains": cfg.domains, "build": cfg.manifest_key()})


def run_build(cfg: BuildConfig, progress: Progress | None = None) -> list[DomainResult]:
    """Build (or resume) a universe; returns per-domain results in domain order."""
    job_cfg = {"seed": cfg.seed, "tasks_per_domain": cfg.tasks_per_domain, "scale": cfg.scale,
               "resume": cfg.resume, "chain_length": cfg.chain_length, "llm": cfg.llm}
    results: dict[str, DomainResult] = {}
    if cfg.executor == "serial":
        for name in cfg.domains:
            results[name] = build_one_domain(cfg.out, name, job_cfg, progress)
    elif cfg.executor == "process":
        results = _run_process(cfg, job_cfg, progress)
    elif cfg.executor == "ray":
        results = _run_ray(cfg, job_cfg, progress)
    else:
        raise ScaleEnvError(f"unknown executor {cfg.executor!r}; use serial, process or ray")
    ordered = [results[n] for n in cfg.domains]
    write_json(cfg.out / "universe.json", {
        "format": FORMAT, "status": "complete", "backend": cfg.backend, "scaleenv": __version__,
        "domains": cfg.domains, "build": cfg.manifest_key(),
        "counts": {"domains": len(ordered), "tools": sum(r.tools for r in ordered),
                   "tasks": sum(r.tasks for r in ordered)},
    })
    return ordered


def _drain(queue: Any, progress: Progress | None) -> None:
    import queue as q

    while True:
        try:
            item = queue.get_nowait()
        except (q.Empty, EOFError, OSError):
            return
        if progress:
            progress(*item)


def _run_process(cfg: BuildConfig, job_cfg: dict[str, Any], progress: Progress | None) -> dict[str, DomainResult]:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    manager = ctx.Manager()
    queue = manager.Queue()
    results: dict[str, DomainResult] = {}
    try:
        with ProcessPoolExecutor(max_workers=max(1, cfg.workers), mp_context=ctx) as pool:
            futures = {pool.submit(_job, (str(cfg.out), n, job_cfg, queue)): n for n in cfg.domains}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                _drain(queue, progress)
                for f in done:
                    results[futures[f]] = f.result()
            _drain(queue, progress)
    finally:
        manager.shutdown()
    return results


def _run_ray(cfg: BuildConfig, job_cfg: dict[str, Any], progress: Progress | None) -> dict[str, DomainResult]:
    try:
        import ray
    except ImportError:
        raise ScaleEnvError("the ray executor needs Ray: pip install 'scaleenv[ray]'") from None
    started = False
    if not ray.is_initialized():
        ray.init(address=cfg.ray_address, num_cpus=None if cfg.ray_address else cfg.workers,
                 include_dashboard=False, log_to_driver=False)
        started = True
    try:
        from scaleenv.parallel.shipping import pack_files, unpack_tree

        # Workers build in their own temporary directories and send the files back: no shared disk.
        remote = ray.remote(_job_shipped)
        refs = {remote.remote((n, job_cfg, pack_files(cfg.out, _domain_files(cfg.out, n)) if cfg.resume else None)): n
                for n in cfg.domains}
        results: dict[str, DomainResult] = {}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            r, files = ray.get(done[0])
            unpack_tree(files, cfg.out)
            results[refs[done[0]]] = r
            if progress:
                progress(r.domain, "tasks", r.tasks, cfg.tasks_per_domain)
        return results
    finally:
        if started:
            ray.shutdown()

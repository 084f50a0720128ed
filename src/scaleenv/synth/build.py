"""``scaleenv build``: Phase 1 (domains) and Phase 2 (tasks) for many domains, resumable, on a
serial, process or Ray executor. The work unit is one domain; every executor gives the same bytes."""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import TYPE_CHECKING, Any

from scaleenv import __version__
from scaleenv.errors import InputError, UniverseError
from scaleenv.synth.attempts import Progress, load_phase1, run_task_attempts
from scaleenv.universe import FORMAT, read_json, write_domain, write_json

if TYPE_CHECKING:
    from multiprocessing.managers import SyncManager

Update = tuple[str, str, int, int]
"""A progress update: ``(domain, stage, done, total)``."""

LOCK_FILE = ".lock"
LOCK_WAIT_S = 15.0
"""How long a build waits for the universe lock (the workers of a killed build die within moments)."""
_HELD: dict[str, list[Any]] = {}  # resolved out path -> [file, depth]: the lock is re-entrant in a process


@contextmanager
def universe_lock(out: Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold the exclusive write lock of a universe directory (``OUT/.lock``, an empty file, ``fcntl.flock``).

    Two writers never run at once: a second build (or resume) waits up to ``LOCK_WAIT_S`` and then
    fails with UniverseError. The lock belongs to the open file, so forked workers keep holding it
    while they live: a resume cannot start while a killed build's workers still write.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX: no locking
        yield
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        key = str(out.resolve())
    except OSError as e:
        raise UniverseError(f"{out}: cannot create the universe directory ({e.strerror or e})") from None
    held = _HELD.get(key)
    if held is not None and held[2] == os.getpid():
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
        return
    try:
        f = (out / LOCK_FILE).open("a", encoding="utf-8")
    except OSError as e:
        raise UniverseError(f"{out}: cannot create its lock file ({e.strerror or e})") from None
    deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                f.close()
                raise UniverseError(f"{out} is being written by another scaleenv build; wait for it to finish "
                                    "(or stop it) and resume") from None
            time.sleep(0.1)
    _HELD[key] = [f, 1, os.getpid()]
    try:
        yield
    finally:
        del _HELD[key]
        f.close()  # closing the file releases the lock (once no forked worker holds it any more)


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
    llm_language: dict[str, Any] | None = None  # LLM rewriting of procedural tasks' language (same fields)
    task_seed: int | None = None
    """Seed of the tasks alone (default: ``seed``): new tasks over the same domains, tools and base worlds."""
    family_mix: dict[str, float] | None = None  # share of attempts per task family (None: the default mix)
    tier_mix: dict[str, float] | None = None  # share of tasks per difficulty tier (None: the default mix)

    def __post_init__(self) -> None:
        """Settings are checked here, once, for every caller (the CLI only maps flags to them)."""
        from scaleenv.parallel import EXECUTORS

        if self.executor not in EXECUTORS:
            raise InputError(f"unknown --executor {self.executor!r}; use serial, process or ray")
        lo, hi = self.chain_length
        if not 2 <= lo <= hi <= 12:
            raise InputError(f"--chain-length must be MIN-MAX with 2 <= MIN <= MAX <= 12, got {lo}-{hi}")
        if self.tasks_per_domain < 0 or self.workers < 1 or not 0.05 <= self.scale <= 50.0:
            raise InputError("--tasks-per-domain must be >= 0, --workers >= 1 and --scale within 0.05-50")
        if not self.domains:
            raise InputError("no domains to build; name some with --domain or --domains N")
        from scaleenv.formats.task import TIERS
        from scaleenv.synth.tasks.families import FAMILIES
        from scaleenv.synth.tasks.tiers import check_mix

        try:
            if self.family_mix is not None:
                self.family_mix = check_mix(self.family_mix, FAMILIES, "--family-mix")
            if self.tier_mix is not None:
                self.tier_mix = check_mix(self.tier_mix, TIERS, "--tier-mix")
        except ValueError as e:
            raise InputError(str(e)) from None

    def manifest_key(self) -> dict[str, Any]:
        key = {"seed": self.seed, "scale": self.scale, "tasks_per_domain": self.tasks_per_domain,
               "domains": self.domains, "chain_length": list(self.chain_length)}
        if self.llm:
            key["llm"] = {"model": self.llm.get("model"), "role_models": self.llm.get("role_models") or {}}
        if self.llm_language:
            key["llm_language"] = self.llm_language.get("model")
        if self.task_seed is not None:
            key["task_seed"] = self.task_seed
        if self.family_mix is not None:
            key["family_mix"] = self.family_mix
        if self.tier_mix is not None:
            key["tier_mix"] = self.tier_mix
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


def build_one_domain(root: Path, name: str, cfg: dict[str, Any], progress: Progress | None = None) -> DomainResult:
    """Phase 1 and Phase 2 for one domain with the back end ``cfg`` names, writing into ``root``;
    resumable at task granularity."""
    from scaleenv.synth.backend import backend_for
    from scaleenv.synth.tasks.context import DomainContext

    backend = backend_for(Path(root), name, cfg, progress)
    name = backend.domain
    k, resume = cfg["tasks_per_domain"], cfg["resume"]
    ddir = Path(root) / "domains" / name
    t0 = time.perf_counter()
    skipped = []
    if resume and (ddir / "done.json").exists():
        spec, base, tests, graph, derived = load_phase1(ddir)
        skipped.append("phase1")
        backend.phase1_resumed()
    else:
        built = backend.phase1()
        write_domain(Path(root), built)
        spec, base, tests, graph, derived = built.spec, built.base, built.tests, built.graph, built.derived_tools
        backend.phase1_written()
    t1 = time.perf_counter()
    if progress:
        progress(name, "tools", 1, 1)
    positive = {r["tool"]: r.get("positive_args") for r in tests["reports"] if r.get("admitted")}
    ctx = DomainContext(spec, base, graph, positive)
    try:
        tasks, attempt, rejections, done_before = run_task_attempts(
            Path(root), name, k, resume, backend.task_maker(ctx), backend.max_attempts(k), progress,
            backend.after_attempt)
    finally:
        backend.close()
    if done_before:
        skipped.append("phase2")
    if cfg.get("llm_language"):  # natural language for the accepted tasks (cached, resumable)
        from scaleenv.synth.llm.language import rewrite_tasks

        tasks = rewrite_tasks(root, name, tasks, cfg["llm_language"])
    t2 = time.perf_counter()
    backend.finish(tasks, skipped)
    write_json(ddir / "tasks_report.json", {"attempts": attempt, "accepted": len(tasks),
                                             "rejections": dict(sorted(rejections.items()))})
    stats = graph.stats()
    return DomainResult(name, len(spec.tables), len(spec.tools), derived, stats["edges"], len(tasks), attempt,
                        dict(sorted(rejections.items())), round(t1 - t0, 3), round(t2 - t1, 3), skipped,
                        backend.stage_seconds())


class QueueProgress:
    """A progress callback that a worker process can hold: it puts each update on a queue the
    parent drains."""

    def __init__(self, queue: Queue[Update]):
        self.queue = queue

    def __call__(self, domain: str, stage: str, done: int, total: int) -> None:
        self.queue.put((domain, stage, done, total))


class DomainBuilder:
    """A build worker (serial, process or Ray): builds whole domains, one batch item each."""

    def __init__(self, root: str, cfg: dict[str, Any], progress: Progress | None = None):
        self.root = Path(root)
        self.cfg = cfg
        self.progress = progress

    def run_batch(self, batch: list[str], sink: Callable[[Any], None] | None = None) -> list[tuple[str, DomainResult]]:
        out = []
        for name in batch:
            item = (name, build_one_domain(self.root, name, self.cfg, self.progress))
            out.append(item)
            if sink is not None:
                sink(item)
        return out

    def close(self) -> None:
        pass


class ShippedDomainBuilder:
    """A build worker without the driver's disk (Ray): each batch item is ``(domain, seed)``, where
    ``seed`` packs the domain's partial files when resuming (else ``None``). It builds the domain in a
    temporary directory of its own and returns ``(domain, result, files)``, the files it wrote packed
    (:func:`~scaleenv.parallel.shipping.in_scratch`), for the driver to unpack into the universe."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg

    def run_batch(self, batch: list[tuple[str, bytes | None]],
                  sink: Callable[[Any], None] | None = None) -> list[tuple[str, DomainResult, bytes]]:
        from scaleenv.parallel.shipping import in_scratch

        out = []
        for name, seed in batch:
            result, files = in_scratch(seed, functools.partial(self._build, name))
            item = (name, result, files)
            out.append(item)
            if sink is not None:
                sink(item)
        return out

    def _build(self, name: str, root: Path) -> DomainResult:
        return build_one_domain(root, name, self.cfg, None)

    def close(self) -> None:
        pass


def _domain_files(out: Path, name: str) -> list[str]:
    """The files of one domain already in a universe (what a resumed shipped build starts from)."""
    rels = [p.relative_to(out).as_posix() for p in (out / "domains" / name).rglob("*") if p.is_file()]
    return rels + [p.relative_to(out).as_posix() for p in (out / "tasks").glob(f"{name}.*") if p.is_file()]


def prepare_out(cfg: BuildConfig, force: bool = False) -> None:
    with universe_lock(cfg.out):
        _prepare_out(cfg, force)


def _prepare_out(cfg: BuildConfig, force: bool) -> None:
    manifest = cfg.out / "universe.json"
    if manifest.exists():
        old = read_json(manifest)
        if cfg.resume:
            prev = old.get("build", {})
            if prev and prev != cfg.manifest_key():
                raise UniverseError(f"{cfg.out} was built with different settings ({prev}); "
                                    "resume with the same flags or pick another --out")
        elif force:
            _clear(cfg.out)
        else:
            raise UniverseError(f"{cfg.out} already holds a universe; pass --resume to continue it, "
                                "--force to overwrite it, or another --out")
    elif cfg.out.exists() and any(p.name != LOCK_FILE for p in cfg.out.iterdir()) and not force:
        raise UniverseError(f"{cfg.out} exists and is not empty; pick another --out or pass --force")
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_json(manifest, {"format": FORMAT, "status": "building", "backend": cfg.backend,
                          "scaleenv": __version__, "domains": cfg.domains, "build": cfg.manifest_key()})


def _clear(out: Path) -> None:
    """Empty ``out`` for --force, keeping the lock file this build holds."""
    for p in out.iterdir():
        if p.name == LOCK_FILE:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def run_build(cfg: BuildConfig, progress: Progress | None = None) -> list[DomainResult]:
    """Build (or resume) a universe; returns per-domain results in domain order (under the lock)."""
    with universe_lock(cfg.out):
        return _run_build(cfg, progress)


def _run_build(cfg: BuildConfig, progress: Progress | None) -> list[DomainResult]:
    job_cfg = {"seed": cfg.seed, "tasks_per_domain": cfg.tasks_per_domain, "scale": cfg.scale,
               "resume": cfg.resume, "chain_length": cfg.chain_length, "llm": cfg.llm,
               "llm_language": cfg.llm_language, "family_mix": cfg.family_mix, "tier_mix": cfg.tier_mix}
    if cfg.task_seed is not None:
        job_cfg["task_seed"] = cfg.task_seed
    results = _run_executor(cfg, job_cfg, progress)
    ordered = [results[n] for n in cfg.domains]
    write_json(cfg.out / "universe.json", {
        "format": FORMAT, "status": "complete", "backend": cfg.backend, "scaleenv": __version__,
        "domains": cfg.domains, "build": cfg.manifest_key(),
        "counts": {"domains": len(ordered), "tools": sum(r.tools for r in ordered),
                   "tasks": sum(r.tasks for r in ordered)},
    })
    return ordered


def _run_executor(cfg: BuildConfig, job_cfg: dict[str, Any], progress: Progress | None) -> dict[str, DomainResult]:
    """Build every domain on the configured executor (``scaleenv.parallel``): one domain per batch."""
    if cfg.executor == "ray":  # workers without the driver's disk: each builds in its own folder, files come back
        return _run_shipped(cfg, job_cfg, progress)
    from scaleenv.parallel import make_executor

    results: dict[str, DomainResult] = {}
    root = str(cfg.out.resolve())
    manager: SyncManager | None = None
    queue: Queue[Update] | None = None
    if cfg.executor == "process":
        manager, queue = _progress_queue()
        worker_progress: Progress | None = QueueProgress(queue)
    else:
        worker_progress = progress

    def sink(item: tuple[str, DomainResult]) -> None:
        name, result = item
        results[name] = result

    try:
        factory = functools.partial(DomainBuilder, root, job_cfg, worker_progress)
        with make_executor(cfg.executor, factory, workers=_workers(cfg)) as executor:
            executor.run(([n] for n in cfg.domains), sink, tick=(lambda: _drain(queue, progress)) if queue else None)
        if queue is not None:
            _drain(queue, progress)
    finally:
        if manager is not None:
            manager.shutdown()
    return results


def _run_shipped(cfg: BuildConfig, job_cfg: dict[str, Any], progress: Progress | None) -> dict[str, DomainResult]:
    """The Ray build: :class:`ShippedDomainBuilder` actors on ``parallel``'s RayExecutor; each finished
    domain's files are unpacked into the universe here, as they arrive."""
    from scaleenv.parallel import make_executor
    from scaleenv.parallel.shipping import pack_files, unpack_tree

    results: dict[str, DomainResult] = {}

    def batches() -> Iterator[list[tuple[str, bytes | None]]]:
        for n in cfg.domains:  # packed lazily: only the batches in flight hold their seed files
            yield [(n, pack_files(cfg.out, _domain_files(cfg.out, n)) if cfg.resume else None)]

    def sink(item: tuple[str, DomainResult, bytes]) -> None:
        name, result, files = item
        before = set(_domain_files(cfg.out, name))
        for rel in before - set(unpack_tree(files, cfg.out)):  # the worker removed it (a resumed partial file)
            (cfg.out / rel).unlink()
        results[name] = result
        if progress:
            progress(result.domain, "tasks", result.tasks, cfg.tasks_per_domain)

    factory = functools.partial(ShippedDomainBuilder, job_cfg)
    with make_executor("ray", factory, workers=_workers(cfg), ray_address=cfg.ray_address) as executor:
        executor.run(batches(), sink)
    return results


def _workers(cfg: BuildConfig) -> int:
    return max(1, min(cfg.workers, len(cfg.domains)))


def _progress_queue() -> tuple[SyncManager, Queue[Update]]:
    """A queue that worker processes can put progress on; its server dies with this process."""
    from multiprocessing.managers import SyncManager

    from scaleenv.parallel.lifeline import die_with_parent
    from scaleenv.parallel.process import start_context

    ctx = start_context()
    manager = SyncManager(ctx=ctx)
    manager.start(die_with_parent, (os.getpid() if ctx.get_start_method() == "fork" else None,))
    return manager, manager.Queue()


def _drain(queue: Queue[Update], progress: Progress | None) -> None:
    while True:
        try:
            item = queue.get_nowait()
        except (Empty, EOFError, OSError):
            return
        if progress:
            progress(*item)

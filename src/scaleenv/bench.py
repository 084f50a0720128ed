"""The performance suite behind ``scaleenv bench``: runs ``benchmarks/bench_*.py`` and merges their figures.

Each benchmark module defines ``run(quick: bool) -> dict[str, float]`` and names its figures with a
prefix of its own (``core.reset_ms``, ...). Figures are medians unless their name says otherwise.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from scaleenv.errors import ScaleEnvError

BENCH_DIR_ENV = "SCALEENV_BENCH_DIR"


def bench_dir() -> Path:
    """Where the benchmark modules live: ``$SCALEENV_BENCH_DIR`` or ``<repo root>/benchmarks``."""
    override = os.environ.get(BENCH_DIR_ENV)
    if override:
        path = Path(override)
    else:
        import scaleenv

        path = Path(scaleenv.__file__).resolve().parents[2] / "benchmarks"
    if not path.is_dir():
        raise ScaleEnvError(
            f"benchmark directory {path} not found; run from a source checkout of scaleenv "
            f"(pip install -e .) or set {BENCH_DIR_ENV} to the benchmarks/ folder"
        )
    return path


def discover(directory: Path | None = None) -> dict[str, Path]:
    """``{name: path}`` of every ``bench_<name>.py`` module, sorted by name."""
    directory = directory or bench_dir()
    return {p.stem.removeprefix("bench_"): p for p in sorted(directory.glob("bench_*.py"))}


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"scaleenv_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ScaleEnvError(f"cannot load benchmark module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise ScaleEnvError(f"benchmark module {path} does not define run(quick)")
    return module


def run_bench(quick: bool = False, only: Iterable[str] | None = None, scale: float | None = None) -> dict[str, float]:
    """Run every benchmark module (or those named in ``only``) and return their figures, sorted by name.

    ``scale`` goes to the modules whose ``run`` takes it (``bench_tasks``: the catalog retail world's
    scale; 17 is tau2-bench's retail size)."""
    modules = discover()
    if not modules:
        raise ScaleEnvError(f"no bench_*.py modules in {bench_dir()}")
    if only is not None:
        wanted = set(only)
        unknown = wanted - set(modules)
        if unknown:
            raise ScaleEnvError(f"unknown benchmark(s) {sorted(unknown)}; available: {sorted(modules)}")
        modules = {k: v for k, v in modules.items() if k in wanted}
    figures: dict[str, float] = {}
    for path in modules.values():
        module = load_module(path)
        takes_scale = "scale" in inspect.signature(module.run).parameters
        figures.update(module.run(quick, scale=scale) if takes_scale else module.run(quick))
    return {k: figures[k] for k in sorted(figures)}

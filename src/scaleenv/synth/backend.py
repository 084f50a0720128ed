"""Synthesis back ends behind one protocol: the orchestrator (:mod:`scaleenv.synth.build`) runs
Phase 1 and Phase 2 the same way for each, and a back end supplies only what differs.

    procedural   a catalog blueprint, derived and seeded offline (deterministic, fast)
    llm          a bare domain name, through the paper's LLM roles (cached, resumable)
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from scaleenv.formats.task import Task
from scaleenv.synth.attempts import Progress
from scaleenv.synth.procedural.domain import BuiltDomain
from scaleenv.synth.tasks.context import DomainContext


class BackendKind(StrEnum):
    PROCEDURAL = "procedural"
    LLM = "llm"


class Backend(Protocol):
    """One domain's synthesis with one back end (built per domain by :func:`backend_for`)."""

    domain: str
    """The domain's directory name (the LLM back end turns a bare name into a slug)."""

    def phase1(self) -> BuiltDomain:
        """Tables, tools, tested code, the seeded world and the dependency graph."""

    def phase1_written(self) -> None:
        """Phase 1 was just built and written."""

    def phase1_resumed(self) -> None:
        """Phase 1 was loaded from a finished earlier run."""

    def task_maker(self, ctx: DomainContext) -> Callable[[int], Task]:
        """Attempt number -> an accepted task, or raise TaskRejected with a reason."""

    def max_attempts(self, k: int) -> int:
        """How many attempts Phase 2 may spend on ``k`` tasks."""

    def after_attempt(self, accepted: int) -> None:
        """Called after every attempt with the number of tasks accepted so far."""

    def finish(self, tasks: list[Task], skipped: list[str]) -> None:
        """Phase 2 is over with ``tasks`` accepted (``skipped`` names the phases a resume did not redo)."""

    def close(self) -> None:
        """Release what the back end holds (threads, clients), also after a failure."""

    def stage_seconds(self) -> dict[str, float]:
        """CPU seconds per Phase 2 stage spent on this domain, where the back end measures them."""


class ProceduralBackend:
    """A catalog blueprint: derive the spec, seed the world, test the tools; tasks by graph expansion."""

    def __init__(self, root: Path, name: str, cfg: dict[str, Any], progress: Progress | None = None):
        from scaleenv.synth.tasks.generate import STAGE_SECONDS, ChainConfig

        self.domain = name
        self.cfg = cfg
        lo, hi = cfg.get("chain_length", (3, 8))
        self.chain = ChainConfig(min_length=lo, max_length=hi, family_mix=cfg.get("family_mix"),
                                 tier_mix=cfg.get("tier_mix"))
        self._stages_before = dict(STAGE_SECONDS)

    def phase1(self) -> BuiltDomain:
        from scaleenv.synth.procedural.blueprint import catalog
        from scaleenv.synth.procedural.domain import build_domain

        return build_domain(catalog()[self.domain], self.cfg["seed"], self.cfg["scale"])

    def phase1_written(self) -> None:
        pass

    def phase1_resumed(self) -> None:
        pass

    def task_maker(self, ctx: DomainContext) -> Callable[[int], Task]:
        from scaleenv.synth.tasks.families import generate_task

        seed, chain = self.cfg.get("task_seed", self.cfg["seed"]), self.chain
        return lambda attempt: generate_task(ctx, seed, attempt, chain)

    def max_attempts(self, k: int) -> int:
        return 10 * k + 20

    def after_attempt(self, accepted: int) -> None:
        pass

    def finish(self, tasks: list[Task], skipped: list[str]) -> None:
        pass

    def close(self) -> None:
        pass

    def stage_seconds(self) -> dict[str, float]:
        from scaleenv.synth.tasks.generate import STAGE_SECONDS

        return dict(sorted((st, round(v - self._stages_before.get(st, 0.0), 3)) for st, v in STAGE_SECONDS.items()))


def backend_for(root: Path, name: str, cfg: dict[str, Any], progress: Progress | None = None) -> Backend:
    """The back end a build's settings name (``cfg["llm"]`` set: the LLM back end)."""
    if cfg.get("llm"):
        from scaleenv.synth.llm.backend import LLMBackend

        return LLMBackend(root, name, cfg, progress)
    return ProceduralBackend(root, name, cfg, progress)

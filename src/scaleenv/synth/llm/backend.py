"""The LLM back end behind :class:`scaleenv.synth.backend.Backend`: Phase 1 from a bare domain
name through the paper's roles, Phase 2 through the task agents; token accounting in
``tokens.json`` after every attempt and one line per run in ``llm_runs.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.task import Task
from scaleenv.llm.accounting import cost_report, merge_domain_summaries
from scaleenv.llm.base import LLMError, LLMOutputError
from scaleenv.synth.attempts import Progress
from scaleenv.synth.llm.build import AttemptsAhead, make_session, synthesize_domain
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import slug
from scaleenv.synth.procedural.domain import BuiltDomain
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.universe import read_json, write_json


class LLMBackend:
    """One domain built by a model (any OpenAI-compatible endpoint, or a scripted model in tests)."""

    def __init__(self, root: Path, name: str, cfg: dict[str, Any], progress: Progress | None = None):
        self.llm = dict(cfg["llm"])
        self.synth = SynthConfig.from_json(self.llm.get("synth"))
        if cfg.get("chain_length"):
            self.synth.chain_length = tuple(cfg["chain_length"])
        self.domain = slug(name)
        self.cfg = cfg
        self.progress = progress
        self.session = make_session(self.llm, Path(root))
        self.ask = self.session.scoped(domain=self.domain)
        self.ddir = Path(root) / "domains" / self.domain
        self.tokens_path = self.ddir / "tokens.json"
        self.prior: dict[str, Any] = (read_json(self.tokens_path)
                                      if cfg["resume"] and self.tokens_path.exists() else {})
        self._accepted = 0
        self._ahead: AttemptsAhead | None = None
        self._spec_tools: list[str] = []

    def _save_tokens(self, accepted: int, task_ids: list[str] | None = None, tools: list[str] | None = None) -> None:
        summary = merge_domain_summaries(self.prior, self.session.ledger.domain_summary(self.domain))
        summary["model"] = self.session.config.model
        summary["role_models"] = dict(self.session.config.role_models)
        summary["tasks"] = accepted
        summary["per_task"] = round(summary["phase2"].get("total_tokens", 0) / accepted) if accepted else None
        if task_ids is not None and tools is not None:
            summary["report"] = cost_report(summary, tools, task_ids)
        write_json(self.tokens_path, summary)

    def phase1(self) -> BuiltDomain:
        self.prior = {}

        def tool_progress(done: int, total: int) -> None:
            if self.progress:
                self.progress(self.domain, "tool_code", done, total)

        return synthesize_domain(self.domain, self.ask, self.cfg["seed"], self.cfg.get("scale", 1.0), self.synth,
                                 description=str(self.llm.get("description") or ""), progress=tool_progress)

    def phase1_written(self) -> None:
        self._save_tokens(0)

    def phase1_resumed(self) -> None:
        pass

    def task_maker(self, ctx: DomainContext) -> Callable[[int], Task]:
        from scaleenv.synth.llm.tasks import attach_fixtures, generate_llm_task
        from scaleenv.synth.tasks.generate import TaskRejected
        from scaleenv.synth.tasks.reasons import Reason

        seed = self.cfg.get("task_seed", self.cfg["seed"])

        def make_task(attempt: int) -> Task:
            try:
                return generate_llm_task(ctx, self.ask, seed, attempt, self.synth, self.cfg.get("family_mix"),
                                         self.cfg.get("tier_mix"))
            except LLMOutputError as e:
                raise TaskRejected(Reason.LLM_OUTPUT, str(e)[:200]) from None
            except LLMError as e:
                raise LLMError(f"{e}; the finished tasks are kept: continue with --resume "
                               "(answers already received come from the cache)") from None
            except TaskRejected:
                raise
            except ScaleEnvError as e:  # e.g. generated rows a world refuses
                raise TaskRejected(Reason.SYNTHESIS_ERROR, str(e)[:200]) from None

        attach_fixtures(ctx, self.ddir / "tests.json")
        _ = ctx.io, ctx.edge_counts  # computed once, before attempts run in threads
        self._spec_tools = [t.name for t in ctx.spec.tools]
        k = self.cfg["tasks_per_domain"]
        self._ahead = AttemptsAhead(make_task, self.session.config.concurrency, lambda: k - self._accepted,
                                    self.max_attempts(k))
        return self._ahead

    def max_attempts(self, k: int) -> int:
        return int(self.llm.get("max_attempts") or (3 * k + 5))

    def after_attempt(self, accepted: int) -> None:
        self._accepted = accepted
        self._save_tokens(accepted)

    def finish(self, tasks: list[Task], skipped: list[str]) -> None:
        self.close()
        self._save_tokens(len(tasks), [t.id for t in tasks], self._spec_tools)
        run = self.session.ledger.summary()
        with (self.ddir / "llm_runs.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"model": self.session.config.model, "base_url": self.session.config.base_url,
                                "requests": run["requests"], "retries": run["retries"], "cache_hits": run["cache_hits"],
                                "fresh": run["fresh"], "skipped": skipped,
                                "calls_by_role": {r: v["calls"] for r, v in run["by_role"].items()},
                                "repairs_by_role": dict(sorted(self.session.repairs.items()))},
                               sort_keys=True) + "\n")

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def stage_seconds(self) -> dict[str, float]:
        return {}

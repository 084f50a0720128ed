"""Token accounting per role, per domain and per task.

Two figures are kept apart:

* **tokens**: what producing the artifact took, whether the answer came fresh from the endpoint or
  from the response cache. Deterministic for a given cache, so it can live in the universe.
* **fresh**: what this process actually asked the endpoint for (and paid), plus requests made
  (retries included) and cache hits. A rerun with a warm cache has zero fresh tokens.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any


def _bucket() -> dict[str, int]:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _add(b: dict[str, int], prompt: int, completion: int) -> None:
    b["calls"] += 1
    b["prompt_tokens"] += prompt
    b["completion_tokens"] += completion
    b["total_tokens"] += prompt + completion


class TokenLedger:
    """Thread-safe totals of model calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = _bucket()
        self.by_role: dict[str, dict[str, int]] = defaultdict(_bucket)
        self.by_domain: dict[str, dict[str, int]] = defaultdict(_bucket)
        self.by_task: dict[str, dict[str, int]] = defaultdict(_bucket)
        self.by_tool: dict[str, dict[str, int]] = defaultdict(_bucket)  # "domain/tool": its code, tests, repairs
        self.by_domain_role: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(_bucket))
        self.fresh = _bucket()
        self.cache_hits = 0
        self.requests = 0  # HTTP requests / backend calls, retries included
        self.retries = 0

    def record(self, role: str, domain: str | None, task: str | None, prompt: int, completion: int,
               cached: bool, tool: str | None = None) -> None:
        with self._lock:
            if tool:
                _add(self.by_tool[f"{domain or '-'}/{tool}"], prompt, completion)
            _add(self.total, prompt, completion)
            _add(self.by_role[role or "-"], prompt, completion)
            if domain:
                _add(self.by_domain[domain], prompt, completion)
                _add(self.by_domain_role[domain][role or "-"], prompt, completion)
            if task:
                _add(self.by_task[task], prompt, completion)
            if cached:
                self.cache_hits += 1
            else:
                _add(self.fresh, prompt, completion)

    def record_shared(self, role: str, domain: str | None, tasks: list[str], prompt: int, completion: int,
                      cached: bool) -> None:
        """One request that served several ``tasks`` (a batched chain request): counted once in the
        totals and per role; per task, its tokens are split evenly (the remainder to the first tasks)
        and the call is counted for the first task only, so the tasks' figures add up to the request."""
        if not tasks:
            self.record(role, domain, None, prompt, completion, cached)
            return
        with self._lock:
            _add(self.total, prompt, completion)
            _add(self.by_role[role or "-"], prompt, completion)
            if domain:
                _add(self.by_domain[domain], prompt, completion)
                _add(self.by_domain_role[domain][role or "-"], prompt, completion)
            n = len(tasks)
            for i, task in enumerate(tasks):
                b = self.by_task[task]
                p = prompt // n + (1 if i < prompt % n else 0)
                c = completion // n + (1 if i < completion % n else 0)
                b["calls"] += 1 if i == 0 else 0
                b["prompt_tokens"] += p
                b["completion_tokens"] += c
                b["total_tokens"] += p + c
            if cached:
                self.cache_hits += 1
            else:
                _add(self.fresh, prompt, completion)

    def count_requests(self, attempts: int = 1) -> None:
        """``attempts`` requests reached the backend for one call (all but the first were retries)."""
        with self._lock:
            self.requests += attempts
            self.retries += max(0, attempts - 1)

    def domain_summary(self, domain: str) -> dict[str, Any]:
        """What building ``domain`` took: phase 1 (no task), phase 2 per task, by role."""
        with self._lock:
            prefix = f"{domain}/"
            tasks = {k: dict(v) for k, v in sorted(self.by_task.items()) if k.startswith(prefix)}
            total = dict(self.by_domain.get(domain, _bucket()))
            phase2 = _bucket()
            for v in tasks.values():
                for k in phase2:
                    phase2[k] += v[k]
            phase1 = {k: total[k] - phase2[k] for k in total}
            tools = {k.removeprefix(prefix): dict(v) for k, v in sorted(self.by_tool.items()) if k.startswith(prefix)}
            return {"total": total, "phase1": phase1, "phase2": phase2, "by_task": tasks, "by_tool": tools,
                    "by_role": {r: dict(v) for r, v in sorted(self.by_domain_role.get(domain, {}).items())}}

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {
                "total": dict(self.total),
                "fresh": dict(self.fresh),
                "requests": self.requests,
                "retries": self.retries,
                "cache_hits": self.cache_hits,
                "by_role": {k: dict(v) for k, v in sorted(self.by_role.items())},
                "by_domain": {k: dict(v) for k, v in sorted(self.by_domain.items())},
                "by_task": {k: dict(v) for k, v in sorted(self.by_task.items())},
            }


def merge_domain_summaries(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Add two :meth:`TokenLedger.domain_summary` records (a resumed build continues the old one)."""

    def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        keys = set(a) | set(b)
        return {k: int(a.get(k, 0)) + int(b.get(k, 0)) for k in sorted(keys)}

    out: dict[str, Any] = {}
    for k in ("total", "phase1", "phase2"):
        out[k] = add(old.get(k, {}), new.get(k, {}))
    for k in ("by_task", "by_role", "by_tool"):
        merged = {kk: dict(vv) for kk, vv in old.get(k, {}).items()}
        for kk, vv in new.get(k, {}).items():
            merged[kk] = add(merged.get(kk, {}), vv)
        out[k] = dict(sorted(merged.items()))
    return out


def cost_report(summary: dict[str, Any], admitted: list[str], accepted: list[str]) -> dict[str, Any]:
    """Tokens per admitted tool and per accepted task (a :meth:`TokenLedger.domain_summary` record).

    Each unit carries the overhead that produced it: Phase 1 tokens (domain, schema, database,
    dependency agents and the tools that were dropped) spread over the admitted tools, Phase 2
    tokens (rejected attempts included) over the accepted tasks. ``own`` is a tool's or task's own
    requests only.
    """
    p1 = int(summary.get("phase1", {}).get("total_tokens", 0))
    p2 = int(summary.get("phase2", {}).get("total_tokens", 0))
    by_tool = summary.get("by_tool", {})
    by_task = summary.get("by_task", {})
    own_tools = {t: int(by_tool.get(t, {}).get("total_tokens", 0)) for t in admitted}
    own_tasks = {t: int(by_task.get(t, {}).get("total_tokens", 0)) for t in accepted}
    return {
        "admitted_tools": len(admitted), "accepted_tasks": len(accepted),
        "per_admitted_tool": round(p1 / len(admitted)) if admitted else None,
        "per_accepted_task": round(p2 / len(accepted)) if accepted else None,
        "own_per_admitted_tool": round(sum(own_tools.values()) / len(admitted)) if admitted else None,
        "own_per_accepted_task": round(sum(own_tasks.values()) / len(accepted)) if accepted else None,
        "tools": own_tools, "tasks": own_tasks,
    }

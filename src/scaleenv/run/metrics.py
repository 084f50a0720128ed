"""Avg@k, Pass@k and Pass^k over n >= k trials per task (tau-bench family), per domain and overall.

For a task with ``n`` trials of which ``c`` succeeded:

    Pass@k = 1 - C(n - c, k) / C(n, k)     the chance that at least one of k trials (drawn without
                                           replacement from the n) succeeds (Chen et al. 2021)
    Pass^k = C(c, k) / C(n, k)             the chance that all k succeed (tau-bench's pass^k)
    Avg@k  = mean reward of the n trials   the expected mean reward of k trials (unbiased for any k <= n)

Each is averaged over the tasks that have at least k trials. Rewards are the episodes' scores in
[0, 1]; success is the reward's ``success`` flag (a score of 1 in the default binary reward).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from math import comb
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k trials succeeds) from c successes in n trials."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(all k trials succeed) from c successes in n trials."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def avg_at_k(scores: list[float], k: int) -> float:
    """Unbiased estimate of the expected mean reward of k trials: the mean of all n >= k scores."""
    _check(len(scores), 0, k)
    return sum(scores) / len(scores)


def _check(n: int, c: int, k: int) -> None:
    if not (1 <= k <= n and 0 <= c <= n):
        raise ValueError(f"need 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _block(per_task: dict[str, list[tuple[float, bool]]], ks: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"avg_at_k": {}, "pass_at_k": {}, "pass_hat_k": {}, "tasks_at_k": {}}
    for k in ks:
        eligible = [v for v in per_task.values() if len(v) >= k]
        out["tasks_at_k"][str(k)] = len(eligible)
        out["avg_at_k"][str(k)] = _mean([avg_at_k([s for s, _ in v], k) for v in eligible])
        out["pass_at_k"][str(k)] = _mean([pass_at_k(len(v), sum(ok for _, ok in v), k) for v in eligible])
        out["pass_hat_k"][str(k)] = _mean([pass_hat_k(len(v), sum(ok for _, ok in v), k) for v in eligible])
    scores = [s for v in per_task.values() for s, _ in v]
    out["num_tasks"] = len(per_task)
    out["num_episodes"] = len(scores)
    out["avg_reward"] = _mean(scores)
    return out


def summarize(records: Iterable[dict[str, Any]], k_max: int) -> dict[str, Any]:
    """Metrics for k = 1..k_max from records with ``task_id``, ``domain``, ``score``, ``success`` and
    optionally ``termination``. Returns the overall block with ``per_domain`` (a list sorted by domain)."""
    ks = list(range(1, max(1, k_max) + 1))
    per_task: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    domain_of: dict[str, str] = {}
    terms: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in records:
        per_task[r["task_id"]].append((float(r["score"]), bool(r["success"])))
        domain_of[r["task_id"]] = r["domain"]
        terms[r["domain"]][r.get("termination") or "unknown"] += 1
    overall = _block(per_task, ks)
    overall["terminations"] = _sum_counts(terms.values())
    per_domain = []
    for d in sorted(set(domain_of.values())):
        block = _block({t: v for t, v in per_task.items() if domain_of[t] == d}, ks)
        per_domain.append({"domain": d, **block, "terminations": dict(sorted(terms[d].items()))})
    overall["per_domain"] = per_domain
    return overall


def _sum_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for c in counts:
        for k, v in c.items():
            total[k] += v
    return dict(sorted(total.items()))

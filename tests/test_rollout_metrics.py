"""Avg@k, Pass@k and Pass^k: hand-computed values, brute-force unbiasedness, per-domain summaries."""

from __future__ import annotations

import itertools

import pytest

from scaleenv.run.metrics import avg_at_k, pass_at_k, pass_hat_k, summarize


@pytest.mark.parametrize(
    "n, c, k, want",
    [
        (4, 0, 1, 0.0),
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),          # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (4, 2, 2, 5 / 6),        # 1 - C(2,2)/C(4,2) = 1 - 1/6
        (4, 2, 3, 1.0),          # n - c < k: some success is always drawn
        (4, 4, 4, 1.0),
        (5, 2, 2, 0.7),          # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 4, 1 - 35 / 210),
    ],
)
def test_pass_at_k_hand_values(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(want)


@pytest.mark.parametrize(
    "n, c, k, want",
    [
        (4, 4, 4, 1.0),
        (4, 3, 4, 0.0),
        (4, 2, 2, 1 / 6),        # C(2,2)/C(4,2)
        (4, 3, 2, 0.5),          # C(3,2)/C(4,2) = 3/6
        (5, 3, 2, 0.3),          # 3/10
        (4, 1, 1, 0.25),
        (8, 6, 3, 20 / 56),
    ],
)
def test_pass_hat_k_hand_values(n, c, k, want):
    assert pass_hat_k(n, c, k) == pytest.approx(want)


def test_avg_at_k_is_the_mean_of_all_trials():
    assert avg_at_k([1.0, 0.0, 1.0, 1.0], 1) == pytest.approx(0.75)
    assert avg_at_k([1.0, 0.0, 1.0, 1.0], 4) == pytest.approx(0.75)
    assert avg_at_k([0.5, 0.25], 2) == pytest.approx(0.375)


@pytest.mark.parametrize("outcomes", [(1, 0, 0, 1, 0), (1, 1, 1, 0), (0, 0, 0), (1, 0, 1, 0, 1, 1)])
def test_estimators_are_unbiased_by_enumeration(outcomes):
    """Averaged over every k-subset of the n trials, the empirical any/all/mean equal the estimators."""
    n, c = len(outcomes), sum(outcomes)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
        assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))
        assert avg_at_k([float(x) for x in outcomes], k) == pytest.approx(
            sum(sum(s) / k for s in subsets) / len(subsets))


@pytest.mark.parametrize("n, c, k", [(3, 1, 4), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_invalid_counts_raise(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def _records(task: str, domain: str, outcomes: list[int], termination: str = "user_done") -> list[dict]:
    return [{"task_id": task, "domain": domain, "score": float(o), "success": bool(o), "termination": termination}
            for o in outcomes]


def test_summarize_per_domain_and_overall():
    recs = (_records("a/1", "a", [1, 1, 0, 1]) + _records("a/2", "a", [0, 0, 0, 0])
            + _records("b/1", "b", [1, 1, 1, 1]) + _records("b/2", "b", [1, 0], termination="error"))
    out = summarize(recs, 4)
    a, b = out["per_domain"]
    assert a["domain"] == "a" and b["domain"] == "b"
    # domain a: task 1 has c=3 of 4, task 2 has c=0 of 4
    assert a["avg_at_k"]["1"] == pytest.approx((0.75 + 0.0) / 2)
    assert a["pass_at_k"]["2"] == pytest.approx((1.0 + 0.0) / 2)          # 1 - C(1,2)/C(4,2) = 1
    assert a["pass_hat_k"]["2"] == pytest.approx((3 / 6 + 0.0) / 2)       # C(3,2)/C(4,2)
    assert a["pass_hat_k"]["4"] == pytest.approx(0.0)
    # domain b: task b/2 has only 2 trials, so it counts for k <= 2 only
    assert b["tasks_at_k"] == {"1": 2, "2": 2, "3": 1, "4": 1}
    assert b["pass_hat_k"]["2"] == pytest.approx((1.0 + 0.0) / 2)
    assert b["pass_hat_k"]["3"] == pytest.approx(1.0)
    assert b["avg_at_k"]["4"] == pytest.approx(1.0)
    assert b["terminations"] == {"error": 2, "user_done": 4}
    # overall: averaged over tasks (4 tasks at k=1, 3 at k=4)
    assert out["avg_at_k"]["1"] == pytest.approx((0.75 + 0.0 + 1.0 + 0.5) / 4)
    assert out["pass_at_k"]["1"] == pytest.approx((0.75 + 0.0 + 1.0 + 0.5) / 4)
    assert out["pass_hat_k"]["4"] == pytest.approx((0.0 + 0.0 + 1.0) / 3)
    assert out["num_tasks"] == 4 and out["num_episodes"] == 14
    assert out["avg_reward"] == pytest.approx((3 + 0 + 4 + 1) / 14)
    assert out["terminations"] == {"error": 2, "user_done": 12}


def test_summarize_with_no_task_reaching_k_reports_none():
    out = summarize(_records("a/1", "a", [1]), 3)
    assert out["pass_at_k"] == {"1": 1.0, "2": None, "3": None}
    assert out["tasks_at_k"] == {"1": 1, "2": 0, "3": 0}
    empty = summarize([], 2)
    assert empty["num_episodes"] == 0 and empty["avg_reward"] is None and empty["per_domain"] == []

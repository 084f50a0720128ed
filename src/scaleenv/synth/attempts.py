"""Phase 2's attempt loop, shared by every back end: ask for tasks until enough are accepted,
dropping duplicates, counting every rejection, and writing as it goes so that a crash loses nothing."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.synth.graph.build import ToolGraph
from scaleenv.universe import read_json, read_tasks
from scaleenv.utils.fs import atomic_write_text

Progress = Callable[[str, str, int, int], None]  # (domain, stage, done, total)


def _load_attempt_log(path: Path) -> tuple[int, Counter[str]]:
    nxt = 0
    rej: Counter[str] = Counter()
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


def load_phase1(ddir: Path) -> tuple[DomainSpec, bytes, dict[str, Any], ToolGraph, int]:
    """A finished domain's Phase 1 artifacts: (spec, base snapshot, tests report, graph, derived tools)."""
    spec = DomainSpec.model_validate(read_json(ddir / "spec.json"))
    base = (ddir / "base.sqlite").read_bytes()
    tests = read_json(ddir / "tests.json")
    return spec, base, tests, ToolGraph.from_json(read_json(ddir / "graph.json")), tests["tools"]


def run_task_attempts(root: Path, name: str, k: int, resume: bool, make_task: Callable[[int], Task],
                      max_attempts: int, progress: Progress | None = None,
                      after_attempt: Callable[[int], None] | None = None) -> tuple[list[Task], int, Counter[str], bool]:
    """Phase 2's attempt loop, shared by both back ends: call ``make_task(attempt)`` until ``k`` tasks
    are accepted (or ``max_attempts`` are spent), dropping duplicates and counting every rejection.

    Each accepted task is flushed to ``tasks/<d>.partial.jsonl`` and each attempt to
    ``domains/<d>/attempts.jsonl`` as it happens, so a crash loses nothing; with ``resume`` the loop
    continues where they stop. Returns (tasks, attempts, rejections, whether Phase 2 was already done).
    """
    from scaleenv.synth.tasks.generate import TaskRejected
    from scaleenv.synth.tasks.reasons import Reason

    ddir, tdir = root / "domains" / name, root / "tasks"
    final, partial, log = tdir / f"{name}.jsonl", tdir / f"{name}.partial.jsonl", ddir / "attempts.jsonl"
    if resume and final.exists():
        attempt, rejections = _load_attempt_log(log)
        tasks = list(read_tasks(final))
        unique = dedup_tasks(tasks)
        if len(unique) != len(tasks):  # an older build's duplicated lines: keep each task once
            atomic_write_text(final, "".join(t.to_jsonl() + "\n" for t in unique))
        return unique, attempt, rejections, True
    tdir.mkdir(parents=True, exist_ok=True)
    tasks = []
    if resume and partial.exists():
        tasks = dedup_tasks(list(read_tasks(partial, tolerate_torn_tail=True)))
        attempt, rejections = _load_attempt_log(log)
        if tasks:
            attempt = max(attempt, tasks[-1].attempt + 1)
    else:
        attempt, rejections = 0, Counter[str]()
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
                    raise TaskRejected(Reason.DUPLICATE)
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


def dedup_tasks(tasks: list[Task]) -> list[Task]:
    """Each task once (by id, and by chain and initial state), in file order."""
    ids: set[str] = set()
    keys: set[tuple[str, str]] = set()
    out = []
    for t in tasks:
        k = t.dedup_key()
        if t.id in ids or k in keys:
            continue
        ids.add(t.id)
        keys.add(k)
        out.append(t)
    return out

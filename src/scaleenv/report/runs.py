"""Rollout runs for the viewer: a ``results.json`` and, when present, its trajectories JSONL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaleenv.errors import ScaleEnvError


class ReportError(ScaleEnvError):
    """The report cannot be written: unreadable results, or an output path that is not ours."""


@dataclass
class Run:
    """One rollout: its results file, settings and where its trajectories are."""

    index: int
    path: Path
    results: dict[str, Any]
    trajectories: Path | None
    label: str
    skipped_lines: int = 0
    episodes: list[list[Any]] = field(default_factory=list)
    """Index rows (see ``site.EPISODE_COLUMNS``), filled while the chunks are written."""


def load_run(index: int, path: Path, taken: set[str]) -> Run:
    """Read one ``results.json``; find its trajectories file (recorded path, else ``<stem>.trajectories.jsonl``)."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path} does not exist; pass the results.json written by `scaleenv rollout`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"cannot read {path}: {e}") from None
    if not isinstance(res, dict) or not isinstance(res.get("settings", {}), dict):
        raise ReportError(f"{path} is not a results.json from `scaleenv rollout`")
    candidates = []
    if isinstance(res.get("trajectories"), str):
        rec = Path(res["trajectories"])
        candidates += [rec, path.parent / rec.name]
    candidates.append(path.with_name(path.stem + ".trajectories.jsonl"))
    traj = next((c for c in candidates if c.is_file()), None)
    s = res.get("settings") or {}
    base = f"{s.get('agent', '?')} · {path.stem}"
    label, n = base, 2
    while label in taken:
        label, n = f"{base} ({n})", n + 1
    taken.add(label)
    return Run(index, path, res, traj, label)


def records(run: Run) -> Iterator[dict[str, Any]]:
    """Episode records: full trajectories when the JSONL exists (torn or corrupt lines skipped and
    counted), else the summaries kept in results.json (no messages)."""
    if run.trajectories is None:
        for s in run.results.get("simulations") or []:
            if isinstance(s, dict) and "id" in s:
                yield _from_summary(s)
        return
    with run.trajectories.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                run.skipped_lines += 1
                continue
            if not _well_formed(rec):
                run.skipped_lines += 1
                continue
            rec.pop("tools", None)  # schemas are the same for every episode of a task: not shown
            yield rec


def _well_formed(rec: object) -> bool:
    """The fields the viewer reads have the types a trajectory record gives them."""
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
        return False
    kinds = {"reward": dict, "timings": dict, "usage": dict, "messages": list}
    if any(rec.get(k) is not None and not isinstance(rec[k], t) for k, t in kinds.items()):
        return False
    if not all(isinstance(m, dict) for m in rec.get("messages") or []):
        return False
    try:
        float((rec.get("reward") or {}).get("score", 0) or 0)
        float((rec.get("timings") or {}).get("total_s", 0) or 0)
        for k in ("steps", "tool_calls", "tool_errors", "user_turns"):
            int(rec.get(k) or 0)
    except (TypeError, ValueError):
        return False
    return True


def _from_summary(s: dict[str, Any]) -> dict[str, Any]:
    ri = s.get("reward_info") or {}
    return {"id": s["id"], "task_id": s.get("task_id", ""), "domain": s.get("domain", ""), "trial": s.get("trial", 0),
            "seed": s.get("seed"), "termination": s.get("termination_reason", "?"), "error": s.get("error"),
            "reward": {"score": ri.get("reward", 0.0), "success": ri.get("success", False),
                       "components": ri.get("components", {}), "diff": ri.get("diff", [])},
            "steps": s.get("steps", 0), "tool_calls": s.get("tool_calls", 0), "tool_errors": s.get("tool_errors", 0),
            "user_turns": s.get("user_turns", 0), "timings": {"total_s": s.get("duration") or 0.0},
            "usage": s.get("usage") or {}, "messages": []}

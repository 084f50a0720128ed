"""``scaleenv export``: a universe's tasks as the dataset files each trainer reads.

    verl       parquet  data_source, agent_name, ability, reward_model, prompt, extra_info
    skyrl      parquet  data_source, env_class, reward_spec, prompt, extra_info
    trl        parquet  env_id, task_id, environment, universe, mode, prompt, task_json
    verifiers  parquet  task, answer, prompt, info        (the classic verifiers / HF dataset columns)
    jsonl      JSONL    env_id, task_id, universe, mode, prompt, tools, task_json
    tau2       JSON     tau2-bench tasks (a ``.json`` path), or a directory of
                        ``<domain>/{tasks.json, split_tasks.json, db.json, policy.md, tools.json}``

Rows carry references first (``env_id`` = the domain, ``task_id``, ``universe`` = the absolute
universe directory) and blobs last. The task travels as a JSON *string* (``task_json``): parquet
would union heterogeneous nested objects into one wide struct padded with nulls. Parquet needs
``pyarrow`` (``pip install 'scaleenv[export]'``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleenv.formats.task import Task
from scaleenv.integrations.session import (
    USER_TOOL_SCHEMA,
    IntegrationError,
    TaskSource,
    opening_messages,
    task_source,
)

AGENT_NAME = "scaleenv_agent"
ENV_CLASS = "scaleenv"


def data_source(domain: str) -> str:
    return f"scaleenv/{domain}"


def _refs(source: TaskSource, task: Task, mode: str) -> dict[str, Any]:
    return {"env_id": task.domain, "task_id": task.id, "universe": str(source.root), "mode": mode}


def _extra_info(source: TaskSource, task: Task, index: int, mode: str) -> dict[str, Any]:
    return {"index": index, **_refs(source, task, mode), "tool_selection": [*task.tools, USER_TOOL_SCHEMA["function"]
                                                                             ["name"]],
            "task_json": task.to_jsonl()}


Prompt = list[dict[str, str]]


def _verl_row(source: TaskSource, task: Task, index: int, mode: str, prompt: Prompt) -> dict[str, Any]:
    return {"data_source": data_source(task.domain), "agent_name": AGENT_NAME, "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": task.id}, "prompt": prompt,
            "extra_info": _extra_info(source, task, index, mode)}


def _skyrl_row(source: TaskSource, task: Task, index: int, mode: str, prompt: Prompt) -> dict[str, Any]:
    return {"data_source": data_source(task.domain), "env_class": ENV_CLASS,
            "reward_spec": {"method": "rule", "ground_truth": task.id}, "prompt": prompt,
            "extra_info": _extra_info(source, task, index, mode)}


def _trl_row(source: TaskSource, task: Task, index: int, mode: str, prompt: Prompt) -> dict[str, Any]:
    from scaleenv.integrations.session import tool_set_name

    refs = _refs(source, task, mode)
    return {"env_id": refs["env_id"], "task_id": refs["task_id"], "environment": tool_set_name(task),
            "universe": refs["universe"], "mode": mode, "prompt": prompt, "task_json": task.to_jsonl()}


def _verifiers_row(source: TaskSource, task: Task, index: int, mode: str, prompt: Prompt) -> dict[str, Any]:
    info = {**_refs(source, task, mode), "task_json": task.to_jsonl()}
    return {"task": task.domain, "answer": task.id, "prompt": prompt,
            "info": json.dumps(info, sort_keys=False, ensure_ascii=False)}


def _jsonl_row(source: TaskSource, task: Task, index: int, mode: str, prompt: Prompt) -> dict[str, Any]:
    spec = source.spec(task.domain)
    tools = [t.openai_schema() for t in spec.tools if t.name in set(task.tools)] + [USER_TOOL_SCHEMA]
    return {**_refs(source, task, mode), "prompt": prompt, "tools": tools, "task_json": task.to_jsonl()}


@dataclass(frozen=True)
class ExportFormat:
    """One export format: how its files are written and, for row formats, how a task becomes a row."""

    name: str
    file: str
    """``parquet``, ``jsonl`` or ``tau2`` (tau2-bench's JSON files, written by :mod:`scaleenv.integrations.tau2`)."""
    row: Callable[[TaskSource, Task, int, str, Prompt], dict[str, Any]] | None = None


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("verl", "parquet", _verl_row),
    ExportFormat("trl", "parquet", _trl_row),
    ExportFormat("skyrl", "parquet", _skyrl_row),
    ExportFormat("verifiers", "parquet", _verifiers_row),
    ExportFormat("jsonl", "jsonl", _jsonl_row),
    ExportFormat("tau2", "tau2"),
)}
"""The export formats by name; adding one is one entry here (and its row function)."""
PARQUET_FORMATS = tuple(n for n, f in FORMATS.items() if f.file == "parquet")


def task_row(fmt: str, source: TaskSource, task: Task, index: int, mode: str = "conversational") -> dict[str, Any]:
    """One dataset row of ``fmt`` (a parquet format or ``jsonl``) for ``task``."""
    f = FORMATS.get(fmt)
    if f is None or f.row is None:
        raise IntegrationError(f"unknown format {fmt!r} for rows; use one of "
                               f"{', '.join(n for n, x in FORMATS.items() if x.row)}")
    return f.row(source, task, index, mode, opening_messages(task, source.spec(task.domain), mode))


def verl_configs(out_dir: str | Path) -> dict[str, Path]:
    """Write ``scaleenv_agent_loop.yaml`` (the loop registry entry for verl's ``agent_loop_config_path``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    loop = out / "scaleenv_agent_loop.yaml"
    loop.write_text(f"- name: {AGENT_NAME}\n  _target_: scaleenv.integrations.verl.ScaleEnvAgentLoop\n",
                    encoding="utf-8")
    return {"agent_loop": loop}


def select_tasks(source: TaskSource, domains: Iterable[str] = ()) -> list[Task]:
    domains = list(domains)
    for d in domains:
        if d not in source.universe.domains:
            raise IntegrationError(f"unknown domain {d!r} in {source.root}; it has: "
                                   f"{', '.join(source.universe.domains) or 'none'}")
    tasks = [t for d in (domains or source.universe.domains) for t in source.tasks(d)]
    if not tasks:
        raise IntegrationError(f"{source.root} has no tasks to export; build some with "
                               "`scaleenv build --tasks-per-domain K`")
    return tasks


def write_parquet(rows: list[dict[str, Any]], out: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise IntegrationError("parquet exports need pyarrow: pip install 'scaleenv[export]'") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(out)


def write_jsonl(rows: Iterable[dict[str, Any]], out: Path) -> None:
    from scaleenv.utils.fs import atomic_write_text

    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def export_universe(universe: str | Path, fmt: str, out: str | Path, *, mode: str = "conversational",
                    domains: Iterable[str] = ()) -> dict[str, Any]:
    """Write the tasks of a universe in ``fmt`` to ``out``; return a small summary."""
    if fmt not in FORMATS:
        raise IntegrationError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    if mode not in ("conversational", "solo"):
        raise IntegrationError(f"unknown --mode {mode!r}; use conversational or solo")
    out = Path(out)
    source = task_source(universe)
    tasks = select_tasks(source, domains)
    if FORMATS[fmt].file == "tau2":
        from scaleenv.integrations.tau2 import write_tau2

        files = write_tau2(source, tasks, out)
        return {"format": fmt, "out": str(out), "tasks": len(tasks), "files": [str(f) for f in files]}
    if out.is_dir():
        raise IntegrationError(f"--out {out} is a directory; pass a file path such as {out / (fmt + '.parquet')}")
    rows = [task_row(fmt, source, t, i, mode) for i, t in enumerate(tasks)]
    if FORMATS[fmt].file == "parquet":
        write_parquet(rows, out)
    else:
        write_jsonl(rows, out)
    return {"format": fmt, "out": str(out), "tasks": len(rows), "files": [str(out)]}


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an exported parquet or JSONL file (parquet through pyarrow)."""
    path = Path(path)
    if path.suffix == ".jsonl" or path.suffix == ".json":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


__all__ = ["FORMATS", "ExportFormat", "export_universe", "read_rows", "task_row", "task_source", "verl_configs"]


def curriculum_rows(path: str | Path, fmt: str = "verl", *, mode: str = "conversational",
                    reward_shape: str | None = None) -> list[dict[str, Any]]:
    """Dataset rows (``fmt``: verl, trl, skyrl, verifiers or jsonl) of the training set a
    ``scaleenv curriculum`` step wrote (its directory), in its order: the next round's dataset.
    ``reward_shape`` goes into each row (``extra_info``/``info`` where the format has one), where
    the adapters read it."""
    from scaleenv.reward.subgoals import REWARD_SHAPES
    from scaleenv.run.curriculum import CurriculumError, curriculum_task_ids

    if reward_shape is not None and reward_shape not in REWARD_SHAPES:
        raise IntegrationError(f"unknown reward shape {reward_shape!r}; use {', '.join(REWARD_SHAPES)}")
    try:
        ids = curriculum_task_ids(path)
    except CurriculumError as e:
        raise IntegrationError(str(e)) from None
    source = task_source(path)
    rows = [task_row(fmt, source, source.task(t), i, mode) for i, t in enumerate(ids)]
    if reward_shape is not None:
        for row in rows:
            nested = next((k for k in ("extra_info", "info") if isinstance(row.get(k), dict)), None)
            (row[nested] if nested else row)["reward_shape"] = reward_shape
    return rows

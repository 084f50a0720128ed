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
from collections.abc import Iterable
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

FORMATS = ("verl", "trl", "skyrl", "verifiers", "jsonl", "tau2")
PARQUET_FORMATS = ("verl", "trl", "skyrl", "verifiers")
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


def task_row(fmt: str, source: TaskSource, task: Task, index: int, mode: str = "conversational") -> dict[str, Any]:
    """One dataset row of ``fmt`` (a parquet format or ``jsonl``) for ``task``."""
    prompt = opening_messages(task, source.spec(task.domain), mode)
    if fmt == "verl":
        return {"data_source": data_source(task.domain), "agent_name": AGENT_NAME, "ability": "tool_use",
                "reward_model": {"style": "rule", "ground_truth": task.id}, "prompt": prompt,
                "extra_info": _extra_info(source, task, index, mode)}
    if fmt == "skyrl":
        return {"data_source": data_source(task.domain), "env_class": ENV_CLASS,
                "reward_spec": {"method": "rule", "ground_truth": task.id}, "prompt": prompt,
                "extra_info": _extra_info(source, task, index, mode)}
    if fmt == "trl":
        refs = _refs(source, task, mode)
        from scaleenv.integrations.trl import tool_set_name

        return {"env_id": refs["env_id"], "task_id": refs["task_id"], "environment": tool_set_name(task),
                "universe": refs["universe"], "mode": mode, "prompt": prompt, "task_json": task.to_jsonl()}
    if fmt == "verifiers":
        info = {**_refs(source, task, mode), "task_json": task.to_jsonl()}
        return {"task": task.domain, "answer": task.id, "prompt": prompt,
                "info": json.dumps(info, sort_keys=False, ensure_ascii=False)}
    if fmt == "jsonl":
        spec = source.spec(task.domain)
        tools = [t.openai_schema() for t in spec.tools if t.name in set(task.tools)] + [USER_TOOL_SCHEMA]
        return {**_refs(source, task, mode), "prompt": prompt, "tools": tools, "task_json": task.to_jsonl()}
    raise IntegrationError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


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
    if fmt == "tau2":
        from scaleenv.integrations.tau2 import write_tau2

        files = write_tau2(source, tasks, out)
        return {"format": fmt, "out": str(out), "tasks": len(tasks), "files": [str(f) for f in files]}
    if out.is_dir():
        raise IntegrationError(f"--out {out} is a directory; pass a file path such as {out / (fmt + '.parquet')}")
    rows = [task_row(fmt, source, t, i, mode) for i, t in enumerate(tasks)]
    if fmt in PARQUET_FORMATS:
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

    return pq.read_table(path).to_pylist()


__all__ = ["FORMATS", "export_universe", "read_rows", "task_row", "task_source"]

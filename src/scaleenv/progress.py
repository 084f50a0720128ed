"""Rich progress bars and summary tables for the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console as _Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def Console(*, stderr: bool = False) -> _Console:  # noqa: N802 - a factory standing in for rich's class
    """A console that is at least 120 columns wide when output is not a terminal (pipes, CI logs)."""
    console = _Console(stderr=stderr)
    if not console.is_terminal:
        console = _Console(width=max(console.width, 120), stderr=stderr)
    return console


class BuildProgress:
    """One overall bar for domains and one per domain for its tasks."""

    def __init__(self, domains: list[str], tasks_per_domain: int, enabled: bool = True):
        self.enabled = enabled
        self.k = tasks_per_domain
        self.progress = Progress(
            TextColumn("[bold]{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), disable=not enabled, transient=False,
        )
        self.overall = self.progress.add_task("domains", total=len(domains))
        self.rows: dict[str, Any] = {}
        self.finished: set[str] = set()

    def __enter__(self) -> BuildProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def stop(self) -> None:
        self.progress.stop()

    def update(self, domain: str, stage: str, done: int, total: int) -> None:
        if domain not in self.rows:
            self.rows[domain] = self.progress.add_task(domain, total=max(total, self.k, 1))
        row = self.rows[domain]
        if stage == "tasks":
            self.progress.update(row, completed=done, total=max(total, 1))
        finished = (stage == "tasks" and done >= total) or (stage == "tools" and self.k == 0)
        if finished and domain not in self.finished:
            self.finished.add(domain)
            self.progress.update(row, completed=max(total, 1))
            self.progress.advance(self.overall)


def print_build_summary(results: list[Any], out: Path, seconds: float) -> None:
    table = Table(title=f"universe: {out}")
    for col in ("domain", "tables", "tools", "edges", "tasks", "attempts", "top rejection", "phase1 s", "phase2 s"):
        table.add_column(col, justify="left" if col in ("domain", "top rejection") else "right")
    for r in results:
        top = max(r.rejections.items(), key=lambda kv: kv[1], default=("-", 0))
        table.add_row(r.domain, str(r.tables), f"{r.tools}/{r.derived_tools}", str(r.edges), str(r.tasks),
                      str(r.attempts), f"{top[0]} ({top[1]})" if top[1] else "-", f"{r.phase1_s:.2f}",
                      f"{r.phase2_s:.2f}")
    tasks = sum(r.tasks for r in results)
    table.add_row("total", str(sum(r.tables for r in results)), str(sum(r.tools for r in results)),
                  str(sum(r.edges for r in results)), str(tasks), str(sum(r.attempts for r in results)), "",
                  "", "", style="bold")
    Console().print(table)
    Console().print(f"{tasks} verified tasks in {seconds:.1f} s ({tasks / max(seconds, 1e-9):.1f} tasks/s)")


def print_counts(counts: dict[str, Any]) -> None:
    table = Table()
    for col in ("domain", "tables", "tools", "edges", "tasks"):
        table.add_column(col, justify="left" if col == "domain" else "right")
    for d in counts["per_domain"]:
        table.add_row(d["domain"], str(d["tables"]), str(d["tools"]), str(d["edges"]), str(d["tasks"]))
    table.add_row("total", str(counts["tables"]), str(counts["tools"]), str(counts["edges"]), str(counts["tasks"]),
                  style="bold")
    console = Console()
    console.print(table)
    for key in ("families", "tiers"):
        if counts.get(key):
            console.print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in counts[key].items()))

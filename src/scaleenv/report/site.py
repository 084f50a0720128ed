"""``scaleenv report``: write a self-contained static site for a universe and its rollouts.

Layout (``--out DIR``)::

    index.html domains.html tasks.html trajectories.html plots.html
    assets/app.css assets/app.js
    data/domains/dNNN.js                one domain: graph SVG, tool cards, tables, tests
    data/tasks/index.js, cNNNNN.js      the task list; task details in chunks of CHUNK
    data/runs/rN/index.js, cNNNNN.js    one run's episode list; episodes in chunks of CHUNK
    scaleenv-report.json                what was written (also marks the folder as ours)

With ``--out NAME.html`` the overview is NAME.html and the rest goes to ``NAME_files/`` beside it.
Data files are scripts (``SE.put(name, JSON.parse("..."))``) because browsers refuse ``fetch`` on
``file://``; the pages load them on demand, so a big universe costs only what is looked at.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from scaleenv.formats.task import Task
from scaleenv.report.counts import universe_counts
from scaleenv.report.pages import (
    domains_body,
    overview_body,
    plots_body,
    shell,
    tasks_body,
    trajectories_body,
)
from scaleenv.report.render import (
    episode_html,
    table,
    tables_html,
    task_family,
    task_html,
    task_tier,
    tests_html,
    tool_info,
)
from scaleenv.report.runs import ReportError, Run, load_run, records
from scaleenv.report.svg import graph_svg
from scaleenv.universe import Universe, read_json

CHUNK = 100
MARKER = "scaleenv-report.json"
TASK_COLUMNS = ["id", "domain", "family", "tier", "chain_length", "tools", "instruction", "chunk", "request_start",
                "request_end"]
EPISODE_COLUMNS = ["id", "task_id", "domain", "trial", "score", "success", "termination", "steps", "tool_calls",
                   "tool_errors", "user_turns", "ms", "chunk"]


@dataclass
class SiteInfo:
    """Where the site went and what it holds."""

    index: Path
    folder: Path
    domains: int
    tasks: int
    episodes: int
    files: int


def js_data(name: str, obj: object) -> str:
    """A data file: a script handing ``obj`` to the page's loader (``JSON.parse`` of a string literal
    is the fastest way for a browser to read a large object)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"SE.put({json.dumps(name)},JSON.parse({json.dumps(text, ensure_ascii=True)}));\n"


class _Writer:
    def __init__(self, folder: Path):
        self.folder = folder
        self.files = 0

    def text(self, rel: str, text: str) -> None:
        p = self.folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        self.files += 1

    def data(self, name: str, obj: object) -> None:
        self.text(f"data/{name}.js", js_data(name, obj))


def _targets(out: Path) -> tuple[Path, Path, str]:
    """(index page, site folder, the folder's name as seen from the index page or '')."""
    if out.suffix.lower() in (".html", ".htm"):
        folder = out.parent / f"{out.stem}_files"
        return out, folder, folder.name + "/"
    return out / "index.html", out, ""


def _check_target(folder: Path, index: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise ReportError(f"{folder} exists and is not a folder; pick another --out")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise ReportError(f"{folder} is not empty and holds no scaleenv report; pick an empty or new --out")
    if index.exists() and index.is_dir():
        raise ReportError(f"{index} is a folder; pick another --out")


def _domain_data(u: Universe, name: str, n_tasks: int, link: str) -> tuple[dict[str, Any], list[Any], Counter[str]]:
    """One domain's data file (graph SVG, tool cards, tables, tests), its overview row and rejections."""
    spec = json.loads(u.spec(name).model_dump_json())
    graph = u.graph(name)
    tests = u.tests(name)
    rep_path = u.domain_dir(name) / "tasks_report.json"
    rep = read_json(rep_path) if rep_path.exists() else {}
    tools = spec.get("tools", [])
    infos = {t["name"]: tool_info(t) for t in tools}
    edges = graph.get("edges", [])
    kinds = Counter(x.get("kind", "?") for x in edges)
    rejections = Counter({str(k): int(v) for k, v in (rep.get("rejections") or {}).items()})
    c = tests.get("counts", {})
    top = rejections.most_common(1)
    summary = [("html", f'<a href="{link}">{escape(name)}</a>'), len(spec.get("tables", [])), f"{len(tools)}/{tests.get('tools', len(tools))}", c.get("success", 0),
               c.get("anticipated_rejection", 0), c.get("unexpected_failure", 0), len(edges),
               n_tasks, rep.get("attempts", "-"), f"{top[0][0]} ({top[0][1]})" if top else "-"]
    rej_html = (table(["reason", "attempts"], rejections.most_common(), "compact") if rejections
                else "<p class='muted'>No task attempt was rejected.</p>")
    data = {
        "name": name, "description": spec.get("description", ""), "keywords": spec.get("keywords", []),
        "svg": graph_svg(tools, edges, [t["name"] for t in spec.get("tables", [])]),
        "tools": infos, "order": [t["name"] for t in tools], "kinds": dict(sorted(kinds.items())),
        "stats": graph.get("stats", {}), "tables": tables_html(spec), "tests": tests_html(tests, infos),
        "test_counts": c, "rejections": rej_html,
        "attempts": rep.get("attempts"), "accepted": rep.get("accepted"),
    }
    return data, summary, rejections


def _expected_change(u: Universe, task: Task, bases: dict[str, bytes]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Replay the gold chain on the task's initial world and diff the two worlds on the rows it touched."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.tools.replay import build_worlds
    from scaleenv.world.world import World

    spec = u.spec(task.domain)
    if task.domain not in bases:  # one bytes object per domain: the world's hash cache keys on it
        bases[task.domain] = u.base(task.domain)
    try:
        w = build_worlds(spec, bases[task.domain], task, check_hashes=False)
    except ScaleEnvError as exc:
        return None, str(exc)
    before = World.from_snapshot(spec, w.initial)
    try:
        changes = before.diff(w.expected, keys=w.gold_keys)
        return [{"table": c.table, "key": c.key, "kind": c.kind, "columns": {k: list(v) for k, v in c.columns.items()},
                 "before": c.before, "after": c.after} for c in changes], None
    finally:
        before.close()
        w.expected.close()


def _outcomes(runs: list[Run]) -> dict[str, list[tuple[int, str, int, int]]]:
    """Per task: ``(run index, run label, passed, episodes)`` for every run that has episodes of it."""
    out: dict[str, list[tuple[int, str, int, int]]] = {}
    for r in runs:
        acc: dict[str, list[int]] = {}
        for row in r.episodes:
            a = acc.setdefault(row[1], [0, 0])
            a[0] += row[5]
            a[1] += 1
        for task_id, (ok, n) in acc.items():
            out.setdefault(task_id, []).append((r.index, r.label, ok, n))
    return out


def _write_tasks(u: Universe, w: _Writer, outcomes: dict[str, list[tuple[int, str, int, int]]]
                 ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    tasks = u.tasks()
    tool_names: dict[str, int] = {}
    vocab: dict[str, dict[str, int]] = {"domain": {}, "family": {}, "tier": {}}

    def code(kind: str, v: str) -> int:
        return vocab[kind].setdefault(v, len(vocab[kind]))

    rows, by_id, examples, seen_dom = [], {}, [], set()
    chunk: dict[str, str] = {}
    bases: dict[str, bytes] = {}
    for i, task in enumerate(tasks):
        t = task.model_dump(mode="json")
        by_id[t["id"]] = {k: t.get(k) for k in ("id", "domain", "difficulty", "gold_chain", "family", "tier")}
        if t["domain"] not in seen_dom:
            seen_dom.add(t["domain"])
            examples.append(t)
        changes, err = _expected_change(u, task, bases)
        chunk[t["id"]] = task_html(t, changes, err, outcomes.get(t["id"], []))
        chain_tools = sorted({tool_names.setdefault(c["tool"], len(tool_names)) for c in t["gold_chain"]})
        d = t.get("difficulty") or {}
        rows.append([t["id"], code("domain", t["domain"]), code("family", task_family(t)), code("tier", task_tier(t)),
                     int(d.get("chain_length", len(t["gold_chain"]))), chain_tools, t.get("instruction", ""), i // CHUNK,
                     *_request_span(t)])
        if len(chunk) == CHUNK or i == len(tasks) - 1:
            w.data(f"tasks/c{i // CHUNK:05d}", chunk)
            chunk = {}
    w.data("tasks/index", {"columns": TASK_COLUMNS, "rows": rows, "tools": list(tool_names),
                           **{k + "s": list(v) for k, v in vocab.items()}})
    return by_id, examples


def _request_span(t: dict[str, Any]) -> tuple[int, int]:
    """Where the request sits in the instruction (after the persona, before the facts list): what
    the task list shows, while search still covers the whole instruction."""
    ins = t.get("instruction", "")
    persona = str((t.get("user_profile") or {}).get("persona") or "")
    start = len(persona) if persona and ins.startswith(persona) else 0
    end = ins.find(" Facts you know:", start)
    return start, (end if end > start else len(ins))


def _write_run(run: Run, w: _Writer) -> None:
    chunk: dict[str, str] = {}
    n = 0
    where: dict[str, int] = {}
    for rec in records(run):
        r = rec.get("reward") or {}
        t = rec.get("timings") or {}
        row = [rec["id"], str(rec.get("task_id", "")), str(rec.get("domain", "")), rec.get("trial", 0),
               float(r.get("score", 0.0) or 0.0), 1 if r.get("success") else 0, str(rec.get("termination", "?")),
               int(rec.get("steps") or 0), int(rec.get("tool_calls") or 0), int(rec.get("tool_errors") or 0),
               int(rec.get("user_turns") or 0), round(float(t.get("total_s") or 0.0) * 1000, 2), n // CHUNK]
        if rec["id"] in where:  # a resumed run re-ran it: the later record wins
            run.episodes[where[rec["id"]]] = row
        else:
            where[rec["id"]] = len(run.episodes)
            run.episodes.append(row)
        chunk[rec["id"]] = episode_html(rec, run.label)
        n += 1
        if n % CHUNK == 0:
            w.data(f"runs/r{run.index}/c{(n - 1) // CHUNK:05d}", chunk)
            chunk = {}
    if chunk:
        w.data(f"runs/r{run.index}/c{(n - 1) // CHUNK:05d}", chunk)
    run.episodes.sort(key=lambda x: (x[1], x[3], x[0]))
    s = run.results.get("settings") or {}
    w.data(f"runs/r{run.index}/index", {
        "columns": EPISODE_COLUMNS, "rows": run.episodes, "label": run.label,
        "has_messages": run.trajectories is not None, "skipped_lines": run.skipped_lines,
        "settings": {k: s.get(k) for k in ("agent", "user", "mode", "trials", "seed", "max_turns")},
    })


def build_site(universe: str | Path, results: list[Path] | None = None, out: str | Path = "report.html",
               loops: list[Path] | None = None) -> SiteInfo:
    """Write the report site for ``universe`` (and the rollouts in ``results``, and the curriculum
    loops in ``loops``: their ``loop.json``) to ``out``."""
    from scaleenv.report.curriculum import curriculum_cards, load_loop

    loop_data = [load_loop(p) for p in loops or []]
    u = Universe(universe)
    counts = universe_counts(universe)
    runs: list[Run] = []
    taken: set[str] = set()
    for i, p in enumerate(results or []):
        runs.append(load_run(i, Path(p), taken))
    index, folder, prefix = _targets(Path(out))
    _check_target(folder, index)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        w = _Writer(tmp)
        task_counts = {d["domain"]: d["tasks"] for d in counts["per_domain"]}
        domain_rows, rejections, side = [], {}, []
        for di, d in enumerate(counts["per_domain"]):
            n_tasks = task_counts.get(d["domain"], 0)
            data, summary, rej = _domain_data(u, d["domain"], n_tasks, f"{prefix}domains.html#d={di}")
            domain_rows.append(summary)
            rejections[d["domain"]] = rej
            side.append((di, d["domain"], len(data["order"]), n_tasks))
            w.data(f"domains/d{di:03d}", data)
        for run in runs:
            _write_run(run, w)
        by_id, examples = _write_tasks(u, w, _outcomes(runs))
        subtitle = f"{u.root.name} · {counts['tasks']:,} tasks"
        home = "../" + index.name if prefix else "index.html"
        pages = {
            "domains": ("Domains", domains_body(side)),
            "tasks": ("Tasks", tasks_body()),
            "trajectories": ("Trajectories", trajectories_body(bool(runs))),
            "plots": ("Plots", curriculum_cards(loop_data)
                      + plots_body(runs, by_id, [d["domain"] for d in counts["per_domain"]], rejections)),
        }
        for page, (title, body) in pages.items():
            w.text(f"{page}.html", shell(page, title, body, home=home, root="", subtitle=subtitle))
        overview = shell("index", "Overview", overview_body(str(u.root), u.manifest, counts, domain_rows, runs,
                                                            examples, prefix),
                         home=index.name, root=prefix, subtitle=subtitle)
        assets = resources.files("scaleenv.report") / "assets"
        for name in ("app.css", "app.js"):
            w.text(f"assets/{name}", (assets / name).read_text(encoding="utf-8"))
        w.data("runs/list", [{"index": r.index, "label": r.label} for r in runs])
        n_eps = sum(len(r.episodes) for r in runs)
        (tmp / MARKER).write_text(json.dumps({
            "format": "scaleenv-report/1", "universe": str(u.root), "index": index.name,
            "results": [str(r.path) for r in runs], "domains": counts["domains"], "tasks": counts["tasks"],
            "episodes": n_eps}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if prefix:  # the overview sits beside the folder
            (tmp / ".index.html").write_text(overview, encoding="utf-8")
        else:
            w.text("index.html", overview)
        _swap(tmp, folder)
        if prefix:
            (folder / ".index.html").replace(index)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SiteInfo(index, folder, counts["domains"], counts["tasks"], n_eps, w.files + 1)


def _swap(tmp: Path, folder: Path) -> None:
    """Put the freshly written site in place of an older one (ours: checked before writing)."""
    if folder.exists():
        old = folder.with_name(f".{folder.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(folder)

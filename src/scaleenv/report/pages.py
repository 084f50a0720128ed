"""The site's pages: a shared shell (navigation, assets) and the server-rendered parts of each page."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from scaleenv.formats.task import Call, chain_to_python
from scaleenv.report.render import badge, e, highlight, table, task_family, task_tier
from scaleenv.report.runs import Run
from scaleenv.report.svg import EDGE_COLORS, bar_chart, column_chart, line_chart

PAGES = (("index", "Overview"), ("domains", "Domains"), ("tasks", "Tasks"), ("trajectories", "Trajectories"),
         ("plots", "Plots"))


def shell(page: str, title: str, body: str, *, home: str, root: str, subtitle: str) -> str:
    """A full HTML page. ``root`` is the relative path to the folder holding ``assets/`` and the other
    pages; ``home`` the relative path of the overview page."""
    on = ' class="on"'
    nav = "".join(f'<a href="{e(home if p == "index" else root + p + ".html")}"'
                  f'{on if p == page else ""}>{e(label)}</a>' for p, label in PAGES)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{e(title)} · scaleenv report</title><link rel="icon" href="data:,">'
            f'<link rel="stylesheet" href="{e(root)}assets/app.css"></head>'
            f'<body data-page="{e(page)}" data-root="{e(root)}">'
            f'<header class="top"><div class="brand"><span class="logo">◆</span> scaleenv <span class="sub">{e(subtitle)}</span></div>'
            f'<nav>{nav}</nav></header><main>{body}</main>'
            f'<script src="{e(root)}assets/app.js"></script></body></html>\n')


def stat_cards(items: Sequence[tuple[str, object]]) -> str:
    return '<div class="stats">' + "".join(
        f'<div class="stat"><b>{e(f"{v:,}" if isinstance(v, int) else v)}</b><span>{e(k)}</span></div>'
        for k, v in items) + "</div>"


def _pct(x: float | str | None) -> str:
    return "-" if x is None else f"{float(x) * 100:.1f}%"


def overview_body(u_root: str, manifest: dict[str, Any], counts: dict[str, Any], domain_rows: list[list[Any]],
                  runs: Sequence[Run], examples: list[dict[str, Any]], root: str) -> str:
    build = manifest.get("build", {})
    out = [f'<div class="hero"><h1>Universe <code>{e(u_root)}</code></h1>'
           f'<p class="muted">backend {e(manifest.get("backend", "?"))} · seed {e(build.get("seed"))} · '
           f'chain length {e(build.get("chain_length"))} · status {e(manifest.get("status", "?"))}</p></div>',
           stat_cards([("domains", counts["domains"]), ("tables", counts["tables"]), ("tools", counts["tools"]),
                       ("graph edges", counts["edges"]), ("verified tasks", counts["tasks"]),
                       ("episodes", sum(len(r.episodes) for r in runs))])]
    out.append('<h2>Domains</h2><div class="card">' + table(
        ["domain", "tables", "tools admitted/derived", "tests: success", "anticipated rejections",
         "unexpected failures", "edges", "tasks", "attempts", "top rejection"], domain_rows, "sortable") + "</div>")
    if runs:
        rows = []
        for r in runs:
            res, s = r.results, r.results.get("settings") or {}
            ks = sorted(res.get("pass_hat_k") or {}, key=int)
            kmax = ks[-1] if ks else None
            ok = sum(1 for x in r.episodes if x[5])
            rows.append([("html", f'<a href="{e(root)}trajectories.html#run={r.index}">{e(r.label)}</a>'),
                         s.get("agent"), s.get("user"), s.get("mode"), s.get("trials"), len(r.episodes),
                         _pct(ok / len(r.episodes)) if r.episodes else "-",
                         _pct((res.get("avg_at_k") or {}).get("1")),
                         f"{_pct((res.get('pass_hat_k') or {}).get(kmax))} (k={kmax})" if kmax else "-",
                         res.get("errors", 0), (res.get("timings") or {}).get("wall_s", "-")])
        out.append('<h2>Rollout runs</h2><div class="card">' + table(
            ["run", "agent", "user", "mode", "trials", "episodes", "passed", "Avg@1", "Pass^k", "errors", "wall s"],
            rows) + "</div>")
    if examples:
        out.append("<h2>Example tasks</h2><div class='grid2'>")
        for t in examples:
            chain = [Call(**c) for c in t["gold_chain"]]
            out.append(f'<div class="card"><h4><a href="{e(root)}tasks.html#id={e(t["id"])}">{e(t["id"])}</a> '
                       f'{badge((t.get("difficulty") or {}).get("level", ""), "lvl")}</h4>'
                       f'<p>{e(t["instruction"])}</p><pre class="code chain">{highlight(chain_to_python(chain))}</pre></div>')
        out.append("</div>")
    return "".join(out)


def domains_body(domains: Sequence[tuple[int, str, int, int]]) -> str:
    side = "".join(f'<a class="dlink" data-d="{i}" href="#d={i}">{e(name)}<span>{n_tools} tools · {n_tasks} tasks</span></a>'
                   for i, name, n_tools, n_tasks in domains)
    kinds = "".join(f'<label class="kind"><input type="checkbox" data-kind="{e(k)}" checked>'
                    f'<span class="sw" style="background:{c}"></span>{e(k.replace("_", " "))}</label>'
                    for k, c in EDGE_COLORS.items())
    return ('<div class="layout"><aside class="side"><h3>Domains</h3>' + side + '</aside><section class="content">'
            '<div id="domain-head"></div>'
            '<div class="card graphcard"><div class="toolbar"><span class="kinds">' + kinds + '</span>'
            '<span class="nodes-key"><span class="nd read"></span>read tool <span class="nd write"></span>write tool</span>'
            '<input id="tool-search" type="search" placeholder="highlight a tool…">'
            '<button class="btn small" data-zoom="in">+</button><button class="btn small" data-zoom="out">−</button>'
            '<button class="btn small" data-zoom="reset">reset</button></div>'
            '<div id="graph" class="graphbox"></div><div id="graph-stats" class="muted small"></div>'
            '<div id="tip" class="tip" hidden></div></div>'
            '<h3>Tables <span class="muted">columns and match policies</span></h3><div id="tables"></div>'
            '<h3>Procedural tests <span class="muted">per tool</span></h3><div id="tests" class="card"></div>'
            '<h3>Task build rejections</h3><div id="rejections" class="card"></div>'
            "</section></div>")


def tasks_body() -> str:
    return ('<div class="filters card"><input id="q" type="search" placeholder="search id or instruction…">'
            '<select id="f-domain"><option value="">all domains</option></select>'
            '<select id="f-family"><option value="">all families</option></select>'
            '<select id="f-tier"><option value="">all difficulties</option></select>'
            '<select id="f-tool"><option value="">any tool</option></select>'
            '<span id="count" class="muted"></span></div>'
            '<div class="split"><div class="listpane"><table class="list" id="list"><thead><tr><th>id</th>'
            '<th>difficulty</th><th>chain</th><th>instruction</th></tr></thead><tbody></tbody></table>'
            '<div class="pager" id="pager"></div></div>'
            '<div class="detailpane card" id="detail"><p class="muted">Select a task.</p></div></div>')


def trajectories_body(has_runs: bool) -> str:
    if not has_runs:
        return ('<div class="card empty-state"><h2>No rollout results</h2><p>Pass one or more results files: '
                '<code>scaleenv report UNIVERSE --results results.json</code> (written by '
                '<code>scaleenv rollout</code>, with <code>&lt;out&gt;.trajectories.jsonl</code> next to it).</p></div>')
    return ('<div class="filters card"><select id="f-run"></select><input id="q" type="search" '
            'placeholder="search task or episode id…"><select id="f-domain"><option value="">all domains</option></select>'
            '<select id="f-outcome"><option value="">pass and fail</option><option value="1">passed</option>'
            '<option value="0">failed</option></select><select id="f-term"><option value="">any termination</option>'
            '</select><span id="count" class="muted"></span></div>'
            '<div class="split"><div class="listpane"><table class="list" id="list"><thead><tr><th>episode</th>'
            '<th>reward</th><th>end</th><th>calls</th><th>ms</th></tr></thead><tbody></tbody></table>'
            '<div class="pager" id="pager"></div></div>'
            '<div class="detailpane card" id="detail"><p class="muted">Select an episode.</p></div></div>')


# --- plots -----------------------------------------------------------------------------------


def _rate_rows(runs: Sequence[Run], key_of: Callable[[list[Any]], Iterable[str]], order: Sequence[str] | None = None,
               limit: int | None = None) -> list[tuple[str, list[tuple[float, str] | None]]]:
    """Pass rate per group and run: ``key_of(row)`` gives the group keys of one episode row."""
    per: list[dict[str, list[int]]] = []
    for r in runs:
        acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for row in r.episodes:
            for k in key_of(row):
                acc[k][0] += row[5]
                acc[k][1] += 1
        per.append(acc)
    keys = list(order) if order is not None else sorted({k for acc in per for k in acc})
    if limit is not None:
        total = Counter({k: sum(acc.get(k, [0, 0])[1] for acc in per) for k in keys})
        keys = sorted(k for k, _ in total.most_common(limit))
    rows = []
    for k in keys:
        vals: list[tuple[float, str] | None] = []
        for r, acc in zip(runs, per, strict=True):
            if k in acc and acc[k][1]:
                ok, n = acc[k]
                vals.append((ok / n, f"{r.label}: {k}: {ok}/{n} passed ({ok / n * 100:.1f}%)"))
            else:
                vals.append(None)
        if any(v is not None for v in vals):
            rows.append((k, vals))
    return rows


def plots_body(runs: Sequence[Run], tasks: dict[str, dict[str, Any]], domain_names: Sequence[str],
               rejections: dict[str, Counter[str]]) -> str:
    """Every plot, drawn server-side as SVG."""
    names = [r.label for r in runs]
    cards = []

    def card(title: str, svg: str, note: str = "") -> None:
        cards.append(f'<div class="card plot"><h3>{e(title)}</h3>{svg}'
                     f'{f"<p class=muted>{e(note)}</p>" if note else ""}</div>')

    def task_of(row: list[Any]) -> dict[str, Any]:
        return tasks.get(row[1]) or {}

    if runs:
        card("Pass rate by domain", bar_chart(_rate_rows(runs, lambda r: [r[2]], sorted(domain_names)), names))
        tiers = ["easy", "medium", "hard", "expert"]
        seen = {task_tier(t) for t in tasks.values()}
        order = [t for t in tiers if t in seen] + sorted(seen - set(tiers) - {""})
        card("Pass rate by difficulty", bar_chart(_rate_rows(runs, lambda r: [task_tier(task_of(r)) or "?"], order
                                                             + (["?"] if "" in seen else [])), names))
        fams = {task_family(t) for t in tasks.values()} - {""}
        if fams:
            card("Pass rate by task family", bar_chart(_rate_rows(runs, lambda r: [task_family(task_of(r)) or "?"]), names))
        else:
            cards.append('<div class="card plot"><h3>Pass rate by task family</h3><p class="muted">These tasks record '
                         'no <code>family</code> field (older universes): nothing to group by.</p></div>')
        card("Pass rate by tool (30 most-exercised gold-chain tools)",
             bar_chart(_rate_rows(runs, lambda r: sorted({f"{c['tool']} ({r[2]})" for c in task_of(r).get("gold_chain", [])}),
                                  limit=30), names, label_width=260),
             "An episode counts for every tool its task's gold chain calls.")
        calls = {r.label: Counter(row[8] for row in r.episodes) for r in runs}
        xs = list(range(0, max((max(c, default=0) for c in calls.values()), default=0) + 1))
        card("Tool calls per episode", column_chart(xs, calls, xlabel="tool calls", ylabel="episodes"))
        curves: dict[str, list[tuple[int, float]]] = {}
        for r in runs:
            for key, nm in (("pass_hat_k", "Pass^k"), ("pass_at_k", "Pass@k")):
                pts = [(int(k), float(v)) for k, v in (r.results.get(key) or {}).items() if v is not None]
                if pts:
                    curves[f"{r.label} {nm}"] = sorted(pts)
        card("Pass^k and Pass@k curves", line_chart(curves, xlabel="k", ylabel="tasks"),
             "From each results.json (unbiased estimators over n trials per task).")
    else:
        cards.append('<div class="card plot"><h3>Rollout plots</h3><p class="muted">Pass <code>--results</code> '
                     'to see pass rates, calls per episode and Pass^k curves.</p></div>')
    lengths = Counter(int((t.get("difficulty") or {}).get("chain_length", len(t.get("gold_chain", []))))
                      for t in tasks.values())
    xs = list(range(min(lengths, default=0), max(lengths, default=0) + 1))
    per_dom: dict[str, Counter[int]] = {"tasks": lengths}
    card("Gold chain length", column_chart(xs, per_dom, xlabel="calls in the gold chain", ylabel="tasks"))
    total: Counter[str] = Counter()
    for c in rejections.values():
        total.update(c)
    rows = [(k, [(float(v), f"{k}: {v} attempts rejected ("
                  + ", ".join(f"{d} {c[k]}" for d, c in sorted(rejections.items()) if c.get(k)) + ")")])
            for k, v in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]
    attempts = sum(sum(c.values()) for c in rejections.values())
    card("Build rejections by reason", bar_chart(rows, ["rejected attempts"], percent=False, label_width=230)
         if rows else '<p class="muted">No task attempt was rejected.</p>',
         f"{attempts:,} rejected task attempts over {len(rejections)} domains (tasks_report.json).")
    return '<div class="plots">' + "".join(cards) + "</div>"

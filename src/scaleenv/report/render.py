"""HTML fragments for the viewer, rendered in Python so the browser only inserts them.

Tasks, episodes and domain tables are rendered here; every value passes through ``html.escape``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from scaleenv.formats.task import Call, chain_to_python

MAX_TEXT = 2400
"""Characters of one message or tool result kept in the viewer (the JSONL has the full text)."""


def e(v: object) -> str:
    return escape(str(v), quote=True)


def tx(v: object) -> str:
    """Escape element text (quotes need no escaping there, and JSON is full of them)."""
    return escape(str(v), quote=False)


def val(v: object) -> str:
    """A cell value: JSON-ish, ``null`` greyed."""
    if v is None:
        return '<span class="null">null</span>'
    if isinstance(v, str):
        return e(v)
    return e(json.dumps(v, sort_keys=True))


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> str:
    """A table; cells are escaped unless given as ``("html", markup)``."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)

    def cell(c: object) -> str:
        if isinstance(c, tuple) and len(c) == 2 and c[0] == "html":
            return f"<td>{c[1]}</td>"
        return f"<td>{val(c)}</td>"

    body = "".join("<tr>" + "".join(cell(c) for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def badge(text: object, kind: str = "") -> str:
    return f'<span class="badge {e(kind)}">{e(text)}</span>'


def clip(s: str, n: int = MAX_TEXT) -> str:
    return s if len(s) <= n else s[:n] + f"\n… ({len(s) - n:,} more characters)"


_TOKEN = re.compile(r'(?P<com>#.*$)|(?P<str>"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\')|(?P<num>\b-?\d+(?:\.\d+)?\b)'
                    r"|(?P<var>(?<=[(=])s\d+\b)|(?P<call>\b[a-z_][a-z0-9_]*(?=\())|(?P<kw>\b(?:None|True|False|null|true|false)\b)",
                    re.M)


def highlight(code: str) -> str:
    """Light syntax colouring for chain code and JSON."""
    out, last = [], 0
    for m in _TOKEN.finditer(code):
        out.append(e(code[last:m.start()]))
        out.append(f'<span class="t-{m.lastgroup}">{e(m.group())}</span>')
        last = m.end()
    out.append(e(code[last:]))
    return "".join(out)


def pretty_json(v: object) -> str:
    return highlight(json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False))


# --- domains ---------------------------------------------------------------------------------


def _col_constraints(c: dict[str, Any]) -> str:
    bits = []
    if c.get("enum"):
        bits.append("one of " + ", ".join(map(str, c["enum"])))
    if c.get("min") is not None or c.get("max") is not None:
        bits.append(f"[{c.get('min', '')}, {c.get('max', '')}]".replace("None", ""))
    if c.get("unique"):
        bits.append("unique")
    if c.get("default") is not None:
        bits.append(f"default {c['default']}")
    return "; ".join(bits)


def tables_html(spec: dict[str, Any]) -> str:
    """One card per table: columns, types, keys, constraints and each column's match policy."""
    out = []
    for t in spec.get("tables", []):
        rows = []
        for c in t.get("columns", []):
            name = f"<b>{e(c['name'])}</b>" if c["name"] == t.get("primary_key") else e(c["name"])
            fk = c.get("foreign_key")
            policy = c.get("match", "exact")
            rows.append([("html", name), c.get("type", ""), "yes" if c.get("nullable") else "no",
                         ("html", f'<span class="fk">→ {e(fk)}</span>' if fk else ""),
                         _col_constraints(c), ("html", badge(policy, f"m-{policy}")), c.get("description", "")])
        out.append(f'<div class="card tbl"><h4>{e(t["name"])} <span class="muted">key {e(t.get("primary_key", ""))}'
                   f' · {len(t.get("columns", []))} columns</span></h4><p class="muted">{e(t.get("description", ""))}</p>'
                   + table(["column", "type", "nullable", "references", "constraints", "match", "description"], rows,
                           "compact") + "</div>")
    return "".join(out)


def tests_html(tests: dict[str, Any], tools: dict[str, dict[str, Any]]) -> str:
    """Procedural test results, one row per derived tool (admitted or not)."""
    rows = []
    for r in sorted(tests.get("reports", []), key=lambda r: (r.get("admitted", False), r["tool"])):
        c = r.get("counts", {})
        fails = r.get("failures") or []
        untested = r.get("untested_preconditions") or []
        status = badge("admitted", "ok") if r.get("admitted") else badge("rejected", "bad")
        detail = "".join(f"<div class='fail'>{e(f)}</div>" for f in fails)
        if untested:
            detail += f"<div class='muted'>untested: {e(', '.join(map(str, untested)))}</div>"
        rows.append([("html", f'<a class="toollink" data-tool="{e(r["tool"])}">{e(r["tool"])}</a>'),
                     (tools.get(r["tool"]) or {}).get("kind", "-"), ("html", status), c.get("success", 0),
                     c.get("anticipated_rejection", 0),
                     ("html", f'<span class="{"bad-n" if c.get("unexpected_failure") else ""}">'
                              f'{c.get("unexpected_failure", 0)}</span>'),
                     r.get("negative_tests", 0), ("html", detail)])
    return table(["tool", "kind", "status", "success", "anticipated rejections", "unexpected failures",
                  "negative tests", "failures / notes"], rows, "compact sortable")


def tool_info(tool: dict[str, Any]) -> dict[str, Any]:
    """The hover card's data for one tool."""
    return {
        "name": tool["name"], "kind": tool.get("kind", ""), "description": tool.get("description", ""),
        "params": [[p["name"], p.get("type", ""), bool(p.get("required")), p.get("description", "")]
                   for p in tool.get("parameters", [])],
        "pre": [[c.get("error", ""), c.get("sql", "")] for c in tool.get("preconditions", [])],
        "effects": list(tool.get("effects", [])),
        "post": [[c.get("error", ""), c.get("sql", "")] for c in tool.get("postconditions", [])],
        "impl": (tool.get("implementation") or {}).get("kind", "sql"),
        "family": (tool.get("meta") or {}).get("family", ""),
    }


# --- tasks -----------------------------------------------------------------------------------


def task_family(t: dict[str, Any]) -> str:
    return str(t.get("family") or (t.get("difficulty") or {}).get("family") or "")


def task_tier(t: dict[str, Any]) -> str:
    d = t.get("difficulty") or {}
    return str(t.get("tier") or d.get("tier") or d.get("level") or "")


def _kv(d: object) -> str:
    """Facts as a two-column table (a dict), or a list of facts (names, or ``{name, value}`` objects)."""
    if not d:
        return '<p class="muted">none</p>'
    if isinstance(d, dict):
        return table(["fact", "value"], sorted(d.items(), key=lambda kv: str(kv[0])), "compact kv")
    if isinstance(d, list):
        rows = [[x.get("name", ""), x.get("value")] if isinstance(x, dict) else [x, ("html", "")] for x in d]
        return table(["fact", "value"], rows, "compact kv")
    return f"<pre class='code'>{pretty_json(d)}</pre>"


def _profile_html(p: dict[str, Any]) -> str:
    goals = p.get("goals") or []
    out = ["<h4>Goals</h4><ol class='goals'>" + "".join(f"<li>{e(g)}</li>" for g in goals) + "</ol>" if goals else ""]
    out.append("<div class='cols2'><div><h4>Known to the user</h4>" + _kv(p.get("known") or {}) + "</div>")
    out.append("<div><h4>Withheld until asked</h4>" + _kv(p.get("withheld") or {}) + "</div></div>")
    if p.get("persona"):
        out.insert(0, f"<p><b>Persona:</b> {e(p['persona'])}</p>")
    rest = {k: v for k, v in p.items() if k not in ("goals", "known", "withheld", "persona")}
    if rest:
        out.append("<h4>Other profile fields</h4><pre class='code'>" + pretty_json(rest) + "</pre>")
    return "".join(out)


def _patch_html(patch: dict[str, list[dict[str, Any]]], distractors: dict[str, list[Any]]) -> str:
    if not patch:
        return '<p class="muted">The task starts from the base world unchanged.</p>'
    out = []
    for tname in sorted(patch):
        rows = patch[tname]
        cols: list[str] = []
        for r in rows:
            cols += [c for c in r if c not in cols]
        dset = {str(x) for x in distractors.get(tname, [])}
        body = []
        for r in rows:
            key = next(iter(r.values()), None) if r else None
            mark = badge("distractor", "warn") if str(r.get("id", key)) in dset else ""
            body.append([("html", mark)] + [r.get(c) for c in cols])
        out.append(f"<h5>{e(tname)} <span class='muted'>+{len(rows)} rows</span></h5>"
                   + table([""] + cols, body, "compact patch"))
    return "".join(out)


def diff_html(changes: Sequence[dict[str, Any]]) -> str:
    """The expected change (rows added, removed, changed) as a unified-diff-like block."""
    if not changes:
        return '<p class="muted">No change to the world (a read-only task).</p>'
    lines = []
    for c in changes:
        head = f"{c['table']}[{json.dumps(c['key'])}]"
        if c["kind"] == "changed":
            lines.append(f'<div class="dh">~ {tx(head)}</div>')
            for col, (before, after) in c["columns"].items():
                lines.append(f'<div class="del">-   {tx(col)}: {tx(json.dumps(before))}</div>'
                             f'<div class="add">+   {tx(col)}: {tx(json.dumps(after))}</div>')
        elif c["kind"] == "added":
            lines.append(f'<div class="dh add">+ {tx(head)} (new row)</div>')
            for col, v in (c.get("after") or {}).items():
                lines.append(f'<div class="add">+   {tx(col)}: {tx(json.dumps(v))}</div>')
        else:
            lines.append(f'<div class="dh del">- {tx(head)} (removed)</div>')
            for col, v in (c.get("before") or {}).items():
                lines.append(f'<div class="del">-   {tx(col)}: {tx(json.dumps(v))}</div>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"


def _gates_html(gates: dict[str, Any]) -> str:
    want = {"gold": 1.0}
    chips = []
    for g in ("gold", "noop", "random", "hack"):
        if g not in gates:
            continue
        v = gates[g]
        ok = v == want.get(g, 0.0)
        chips.append(f'<div class="gate {"ok" if ok else "bad"}"><span>{e(g)}</span><b>{e(v)}</b>'
                     f'<small>want {want.get(g, 0.0)}</small></div>')
    for g in sorted(set(gates) - {"gold", "noop", "random", "hack"}):
        chips.append(f'<div class="gate"><span>{e(g)}</span><b>{e(gates[g])}</b></div>')
    return '<div class="gates">' + "".join(chips) + "</div>"


def _outcomes_html(task_id: str, outcomes: Sequence[tuple[int, str, int, int]]) -> str:
    if not outcomes:
        return ""
    rows = [[("html", f'<a href="trajectories.html#{e(urlencode({"run": ri, "task": task_id}))}">{e(label)}</a>'),
             ("html", badge(f"{ok}/{n} passed", "ok" if ok == n else "bad" if ok == 0 else "warn"))]
            for ri, label, ok, n in outcomes]
    return "<section><h3>Rollouts of this task</h3>" + table(["run", "episodes"], rows, "compact") + "</section>"


def task_html(t: dict[str, Any], changes: Sequence[dict[str, Any]] | None, change_error: str | None = None,
              outcomes: Sequence[tuple[int, str, int, int]] = ()) -> str:
    """The task browser's detail view of one task (a ``Task.model_dump()`` plus extra fields);
    ``outcomes``: ``(run index, label, passed, episodes)`` per rollout run that played it."""
    d = t.get("difficulty") or {}
    ver = t.get("verification") or {}
    chain = [Call(**c) if isinstance(c, dict) else c for c in t.get("gold_chain", [])]
    chain_tools = {c.tool for c in chain}
    badges = [badge(t["domain"], "dom")]
    if task_family(t):
        badges.append(badge(f"family: {task_family(t)}", "fam"))
    if t.get("tier") or d.get("tier"):
        badges.append(badge(f"tier: {t.get('tier') or d.get('tier')}", "tier"))
    if d.get("level"):
        badges.append(badge(d["level"], f"lvl lvl-{d['level']}"))
    for k in ("chain_length", "sub_goals", "distractor_density", "withheld_facts"):
        if k in d:
            badges.append(badge(f"{k.replace('_', ' ')}: {d[k]}", "soft"))
    extra = {k: v for k, v in d.items() if k not in ("level", "tier", "family", "chain_length", "sub_goals",
                                                      "distractor_density", "withheld_facts")}
    for k, v in sorted(extra.items()):
        badges.append(badge(f"{k}: {v}", "soft"))
    facts = t.get("answer_facts") or []
    tools = "".join(f'<span class="chip{" on" if n in chain_tools else ""}">{e(n)}</span>' for n in t.get("tools", []))
    if changes is None:
        change = f'<p class="bad-n">Could not replay the gold chain: {e(change_error or "unknown error")}</p>'
    else:
        change = diff_html(changes)
    return "".join([
        f'<div class="detail-head"><h2>{e(t["id"])}</h2><div class="badges">{"".join(badges)}</div></div>',
        f'<blockquote class="instr">{e(t.get("instruction", ""))}</blockquote>',
        '<section><h3>User profile</h3>', _profile_html(t.get("user_profile") or {}), "</section>",
        f'<section><h3>Gold chain <span class="muted">{len(chain)} calls</span></h3>'
        f'<pre class="code chain">{highlight(chain_to_python(chain))}</pre>',
        ("<h4>Answer facts</h4>" + table(["name", "value"], [[f["name"], f["value"]] for f in facts], "compact kv")
         if facts else ""), "</section>",
        '<section><h3>Expected change</h3>', change, "</section>",
        '<section><h3>Initial patch</h3>', _patch_html(t.get("initial_patch") or {}, ver.get("distractors") or {}),
        "</section>",
        '<section><h3>Gate scores</h3>', _gates_html(ver.get("gates") or {}),
        f'<p class="muted mono">initial {e(ver.get("initial_hash", "?"))} · expected {e(ver.get("expected_hash", "?"))}'
        f' · attempt {e(t.get("attempt", 0))}</p></section>',
        f'<section><h3>Exercisable tools <span class="muted">{len(t.get("tools", []))}; '
        f'gold-chain tools highlighted</span></h3><div class="chips">{tools}</div></section>',
        _outcomes_html(t["id"], outcomes),
    ])


# --- episodes --------------------------------------------------------------------------------


def _call_summary(name: str, args: object) -> str:
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        inner = str(args)
    return f"{name}({clip(inner, 140)})"


def _parse_args(raw: object) -> object:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _is_error(content: str) -> bool:
    return content.startswith('{"error"')


def conversation_html(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as chat bubbles; each tool call folded with its result inside."""
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    used: set[object] = set()
    out = []
    for m in messages:
        role = m.get("role", "?")
        content = m.get("content")
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        if role == "tool":
            if m.get("tool_call_id") in used:
                continue
            out.append(f'<div class="msg tool"><pre>{tx(clip(text))}</pre></div>')
            continue
        if role == "system":
            out.append(f'<details class="msg system"><summary>system prompt</summary><pre>{tx(clip(text))}</pre></details>')
            continue
        calls = [c for c in (m.get("tool_calls") or []) if isinstance(c, dict)]
        body = f'<div class="bubble">{tx(clip(text))}</div>' if text else ""
        for c in calls:
            function = c.get("function")
            fn = function if isinstance(function, dict) else {}
            args = _parse_args(fn.get("arguments"))
            res = results.get(c.get("id"))
            used.add(c.get("id"))
            rtext = "" if res is None else str(res.get("content") or "")
            err = _is_error(rtext)
            summary = _call_summary(fn.get("name", "?"), args)
            # Compact, plain escaped JSON: the page indents and colours it when a call is unfolded
            # (spans for every token would more than double the size of a large run's files).
            shown = _parse_args(rtext)
            rbody = json.dumps(shown, ensure_ascii=False) if not isinstance(shown, str) else shown
            abody = ("" if len(summary) < 150 else
                     f'<h6>arguments</h6><pre class="code hl">{tx(json.dumps(args, ensure_ascii=False))}</pre>')
            body += (f'<details class="call{" err" if err else ""}"><summary><span class="fn">{tx(summary)}</span>'
                     f'{badge("error", "bad") if err else ""}</summary><div class="callbody">{abody}'
                     f'<h6>result</h6><pre class="code hl">{tx(clip(rbody)) if res is not None else "(no result)"}</pre>'
                     "</div></details>")
        out.append(f'<div class="msg {e(role)}"><div class="who">{e(role)}</div>{body}</div>')
    return '<div class="conv">' + "".join(out) + "</div>"


def _timings_html(t: dict[str, Any]) -> str:
    parts = [(k, float(t.get(k) or 0.0)) for k in ("agent_s", "user_s", "tools_s", "eval_s")]
    total = float(t.get("total_s") or 0.0) or sum(v for _, v in parts) or 1.0
    other = max(0.0, total - sum(v for _, v in parts))
    segs = "".join(f'<span class="seg s-{k}" style="width:{100 * v / total:.2f}%" title="{k}: {v * 1000:.2f} ms"></span>'
                   for k, v in [*parts, ("other_s", other)] if v > 0)
    legend = " · ".join(f'<span class="lgd s-{k}"></span>{k[:-2]} {v * 1000:.1f} ms' for k, v in parts)
    return (f'<div class="tbar">{segs}</div><p class="muted small">{legend} · total {total * 1000:.1f} ms</p>')


def episode_html(rec: dict[str, Any], run_label: str) -> str:
    """One episode: header, reward with its diff, timings, the folded conversation."""
    r = rec.get("reward") or {}
    ok = bool(r.get("success"))
    badges = [badge("pass" if ok else "fail", "ok" if ok else "bad"), badge(f"score {r.get('score', 0)}", "soft"),
              badge(rec.get("termination", "?"), "soft"), badge(f"{rec.get('steps', 0)} steps", "soft"),
              badge(f"{rec.get('tool_calls', 0)} calls", "soft"),
              badge(f"{rec.get('tool_errors', 0)} tool errors", "warn" if rec.get("tool_errors") else "soft"),
              badge(f"{rec.get('user_turns', 0)} user turns", "soft")]
    comps = r.get("components") or {}
    diff = r.get("diff") or []
    err = f'<p class="bad-n">error: {e(rec["error"])}</p>' if rec.get("error") else ""
    usage = rec.get("usage") or {}
    return "".join([
        f'<div class="detail-head"><h3>{e(rec.get("id", ""))}</h3><div class="muted">{e(run_label)} · '
        f'agent {e(rec.get("agent", "?"))} · user {e(rec.get("user", "-"))} · {e(rec.get("mode", ""))} · seed {e(rec.get("seed", ""))}</div>'
        f'<div class="badges">{"".join(badges)}</div></div>', err,
        '<div class="cols2"><div><h4>Reward</h4>',
        table(["component", "value"], sorted(comps.items()), "compact kv") if comps else "",
        "</div><div><h4>Timings</h4>", _timings_html(rec.get("timings") or {}),
        (table(["usage", "tokens"], sorted(usage.items()), "compact kv") if usage else ""), "</div></div>",
        ("<h4>Reward diff</h4><pre class='diff'>" + "".join(f"<div class='del'>{tx(x)}</div>" for x in diff) + "</pre>")
        if diff else "<p class='muted'>No mismatches.</p>",
        f'<h4>Conversation <span class="muted">{len(rec.get("messages") or [])} messages</span> '
        f'<button class="btn small expand-all">expand all calls</button></h4>',
        conversation_html(rec.get("messages") or []),
    ])

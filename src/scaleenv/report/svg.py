"""Server-side SVG: the tool dependency graph (clustered by entity) and the report's charts.

Everything here is deterministic (same input, same bytes) and needs no JavaScript to display; the
viewer's script only adds zoom, pan, filtering and tooltips on top.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")
EDGE_COLORS = {"data_flow": "#4c78a8", "precondition": "#e45756", "shared_table": "#a0a0a8"}


def _f(x: float) -> str:
    """A compact, stable number for SVG attributes."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def edge_color(kind: str) -> str:
    return EDGE_COLORS.get(kind, "#777")


# --- the tool graph --------------------------------------------------------------------------


def graph_layout(tools: Sequence[dict[str, Any]], table_order: Sequence[str]) -> dict[str, Any]:
    """Positions for a clustered layout: one small circle of tools per entity (table), the
    clusters on a big circle in the spec's table order. Returns ``{"pos": {tool: (x, y, angle)},
    "groups": [(name, cx, cy, r)], "size": (w, h)}``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in tools:
        meta = t.get("meta") or {}
        g = meta.get("entity") or (t.get("returns") or {}).get("table") or "other"
        groups.setdefault(g, []).append(t)
    order = [g for g in table_order if g in groups] + sorted(g for g in groups if g not in table_order)
    radii = {g: max(40.0, len(groups[g]) * 44 / (2 * math.pi)) for g in order}
    label_room = 95.0
    circumference = sum(2 * (radii[g] + label_room) for g in order)
    big = max(160.0, circumference / (2 * math.pi)) if len(order) > 1 else 0.0
    # An ellipse wider than tall fits the viewer's landscape box better than a circle.
    rx, ry = big * 1.35, big * 0.8
    pos: dict[str, tuple[float, float, float]] = {}
    out_groups = []
    for gi, g in enumerate(order):
        a = 2 * math.pi * gi / max(1, len(order)) - math.pi / 2
        cx, cy = rx * math.cos(a), ry * math.sin(a)
        r = radii[g]
        members = sorted(groups[g], key=lambda t: (t.get("kind") != "read", t["name"]))
        for i, t in enumerate(members):
            b = a + 2 * math.pi * i / len(members)
            pos[t["name"]] = (cx + r * math.cos(b), cy + r * math.sin(b), b)
        out_groups.append((g, cx, cy, r))
    room = max(radii.values(), default=40.0) + 150
    return {"pos": pos, "groups": out_groups, "size": (2 * (rx + room), 2 * (ry + room))}


def graph_svg(tools: Sequence[dict[str, Any]], edges: Sequence[dict[str, Any]], table_order: Sequence[str]) -> str:
    """The tool dependency graph as inline SVG: nodes ``g.n`` (``data-tool``, ``data-i``), edges
    ``path.e`` with class ``k-<kind>`` and ``data-s``/``data-t`` node indices."""
    lay = graph_layout(tools, table_order)
    pos = lay["pos"]
    w, h = lay["size"]
    index = {t["name"]: i for i, t in enumerate(tools)}
    kinds = sorted({e.get("kind", "?") for e in edges})
    parts = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="{_f(-w / 2)} {_f(-h / 2)} {_f(w)} {_f(h)}" '
             f'data-tools="{len(tools)}" data-edges="{len(edges)}" role="img" aria-label="tool dependency graph">',
             "<defs>"]
    for k in kinds:
        parts.append(f'<marker id="arrow-{escape(k)}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
                     f'markerHeight="6" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
                     f'fill="{edge_color(k)}"/></marker>')
    parts.append("</defs><g class=\"viewport\"><g class=\"groups\">")
    for g, cx, cy, r in lay["groups"]:
        parts.append(f'<circle class="grp" cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r + 14)}"/>'
                     f'<text class="grp-label" x="{_f(cx)}" y="{_f(cy + 4)}">{escape(g)}</text>')
    parts.append('</g><g class="edges">')
    centres = {g: (cx, cy) for g, cx, cy, _ in lay["groups"]}
    for e in edges:
        s, t = e.get("from"), e.get("to")
        if s not in pos or t not in pos:
            continue
        (x1, y1, _), (x2, y2, _) = pos[s], pos[t]
        gs = _group_of(tools[index[s]])
        gt = _group_of(tools[index[t]])
        if gs == gt and gs in centres:
            qx, qy = centres[gs]
            qx, qy = (qx * 2 + (x1 + x2) / 2) / 3, (qy * 2 + (y1 + y2) / 2) / 3
        else:  # pull cross-cluster edges towards the centre: a light bundling
            qx, qy = (x1 + x2) / 4, (y1 + y2) / 4
        # Stop short of the target circle so the arrowhead is visible.
        dx, dy = x2 - qx, y2 - qy
        d = math.hypot(dx, dy) or 1.0
        ex, ey = x2 - dx / d * 7, y2 - dy / d * 7
        kind = e.get("kind", "?")
        params = ", ".join(e.get("params") or [])
        tip = f"{s} → {t} ({kind}{': ' + params if params else ''})"
        parts.append(f'<path class="e k-{escape(kind)}" data-s="{index[s]}" data-t="{index[t]}" '
                     f'd="M{_f(x1)},{_f(y1)}Q{_f(qx)},{_f(qy)} {_f(ex)},{_f(ey)}" stroke="{edge_color(kind)}" '
                     f'marker-end="url(#arrow-{escape(kind)})"><title>{escape(tip)}</title></path>')
    parts.append('</g><g class="nodes">')
    for i, t in enumerate(tools):
        x, y, b = pos[t["name"]]
        anchor = "start" if math.cos(b) >= 0 else "end"
        lx, ly = x + 9 * math.cos(b), y + 9 * math.sin(b) + 3.5
        kind = t.get("kind", "read")
        parts.append(f'<g class="n kind-{escape(kind)}" data-i="{i}" data-tool="{escape(t["name"])}" tabindex="0">'
                     f'<circle cx="{_f(x)}" cy="{_f(y)}" r="6"/>'
                     f'<text x="{_f(lx)}" y="{_f(ly)}" text-anchor="{anchor}">{escape(t["name"])}</text></g>')
    parts.append("</g></g></svg>")
    return "".join(parts)


def _group_of(tool: dict[str, Any]) -> str:
    return (tool.get("meta") or {}).get("entity") or (tool.get("returns") or {}).get("table") or "other"


# --- charts ----------------------------------------------------------------------------------


def _legend(names: Sequence[str], x: float, y: float) -> str:
    out = []
    for i, n in enumerate(names):
        out.append(f'<rect x="{_f(x)}" y="{_f(y + i * 16)}" width="10" height="10" rx="2" fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text class="lg" x="{_f(x + 15)}" y="{_f(y + i * 16 + 9)}">{escape(n)}</text>')
    return "".join(out)


def bar_chart(rows: Sequence[tuple[str, Sequence[tuple[float, str] | None]]], series: Sequence[str], *,
              percent: bool = True, label_width: int = 170, width: int = 640) -> str:
    """Horizontal grouped bars. ``rows``: ``(label, [(value, tooltip) or None per series])``.
    With ``percent`` values are fractions shown on a 0-100 % axis."""
    if not rows:
        return '<p class="empty">No data.</p>'
    nser = max(1, len(series))
    bar_h = 14 if nser == 1 else 10
    row_h = bar_h * nser + 8
    top = 8 + (16 * len(series) if nser > 1 else 0)
    plot_w = width - label_width - 60
    vmax = 1.0 if percent else max((v[0] for _, vs in rows for v in vs if v), default=1.0) or 1.0
    h = top + row_h * len(rows) + 26
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {_f(h)}" width="{width}">']
    if nser > 1:
        out.append(_legend(series, label_width, 4))
    ticks = [0, 0.25, 0.5, 0.75, 1.0]
    axis_y = top + row_h * len(rows)
    for tk in ticks:
        x = label_width + plot_w * tk
        lab = f"{tk * 100:.0f}%" if percent else _num(vmax * tk)
        out.append(f'<line class="grid" x1="{_f(x)}" y1="{top - 2}" x2="{_f(x)}" y2="{_f(axis_y)}"/>'
                   f'<text class="tick" x="{_f(x)}" y="{_f(axis_y + 14)}" text-anchor="middle">{lab}</text>')
    for ri, (label, vals) in enumerate(rows):
        y0 = top + ri * row_h + 4
        out.append(f'<text class="rl" x="{label_width - 8}" y="{_f(y0 + row_h / 2)}" text-anchor="end">'
                   f'{escape(_clip(label, int(label_width / 7.6)))}<title>{escape(label)}</title></text>')
        for si, v in enumerate(vals):
            if v is None:
                continue
            val, tip = v
            bw = max(0.0, plot_w * (val / vmax))
            y = y0 + si * bar_h
            shown = f"{val * 100:.0f}%" if percent else _num(val)
            out.append(f'<rect x="{label_width}" y="{_f(y)}" width="{_f(max(bw, 1.5))}" height="{bar_h - 2}" rx="2" '
                       f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(tip)}</title></rect>'
                       f'<text class="vl" x="{_f(label_width + bw + 4)}" y="{_f(y + bar_h - 4)}">{shown}</text>')
    out.append("</svg>")
    return "".join(out)


def column_chart(xs: Sequence[int | str], series: Mapping[str, Mapping[Any, int]], *, xlabel: str, ylabel: str,
                 width: int = 640, height: int = 240) -> str:
    """Vertical grouped columns (histograms): ``series`` maps a name to ``{x: count}``."""
    if not xs or not series:
        return '<p class="empty">No data.</p>'
    names = list(series)
    left, right, top, bottom = 48, 12, 10 + (16 * len(names) if len(names) > 1 else 0), 40
    pw, ph = width - left - right, height - top - bottom
    vmax = max((c for s in series.values() for c in s.values()), default=1) or 1
    slot = pw / len(xs)
    bw = max(1.0, slot * 0.8 / len(names))
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}">']
    if len(names) > 1:
        out.append(_legend(names, left + 8, 4))
    for tk in (0, 0.25, 0.5, 0.75, 1.0):
        y = top + ph * (1 - tk)
        out.append(f'<line class="grid" x1="{left}" y1="{_f(y)}" x2="{left + pw}" y2="{_f(y)}"/>'
                   f'<text class="tick" x="{left - 6}" y="{_f(y + 4)}" text-anchor="end">{_num(vmax * tk)}</text>')
    every = max(1, math.ceil(len(xs) / 24))
    for xi, x in enumerate(xs):
        x0 = left + xi * slot + slot * 0.1
        for si, n in enumerate(names):
            c = series[n].get(x, 0)
            bh = ph * c / vmax
            out.append(f'<rect x="{_f(x0 + si * bw)}" y="{_f(top + ph - bh)}" width="{_f(bw)}" height="{_f(bh)}" '
                       f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(f"{n}: {x} → {c}")}</title></rect>')
        if xi % every == 0:
            out.append(f'<text class="tick" x="{_f(left + xi * slot + slot / 2)}" y="{_f(top + ph + 14)}" '
                       f'text-anchor="middle">{escape(str(x))}</text>')
    out.append(f'<text class="axis" x="{_f(left + pw / 2)}" y="{height - 6}" text-anchor="middle">{escape(xlabel)}</text>'
               f'<text class="axis" transform="translate(12 {_f(top + ph / 2)}) rotate(-90)" '
               f'text-anchor="middle">{escape(ylabel)}</text></svg>')
    return "".join(out)


def line_chart(series: dict[str, list[tuple[int, float]]], *, xlabel: str, ylabel: str, width: int = 640,
               height: int = 260) -> str:
    """Lines with points on a 0-100 % axis (Pass^k curves): ``series`` maps a name to ``[(k, value)]``."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        return '<p class="empty">No data.</p>'
    names = list(series)
    left, right, top, bottom = 48, 16, 12 + 16 * len(names), 40
    pw, ph = width - left - right, height - top - bottom
    kmin, kmax = min(p[0] for p in pts), max(p[0] for p in pts)
    span = max(1, kmax - kmin)

    def sx(k: float) -> float:
        return left + (pw / 2 if kmax == kmin else pw * (k - kmin) / span)

    def sy(v: float) -> float:
        return top + ph * (1 - v)

    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}">',
           _legend(names, left + 8, 4)]
    for tk in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line class="grid" x1="{left}" y1="{_f(sy(tk))}" x2="{left + pw}" y2="{_f(sy(tk))}"/>'
                   f'<text class="tick" x="{left - 6}" y="{_f(sy(tk) + 4)}" text-anchor="end">{tk * 100:.0f}%</text>')
    for k in sorted({p[0] for p in pts}):
        out.append(f'<text class="tick" x="{_f(sx(k))}" y="{_f(top + ph + 14)}" text-anchor="middle">{k}</text>')
    for si, n in enumerate(names):
        col = PALETTE[si % len(PALETTE)]
        s = sorted(series[n])
        if len(s) > 1:
            d = " ".join(f"{'M' if i == 0 else 'L'}{_f(sx(k))},{_f(sy(v))}" for i, (k, v) in enumerate(s))
            out.append(f'<path d="{d}" fill="none" stroke="{col}" stroke-width="2"/>')
        for k, v in s:
            out.append(f'<circle cx="{_f(sx(k))}" cy="{_f(sy(v))}" r="3.5" fill="{col}">'
                       f'<title>{escape(f"{n}: k={k} → {v * 100:.1f}%")}</title></circle>')
    out.append(f'<text class="axis" x="{_f(left + pw / 2)}" y="{height - 6}" text-anchor="middle">{escape(xlabel)}</text>'
               f'<text class="axis" transform="translate(12 {_f(top + ph / 2)}) rotate(-90)" '
               f'text-anchor="middle">{escape(ylabel)}</text></svg>')
    return "".join(out)


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.1f}"


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"

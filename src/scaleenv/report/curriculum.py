"""The report's curriculum cards: pass rate per round of ``scaleenv curriculum loop`` runs, with the
target window shaded, and a table of each round's tasks, new tasks, difficulty and pass rate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from scaleenv.errors import InputError
from scaleenv.report.svg import PALETTE, _f, _legend

LOOP_FORMAT = "scaleenv-curriculum-loop/1"


def load_loop(path: Path) -> dict[str, Any]:
    """A ``loop.json`` (one line on a file that is not one)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read curriculum loop {path}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != LOOP_FORMAT or not isinstance(data.get("rounds"), list):
        raise InputError(f"{path}: not a loop.json of `scaleenv curriculum loop` (format {LOOP_FORMAT})")
    return data


def window_chart(series: dict[str, list[tuple[int, float]]], window: tuple[float, float], *, width: int = 640,
                 height: int = 280) -> str:
    """Pass rate (0-100 %) per round, one line per loop, over the shaded target window."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        return '<p class="empty">No data.</p>'
    names = list(series)
    left, right, top, bottom = 48, 16, 12 + 16 * len(names), 40
    pw, ph = width - left - right, height - top - bottom
    rmax = max(1, max(p[0] for p in pts))

    def sx(r: float) -> float:
        return left + pw * r / rmax

    def sy(v: float) -> float:
        return top + ph * (1 - v)

    lo, hi = window
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}">',
           f'<rect x="{left}" y="{_f(sy(hi))}" width="{pw}" height="{_f(sy(lo) - sy(hi))}" fill="#54a24b" '
           f'fill-opacity="0.12"><title>target window {lo * 100:.0f}-{hi * 100:.0f}%</title></rect>',
           _legend(names, left + 8, 4)]
    for tk in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line class="grid" x1="{left}" y1="{_f(sy(tk))}" x2="{left + pw}" y2="{_f(sy(tk))}"/>'
                   f'<text class="tick" x="{left - 6}" y="{_f(sy(tk) + 4)}" text-anchor="end">{tk * 100:.0f}%</text>')
    for r in range(rmax + 1):
        out.append(f'<text class="tick" x="{_f(sx(r))}" y="{_f(top + ph + 14)}" text-anchor="middle">{r}</text>')
    for si, n in enumerate(names):
        col = PALETTE[si % len(PALETTE)]
        s = sorted(series[n])
        if len(s) > 1:
            d = " ".join(f"{'M' if i == 0 else 'L'}{_f(sx(r))},{_f(sy(v))}" for i, (r, v) in enumerate(s))
            out.append(f'<path d="{d}" fill="none" stroke="{col}" stroke-width="2"/>')
        for r, v in s:
            out.append(f'<circle cx="{_f(sx(r))}" cy="{_f(sy(v))}" r="3.5" fill="{col}">'
                       f'<title>{escape(f"{n}: round {r} → {v * 100:.1f}%")}</title></circle>')
    out.append(f'<text class="axis" x="{_f(left + pw / 2)}" y="{height - 6}" text-anchor="middle">round</text>'
               f'<text class="axis" transform="translate(12 {_f(top + ph / 2)}) rotate(-90)" '
               f'text-anchor="middle">pass rate</text></svg>')
    return "".join(out)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def curriculum_cards(loops: Sequence[dict[str, Any]]) -> str:
    """The plots page's curriculum cards (empty without loops)."""
    if not loops:
        return ""
    labels = [str(lp.get("agent") or f"loop {i}") for i, lp in enumerate(loops)]
    seen: dict[str, int] = {}
    for i, lab in enumerate(labels):  # two loops of one agent keep apart
        seen[lab] = seen.get(lab, 0) + 1
        if seen[lab] > 1:
            labels[i] = f"{lab} ({seen[lab]})"
    series = {lab: [(int(r["round"]), float(r["pass_rate"])) for r in lp["rounds"] if r.get("pass_rate") is not None]
              for lab, lp in zip(labels, loops, strict=True)}
    lo, hi = (float(x) for x in loops[0].get("window") or (0.2, 0.8))
    cards = [f'<div class="card plot"><h3>Curriculum: pass rate per round</h3>{window_chart(series, (lo, hi))}'
             f'<p class="muted">The shaded band is the target window ({lo * 100:.0f}-{hi * 100:.0f}%); round 0 '
             'is the first sample, each later round the set the curriculum chose.</p></div>']
    for lab, lp in zip(labels, loops, strict=True):
        rows = "".join(
            f"<tr><td>{int(r['round'])}</td><td>{int(r['tasks'])}</td><td>{int(r.get('new_tasks') or 0)}</td>"
            f"<td>{float(r['difficulty'] or 0):.2f}</td><td>{_pct(r.get('pass_rate'))}</td>"
            f"<td>{_pct(r.get('expected_pass_rate'))}</td><td>{'yes' if r.get('in_window') else 'no'}</td></tr>"
            for r in lp["rounds"])
        cards.append(f'<div class="card plot"><h3>Curriculum rounds: {escape(lab)}</h3><table class="grid">'
                     "<thead><tr><th>round</th><th>tasks</th><th>new</th><th>difficulty (sub-goals)</th>"
                     "<th>pass rate</th><th>expected</th><th>in window</th></tr></thead>"
                     f"<tbody>{rows}</tbody></table></div>")
    return '<div class="plots">' + "".join(cards) + "</div>"

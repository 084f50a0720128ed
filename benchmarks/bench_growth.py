"""Growth curves: build and rollout time, and peak memory, against the number of tasks and the world's scale.

Each point runs in a fresh process (so its peak RSS is its own): `run_build` of the catalog retail
domain (serial, one core) with N tasks at scale S, then `run_rollout` oracle, 1 trial, serial, over
every task (task loading included). Figures, for each point ``n<N>_s<S>``:

growth.<point>.build_s        wall seconds of the build
growth.<point>.rollout_s      wall seconds of the rollout
growth.<point>.load_share     share of the rollout spent in build_worlds (task loading)
growth.<point>.peak_rss_mb    peak RSS of the process (build and rollout), 10**6 bytes
growth.<point>.rows           rows of the base world

Full run: tasks 1,024 and 4,096 at scale 1 (16,384 takes too long on a shared 2-core machine: the
README extrapolates it from these), and scale 1, 4 and 17 at 256 tasks. Quick run: 32 and 64 tasks,
scale 1 and 2. ``python benchmarks/bench_growth.py [--quick] [--json OUT] [--svg OUT]``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FULL = {"tasks": [1024, 4096], "scales": [1.0, 4.0, 17.0], "tasks_at_scale": 256}
QUICK = {"tasks": [32, 64], "scales": [1.0, 2.0], "tasks_at_scale": 32}


def one(tasks: int, scale: float) -> dict[str, Any]:
    """Build and roll out one point in this process; returns its figures."""
    import scaleenv.env.cache as cache
    from scaleenv.run.rollout import RolloutConfig, run_rollout
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build
    from scaleenv.universe import Universe
    from scaleenv.world.world import World

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "u"
        cfg = BuildConfig(out=out, domains=["retail"], tasks_per_domain=tasks, scale=scale)
        t = time.perf_counter()
        prepare_out(cfg)
        run_build(cfg)
        build_s = time.perf_counter() - t
        u = Universe(out)
        w = World.from_snapshot(u.spec("retail"), u.base("retail"))
        rows = sum(w.count(tb) for tb in w.table_names)
        w.close()
        spent = [0.0]
        real = cache.build_worlds

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0

        cache.build_worlds = timed
        t = time.perf_counter()
        res = run_rollout(RolloutConfig(universe=out, agent="oracle", executor="serial", trials=1,
                                        out=Path(tmp) / "r.json"))
        rollout_s = time.perf_counter() - t
        cache.build_worlds = real
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"tasks": res["num_episodes"], "scale": scale, "rows": rows, "build_s": build_s, "rollout_s": rollout_s,
            "load_share": spent[0] / rollout_s, "peak_rss_mb": peak / 1e6, "reward": res["avg_at_k"]["1"]}


def points(quick: bool) -> list[tuple[int, float]]:
    p = QUICK if quick else FULL
    out = [(n, 1.0) for n in p["tasks"]]
    out += [(p["tasks_at_scale"], s) for s in p["scales"] if (p["tasks_at_scale"], s) not in out]
    return out


def run(quick: bool = False) -> dict[str, float]:
    figures: dict[str, float] = {}
    for n, s in points(quick):
        proc = subprocess.run([sys.executable, __file__, "--one", str(n), str(s)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"growth point {n} tasks, scale {s:g} failed:\n{proc.stderr[-2000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        key = f"growth.n{n}_s{s:g}"
        for k in ("build_s", "rollout_s", "load_share", "peak_rss_mb", "rows"):
            figures[f"{key}.{k}"] = float(r[k])
    return figures


def svg(figures: dict[str, float]) -> str:
    """Two small line charts (seconds and MB against tasks, and against scale) as standalone SVG text."""
    pts: dict[tuple[int, float], dict[str, float]] = {}
    for k, v in figures.items():
        head, field = k.rsplit(".", 1)
        n, s = head.split(".", 1)[1][1:].split("_s")
        pts.setdefault((int(n), float(s)), {})[field] = v
    by_tasks = sorted((n, d) for (n, s), d in pts.items() if s == 1.0)
    big_n = max((n for (n, s) in pts if s != 1.0), default=None)
    by_scale = sorted((s, d) for (n, s), d in pts.items() if n == big_n)
    series = [("build_s", "#1f77b4", "build s"), ("rollout_s", "#d62728", "rollout s"),
              ("peak_rss_mb", "#2ca02c", "peak RSS MB (right axis)")]
    w, h, pad = 420, 260, 48

    def chart(x0: int, data: list[tuple[float, dict[str, float]]], xlabel: str) -> list[str]:
        if not data:
            return []
        xs = [x for x, _ in data]
        secs = max(max(d["build_s"], d["rollout_s"]) for _, d in data) or 1
        mbs = max(d["peak_rss_mb"] for _, d in data) or 1
        xmax = max(xs) or 1

        def px(x: float) -> float:
            return x0 + pad + (w - 2 * pad) * x / xmax

        def py(v: float, top: float) -> float:
            return h - pad - (h - 2 * pad) * v / top

        out = [f'<line x1="{x0 + pad}" y1="{h - pad}" x2="{x0 + w - pad}" y2="{h - pad}" stroke="black"/>',
               f'<line x1="{x0 + pad}" y1="{pad}" x2="{x0 + pad}" y2="{h - pad}" stroke="black"/>',
               f'<text x="{x0 + w / 2}" y="{h - 10}" text-anchor="middle">{xlabel}</text>',
               f'<text x="{x0 + 6}" y="{pad - 14}">{secs:.0f} s</text>',
               f'<text x="{x0 + w - pad}" y="{pad - 14}" text-anchor="end">{mbs:.0f} MB</text>']
        for x in xs:
            out.append(f'<text x="{px(x):.1f}" y="{h - pad + 16}" text-anchor="middle">{x:g}</text>')
        for field, color, _ in series:
            top = mbs if field == "peak_rss_mb" else secs
            path = " ".join(f"{px(x):.1f},{py(d[field], top):.1f}" for x, d in data)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            out += [f'<circle cx="{px(x):.1f}" cy="{py(d[field], top):.1f}" r="3" fill="{color}"/>' for x, d in data]
        return out

    body = chart(0, [(float(n), d) for n, d in by_tasks], "tasks (scale 1)")
    body += chart(w, by_scale, f"world scale ({big_n} tasks)")
    legend = [f'<text x="{pad + i * 180}" y="18" fill="{c}">{label}</text>' for i, (_, c, label) in enumerate(series)]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h}" font-family="sans-serif" '
            f'font-size="12"><rect width="100%" height="100%" fill="white"/>' + "".join(legend + body) + "</svg>\n")


if __name__ == "__main__":
    if "--one" in sys.argv:
        i = sys.argv.index("--one")
        print(json.dumps(one(int(sys.argv[i + 1]), float(sys.argv[i + 2]))))
        sys.exit(0)
    figs = run(quick="--quick" in sys.argv)
    text = json.dumps(figs, indent=2, sort_keys=True)
    print(text)
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(text + "\n")
    if "--svg" in sys.argv:
        Path(sys.argv[sys.argv.index("--svg") + 1]).write_text(svg(figs))

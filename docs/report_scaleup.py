"""Synthetic scale-up for `scaleenv report`: copy a built universe's tasks and a rollout's episodes
until there are N tasks and M episodes, write the site, and time it in headless Chromium.

    python docs/report_scaleup.py UNIVERSE RESULTS.json [RESULTS.json ...] --tasks 16000 --episodes 50000 --work DIR

Each copy of a task keeps its gold chain and patch (so its expected change replays for real) and
gets a new id; each copied episode is a real trajectory re-labelled to a copied task. Prints one
JSON object of figures (seconds). Needs Playwright and a Chromium (see tests/test_report_browser.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import time
from pathlib import Path


def scale_universe(src: Path, dst: Path, n_tasks: int) -> dict[str, list[str]]:
    """Copy ``src`` to ``dst`` with its tasks repeated (new ids) up to ``n_tasks``; return
    ``{original id: [copy ids]}``."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    files = sorted((dst / "tasks").glob("*.jsonl"))
    per_file = [[json.loads(x) for x in f.read_text().splitlines() if x.strip()] for f in files]
    total = sum(len(x) for x in per_file)
    copies: dict[str, list[str]] = {}
    for f, tasks in zip(files, per_file, strict=True):
        want = round(n_tasks * len(tasks) / total)
        out = []
        for i, t in zip(range(want), itertools.cycle(tasks), strict=False):
            new = {**t, "id": f"{t['domain']}/{i:05d}"}
            copies.setdefault(t["id"], []).append(new["id"])
            out.append(json.dumps(new, sort_keys=True, separators=(",", ":")))
        f.write_text("\n".join(out) + "\n")
    return copies


def scale_results(results: list[Path], copies: dict[str, list[str]], dst: Path, n_episodes: int) -> Path:
    """One results.json + trajectories JSONL with ``n_episodes`` episodes relabelled onto the task copies."""
    episodes = []
    for r in results:
        res = json.loads(r.read_text())
        with open(res["trajectories"], encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                rec.pop("tools", None)
                episodes.append(rec)
    targets = [c for cs in copies.values() for c in cs]
    by_task: dict[str, list[dict]] = {}
    for e in episodes:
        by_task.setdefault(e["task_id"], []).append(e)
    origin = {c: o for o, cs in copies.items() for c in cs}
    traj = dst.with_name(dst.stem + ".trajectories.jsonl")
    sims = []
    with traj.open("w", encoding="utf-8") as f:
        for i in range(n_episodes):
            task = targets[i % len(targets)]
            trial = i // len(targets)
            pool = by_task[origin[task]]
            rec = {**pool[(i + trial) % len(pool)], "task_id": task, "trial": trial, "id": f"{task}#{trial}"}
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            sims.append({"id": rec["id"], "task_id": task, "domain": rec["domain"], "trial": trial})
    res = json.loads(results[0].read_text())
    res.update(trajectories=str(traj), num_episodes=n_episodes, simulations=sims)
    dst.write_text(json.dumps(res))
    return dst


def time_pages(site: Path) -> dict[str, float]:
    """Seconds from navigation to ready, to a filtered list, and to an opened detail, per page."""
    import shutil as sh

    from playwright.sync_api import sync_playwright

    chromium = next(p for p in map(sh.which, ("chromium", "chromium-browser")) if p)
    out: dict[str, float] = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        for name in ("index", "domains", "tasks", "trajectories", "plots"):
            t0 = time.perf_counter()
            pg.goto((site / f"{name}.html").as_uri())
            pg.wait_for_function("document.body.dataset.ready", timeout=120_000)
            out[f"{name}_ready_s"] = round(time.perf_counter() - t0, 3)
            if name in ("tasks", "trajectories"):
                t0 = time.perf_counter()
                pg.fill("#q", "00042")
                pg.locator("#list tbody tr").first.click()
                pg.locator("#detail .detail-head").first.wait_for()
                out[f"{name}_search_and_open_s"] = round(time.perf_counter() - t0, 3)
                out[f"{name}_rows"] = pg.evaluate("document.querySelector('#count').textContent")
        out["console_errors"] = len(errors)
        b.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("universe", type=Path)
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--tasks", type=int, default=16_000)
    ap.add_argument("--episodes", type=int, default=50_000)
    ap.add_argument("--work", type=Path, required=True)
    a = ap.parse_args()
    from scaleenv.report import build_site

    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    copies = scale_universe(a.universe, a.work / "universe", a.tasks)
    res = scale_results(a.results, copies, a.work / "results.json", a.episodes)
    figures: dict[str, object] = {"synthesize_s": round(time.perf_counter() - t0, 1)}
    t0 = time.perf_counter()
    info = build_site(a.work / "universe", [res], a.work / "site")
    figures.update(report_s=round(time.perf_counter() - t0, 1), tasks=info.tasks, episodes=info.episodes,
                   files=info.files, site_mb=round(sum(p.stat().st_size for p in info.folder.rglob("*")) / 2**20, 1),
                   tasks_index_mb=round((info.folder / "data/tasks/index.js").stat().st_size / 2**20, 2),
                   episodes_index_mb=round((info.folder / "data/runs/r0/index.js").stat().st_size / 2**20, 2))
    figures.update(time_pages(info.folder))
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()

"""Take the README's screenshots of a report site (Playwright + a system Chromium).

    python docs/screenshots.py SITE_DIR docs/

The site should have two runs (e.g. `--results random.json --results oracle.json`).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright


def main(site: Path, out: Path) -> None:
    chromium = next(p for p in map(shutil.which, ("chromium", "chromium-browser")) if p)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        pg = b.new_page(viewport={"width": 1280, "height": 760})

        def go(name: str, frag: str = "") -> None:
            pg.goto((site / f"{name}.html").as_uri() + frag)
            pg.wait_for_function("document.body.dataset.ready")

        go("index")
        pg.screenshot(path=str(out / "report-overview.png"))
        go("domains", "#d=1")
        pg.locator(".graphcard").scroll_into_view_if_needed()
        pg.evaluate("window.scrollTo(0, document.querySelector('.graphcard').offsetTop - 60)")
        # a write tool in the upper left, so its card opens over the graph's emptier lower right
        pts = pg.eval_on_selector_all("#graph g.n.kind-write circle",
                                      "cs => cs.map(c => { const r = c.getBoundingClientRect(); return [r.x, r.y]; })")
        best = min(range(len(pts)), key=lambda i: pts[i][0] + 2 * pts[i][1])
        pg.locator("#graph g.n.kind-write circle").nth(best).hover()
        pg.screenshot(path=str(out / "report-domains.png"))
        go("tasks")
        pg.select_option("#f-domain", label="pet_care")
        pg.locator("#list tbody tr").first.click()
        pg.evaluate("const d = document.querySelector('#detail'); d.scrollTop = d.querySelector('pre.chain').offsetTop - 60")
        pg.screenshot(path=str(out / "report-tasks.png"))
        go("trajectories")
        pg.locator("#list tbody tr").nth(2).click()
        pg.locator("#detail details.call").first.wait_for()
        pg.evaluate("const d = document.querySelector('#detail'); d.scrollTop = d.querySelector('.conv').offsetTop - 120")
        for i in (0, 2):
            pg.locator("#detail details.call summary").nth(i).click()
        pg.screenshot(path=str(out / "report-trajectories.png"))
        sel = pg.locator("select.cmp-with")
        sel.select_option(index=sel.locator("option").count() - 1)
        pg.locator(".compare > div").nth(1).locator(".detail-head").wait_for()
        pg.screenshot(path=str(out / "report-compare.png"))
        go("plots")
        pg.screenshot(path=str(out / "report-plots.png"))
        b.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))

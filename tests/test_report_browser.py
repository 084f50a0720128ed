"""The report site in a real headless Chromium (Debian's package, driven by Playwright).

Skipped when Playwright or a Chromium binary is missing; `.ci/run` installs both and runs this file.
Set SCALEENV_CHROMIUM to a Chromium binary, SCALEENV_SCREENSHOTS to a folder to keep a screenshot
of every page.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from report_support import runner, universe_with_runs, write_site
from scaleenv.cli import app
from scaleenv.universe import Universe

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("SCALEENV_CHROMIUM") or next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
if CHROMIUM is None:
    pytest.skip("no Chromium binary (apt-get install chromium, or set SCALEENV_CHROMIUM)", allow_module_level=True)

PAGES = ("index", "domains", "tasks", "trajectories", "plots")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "site"
    write_site(out)
    return out


@pytest.fixture(scope="module")
def browser(site):
    # The rollouts behind ``site`` run asyncio event loops: build them before Playwright starts its own.
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A page that records every console error and uncaught exception in ``page.problems``."""
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    pg.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    pg.problems = problems
    yield pg
    pg.close()


def _open(page, site: Path, name: str, fragment: str = "") -> None:
    page.goto((site / f"{name}.html").as_uri() + fragment)
    page.wait_for_function("document.body.dataset.ready", timeout=30_000)
    assert page.evaluate("document.body.dataset.ready") == "1", page.problems


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_console_errors(page, site, name):
    _open(page, site, name)
    page.wait_for_timeout(200)  # late errors from lazily loaded data
    shots = os.environ.get("SCALEENV_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)
    assert page.problems == []
    assert page.locator("header nav a.on").count() == 1


def test_graph_shows_the_domains_tools_and_filters_edges(page, site):
    u = Universe(universe_with_runs()[0])
    for i, name in enumerate(u.domains):
        _open(page, site, "domains", f"#d={i}")
        page.wait_for_function(f"document.querySelector('#domain-head h1')?.textContent === {name!r}")
        n_tools = len(u.spec(name).tools)
        assert page.locator("#graph svg g.n").count() == n_tools
        assert page.locator("#tool-count").inner_text() == str(n_tools)
        assert page.locator("#graph-stats").inner_text().startswith(f"{n_tools} tools")
        visible = "Array.from(document.querySelectorAll('#graph path.e')).filter(p => p.getClientRects().length).length"
        before = page.evaluate(visible)
        assert before == len(u.graph(name)["edges"])
        page.locator(".kinds input[data-kind=data_flow]").uncheck()
        after = page.evaluate(visible)
        n_flow = sum(1 for x in u.graph(name)["edges"] if x["kind"] == "data_flow")
        assert after == before - n_flow and n_flow > 0
        page.locator(".kinds input[data-kind=data_flow]").check()
        assert page.evaluate(visible) == before
        tool = u.spec(name).tools[0]
        page.locator(f'#graph g.n[data-tool="{tool.name}"] circle').hover()
        tip = page.locator("#tip")
        assert tip.is_visible() and tool.name in tip.inner_text()
        for p in tool.parameters:
            assert p.name in tip.inner_text()
        vb = page.locator("#graph svg").get_attribute("viewBox")
        page.locator("[data-zoom=in]").click()
        assert page.locator("#graph svg").get_attribute("viewBox") != vb
        assert page.problems == []


def test_filters_narrow_the_task_list(page, site):
    u = Universe(universe_with_runs()[0])
    _open(page, site, "tasks")
    total = len(u.tasks())
    count = page.locator("#count")
    assert count.inner_text() == f"{total} of {total} tasks"
    assert page.locator("#list tbody tr").count() == total
    page.select_option("#f-domain", label="pet_care")
    n_pet = len(u.tasks("pet_care"))
    assert count.inner_text() == f"{n_pet} of {total} tasks" and page.locator("#list tbody tr").count() == n_pet
    first = u.tasks("pet_care")[0]
    page.select_option("#f-tool", label=first.gold_chain[-1].tool)
    with_tool = [t for t in u.tasks("pet_care") if first.gold_chain[-1].tool in {c.tool for c in t.gold_chain}]
    assert count.inner_text() == f"{len(with_tool)} of {total} tasks"
    page.select_option("#f-tool", value="")
    page.select_option("#f-domain", value="")
    page.fill("#q", first.id)
    assert count.inner_text() == f"1 of {total} tasks"
    page.locator("#list tbody tr").first.click()
    detail = page.locator("#detail")
    detail.locator("h2").wait_for()
    assert detail.locator("h2").inner_text() == first.id
    assert "Gold chain" in detail.inner_text() and "s0 = " in detail.locator("pre.chain").inner_text()
    detail.locator("a", has_text="oracle").click()  # to this task's episodes in the oracle run
    page.wait_for_url("**/trajectories.html#*")
    page.wait_for_function("document.body.dataset.ready")
    page.locator("#detail .detail-head").wait_for()
    assert page.locator("#count").inner_text().startswith("2 of 16 episodes")
    assert page.locator("#f-run option:checked").inner_text().startswith("oracle")
    assert page.problems == []


def test_a_trajectory_expands_and_compares(page, site):
    _open(page, site, "trajectories")
    assert page.locator("#list tbody tr").count() == 16
    page.locator("#list tbody tr").nth(1).click()
    detail = page.locator("#detail")
    call = detail.locator("details.call").first
    call.wait_for()
    assert call.get_attribute("open") is None and not call.locator(".callbody").is_visible()
    call.locator("summary").click()
    assert call.get_attribute("open") is not None and call.locator(".callbody").is_visible()
    assert "RESULT" in call.locator(".callbody").inner_text().upper()
    # the other trial of this task and both oracle trials are offered for a side-by-side view
    options = detail.locator("select.cmp-with option")
    assert options.count() == 1 + 3
    page.select_option("select.cmp-with", index=3)
    page.locator(".compare > div").nth(1).locator(".detail-head").wait_for()
    assert page.locator(".compare > div").count() == 2
    assert "oracle" in page.locator(".compare > div").nth(1).inner_text()
    page.select_option("#f-outcome", value="1")
    assert page.locator("#count").inner_text().startswith("0 of 16")
    assert page.problems == []


def test_html_out_site_works_from_file(page, tmp_path):
    u, r_random, _ = universe_with_runs()
    out = tmp_path / "report.html"
    res = runner.invoke(app, ["report", str(u), "--results", str(r_random), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page.goto(out.as_uri())
    page.wait_for_function("document.body.dataset.ready")
    page.locator("header nav a", has_text="Tasks").click()
    page.wait_for_url("**/report_files/tasks.html")
    page.wait_for_function("document.body.dataset.ready")
    assert page.locator("#list tbody tr").count() == len(Universe(u).tasks())
    page.locator("header nav a", has_text="Overview").click()
    page.wait_for_url("**/report.html")
    page.wait_for_function("document.body.dataset.ready")
    assert page.url == out.as_uri() and page.problems == []

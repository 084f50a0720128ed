"""`scaleenv report`: the static site's files, data and edge cases (no browser; see test_report_browser.py)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from report_support import read_data, runner, universe_with_runs, write_site
from scaleenv.cli import app
from scaleenv.report.render import task_family, task_html, task_tier
from scaleenv.universe import Universe

PAGES = ("index.html", "domains.html", "tasks.html", "trajectories.html", "plots.html")


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert "8 tasks, 32 episodes" in write_site(out)
    return out


def test_every_page_and_asset_is_written(site):
    for p in PAGES:
        html = (site / p).read_text()
        assert html.startswith("<!doctype html>") and 'src="assets/app.js"' in html
    assert (site / "assets" / "app.js").is_file() and (site / "assets" / "app.css").is_file()
    index = (site / "index.html").read_text()
    assert "<h2>Domains</h2>" in index and "smart_home" in index and "pet_care" in index and "s0 = " in index
    assert "random · random" in index and "oracle · oracle" in index  # both runs listed
    marker = json.loads((site / "scaleenv-report.json").read_text())
    assert marker["tasks"] == 8 and marker["episodes"] == 32 and len(marker["results"]) == 2


def test_no_page_references_the_network(site):
    for p in [*site.glob("*.html"), *site.glob("assets/*")]:
        text = p.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), p
        assert "fetch(" not in text and "XMLHttpRequest" not in text, p  # file:// forbids both


def test_domain_graph_has_every_tool_and_edge(site):
    u = Universe(universe_with_runs()[0])
    for i, name in enumerate(u.domains):
        d = read_data(site, f"domains/d{i:03d}")
        assert d["name"] == name
        spec, graph = u.spec(name), u.graph(name)
        assert d["svg"].count('<g class="n ') == len(spec.tools) == len(d["order"]) == len(d["tools"])
        assert d["svg"].count('<path class="e ') == len(graph["edges"])
        assert f'data-tools="{len(spec.tools)}"' in d["svg"]
        assert sum(d["kinds"].values()) == len(graph["edges"])
        tool = spec.tools[0]
        info = d["tools"][tool.name]
        assert [p[0] for p in info["params"]] == [p.name for p in tool.parameters]
        assert [c[1] for c in info["pre"]] == [c.sql for c in tool.preconditions]
        assert info["effects"] == list(tool.effects)
        for t in spec.tables:  # every table with its columns and match policies
            assert f"<h4>{t.name} " in d["tables"]
        assert 'class="badge m-exact"' in d["tables"]
        assert d["tests"].count("<tr>") == len(u.tests(name)["reports"]) + 1


def test_task_index_and_details(site):
    u = Universe(universe_with_runs()[0])
    idx = read_data(site, "tasks/index")
    tasks = u.tasks()
    assert [r[0] for r in idx["rows"]] == [t.id for t in tasks]
    chunk = read_data(site, "tasks/c00000")
    for row, t in zip(idx["rows"], tasks, strict=True):
        assert idx["domains"][row[1]] == t.domain
        assert idx["tiers"][row[3]] == t.difficulty.level
        assert {idx["tools"][i] for i in row[5]} == {c.tool for c in t.gold_chain}
        assert row[6] == t.instruction and 0 <= row[8] < row[9] <= len(t.instruction)
        html = chunk[t.id]
        assert "s0 = " in html and t.gold_chain[0].tool in html
        for g in t.user_profile.goals:
            assert g.replace("'", "&#x27;").replace('"', "&quot;") in html
        gates = t.verification.gates
        assert f"<span>gold</span><b>{gates['gold']}</b>" in html
        # both runs played it twice; the oracle passed both times
        assert html.count("trajectories.html#run=") == 2 and "oracle · oracle</a></td><td>" in html
        assert '<span class="badge ok">2/2 passed</span></td></tr></tbody>' in html


def test_expected_change_is_the_gold_chains_diff(site):
    """A write task's detail shows the rows its gold chain changes, with old and new values."""
    from scaleenv.env.cache import build_worlds
    from scaleenv.world.world import World

    u = Universe(universe_with_runs()[0])
    chunk = read_data(site, "tasks/c00000")
    checked = 0
    for t in u.tasks():
        spec = u.spec(t.domain)
        w = build_worlds(spec, u.base(t.domain), t)
        changes = World.from_snapshot(spec, w.initial).diff(w.expected, keys=w.gold_keys)
        html = chunk[t.id]
        if not changes:
            assert "No change to the world" in html
            continue
        for c in changes:
            assert f"{c.table}[{json.dumps(c.key)}]" in html.replace("&quot;", '"')
            for col, (before, after) in c.columns.items():
                assert f"-   {col}: {json.dumps(before)}" in html
                assert f"+   {col}: {json.dumps(after)}" in html
            checked += 1
    assert checked > 0


def test_episode_index_and_conversations(site):
    _, r_random, r_oracle = universe_with_runs()
    runs = read_data(site, "runs/list")
    assert [r["index"] for r in runs] == [0, 1]
    for i, path in enumerate((r_random, r_oracle)):
        res = json.loads(path.read_text())
        idx = read_data(site, f"runs/r{i}/index")
        assert idx["has_messages"] and len(idx["rows"]) == res["num_episodes"] == 16
        ok = sum(r[5] for r in idx["rows"])
        assert ok == sum(1 for s in res["simulations"] if s["reward_info"]["success"])
        chunk = read_data(site, f"runs/r{i}/c00000")
        assert set(chunk) == {r[0] for r in idx["rows"]}
        html = chunk[idx["rows"][0][0]]
        assert '<details class="call' in html and 'class="msg user"' in html
    assert sum(r[5] for r in read_data(site, "runs/r1/index")["rows"]) == 16  # oracle passes all


def test_plots_are_drawn(site):
    html = (site / "plots.html").read_text()
    for title in ("Pass rate by domain", "Pass rate by difficulty", "Pass rate by task family", "Pass rate by tool",
                  "Tool calls per episode", "Pass^k and Pass@k curves", "Gold chain length",
                  "Build rejections by reason"):
        assert f"<h3>{title}" in html
    assert html.count('<svg class="chart"') >= 6  # family: a note (no such field yet); rejections: maybe none
    assert "oracle · oracle: pet_care: 8/8 passed (100.0%)" in html


def test_same_input_same_bytes(site, tmp_path):
    write_site(tmp_path / "again")
    a, b = _hashes(site), _hashes(tmp_path / "again")
    assert a == b


def test_html_out_writes_the_site_beside_it(tmp_path):
    u, r_random, _ = universe_with_runs()
    out = tmp_path / "report.html"
    res = runner.invoke(app, ["report", str(u), "--results", str(r_random), "--out", str(out)])
    assert res.exit_code == 0, res.output
    index = out.read_text()
    assert 'href="report_files/assets/app.css"' in index and 'href="report_files/tasks.html"' in index
    assert (tmp_path / "report_files" / "tasks.html").is_file()
    assert 'href="../report.html"' in (tmp_path / "report_files" / "tasks.html").read_text()
    assert not (tmp_path / "report_files" / "index.html").exists()
    res = runner.invoke(app, ["report", str(u), "--out", str(out)])  # rewriting our own report is fine
    assert res.exit_code == 0, res.output
    assert read_data(tmp_path / "report_files", "runs/list") == []


def test_refuses_a_folder_that_is_not_a_report(tmp_path):
    u = universe_with_runs()[0]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    res = runner.invoke(app, ["report", str(u), "--out", str(tmp_path / "mine")])
    assert res.exit_code == 2 and "holds no scaleenv report" in res.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_bad_results_exit_2(tmp_path):
    u = universe_with_runs()[0]
    res = runner.invoke(app, ["report", str(u), "--results", str(tmp_path / "missing.json"), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "does not exist" in res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["report", str(u), "--results", str(bad), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "cannot read" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2


def test_torn_or_missing_trajectories(tmp_path):
    """A corrupt line is skipped and counted; without the JSONL the summaries in results.json are used."""
    u, r_random, _ = universe_with_runs()
    res = json.loads(r_random.read_text())
    lines = Path(res["trajectories"]).read_text().splitlines()
    copy = tmp_path / "torn.json"
    copy.write_text(json.dumps({**res, "trajectories": str(tmp_path / "torn.trajectories.jsonl")}))
    odd = json.dumps({**json.loads(lines[3]), "reward": "1.0", "id": "x#9"})  # parses, but not a record
    (tmp_path / "torn.trajectories.jsonl").write_text("\n".join(lines[:3] + [odd, "{torn", lines[3][:50]]) + "\n")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({**res, "trajectories": str(tmp_path / "gone.jsonl")}))
    out = tmp_path / "s"
    r = runner.invoke(app, ["report", str(u), "--results", str(copy), "--results", str(bare), "--out", str(out)])
    assert r.exit_code == 0, r.output
    torn = read_data(out, "runs/r0/index")
    assert len(torn["rows"]) == 3 and torn["skipped_lines"] == 3
    summary = read_data(out, "runs/r1/index")
    assert not summary["has_messages"] and len(summary["rows"]) == 16
    assert sum(x[8] for x in summary["rows"]) == sum(s["tool_calls"] for s in res["simulations"])


def test_family_and_tier_are_shown_when_present():
    u = Universe(universe_with_runs()[0])
    t = next(x for x in u.tasks() if x.family == "direct").model_dump(mode="json")  # direct: no family key
    assert task_family(t) == "" and task_tier(t) == t["difficulty"]["level"]
    assert "family:" not in task_html(t, [])
    t2 = {**t, "family": "refusal", "tier": "expert"}
    html = task_html(t2, [])
    assert task_family(t2) == "refusal" and task_tier(t2) == "expert"
    assert "family: refusal" in html and "tier: expert" in html

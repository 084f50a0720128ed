"""End to end through the CLI: build, check, inspect, validate, resume, executors, corrupt input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.synth.build import BuildConfig, build_one_domain, prepare_out, run_build
from scaleenv.synth.tasks.gates import ZERO_GATES

runner = CliRunner()


def _tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small_universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("u") / "universe"
    res = runner.invoke(app, ["build", "--domain", "pet_care", "--domain", "wedding_planning", "--tasks-per-domain", "4",
                              "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_build_check_inspect(small_universe):
    res = runner.invoke(app, ["inspect", str(small_universe), "--json"])
    assert res.exit_code == 0, res.output
    counts = json.loads(res.output)
    assert set(counts) == {"domains", "tables", "tools", "edges", "tasks", "families", "tiers", "per_domain"}
    assert counts["domains"] == 2 and counts["tasks"] == 8
    assert sum(counts["families"].values()) == sum(counts["tiers"].values()) == 8
    assert counts["tools"] == sum(d["tools"] for d in counts["per_domain"]) >= 50
    res = runner.invoke(app, ["check", str(small_universe), "--json"])
    assert res.exit_code == 0, res.output
    gates = json.loads(res.output)
    assert gates == {"tasks": 8, "gold_pass": 8, "gold_conversational_pass": 8, "gold_styled_pass": 8, "styles_failed": {},
                     **{f"{g}_zero": 8 for g in ZERO_GATES}, "failures": []}
    for name in ("spec.json", "base.sqlite", "tests.json", "graph.json", "done.json"):
        assert (small_universe / "domains" / "pet_care" / name).is_file()
    graph = json.loads((small_universe / "domains" / "pet_care" / "graph.json").read_text())
    assert set(graph["stats"]) >= {"nodes", "edges", "edges_by_kind", "density", "components"}
    res = runner.invoke(app, ["validate", str(small_universe)])
    assert res.exit_code == 0 and "2 domains, 8 tasks" in res.output


def test_domains_only_build(tmp_path):
    res = runner.invoke(app, ["build", "--domain", "pet_care", "--tasks-per-domain", "0", "--out",
                              str(tmp_path / "u"), "--quiet"])
    assert res.exit_code == 0, res.output
    counts = json.loads(runner.invoke(app, ["inspect", str(tmp_path / "u"), "--json"]).output)
    assert counts["tasks"] == 0 and counts["tools"] >= 25


def test_list_domains():
    res = runner.invoke(app, ["list-domains"])
    assert res.exit_code == 0
    lines = res.output.strip().splitlines()
    assert len(lines) >= 24
    assert any(line.startswith("retail") and "[eval-only]" in line for line in lines)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["build", "--domain", "no_such_domain"], "unknown domain"),
        (["build", "--executor", "gpu"], "unknown --executor"),
        (["build", "--chain-length", "9-3"], "--chain-length"),
        (["inspect", "/nonexistent/dir"], "not a directory"),
        (["check", "/nonexistent/dir"], "not a directory"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, tmp_path):
    res = runner.invoke(app, args + (["--out", str(tmp_path / "x")] if args[0] == "build" else []))
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert "Traceback" not in res.output


def test_corrupt_task_file_is_reported_with_file_and_line(small_universe, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(small_universe, bad)
    path = bad / "tasks" / "pet_care.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    path.write_text("\n".join(lines) + "\n")
    for cmd in (["check", str(bad)], ["validate", str(bad)]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2, res.output
        assert "pet_care.jsonl: line 3" in res.output
        assert "Traceback" not in res.output
    (bad / "universe.json").write_text("{not json")
    res = runner.invoke(app, ["inspect", str(bad)])
    assert res.exit_code == 2 and "universe.json: line 1" in res.output


def test_existing_output_needs_resume_or_force(small_universe):
    res = runner.invoke(app, ["build", "--domain", "pet_care", "--out", str(small_universe)])
    assert res.exit_code == 2 and "--resume" in res.output


def _cfg(out: Path, **kw) -> BuildConfig:
    return BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=6, seed=3, **kw)


def test_resume_after_interruption_gives_the_same_universe(tmp_path):
    full = _cfg(tmp_path / "full")
    prepare_out(full)
    run_build(full)

    cut = _cfg(tmp_path / "cut")
    prepare_out(cut)

    class Stop(Exception):
        pass

    def interrupt(domain, stage, done, total):
        if stage == "tasks" and done >= 3:
            raise Stop

    with pytest.raises(Stop):
        build_one_domain(cut.out, "pet_care", {"seed": 3, "tasks_per_domain": 6, "scale": 1.0, "resume": False,
                                               "chain_length": (3, 8)}, interrupt)
    partial = cut.out / "tasks" / "pet_care.partial.jsonl"
    assert len(partial.read_text().splitlines()) == 3
    with partial.open("a") as f:  # a torn line, as a crash mid-write leaves
        f.write('{"id": "pet_care/0')
    resumed = _cfg(tmp_path / "cut", resume=True)
    prepare_out(resumed)
    run_build(resumed)
    a, b = _tree_hashes(full.out), _tree_hashes(cut.out)
    a.pop("domains/pet_care/attempts.jsonl")
    b.pop("domains/pet_care/attempts.jsonl")
    assert a == b


def test_process_executor_gives_the_same_bytes(tmp_path):
    serial = BuildConfig(out=tmp_path / "s", domains=["pet_care", "wedding_planning"], tasks_per_domain=3, seed=1)
    proc = BuildConfig(out=tmp_path / "p", domains=["pet_care", "wedding_planning"], tasks_per_domain=3, seed=1,
                       executor="process", workers=2)
    for cfg in (serial, proc):
        prepare_out(cfg)
        run_build(cfg)
    assert _tree_hashes(serial.out) == _tree_hashes(proc.out)


def test_console_script_runs():
    res = subprocess.run([sys.executable, "-m", "scaleenv.cli", "list-domains"], capture_output=True, text=True)
    assert res.returncode == 0 and "pet_care" in res.stdout


def test_report_writes_html(small_universe, tmp_path):
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(small_universe), "--out", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert html.startswith("<!doctype html>")
    assert "pet_care" in html and "wedding_planning" in html
    assert "<h2>Domains</h2>" in html and "s0 = " in html
    res = runner.invoke(app, ["report", str(small_universe), "--results", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "does not exist" in res.output

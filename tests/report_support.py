"""A small universe with two rollouts (random, oracle) for the report tests (built once per process)."""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from scaleenv.cli import app

runner = CliRunner()


@cache
def universe_with_runs() -> tuple[Path, Path, Path]:
    """(universe, random results.json, oracle results.json)."""
    root = Path(tempfile.mkdtemp(prefix="scaleenv-report-"))
    atexit.register(shutil.rmtree, root, True)
    u = root / "universe"
    res = runner.invoke(app, ["build", "--domain", "smart_home", "--domain", "pet_care", "--tasks-per-domain", "4",
                              "--out", str(u), "--quiet"])
    assert res.exit_code == 0, res.output
    runs = []
    for agent in ("random", "oracle"):
        out = root / f"{agent}.json"
        res = runner.invoke(app, ["rollout", str(u), "--agent", agent, "--trials", "2", "--out", str(out)])
        assert res.exit_code == 0, res.output
        runs.append(out)
    return u, runs[0], runs[1]


def write_site(out: Path) -> str:
    """``scaleenv report`` of the universe with both runs into ``out``; returns the command's output."""
    u, r_random, r_oracle = universe_with_runs()
    res = runner.invoke(app, ["report", str(u), "--results", str(r_random), "--results", str(r_oracle),
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    return res.output


def read_data(site: Path, name: str) -> Any:
    """The object a data script hands to ``SE.put``."""
    text = (site / "data" / f"{name}.js").read_text(encoding="utf-8")
    m = re.fullmatch(r'SE\.put\((".*?"),JSON\.parse\((".*")\)\);\n', text, re.S)
    assert m, text[:200]
    assert json.loads(m.group(1)) == name
    return json.loads(json.loads(m.group(2)))

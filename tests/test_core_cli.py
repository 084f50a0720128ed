"""``scaleenv validate SPEC.json``: a one-line summary and exit 0, or exit 2 with one line per problem."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import example_domain
from scaleenv.cli import app

runner = CliRunner()


def write(tmp_path: Path, data: object, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_valid_spec_prints_one_line_summary(tmp_path: Path) -> None:
    path = write(tmp_path, example_domain.SPEC)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines == [
        f"ok: bookshop: 4 tables, 7 tools (4 write, 3 read), hash {example_domain.spec().content_hash()}"
    ]


def test_malformed_json_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{"name": "bookshop",\n "tables": [}')
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{path}: line 2 column 13: malformed JSON:")
    assert "Traceback" not in result.output


def test_invalid_spec_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    spec = copy.deepcopy(example_domain.SPEC)
    spec["tools"][0]["name"] = "get-book"
    spec["tools"][3]["preconditions"][1]["error"] = "nope"
    spec["tables"][2]["columns"][1]["foreign_key"] = "clients.id"
    path = write(tmp_path, spec)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"{path}: tables[2](orders).columns[1](customer_id).foreign_key: references missing table 'clients'",
        f"{path}: tools[0](get-book).name: 'get-book' does not match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$",
        f"{path}: tools[3](cancel_order).preconditions[1].error: error 'nope' is not declared in errors",
    ]
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_structurally_invalid_spec(tmp_path: Path) -> None:
    path = write(tmp_path, {"name": "x", "tables": "none", "tools": [{"kind": "delete"}]})
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert f"{path}: tables: Input should be a valid list" in lines
    assert any(line.startswith(f"{path}: tools.0.name: ") for line in lines)
    assert all(line.startswith(f"{path}: ") for line in lines)


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nope.json'} does not exist; pass a domain spec .json file or a universe directory"
    ]


def test_real_process_has_no_traceback(tmp_path: Path) -> None:
    bad = write(tmp_path, "[1, 2", "bad.json")
    good = write(tmp_path, example_domain.SPEC, "good.json")
    for path, code in ((bad, 2), (good, 0)):
        proc = subprocess.run([sys.executable, "-m", "scaleenv.cli", "validate", str(path)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == code, proc.stderr
        assert "Traceback" not in proc.stderr
        assert len((proc.stderr if code else proc.stdout).strip().splitlines()) == 1

"""Corrupt universe files against every command: one ``error:`` line and exit 2 (never a traceback),
and no command that verifies (validate, check, rollout) passes a universe it cannot trust."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.synth.build import BuildConfig, prepare_out, run_build

runner = CliRunner()
D = "pet_care"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corrupt") / "u"
    cfg = BuildConfig(out=out, domains=[D], tasks_per_domain=2, seed=0)
    prepare_out(cfg)
    run_build(cfg)
    return out


def _copy(pristine: Path, tmp: Path) -> Path:
    u = tmp / "u"
    if u.exists():
        shutil.rmtree(u)
    shutil.copytree(pristine, u)
    return u


COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "validate": lambda u, t: ["validate", str(u)],
    "inspect": lambda u, t: ["inspect", str(u)],
    "check": lambda u, t: ["check", str(u)],
    "rollout": lambda u, t: ["rollout", str(u), "--out", str(t / "r.json"), "--num-tasks", "1", "-q", "--force"],
    "report": lambda u, t: ["report", str(u), "--out", str(t / "r.html")],
    "export": lambda u, t: ["export", str(u), "--format", "jsonl", "--out", str(t / "e.jsonl")],
    "serve": lambda u, t: ["serve", str(u), "--task", "nope/00000"],
}


def _run(u: Path, tmp: Path, command: str):
    res = runner.invoke(app, COMMANDS[command](u, tmp))
    crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
    assert not crashed, f"{command}: {type(res.exception).__name__}: {res.exception}"
    assert "Traceback" not in res.output, res.output
    assert res.exit_code in (0, 1, 2), (command, res.exit_code, res.output)
    if res.exit_code == 2:
        errors = [line for line in res.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, res.output
    return res


# --- the corruptions --------------------------------------------------------------------


def _edit_json(path: Path, fn: Callable) -> None:
    data = json.loads(path.read_text())
    out = fn(data)
    path.write_text(json.dumps(data if out is None else out))


def _drop_table(u: Path) -> None:
    conn = sqlite3.connect(u / "domains" / D / "base.sqlite")
    name = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 1) != '_' "
                        "AND name NOT LIKE 'sqlite%' ORDER BY name").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(f'DROP TABLE "{name}"')
    conn.commit()
    conn.close()


def _tamper_write(u: Path) -> None:
    """Change a literal argument of a write in the first task (the one a one-task rollout plays): a
    number by 7, else a text by a suffix, so the replayed chain no longer gives the recorded state."""
    path = u / "tasks" / f"{D}.jsonl"
    lines = path.read_text().splitlines()
    t = json.loads(lines[0])
    for kind in (int | float, str):
        for call in t["gold_chain"]:
            if call.get("purpose") != "goal":
                continue
            for k, v in call["args"].items():
                if isinstance(v, kind) and not isinstance(v, bool) and k != "limit":
                    call["args"][k] = v + 7 if kind is not str else f"{v} Tampered"
                    lines[0] = json.dumps(t)
                    path.write_text("\n".join(lines) + "\n")
                    return
    pytest.skip("no literal argument to tamper with")


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def _spec(u: Path) -> Path:
    return u / "domains" / D / "spec.json"


def _tasks(u: Path) -> Path:
    return u / "tasks" / f"{D}.jsonl"


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "deep_manifest": lambda u: (u / "universe.json").write_text(_deep()),
    "deep_spec": lambda u: _spec(u).write_text(_deep()),
    "numeric_domain_names": lambda u: _edit_json(u / "universe.json", lambda m: m.update(domains=[1, 2])),
    "build_not_an_object": lambda u: _edit_json(u / "universe.json", lambda m: m.update(build=[1])),
    # found by the property below in CI: an unhashable format crashed the old-format lookup
    "format_a_list": lambda u: _edit_json(u / "universe.json", lambda m: m.update(format=[])),
    "format_an_object": lambda u: _edit_json(u / "universe.json", lambda m: m.update(format={"a": 1})),
    "domains_a_string": lambda u: _edit_json(u / "universe.json", lambda m: m.update(domains=D)),
    "domain_without_directory": lambda u: _edit_json(u / "universe.json", lambda m: m["domains"].append("ghost")),
    "path_as_domain": lambda u: _edit_json(u / "universe.json", lambda m: m.update(domains=["../../etc"])),
    "graph_a_list": lambda u: (u / "domains" / D / "graph.json").write_text("[]"),
    "tests_a_list": lambda u: (u / "domains" / D / "tests.json").write_text("[]"),
    "spec_a_list": lambda u: _spec(u).write_text("[]"),
    "table_missing_from_base": _drop_table,
    "garbage_base": lambda u: (u / "domains" / D / "base.sqlite").write_bytes(b"garbage" * 500),
    "empty_sqlite_base": lambda u: (u / "domains" / D / "base.sqlite").write_bytes(
        b"SQLite format 3\x00" + bytes(4096)),
    "task_file_missing": lambda u: _tasks(u).unlink(),
    "task_file_empty": lambda u: _tasks(u).write_text(""),
    "task_line_duplicated": lambda u: _tasks(u).write_text(
        _tasks(u).read_text() + _tasks(u).read_text().splitlines()[0] + "\n"),
    "tool_removed_from_spec": lambda u: _edit_json(_spec(u), lambda s: s.update(tools=s["tools"][1:])),
    "gold_chain_tampered": _tamper_write,
    "hostile_sql_in_spec": lambda u: _edit_json(_spec(u), lambda s: s["tools"][0].update(
        returns={"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
                 "mode": "many"})),
}

# what each verifying command must refuse (inspect, report and export only describe what is there)
MUST_FAIL = {
    "validate": set(CORRUPTIONS),
    "check": set(CORRUPTIONS),
    "rollout": set(CORRUPTIONS) - {"graph_a_list", "tests_a_list"},  # a rollout reads neither
    "serve": set(CORRUPTIONS),  # (asked for a task that does not exist: 2 either way, but one line)
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corruption_against_every_command(case: str, pristine: Path, tmp_path: Path) -> None:
    u = _copy(pristine, tmp_path)
    CORRUPTIONS[case](u)
    for command in COMMANDS:
        res = _run(u, tmp_path, command)
        if case in MUST_FAIL.get(command, set()):
            assert res.exit_code != 0, f"{command} passed a universe with {case}: {res.output}"


def test_the_pristine_universe_passes_every_command(pristine: Path, tmp_path: Path) -> None:
    for command in COMMANDS:
        res = _run(pristine, tmp_path, command)
        assert res.exit_code == (2 if command == "serve" else 0), (command, res.output)


def test_rollout_reports_environment_errors_apart(pristine: Path, tmp_path: Path) -> None:
    u = _copy(pristine, tmp_path)
    _tamper_write(u)  # one task's gold chain no longer reaches its recorded state
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["rollout", str(u), "--out", str(out), "-q"])
    assert res.exit_code == 2 and "failed in the environment" in res.output, res.output
    results = json.loads(out.read_text())
    assert results["environment_errors"] == 1 and results["num_episodes"] == 1
    assert results["avg_reward"] == 1.0  # the oracle's one good episode, not (1 + 0) / 2
    assert "environment: " in results["environment_error_examples"][0]


# --- property: any corruption of any file, any command ------------------------------------------

FILES = ["universe.json", f"domains/{D}/spec.json", f"domains/{D}/base.sqlite", f"domains/{D}/tests.json",
         f"domains/{D}/graph.json", f"domains/{D}/done.json", f"domains/{D}/tasks_report.json", f"tasks/{D}.jsonl"]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                     max_size=3), max_leaves=8)


def _corrupt(path: Path, kind: str, data: st.DataObject) -> None:
    raw = path.read_bytes()
    if kind == "delete":
        path.unlink()
    elif kind == "truncate":
        path.write_bytes(raw[: data.draw(st.integers(0, max(0, len(raw) - 1)), label="keep")])
    elif kind == "flip":
        i = data.draw(st.integers(0, len(raw) - 1), label="at")
        path.write_bytes(raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255), label="xor")]) + raw[i + 1:])
    elif kind == "json":
        path.write_text(json.dumps(data.draw(JSON_VALUES, label="value")))
    elif kind == "deep":
        path.write_text(_deep(data.draw(st.sampled_from([2_000, 100_000]), label="depth")))
    elif kind == "field":  # one top-level field of a JSON object gets another value
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj:
            key = data.draw(st.sampled_from(sorted(obj)), label="field")
            obj[key] = data.draw(JSON_VALUES, label="value")
            path.write_text(json.dumps(obj))
        else:
            path.write_bytes(raw + b"\x00garbage")


# derandomized: the same examples on every run, so a CI run passes or fails alike (a case a random run
# finds becomes a named corruption above)
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), file=st.sampled_from(FILES),
       kind=st.sampled_from(["delete", "truncate", "flip", "json", "deep", "field"]),
       command=st.sampled_from(sorted(COMMANDS)))
def test_any_corruption_of_any_file_gives_one_line_or_success(pristine: Path, tmp_path: Path, data, file: str,
                                                              kind: str, command: str) -> None:
    u = _copy(pristine, tmp_path)
    _corrupt(u / file, kind, data)
    _run(u, tmp_path, command)

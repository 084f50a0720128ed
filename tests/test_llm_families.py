"""The LLM back end draws task families too (``--family-mix``): the ``direct`` family from the task
agents, the data-reasoning families from their procedural builders over the LLM-made domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI
from llm_fixture import PetCareScript
from scaleenv.cli import app
from scaleenv.formats.task import Task
from scaleenv.synth.tasks.families import FAMILIES

runner = CliRunner()
LLM_CONFIG = {"backoff": 0.01, "concurrency": 2,
              "synth": {"debug_rounds": 1, "best_of_k": 3,
                        "sandbox": {"cpu_seconds": 1, "wall_seconds": 10.0, "memory_mb": 256}}}


@pytest.fixture(scope="module")
def universe(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm_families")
    cfg = root / "llm.json"
    cfg.write_text(json.dumps(LLM_CONFIG))
    with FakeOpenAI(PetCareScript()) as srv:
        res = runner.invoke(app, ["build", "--llm", "scripted-model", "--base-url", srv.url, "--api-key-env",
                                  "SCALEENV_TEST_KEY", "--domain", "pet care", "--tasks-per-domain", "4", "--out",
                                  str(root / "u"), "--llm-cache", str(root / "cache"), "--llm-config", str(cfg),
                                  "--family-mix", "computed=1,bulk=1,description=1", "--tier-mix", "hard=1",
                                  "--quiet"])
    assert res.exit_code == 0, res.output
    return root / "u"


def _tasks(u: Path) -> list[Task]:
    return [Task.model_validate_json(line) for f in sorted((u / "tasks").glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def test_llm_build_draws_the_procedural_families(universe):
    tasks = _tasks(universe)
    assert tasks
    for t in tasks:
        assert t.family in FAMILIES and t.difficulty.tier == "hard"
        if t.family != "direct":
            assert t.verification.backend == "llm"
            assert t.verification.synthesis == {"family": t.family, "builder": "procedural"}
    assert {t.family for t in tasks} - {"direct"}, "no procedural family was drawn on the LLM domain"


def test_llm_family_tasks_pass_the_audit(universe):
    from scaleenv.synth.audit import audit_universe

    res = audit_universe(universe)
    assert res.tasks == len(_tasks(universe)) and res.defects == 0, res.to_json()["examples"]
    for t in _tasks(universe):
        if t.family != "direct":
            assert t.verification.program is not None  # the selection's query program, checked at build

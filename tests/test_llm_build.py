"""End to end through the command line and the real openai SDK: `scaleenv build --llm` against a
local chat-completions server that replays the scripted pet-care answers (with one HTTP 500 to
retry). The domain passes procedural testing, its tasks pass every gate, `scaleenv check` accepts
the universe, `inspect` shows the token accounting, and a rerun with a warm cache asks nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI
from llm_fixture import CHAINS, DROPPED, TOOLS, PetCareScript, policy, role_of
from scaleenv.cli import app
from scaleenv.formats.task import Task
from scaleenv.synth.tasks.gates import ZERO_GATES

runner = CliRunner()
LLM_CONFIG = {"backoff": 0.01, "concurrency": 2,
              "synth": {"debug_rounds": 1, "best_of_k": 3,
                        "sandbox": {"cpu_seconds": 1, "wall_seconds": 10.0, "memory_mb": 256}}}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(PetCareScript()) as srv:
        srv.failures = [500]  # the very first request fails once; the client retries
        yield srv


def _build(srv: FakeOpenAI, root: Path, out: str, *extra: str):
    cfg = root / "llm.json"
    cfg.write_text(json.dumps(LLM_CONFIG))
    return runner.invoke(app, ["build", "--llm", "scripted-model", "--base-url", srv.url, "--api-key-env",
                               "SCALEENV_TEST_KEY", "--domain", "pet care", "--tasks-per-domain", "2", "--out",
                               str(root / out), "--llm-cache", str(root / "cache"), "--llm-config", str(cfg),
                               "--quiet", *extra])


@pytest.fixture(scope="module")
def built(server, tmp_path_factory):
    root = tmp_path_factory.mktemp("llm")
    res = _build(server, root, "u1")
    assert res.exit_code == 0, (res.output, res.exception)  # --quiet: a crash shows only here
    return root, root / "u1", server.count()


def _json(path: Path):
    return json.loads(path.read_text())


def test_domain_passes_procedural_testing(built):
    _, u, _ = built
    d = u / "domains" / "pet_care"
    assert _json(u / "universe.json")["backend"] == "llm"
    tests = _json(d / "tests.json")
    assert tests["tools"] == len(TOOLS) and set(tests["rejected"]) == DROPPED
    assert tests["admitted"] == len(TOOLS) - len(DROPPED)
    for r in tests["reports"]:
        assert r["admitted"] == (r["counts"]["unexpected_failure"] == 0), r["tool"]
    spec = _json(d / "spec.json")
    assert len(spec["tools"]) == tests["admitted"] and spec["meta"]["backend"] == "llm"
    assert sorted(spec["meta"]["dropped_tools"]) == sorted(DROPPED)
    llm = tests["llm"]
    assert llm["rounds"]["update_pet_weight"] == 2  # the debug loop fixed it
    # each admitted tool's passed fixture is kept for Phase 2's task worlds; a dropped tool's is not
    assert set(llm["fixtures"]) <= {r["tool"] for r in tests["reports"] if r["admitted"]} and llm["fixtures"]
    assert all(f["rows"] and isinstance(f["args"], list) for f in llm["fixtures"].values())
    reasons = {d["tool"]: " ".join(d["reason"]) for d in llm["dropped"]}
    assert "no such column: owner_ref" in reasons["merge_owners"]
    assert "imports are not allowed (socket)" in reasons["export_records"]
    assert "sandbox" in reasons["recompute_balances"]  # killed for hanging
    graph = _json(d / "graph.json")
    sources = {e["source"] for e in graph["edges"]}
    assert sources == {"computed", "llm"} and llm["edges_by_source"]["llm"] == llm["dependency"]["edges_added"]


def test_tasks_pass_every_gate_and_check_accepts_the_universe(built):
    _, u, _ = built
    tasks = [Task.model_validate_json(line) for line in (u / "tasks" / "pet_care.jsonl").read_text().splitlines()]
    assert len(tasks) == 2
    for t in tasks:
        assert t.verification.gates == {"gold": 1.0, "gold_conversational": 1.0, **{g: 0.0 for g in ZERO_GATES}}
        assert t.verification.backend == "llm" and len(t.tools) >= len(t.gold_chain)
        chain = CHAINS[t.attempt % len(CHAINS)]
        assert [c.tool for c in t.gold_chain] == [line.split("=", 1)[1].split("(")[0].strip()
                                                  for line in chain.splitlines()]
    synth = [t.verification.synthesis for t in tasks]
    assert any(s["gate"] for s in synth) and any(g["accepted"] for s in synth for g in s["gate"])
    assert any(s["state_rounds"] == 2 for s in synth)  # the invoice chain's rows were repaired
    # check-in's own test fixture (re-keyed) made it executable, where the patch agent was asked before
    assert sum(s.get("fixture_patches", 0) for s in synth) >= 1 and sum(s["llm_patches"] for s in synth) == 0
    res = runner.invoke(app, ["check", str(u), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {"tasks": 2, "gold_pass": 2, "gold_conversational_pass": 2, "gold_styled_pass": 2,
                                      "styles_failed": {}, **{f"{g}_zero": 2 for g in ZERO_GATES},
                                      "failures": []}
    res = runner.invoke(app, ["validate", str(u)])
    assert res.exit_code == 0 and "1 domains, 2 tasks" in res.output


def test_inferred_invariants_are_stored_and_the_worlds_obey_them(built):
    """The rules the schema implies (a vaccination's next due date is not before the date it was given)
    are part of the built spec, so the audit checks the base world and every task's worlds."""
    _, u, _ = built
    spec = _json(u / "domains" / "pet_care" / "spec.json")
    names = {i["name"] for i in spec["invariants"]}
    assert "vaccinations.next_due_after_given_on" in names
    res = runner.invoke(app, ["audit", str(u), "--invariants", "--json"])
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["violations"] == 0 and out["worlds"] == 1 + 2 * 2, res.output
    assert out["per_domain"][0]["invariants"] == len(spec["invariants"])


def test_token_accounting_is_kept_and_shown(built, server):
    _, u, _ = built
    tok = _json(u / "domains" / "pet_care" / "tokens.json")
    assert tok["model"] == "scripted-model" and tok["tasks"] == 2
    assert tok["total"]["total_tokens"] == tok["phase1"]["total_tokens"] + tok["phase2"]["total_tokens"] > 0
    assert {"tool_schema", "database", "code", "debug", "dependency", "chain", "state", "solver",
            "instruction"} <= set(tok["by_role"])
    assert "gate" not in tok["by_role"]  # the rubric's numbers decide every gate in code
    assert tok["per_task"] == round(tok["phase2"]["total_tokens"] / 2)
    assert set(tok["by_task"]) >= {"pet_care/00000", "pet_care/00001"}
    res = runner.invoke(app, ["inspect", str(u), "--json"])
    assert res.exit_code == 0, res.output
    counts = json.loads(res.output)
    assert counts["per_domain"][0]["tokens"]["total"] == tok["total"]
    assert counts["tokens"]["total_tokens"] == tok["total"]["total_tokens"]
    run = [json.loads(line) for line in (u / "domains" / "pet_care" / "llm_runs.jsonl").read_text().splitlines()]
    assert run[0]["retries"] >= 1 and run[0]["requests"] == run[0]["fresh"]["calls"] + run[0]["retries"]
    # the repair prompts went over the wire like everything else
    roles = [role_of(r["messages"]) for r in server.requests if len(r["messages"]) > 2]
    assert {"tool_schema", "database", "state", "instruction"} <= set(roles)


def test_rerun_with_a_warm_cache_makes_zero_requests(built, server):
    root, u1, before = built
    res = _build(server, root, "u2")
    assert res.exit_code == 0, (res.output, res.exception)
    assert server.count() == before
    u2 = root / "u2"
    for rel in ("domains/pet_care/spec.json", "domains/pet_care/tests.json", "domains/pet_care/graph.json",
                "domains/pet_care/base.sqlite", "domains/pet_care/tokens.json", "tasks/pet_care.jsonl"):
        assert (u1 / rel).read_bytes() == (u2 / rel).read_bytes(), rel
    run = json.loads((u2 / "domains" / "pet_care" / "llm_runs.jsonl").read_text().splitlines()[-1])
    assert run["requests"] == 0 and run["fresh"]["total_tokens"] == 0 and run["cache_hits"] > 0


def test_resume_of_a_finished_build_asks_nothing(built, server):
    root, u1, _ = built
    before = server.count()
    res = _build(server, root, "u1", "--resume")
    assert res.exit_code == 0, res.output
    assert server.count() == before
    run = json.loads((u1 / "domains" / "pet_care" / "llm_runs.jsonl").read_text().splitlines()[-1])
    assert run["skipped"] == ["phase1", "phase2"] and run["requests"] == 0


def test_tokens_are_reported_per_admitted_tool_and_per_accepted_task(built):
    _, u, _ = built
    tok = _json(u / "domains" / "pet_care" / "tokens.json")
    rep = tok["report"]
    admitted = len(TOOLS) - len(DROPPED)
    assert rep["admitted_tools"] == admitted and rep["accepted_tasks"] == 2
    assert rep["per_admitted_tool"] == round(tok["phase1"]["total_tokens"] / admitted)
    assert rep["per_accepted_task"] == round(tok["phase2"]["total_tokens"] / 2)
    assert set(rep["tools"]) == {t["name"] for t in TOOLS} - DROPPED and all(v > 0 for v in rep["tools"].values())
    assert set(tok["by_tool"]) == {t["name"] for t in TOOLS}  # the dropped tools' cost is kept too
    assert tok["by_tool"]["update_pet_weight"]["calls"] >= 2  # code with its tests, and the debug round
    run = json.loads((u / "domains" / "pet_care" / "llm_runs.jsonl").read_text().splitlines()[0])
    assert run["repairs_by_role"]["database"] >= 1 and run["calls_by_role"]["code"] == len(TOOLS)


def test_requests_run_concurrently_and_the_universe_is_the_same(built, tmp_path):
    _, u1, _ = built
    with FakeOpenAI(PetCareScript()) as srv:
        srv.delays = [0.05] * 400  # slow answers, so requests overlap
        cfg = tmp_path / "llm.json"
        cfg.write_text(json.dumps({**LLM_CONFIG, "concurrency": 1}))
        res = runner.invoke(app, ["build", "--llm", "scripted-model", "--base-url", srv.url, "--api-key-env",
                                  "SCALEENV_TEST_KEY", "--domain", "pet care", "--tasks-per-domain", "2", "--out",
                                  str(tmp_path / "u"), "--llm-config", str(cfg), "--llm-concurrency", "6", "--quiet"])
        assert res.exit_code == 0, res.output
        assert 2 <= srv.max_inflight <= 6
    for rel in ("domains/pet_care/spec.json", "domains/pet_care/graph.json", "tasks/pet_care.jsonl"):
        assert (u1 / rel).read_bytes() == (tmp_path / "u" / rel).read_bytes(), rel


def test_the_policy_agent_writes_the_domain_policy_after_a_repair(built):
    """The policy names admitted write tools and its predicate runs; the first reply (an unknown tool) was
    sent back for repair."""
    from scaleenv.formats.domain import DomainSpec
    from scaleenv.synth.llm.policy import policy_problems

    _, u, _ = built
    spec = DomainSpec.model_validate(_json(u / "domains" / "pet_care" / "spec.json"))
    assert spec.policy is not None
    assert {r.kind for r in spec.policy.rules} == {"identity", "confirmation", "scope", "eligibility"}
    late = spec.policy.rule("no_late_cancellation")
    assert late.tools == ["cancel_appointment"] and late.reason in late.text
    base = (u / "domains" / "pet_care" / "base.sqlite").read_bytes()  # a world snapshot
    assert policy_problems(policy(bad=False), spec, base) == []
    assert any("must name write tools" in p for p in policy_problems(policy(bad=True), spec, base))

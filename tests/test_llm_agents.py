"""The synthesis agents with a scripted chat model: every failure mode the issue names, one at a time."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llm_fixture import TOOLS, PetCareScript, canned_tests, database, implementation
from scaleenv.cli import app
from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.chaincode import ChainCodeError, literal_values, parse_chain
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.deps import judge_dependencies
from scaleenv.synth.llm.design import DomainProfile, design_database, design_tools, parse_database
from scaleenv.synth.llm.filter import (
    DomainRefused,
    FilterVerdict,
    check_domain,
    register_domain_filter,
    unregister_domain_filter,
)
from scaleenv.synth.llm.implement import ToolImplementer, make_tool
from scaleenv.synth.llm.prompts import ROLES, render
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.tools.sandbox import SandboxLimits

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])
CFG = SynthConfig(debug_rounds=1, sandbox=SandboxLimits(cpu_seconds=1, wall_seconds=2.0, memory_mb=256))


def session(**queues):
    model = ScriptedChatModel(PetCareScript(), queues=queues)
    return model, LLMSession(model, LLMConfig(model="scripted", concurrency=2)).scoped("pet_care")


def test_every_role_has_a_prompt_template_with_its_role_line():
    for role in ROLES:
        msgs = render(role, **{k: "x" for k in ("name", "title", "description", "keywords", "min_tools", "max_tools",
                                                "target", "tools", "min_tables", "max_tables", "tool_name", "tool",
                                                "tables", "id_examples", "clock", "rows", "next_ids", "implementation",
                                                "tests", "failures", "round", "rounds", "pairs", "task_number",
                                                "edges", "goal_tool", "min_len", "max_len", "chain", "distractors",
                                                "args", "error", "included", "complexity", "remaining",
                                                "feasibility", "k", "chains", "answers", "withheld", "lookups", "persona", "goals",
                                                "stated", "n_goals", "tau", "max_chains", "growth", "policy")})
        assert msgs[0]["content"].startswith(f"Role: {role}\n") and "$" not in msgs[1]["content"]


def test_tool_schema_agent_recovers_from_invalid_json():
    model, ask = session()
    tools = design_tools(ask, PROFILE, CFG)
    assert len(tools) == len(TOOLS) and model.count("tool_schema") == 2
    assert "invalid JSON" in model.requests[1].messages[-1]["content"]
    assert all(p["type"] in ("string", "number") for t in tools for p in t["parameters"])


def test_database_agent_fixes_an_unknown_table_after_validator_feedback():
    model, ask = session()
    design = design_database(ask, PROFILE, TOOLS, CFG)
    assert model.count("database") == 2
    feedback = model.requests[-1].messages[-1]["content"]
    assert "references missing table 'owner'" in feedback and "tables[1](pets)" in feedback
    assert {t.name for t in design.tables} == {"owners", "pets", "vets", "appointments", "vaccinations", "invoices"}
    assert design.param_columns["book_appointment.pet_id"] == "pets.id"
    assert design.meta["id_prefix"]["appointments"] == "APP-"
    assert design.meta["examples"]["pets.name"][0] == "Biscuit"


def test_database_problems_are_reported_not_raised():
    bad = database()
    bad["tables"][0]["columns"][0]["type"] = "integer"
    bad["param_columns"]["get_pet.pet_id"] = "pets.nope"
    del bad["tool_tables"]["get_vet"]
    _, problems = parse_database(bad, TOOLS, PROFILE, CFG)
    text = "\n".join(problems)
    assert "the id column must have type text" in text
    _, problems = parse_database({**database(), "param_columns": {"get_pet.pet_id": "pets.nope"},
                                  "tool_tables": {}}, TOOLS, PROFILE, CFG)
    text = "\n".join(problems)
    assert "'pets.nope' is not a known table.column" in text and "tool get_vet is missing" in text
    assert "id parameter get_owner.owner_id must map" in text


@pytest.fixture(scope="module")
def implementer():
    design, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    spec = DomainSpec(name="pet_care", tables=design.tables, meta={"title": "Pet Care", **design.meta})
    base = seed_world(spec, 0).snapshot()
    model = ScriptedChatModel(PetCareScript())
    ask = LLMSession(model, LLMConfig(model="scripted", concurrency=2)).scoped("pet_care")
    return model, ToolImplementer(ask, "Pet Care", spec, base, design.tool_tables, design.param_columns, CFG)


def _tool(name):
    return next(t for t in TOOLS if t["name"] == name)


def test_code_with_a_bug_is_fixed_by_the_debug_loop(implementer):
    model, imp = implementer
    b = imp.build(_tool("update_pet_weight"))
    assert b.admitted and b.rounds == 2 and b.tool.implementation.kind == "python"
    assert "constraint" in " ".join(b.history[0]["failures"])  # grams broke the weight's CHECK
    assert b.history[0]["diagnosis"] == "the weight was stored in grams"
    counts = b.report.counts()
    assert counts["unexpected_failure"] == 0 and counts["success"] >= 2 and counts["anticipated_rejection"] >= 2


def test_code_that_never_passes_is_dropped(implementer):
    _, imp = implementer
    b = imp.build(_tool("merge_owners"))
    assert not b.admitted and b.rounds == 2
    assert "no such column: owner_ref" in b.report.tests[0].reason


def test_a_hostile_tool_importing_socket_is_not_admitted(implementer):
    _, imp = implementer
    b = imp.build(_tool("export_records"))
    assert not b.admitted and "imports are not allowed (socket)" in " ".join(b.history[-1]["failures"])


def test_a_good_tool_passes_procedural_and_agent_tests(implementer):
    _, imp = implementer
    b = imp.build(_tool("check_in_appointment"))
    assert b.admitted and b.rounds == 1
    kinds = {t.kind for t in b.report.tests}
    assert {"positive", "negative", "llm_positive", "llm_negative"} <= kinds
    assert b.report.counts()["anticipated_rejection"] >= 3  # one per precondition at least


def test_a_fixture_that_does_not_load_goes_to_the_debug_agent(implementer):
    model, imp = implementer
    tests = canned_tests("get_pet")
    tests["fixture"] = {"pets": [{"id": "PET-0101", "owner_id": "OWN-4242", "name": "X", "species": "dog"}]}
    tool, _ = make_tool(_tool("get_pet"), implementation("get_pet"), imp.param_columns, ["pets"])
    report, failures = imp.run_tests(tool, tests)
    assert not report.admitted and any("fixture: the rows do not load" in f for f in failures)


def test_dependency_agent_batches_pairs_and_tags_edges():
    design, _ = parse_database(database(), TOOLS, PROFILE, CFG)
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns,
                       design.tool_tables[t["name"]])[0] for t in TOOLS if t["name"] not in
             ("merge_owners", "export_records", "recompute_balances")]
    spec = DomainSpec(name="pet_care", tables=design.tables, tools=tools, meta={"title": "Pet Care", **design.meta})
    graph = build_graph(spec)
    computed = len(graph.edges())
    model, ask = session()
    stats = judge_dependencies(ask, "Pet Care", spec, graph, design.tool_tables,
                               SynthConfig(dependency_batch=5, max_dependency_pairs=40))
    assert stats["candidate_pairs"] > 5
    assert stats["calls"] == model.count("dependency") == -(-stats["candidate_pairs"] // 5)
    llm_edges = [e for e in graph.edges() if e[2]["source"] == "llm"]
    assert len(llm_edges) == stats["edges_added"] > 0 and len(graph.edges()) == computed + len(llm_edges)
    assert all(d["source"] == "computed" for _, _, d in graph.edges() if d not in [e[2] for e in llm_edges])


def test_chain_code_is_parsed_not_run():
    design, _ = parse_database(database(), TOOLS, PROFILE, CFG)
    spec = DomainSpec(name="pet_care", tables=design.tables,
                      tools=[make_tool(t, implementation(t["name"], False), design.param_columns)[0]
                             for t in TOOLS if t["name"] in ("find_owner_by_email", "list_pets_by_owner", "get_pet")])
    calls = parse_chain('s0 = find_owner_by_email(email="a@b.c")\n'
                        's1 = list_pets_by_owner(owner_id=s0["id"])\n'
                        's2 = get_pet(pet_id=pick(s1, name="Rex")["id"])\n'
                        's3 = get_pet(pet_id=s1[0]["id"])', spec)
    assert calls[1].args == {"owner_id": {"$ref": 0, "field": "id"}}
    assert calls[2].args == {"pet_id": {"$ref": 1, "field": "id", "where": {"name": "Rex"}}}
    assert calls[3].args == {"pet_id": {"$ref": 1, "field": "id"}}
    assert literal_values(calls) == ["a@b.c", "Rex"]
    for bad, needle in [('s0 = nope(x=1)', "unknown tool"), ('s0 = get_pet("PET-1")', "by name"),
                        ('s0 = get_pet(pet_id=__import__("os").system("x"))', "must be a literal"),
                        ('import os', "only 'sN = tool"), ('s0 = get_pet(pet_id=s9["id"])', "not an earlier step"),
                        ('s0 = get_pet()', "missing required"), ('s0 = get_pet(pet_id="x", color=1)', "no parameter")]:
        with pytest.raises(ChainCodeError, match=needle):
            parse_chain(bad, spec)


def test_domain_filter_refuses_harmful_domains_before_any_request(tmp_path):
    check_domain("pet care", "A veterinary clinic.")
    check_domain("stock trading", "Brokerage accounts and orders.")
    for name in ("bioweapon lab", "ransomware_operations", "human trafficking logistics"):
        with pytest.raises(DomainRefused):
            check_domain(name)
    with pytest.raises(DomainRefused, match="money laundering"):
        check_domain("ok name", "but a description about money laundering")

    def no_casinos(name, description, keywords):
        return FilterVerdict("casino" not in name, "not allowed")

    register_domain_filter(no_casinos)
    try:
        with pytest.raises(DomainRefused):
            check_domain("online casino")
    finally:
        unregister_domain_filter(no_casinos)
    check_domain("online casino")
    res = CliRunner().invoke(app, ["build", "--llm", "m", "--base-url", "http://127.0.0.1:9/v1", "--domain",
                                   "bioweapon lab", "--tasks-per-domain", "0", "--out", str(tmp_path / "u"), "--quiet",
                                   "--llm-cache", str(tmp_path / "c")])
    assert res.exit_code == 2, res.output
    assert "refused by the domain filter" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "c").exists()  # nothing was asked


@pytest.mark.parametrize("args, needle", [
    (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --llm"),
    (["--llm", "m", "--base-url", "http://x/v1", "--llm-role", "nobody=big"], "--llm-role must be ROLE=MODEL"),
    (["--llm", "m", "--api-key-env", "SCALEENV_TEST_UNSET_KEY"], "set SCALEENV_TEST_UNSET_KEY"),
])
def test_llm_flags_fail_with_one_line(args, needle, tmp_path, monkeypatch):
    monkeypatch.delenv("SCALEENV_TEST_UNSET_KEY", raising=False)
    res = CliRunner().invoke(app, ["build", *args, "--domain", "pet care", "--out", str(tmp_path / "u"), "--quiet"])
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output


def test_llm_config_file_is_checked(tmp_path):
    cfg = tmp_path / "llm.json"
    cfg.write_text(json.dumps({"synth": {"no_such_setting": 1}}))
    res = CliRunner().invoke(app, ["build", "--llm", "m", "--base-url", "http://127.0.0.1:9/v1", "--llm-config",
                                   str(cfg), "--domain", "pet care", "--out", str(tmp_path / "u"), "--quiet"])
    assert res.exit_code == 2 and "--llm-config" in res.output

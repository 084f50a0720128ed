"""The ambiguities a second fresh reader met answering a whole LLM build by hand (community bike sharing,
68 requests, /work/relay2): each is now stated in its prompt or removed by the build, one test each."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from llm_fixture import DROPPED, TOOLS, PetCareScript, database, implementation
from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.chaincode import parse_chain
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import DomainProfile, normalize_tools, parse_database
from scaleenv.synth.llm.implement import ToolImplementer, make_tool, same_record_errors, with_new_errors
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import parse_sample_rows
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.synth.llm.tasks import LLMTaskBuilder, _Exerciser
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.tools.chain import run_chain
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])
CFG = SynthConfig(min_tables=1)


def _text(role: str, **values: object) -> str:
    return re.sub(r"\s+", " ", " ".join(m["content"] for m in render(role, **values)))


def _spec() -> DomainSpec:
    design, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns,
                       design.tool_tables[t["name"]])[0] for t in TOOLS if t["name"] not in DROPPED]
    return DomainSpec(name="pet_care", tables=design.tables, tools=tools, meta={"title": "Pet Care", **design.meta})


def _ask(model: ScriptedChatModel):
    return LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care")


# --- 1. one not-found code per record, named after it ---------------------------------------------


def _move(errors: list[dict[str, str]]) -> dict:
    return {"name": "move_bike", "kind": "write", "description": "Move a bike to a station.",
            "parameters": [{"name": "bike_id", "type": "string"}, {"name": "to_station_id", "type": "string"}],
            "errors": errors}


def test_the_models_own_not_found_code_serves_a_role_named_id_parameter():
    """`station_not_found` covers `to_station_id`: no second, parameter-named code for the same rule."""
    tools, problems = normalize_tools({"tools": [_move([{"code": "bike_not_found"}, {"code": "station_not_found"}])]})
    assert not problems
    assert [e["code"] for e in tools[0]["errors"]] == ["bike_not_found", "station_not_found"]
    # with no code of its own, the added one is named after the record too
    tools, _ = normalize_tools({"tools": [_move([{"code": "bike_not_found"}])]})
    assert [e["code"] for e in tools[0]["errors"]] == ["bike_not_found", "station_not_found"]


def test_a_role_named_not_found_code_in_the_code_is_the_declared_one():
    """The code agent wrote `to_pet_not_found` where the tool declares `pet_not_found`: the tool keeps one
    code for the rule, and the test cases expecting the repeat expect the declared code."""
    design, _ = parse_database(database(), TOOLS, PROFILE, CFG)
    abstract = next(t for t in TOOLS if t["name"] == "get_pet")
    impl = implementation("get_pet", first=False)
    impl["preconditions"] = [{**c, "error": "to_pet_not_found"} if c["error"] == "pet_not_found" else c
                             for c in impl["preconditions"]]
    tool, problems = make_tool(abstract, impl, design.param_columns, design.tool_tables["get_pet"])
    assert not problems
    codes = [e.code for e in tool.errors]
    assert "to_pet_not_found" not in codes and codes.count("pet_not_found") == 1
    assert "pet_not_found" in {c.error for c in tool.preconditions}
    tests = same_record_errors({"cases": [{"kind": "negative", "args": {}, "error": "to_pet_not_found"}]}, abstract)
    assert tests["cases"][0]["error"] == "pet_not_found"
    assert "to_pet_not_found" not in [e["code"] for e in with_new_errors(abstract, impl)["errors"]]


def test_tool_schema_prompt_says_how_not_found_codes_are_named():
    text = _text("tool_schema", title="t", name="n", description="d", keywords="k", min_tools=25, max_tools=40,
                 target=30)
    assert "<record>_not_found" in text and "station_not_found serves to_station_id" in text


# --- 2. the codes the code agent adds reach the test prompt ---------------------------------------


@pytest.fixture()
def implementer():
    design, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    spec = DomainSpec(name="pet_care", tables=design.tables, meta={"title": "Pet Care", **design.meta})
    model = ScriptedChatModel(PetCareScript())
    # the code and the test agents asked apart (synth.code_with_tests off): their own prompts
    imp = ToolImplementer(_ask(model), "Pet Care", spec, seed_world(spec, 0).snapshot(), design.tool_tables,
                          design.param_columns, dataclasses.replace(CFG, code_with_tests=False))
    return model, imp


def test_error_codes_named_in_the_code_reach_that_tools_test_prompt(implementer):
    model, imp = implementer
    abstract = next(t for t in TOOLS if t["name"] == "get_pet")
    impl = implementation("get_pet", first=False)
    impl["preconditions"] = [*impl["preconditions"], {"sql": "SELECT date(:pet_id) IS NULL", "error": "invalid_date",
                                                      "message": "Not a date."}]
    model.push("code", json.dumps(impl))
    imp.build(abstract)
    test = next(r for r in model.requests if r.role == "test").messages[1]["content"]
    assert "invalid_date" in test and "pet_not_found" in test
    assert [e["code"] for e in with_new_errors(abstract, impl)["errors"]].count("invalid_date") == 1
    assert "invalid_date" not in [e["code"] for e in abstract["errors"]]  # the tool schema itself is left alone


# --- 3..6. the database and code prompts answer what the reader had to guess -------------------------


def test_database_prompt_answers_param_columns_lifecycle_dates_and_seeded_only_tables():
    text = _text("database", title="t", name="n", description="d", tools="-", min_tables=5, max_tables=8)
    assert "a substring filter and a range bound count too" in text and '"search_pets.name_query"' in text
    assert "follows this lifecycle rule" in text  # a date both lifecycle-named and a period's end
    assert "A table that no tool creates (stations, bikes) is fine" in text


def test_code_prompt_says_rows_keep_their_column_names_and_may_add_computed_ones():
    text = _text("code", title="t", tool_name="x", tool="{}", tables="-", id_examples="-", clock="c")
    assert "column names unchanged" in text and 'the id stays "id"' in text and "AS docked_bikes" in text


# --- 7. the test prompt shows no rule-breaking filler as examples, fresh ids for every table -----------


def test_test_prompt_shows_filler_ids_only_and_fresh_ids_of_parent_tables(implementer):
    model, imp = implementer
    abstract = next(t for t in TOOLS if t["name"] == "book_appointment")
    imp.build(abstract)
    prompt = next(r for r in model.requests if r.role == "test").messages[1]["content"]
    block = prompt.split("may disagree with them):\n")[1].split("\n\nNew rows")[0]
    rows = parse_sample_rows(block)
    assert rows
    for t, rs in rows.items():
        table = imp.spec.table(t)
        keys = {c.name for c in table.columns if c.name == table.primary_key or c.foreign_key}
        assert rs and all(set(r) == keys for r in rs), t  # no states, dates or names to copy
    ids = prompt.split("counting up from: ")[1].split(". The clock")[0]
    fresh = {x.split(" ")[0] for x in ids.split(", ")}
    tables = imp.tool_tables["book_appointment"]
    parents = {c.foreign_key.split(".")[0] for t in tables for c in imp.spec.table(t).columns if c.foreign_key}
    assert set(tables) | parents <= fresh and "owners" in fresh


# --- 8. the solver judges feasibility on enough rows ---------------------------------------------------


def test_solver_prompt_shows_several_rows_and_every_state():
    spec = _spec()
    ctx = DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})
    model = ScriptedChatModel(PetCareScript())
    b = LLMTaskBuilder(ctx, _ask(model), 0, 0, SynthConfig(solver_tools=40))
    rest = [t.name for t in spec.tools if t.name in ("get_appointment", "cancel_appointment", "check_in_appointment")]
    b.solve(rest, _Exerciser(b, ctx.base, {}))
    prompt = model.requests[-1].messages[1]["content"]
    rows = parse_sample_rows(prompt.split("up to 4 per table):\n")[1].split("\n\nThe clock")[0])
    appts = rows["appointments"]
    world = World.from_snapshot(spec, ctx.base)
    states = {r[0] for r in world.conn.execute("SELECT DISTINCT status FROM appointments")}
    assert len(appts) >= min(4, world.count("appointments"))
    assert len({r["status"] for r in appts}) == min(len(states), len(appts))  # one of each state first


# --- 9. the gate and the instruction agree on what a grown task asks for --------------------------


def test_gate_prompt_guides_a_task_of_more_than_one_chain():
    text = _text("gate", title="t", included=9, complexity="0.30", remaining=25, feasibility="1.00", k=4,
                 chains=2, tau="0.5", max_chains=3)
    assert "With two or more chains, grow again only while c(H) is below 0.6" in text
    assert "at most 3 chains in all" in text and "the customer's request and the expected final state" in text


def test_a_grown_tasks_instruction_prompt_shows_what_the_expected_world_holds():
    """The gate grew the task; the instruction agent is told the added chains are tools only, and the chain
    it is shown is everything the expected world holds (run on the initial state it gives the expected hash)."""
    spec = _spec()
    ctx = DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})
    grown = 0
    for attempt in range(6):
        model = ScriptedChatModel(PetCareScript())
        try:
            task = LLMTaskBuilder(ctx, _ask(model), 0, attempt, SynthConfig()).run()
        except TaskRejected:
            continue
        prompt = next(r for r in model.requests if r.role == "instruction").messages[1]["content"]
        shown = parse_chain(re.search(r"```python\n(.*?)```", prompt, re.S).group(1), spec)
        world = World.from_snapshot(spec, ctx.base)
        apply_patch(world, task.initial_patch)
        run_chain(world, spec, shown)
        assert world.state_hash() == task.verification.expected_hash
        if task.difficulty.chains > 1:
            grown += 1
            assert f"The expansion added {task.difficulty.chains - 1} more chain(s)" in prompt
            assert "the customer asks for this chain only" in prompt
        else:
            assert "This chain is the whole task" in prompt
    assert grown

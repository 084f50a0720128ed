"""The LLM back end's prompts stay small (issue 16: 600k tokens for 50 tools + 64 tasks) without
losing what a reader needs, and a recorded hand run can be replayed against changed prompts."""

from __future__ import annotations

import json
import re
import statistics
import threading

import pytest

from llm_fixture import TOOLS, PetCareScript, database
from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.base import estimate_tokens, messages_text
from scaleenv.llm.relay import Queue, answer
from scaleenv.llm.replay import Replayer, subject
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import DomainProfile, parse_database
from scaleenv.synth.llm.implement import ToolImplementer, make_tool
from scaleenv.synth.llm.render import parse_sample_rows, sample_rows, tool_text
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.synth.llm.tasks import LLMTaskBuilder, _Exerciser
from scaleenv.synth.tasks.context import DomainContext

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])
CFG = SynthConfig(debug_rounds=1)


@pytest.fixture(scope="module")
def design():
    d, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    return d


@pytest.fixture(scope="module")
def prompts(design):
    """The code and test prompts of every pet-care tool."""
    spec = DomainSpec(name="pet_care", tables=design.tables, meta={"title": "Pet Care", **design.meta})
    model = ScriptedChatModel(PetCareScript())
    ask = LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care")
    imp = ToolImplementer(ask, "Pet Care", spec, seed_world(spec, 0).snapshot(), design.tool_tables,
                          design.param_columns, CFG)
    for t in TOOLS:
        names, tables = imp._tables(t["name"])
        imp.code(t)
        imp.tests(t, names, tables)
    out: dict[str, dict[str, str]] = {"code": {}, "test": {}}
    for r in model.requests:
        out[r.role][subject(r.role, r.payload())] = r.messages[1]["content"]
    return spec, out


def _tokens(texts):
    return [estimate_tokens(t) for t in texts]


def test_code_and_test_prompts_fit_their_budget(prompts):
    """Means over the 31 pet-care tools (were 1,323 and 775 tokens with the JSON tool, every id
    prefix, parent tables in the code prompt and three dict rows per table)."""
    _, by_role = prompts
    assert statistics.mean(_tokens(by_role["code"].values())) < 1100
    assert statistics.mean(_tokens(by_role["test"].values())) < 700


def test_the_code_prompt_carries_only_the_tables_and_ids_the_tool_touches(prompts, design):
    spec, by_role = prompts
    for name, prompt in by_role["code"].items():
        touched = set(design.tool_tables[name])
        block = prompt.split("Tables it touches:\n")[1].split("\n\n")[0]
        shown = {line.split(":")[0] for line in block.splitlines()}
        assert shown == touched, name
        ids = prompt.split("Ids look like ")[1].split(". The clock")[0]
        assert {x.split()[0] for x in ids.split(", ")} == touched, name
    # get_pet's pets rows point at owners, but the code only reads pets
    assert "owners:" not in by_role["code"]["get_pet"]


def test_the_tool_text_keeps_every_fact_of_the_schema_agents_json():
    t = {"name": "book", "kind": "write", "description": "Book a visit. It must not clash with another one.",
         "parameters": [{"name": "pet_id", "type": "string", "required": True, "description": "The pet."},
                        {"name": "kind", "type": "string", "required": False, "enum": ["a", "b"]},
                        {"name": "n", "type": "integer", "minimum": 1, "maximum": 9, "description": "How many."},
                        {"name": "tags", "type": "array", "items": "string", "required": False}],
         "output": "The new visit.", "preconditions": ["the pet exists (register_pet)"],
         "postconditions": ["the visit is scheduled"],
         "errors": [{"code": "pet_not_found", "description": "No pet has this id."}, {"code": "slot_taken"}]}
    text = tool_text(t, {"book.pet_id": "pets.id"})
    for fact in ("book (write): Book a visit. It must not clash with another one.",
                 "- pet_id* (string; = pets.id): The pet.", "- kind (string, optional; one of a|b)",
                 "- n* (integer; 1..9): How many.", "- tags (array of string, optional)", "output: The new visit.",
                 "preconditions: the pet exists (register_pet)", "postconditions: the visit is scheduled",
                 "errors: pet_not_found (No pet has this id.), slot_taken"):
        assert fact in text
    assert len(text) < len(json.dumps(t))


def test_the_test_prompt_shows_one_compact_row_per_table_and_one_fresh_id_wording(prompts):
    spec, by_role = prompts
    for name, prompt in by_role["test"].items():
        assert '{"name": "' + name not in prompt  # the tool as text, not its JSON again
        rows = parse_sample_rows(prompt.split("may disagree with them):\n")[1].split("\n\nNew rows")[0])
        assert rows and all(len(rs) <= 2 for rs in rows.values())  # ids and links only (issue 16, relay2)
        assert "New rows use fresh ids counting up from: " in prompt


def _ctx(design):
    tables = design.tool_tables
    from llm_fixture import DROPPED, implementation

    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns, tables[t["name"]])[0]
             for t in TOOLS if t["name"] not in DROPPED]
    spec = DomainSpec(name="pet_care", tables=design.tables, tools=tools, meta={"title": "Pet Care", **design.meta})
    return DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})


def _builder(ctx, attempt=0, cfg=None):
    model = ScriptedChatModel(PetCareScript())
    ask = LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care")
    return model, LLMTaskBuilder(ctx, ask, 0, attempt, cfg or SynthConfig())


def test_the_chain_prompt_is_bounded(design):
    ctx = _ctx(design)
    for attempt in range(6):
        model, b = _builder(ctx, attempt)
        b.write_chain("medium")
        prompt = model.requests[-1].messages[1]["content"]
        tools = prompt.split("the goal tool first:\n")[1].split("\n\n")[0].splitlines()
        assert 1 <= len(tools) <= 10
        assert estimate_tokens(messages_text(model.requests[-1].messages)) < 1500


def test_the_solver_sees_a_sample_of_at_most_solver_tools_unused_tools(design):
    ctx = _ctx(design)
    rest = [t.name for t in ctx.spec.tools][3:]
    seen = []
    for attempt in range(3):
        model, b = _builder(ctx, attempt, cfg=SynthConfig(solver_tools=5))
        b.solve(rest, _Exerciser(b, ctx.base, {}))
        prompt = model.requests[-1].messages[1]["content"]
        lines = prompt.split("-> returns | description):\n")[1].split("\n\n")[0].splitlines()
        names = [re.match(r"(\w+)\(", x).group(1) for x in lines]
        assert len(names) == 5 and set(names) <= set(rest)
        assert names == [n for n in rest if n in names]  # in the spec's order
        seen.append(tuple(names))
    assert len(set(seen)) > 1  # tasks see different parts of D_n


# --- replaying a recorded relay queue ------------------------------------------------------------

def _body(role: str, user: str) -> dict:
    return {"model": "relay", "messages": [{"role": "system", "content": f"Role: {role}\nYou are..."},
                                           {"role": "user", "content": user}]}


def _record(tmp_path, items):
    q = Queue(tmp_path / "old")
    q.dir.mkdir()
    lock, index = threading.Lock(), {}
    for role, user, text in items:
        n = q.enqueue(_body(role, user), lock, index)
        answer(q.dir, n, text)
    return q.dir


def test_replay_answers_the_same_question_reworded_in_order(tmp_path):
    old = _record(tmp_path, [
        ("code", "Domain: X\nTool name: get_pet\nTool schema: {json}", "code get_pet"),
        ("code", "Domain: X\nTool name: get_vet\nTool schema: {json}", "code get_vet"),
        ("debug", "Tool name: get_pet\nround 1", "debug get_pet 1"),
        ("debug", "Tool name: get_pet\nround 2", "debug get_pet 2"),
        ("chain", "Domain: X\nTask number: 3\nTools: a lot", "chain 3"),
        ("state", "Reference chain:\n```python\ns0 = get_pet(pet_id='P')\n```\nold wording", "state P"),
        ("gate", "Tools already in the task's environment: 9, c(H) = 0.71", "gate 0.71"),
        ("gate", "Tools already in the task's environment: 20, c(H) = 1.86", "gate 1.86"),
    ])
    r = Replayer.from_queue(old)
    assert r.answer_for("code", _body("code", "Tool name: get_vet\nTool (* = required): text")) == "code get_vet"
    assert r.answer_for("debug", _body("debug", "Tool name: get_pet\nnew words")) == "debug get_pet 1"
    assert r.answer_for("debug", _body("debug", "Tool name: get_pet\nnew words")) == "debug get_pet 2"
    assert r.answer_for("chain", _body("chain", "Task number: 3\nTools: fewer")) == "chain 3"
    state = _body("state", 'Reference chain:\n```python\ns0 = get_pet(pet_id="P")\n```\nnew wording')
    assert r.answer_for("state", state) == "state P"
    assert r.counts == {"exact": 5, "nearest": 0, "unanswered": 0}
    # no recorded counterpart: the most alike prompt of the role, counted apart
    assert r.answer_for("gate", _body("gate", "Tools already in the task's environment: 21, c(H) = 1.86")) == "gate 1.86"
    assert r.answer_for("solver", _body("solver", "anything")) is None
    assert r.counts == {"exact": 5, "nearest": 1, "unanswered": 1}


def test_replay_serves_a_queue_and_leaves_what_it_cannot_answer(tmp_path):
    old = _record(tmp_path, [("code", "Tool name: get_pet\nold", "code get_pet")])
    new = Queue(tmp_path / "new")
    new.dir.mkdir()
    lock, index = threading.Lock(), {}
    a = new.enqueue(_body("code", "Tool name: get_pet\nnew"), lock, index)
    b = new.enqueue(_body("solver", "chains please"), lock, index)
    counts = Replayer.from_queue(old).serve(new.dir, idle=0.2, poll=0.01)
    assert new.answer_of(a) == "code get_pet" and new.answer_of(b) is None
    assert counts == {"exact": 1, "nearest": 0, "unanswered": 1}


def test_the_chain_prompt_states_each_tables_rules_once_and_its_columns_in_the_rows(design):
    ctx = _ctx(design)
    model, b = _builder(ctx, 3)
    b.write_chain("medium")
    prompt = model.requests[-1].messages[1]["content"]
    rules = prompt.split("ranges and unique columns\n")[1].split("\n\n")[0].splitlines()
    rows = parse_sample_rows(prompt.split("Some existing rows:\n")[1].split("\n\n")[0])
    assert {line.split(":")[0] for line in rules} == set(rows)  # every table: its rules and its columns
    for line in rules:
        table = ctx.spec.table(line.split(":")[0])
        for c in table.columns:
            if c.enum:
                assert f"{c.name} " in line and all(str(v) in line for v in c.enum)
            if c.foreign_key:
                assert f"{c.name} -> {c.foreign_key.split('.')[0]}" in line
            if c.unique:
                assert re.search(rf"\b{c.name}\b[^;]*unique", line)


def test_an_empty_table_still_shows_its_columns(design):
    spec = DomainSpec(name="pet_care", tables=design.tables, meta=design.meta)
    world = seed_world(spec)
    world.conn.execute("DELETE FROM vaccinations")
    text = sample_rows(world, ["pets", "vaccinations"], per_table=1)
    cols = ", ".join(c.name for c in spec.table("vaccinations").columns)
    assert f"vaccinations ({cols}):\n  (no rows)" in text
    assert parse_sample_rows(text)["vaccinations"] == [] and len(parse_sample_rows(text)["pets"]) == 1


def test_relay_replay_on_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from scaleenv.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["relay", "replay", str(tmp_path / "new"), "--from", str(tmp_path / "nope")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and "not a relay queue" in res.output
    old = _record(tmp_path, [("code", "Tool name: get_pet\nold", "code get_pet")])
    new = Queue(tmp_path / "new")
    new.dir.mkdir()
    n = new.enqueue(_body("code", "Tool name: get_pet\nnew"), threading.Lock(), {})
    res = runner.invoke(app, ["relay", "replay", str(new.dir), "--from", str(old), "--idle", "0.2"])
    assert res.exit_code == 0 and "1 exact, 0 nearest, 0 left unanswered" in res.output
    assert new.answer_of(n) == "code get_pet"

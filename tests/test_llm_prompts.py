"""The LLM back end's prompts carry what a stateless model needs (issue 16's defects, one test each)."""

from __future__ import annotations

import contextlib
import copy
import json
import re

from llm_fixture import DROPPED, TOOLS, PetCareScript, database, implementation
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Call
from scaleenv.llm.parse import parse_json
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.complexity import core_complexity, core_pairs
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.deps import judge_dependencies, table_access
from scaleenv.synth.llm.design import DomainProfile, normalize_tools, parse_database
from scaleenv.synth.llm.implement import make_tool
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import (
    abstract_line,
    parse_sample_rows,
    sample_rows,
    summary,
    tables_text,
    tool_sig,
)
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.synth.llm.tasks import LLMTaskBuilder
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.expand import complexity
from scaleenv.world.world import World

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])
CFG = SynthConfig(min_tables=1)
LONG = ("Issue a parking permit for a resident's vehicle in one zone. The zone must have capacity left, the "
        "resident may hold at most two active permits, and the permit carries the application's plate number.")


def _spec(overrides: dict[str, list[str]] | None = None) -> tuple[DomainSpec, dict]:
    design, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    tables = {**design.tool_tables, **(overrides or {})}
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns, tables[t["name"]])[0]
             for t in TOOLS if t["name"] not in DROPPED]
    return DomainSpec(name="pet_care", tables=design.tables, tools=tools,
                      meta={"title": "Pet Care", **design.meta}), design.tool_tables


def _ask():
    model = ScriptedChatModel(PetCareScript())
    return model, LLMSession(model, LLMConfig(model="scripted", concurrency=2)).scoped("pet_care")


def _builder(spec: DomainSpec, attempt: int = 0) -> tuple[ScriptedChatModel, LLMTaskBuilder]:
    ctx = DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})
    model, ask = _ask()
    return model, LLMTaskBuilder(ctx, ask, 0, attempt, SynthConfig())


def _examples(text: str) -> list[dict]:
    """Every top-level JSON object in a prompt."""
    out, dec, i = [], json.JSONDecoder(), 0
    while (i := text.find("{", i)) >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        out.append(obj)
        i = end
    return out


# 1. the code prompt shows a write tool, effects as SQL strings
def test_code_prompt_shows_a_write_tool_whose_effects_are_sql_strings():
    text = render("code", title="t", tool_name="x", tool="{}", tables="-", id_examples="-", clock="c")[1]["content"]
    writes = [e for e in _examples(text) if e.get("effects")]
    assert writes, "no write-tool example"
    assert all(isinstance(s, str) and s.split()[0] in ("INSERT", "UPDATE", "DELETE") for s in writes[0]["effects"])
    # and effects written as {"sql": ...} objects are read as their SQL instead of costing a repair
    abstract = next(t for t in TOOLS if t["name"] == "pay_invoice")
    impl = implementation("pay_invoice", first=False)
    impl["effects"] = [{"sql": s} for s in impl["effects"]]
    tool, problems = make_tool(abstract, impl, {}, ["invoices"])
    assert not problems and tool is not None and tool.effects[0].startswith("UPDATE invoices")


# 5. descriptions are whole in the database, dependency and chain prompts
def test_tool_descriptions_are_never_cut():
    spec, tt = _spec()
    tool = spec.tool("book_appointment").model_copy(update={"description": LONG})
    assert LONG in tool_sig(tool) and LONG in tool_sig(tool, access=(["pets"], ["appointments"]))
    assert LONG in abstract_line({"name": "issue_permit", "kind": "write", "description": LONG, "parameters": []})
    short = summary(LONG, 120)
    assert len(short) <= 130 and short.endswith(" [...]") and LONG.startswith(short.removesuffix(" [...]"))
    assert short.removesuffix(" [...]").endswith(".")  # whole sentences, never half a word
    cut = summary("word " * 40, 50)
    assert cut.removesuffix(" [...]").endswith("word")


# 6. the chain prompt: only the goal tool's edges, whole rows, a way to find the customer
def test_chain_prompt_shows_only_the_goal_edges_whole_rows_and_lookups():
    spec, _ = _spec()
    model, b = _builder(spec, attempt=3)
    b.write_chain("medium")
    prompt = model.requests[-1].messages[1]["content"]
    goal = re.search(r"Suggested goal: a call to (\w+)", prompt).group(1)
    edges = re.search(r"needs the state\nA writes\): (.*)", prompt).group(1)
    pairs = [e.split(" (")[0] for e in edges.split(", ") if "->" in e]
    assert pairs and all(goal in p.split("->") for p in pairs)  # the others' edges cost tokens, say nothing
    lookups = prompt.split("Ways to find a record from what the customer knows (by table):\n")[1].split("\n\n")[0]
    assert "owners: " in lookups and "find_owner_by_email" in lookups
    rows = parse_sample_rows(prompt.split("Some existing rows:\n")[1].split("\n\n")[0])
    assert rows and all(spec.table(t) is not None and len(rs) == 1 for t, rs in rows.items())
    for t, rs in rows.items():
        assert set(rs[0]) == {c.name for c in spec.table(t).columns}  # whole records


def test_sample_rows_keeps_whole_records_and_every_table():
    spec, _ = _spec()
    world = World.from_snapshot(spec, seed_world(spec).snapshot())
    text = sample_rows(world, ["owners", "pets", "appointments", "invoices"], per_table=3, max_chars=700)
    assert text.splitlines()[-1].endswith("more row(s) not shown)")
    rows = parse_sample_rows(text)
    assert set(rows) == {"owners", "pets", "appointments", "invoices"}
    for t, rs in rows.items():
        cols = {c.name for c in spec.table(t).columns}
        assert rs and all(set(r) == cols for r in rs)
        first = world.conn.execute(f"SELECT * FROM {t} ORDER BY id LIMIT 1").fetchone()
        assert list(rs[0].values()) == list(first)


# 7. the schema's id prefixes are kept
def test_id_prefixes_from_the_schema_are_respected():
    db = database()
    owners = next(t for t in db["tables"] if t["name"] == "owners")
    owners["columns"][0]["description"] = "Customer id, e.g. CUS-0001"
    pets = next(t for t in db["tables"] if t["name"] == "pets")
    pets["id_prefix"] = "ANI-"
    vets = next(t for t in db["tables"] if t["name"] == "vets")
    vets["id_prefix"] = "CUS-"  # taken by owners
    design, problems = parse_database(db, TOOLS, PROFILE, CFG)
    assert design is None and any("CUS-" in p and "more than one table" in p for p in problems)
    del vets["id_prefix"]
    design, problems = parse_database(db, TOOLS, PROFILE, CFG)
    assert not problems
    prefixes = design.meta["id_prefix"]
    assert prefixes["owners"] == "CUS-" and prefixes["pets"] == "ANI-"
    assert len(set(prefixes.values())) == len(prefixes)
    spec = DomainSpec(name="pet_care", tables=design.tables, meta=design.meta)
    world = seed_world(spec)
    assert world.conn.execute("SELECT min(id) FROM pets").fetchone()[0] == "ANI-0001"


# 8. the state prompt covers every table the chain touches, seen in its SQL too
def test_state_prompt_includes_every_table_the_chain_needs():
    spec, _ = _spec(overrides={"book_appointment": ["vets"]})  # the tool -> tables map forgot two tables
    model, b = _builder(spec)
    b.chain = [Call(tool="book_appointment", args={"pet_id": "PET-0001", "vet_id": "VET-0001",
                                                   "scheduled_for": "2026-07-01", "reason": "checkup"})]
    tables = b.chain_tables()
    assert {"appointments", "pets", "vets", "owners"} <= set(tables)
    with contextlib.suppress(Exception):  # only the prompt matters here
        b.write_state(1)
    prompt = next(r for r in model.requests if r.role == "state").messages[1]["content"]
    ids = prompt.split("counting up from: ")[1].split(". The clock")[0]
    assert "appointments APP-" in ids and "owners OWN-" in ids
    rows = parse_sample_rows(prompt.split("Some existing rows")[1].split("\n\nNew rows")[0].split(":\n", 1)[1])
    assert {"appointments", "owners"} <= set(rows)


# 4. the expansion gate's complexity does not count loose id matches
def test_gate_complexity_counts_core_dependencies_only():
    spec, _ = _spec()
    ctx = DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})
    chain_and_layer = ["find_owner_by_email", "list_pets_by_owner", "book_appointment", "get_appointment",
                       "cancel_appointment", "get_pet", "get_owner", "reschedule_appointment", "check_in_appointment",
                       "list_appointments_by_pet", "get_vet", "list_vets"]
    assert complexity(ctx, chain_and_layer) > 0.85  # the multigraph of loose matches
    assert core_complexity(ctx, chain_and_layer) < 0.4
    # the whole domain (28 tools) is not past saturation: the gate can let a task grow (was 1.65)
    assert core_complexity(ctx, [t.name for t in spec.tools]) < 1.0
    pairs = core_pairs(ctx)
    assert ("book_appointment", "cancel_appointment") in pairs  # creates the record the other takes
    assert ("cancel_appointment", "reschedule_appointment") in pairs  # writes the status the other tests
    assert ("find_owner_by_email", "list_pets_by_owner") not in pairs  # a lookup only passes the id on
    assert ("get_appointment", "cancel_appointment") not in pairs
    assert ("get_pet", "get_owner") not in pairs  # only a foreign-key column of the pet's row
    assert ("create_invoice", "get_vet") not in pairs


# 9a. an optional id filter has its own error code
def test_an_optional_id_filter_gets_a_not_found_code():
    tools, problems = normalize_tools({"tools": [
        {"name": "list_appointments", "kind": "read", "description": "List appointments, optionally of one vet.",
         "parameters": [{"name": "vet_id", "type": "string", "required": False},
                        {"name": "new_owner_id", "type": "string"}],
         "errors": [{"code": "invalid_date"}]}]})
    assert not problems
    codes = [e["code"] for e in tools[0]["errors"]]
    assert codes == ["invalid_date", "vet_not_found", "owner_not_found"]


# 9b. dependency batches say which tables each tool reads and writes
def test_dependency_batches_say_what_each_tool_reads_and_writes():
    spec, tt = _spec()
    access = table_access(spec, tt)
    assert access["book_appointment"] == (["pets", "vets"], ["appointments"])
    model, ask = _ask()
    stats = judge_dependencies(ask, "Pet Care", spec, build_graph(spec), tt, SynthConfig(dependency_batch=4))
    assert stats["calls"] == model.count("dependency") > 0
    for req in model.requests:
        prompt = req.messages[1]["content"]
        assert "update_pet_weight(write)" in prompt and "writes: pets" in prompt
        for _a, b in re.findall(r"^\d+\. (\w+) -> (\w+)$", prompt, re.M):
            line = next(x for x in prompt.splitlines() if x.startswith(f"{b}("))
            reads, writes = re.search(r"reads: (.*); writes: (.*)$", line).groups()
            assert "pets" in reads.split(", ") + writes.split(", ")  # A (a pets writer) changes what B sees


# 9c. the solver prompt says why it is asked
def test_solver_prompt_states_its_purpose():
    text = render("solver", title="t", tools="-", rows="-", clock="c", k=3)[0]["content"]
    assert "Purpose:" in text and "gate" in text and "execute" in text


# 9d. a two-column uniqueness rule can be stated (and is shown to the code agent)
def test_a_two_column_uniqueness_rule_can_be_stated():
    db = database()
    pets = next(t for t in db["tables"] if t["name"] == "pets")
    pets["unique_together"] = [["owner_id", "nickname"]]
    design, problems = parse_database(db, TOOLS, PROFILE, CFG)
    assert design is None and any("unique_together" in p and "nickname" in p for p in problems)
    pets["unique_together"] = [["owner_id", "name"]]
    design, problems = parse_database(db, TOOLS, PROFILE, CFG)
    assert not problems and design.meta["unique_together"] == {"pets": [["owner_id", "name"]]}
    spec = DomainSpec(name="pet_care", tables=design.tables, meta=design.meta)
    assert "unique together (owner_id, name)" in tables_text(spec, ["pets"])


# 9e. the examples keep their own rules
def test_the_database_example_follows_its_own_rules():
    text = render("database", name="n", title="t", description="d", tools="-", min_tables=1,
                  max_tables=9)[1]["content"]
    example = parse_json(text.split("Reply with one JSON object and nothing else:")[1])
    tools = [{"name": "get_pet", "kind": "read", "description": "Get a pet.", "errors": [],
              "parameters": [{"name": "pet_id", "type": "string", "required": True}]},
             {"name": "find_owner_by_email", "kind": "read", "description": "Find an owner.", "errors": [],
              "parameters": [{"name": "email", "type": "string", "required": True}]}]
    design, problems = parse_database(copy.deepcopy(example), tools, PROFILE, CFG)
    assert not problems, problems
    assert design.meta["id_prefix"] == {"owners": "OWN-", "pets": "PET-"}


def test_prompts_say_what_a_fresh_reader_got_wrong_in_the_relay_run():
    """The ambiguities a reader met answering a whole build by hand (ski resort rental, 95 requests)."""
    schema = render("tool_schema", title="t", name="n", description="d", keywords="k", min_tools=25, max_tools=40,
                    target=30)
    schema_text = " ".join(m["content"] for m in schema)
    assert "invalid_status" not in schema_text and "invalid_arguments" in schema_text
    test = " ".join(m["content"] for m in render("test", title="t", tool_name="x", tool="{}", tables="-",
                                                  rows="-", next_ids="-", clock="c"))
    assert "never reach" in test.replace("never reaches", "never reach") and "never reuse an example" in test
    state = " ".join(m["content"] for m in render("state", title="t", chain="-", tables="-", rows="-",
                                                   next_ids="-", clock="c", distractors=1))
    assert "@example.com" not in state and "never reuse an example" in state
    debug = " ".join(m["content"] for m in render("debug", title="t", tool_name="x", tool="{}", implementation="{}",
                                                   tests="-", failures="-", round=1, rounds=2, tables="-"))
    assert "is added to them" in debug


# the gate knows its threshold and what a direct dependency is (a reader had to guess both)
def test_gate_prompt_states_the_threshold_and_the_structural_dependency():
    text = render("gate", title="t", included=9, complexity="0.30", remaining=25, feasibility="1.00", k=4,
                  chains=1, tau="0.5", max_chains=3)[1]["content"]
    assert "the chain is added when p >= 0.5" in text
    assert "B depends directly on A when B needs a record A creates or a\nstate A writes" in text
    assert "One chain so far: grow (p >= 0.5" in text  # the rubric says when to grow


def test_instruction_prompt_says_filter_words_are_literal_values():
    """A fresh reader took "every literal value (names, e-mails, dates, amounts, reasons)" to leave out a
    status a lookup filters by, and got a repair round; the prompt names them, said as people say them."""
    from importlib.resources import files

    text = (files("scaleenv.synth.llm") / "prompts" / "instruction.txt").read_text()
    assert "the words a lookup filters by" in text and '"in progress"' in text

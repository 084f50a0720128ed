"""What two more fresh readers met answering whole LLM builds by hand (regional ferry ticketing, /work/relay6;
university dormitory maintenance, /work/relay7): each is now fixed in the engine or stated in its prompt."""

from __future__ import annotations

import json
import re

from llm_fixture import DROPPED, TOOLS, PetCareScript, database, implementation
from scaleenv.formats.domain import Column, DomainSpec, Table
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.chaincode import parse_chain
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import DomainProfile, parse_database
from scaleenv.synth.llm.implement import make_tool
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.seedrows import infer_invariants, seed_world
from scaleenv.synth.llm.tasks import LLMTaskBuilder
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.world.invariants import check_world
from scaleenv.world.world import World

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])


def _text(role: str, **values: object) -> str:
    return re.sub(r"\s+", " ", " ".join(m["content"] for m in render(role, **values)))


# --- 1. the two-link rule binds only where it is meant -----------------------------------------------


def _dorm(independent: bool) -> DomainSpec:
    """relay7's charge of a resident for damage found on a work order: the charged resident need not be the
    order's reporter; relay6's booking change names the sailing it moved from and the one it moved to."""
    residents = Table(name="residents", columns=[Column(name="id"), Column(name="full_name")])
    orders = Table(name="work_orders", columns=[Column(name="id"),
                                                Column(name="resident_id", foreign_key="residents.id")])
    charges = Table(name="damage_charges", columns=[
        Column(name="id"), Column(name="resident_id", foreign_key="residents.id"),
        Column(name="work_order_id", foreign_key="work_orders.id"), Column(name="amount", type="real")])
    sailings = Table(name="sailings", columns=[Column(name="id"), Column(name="code")])
    bookings = Table(name="bookings", columns=[Column(name="id"), Column(name="sailing_id", foreign_key="sailings.id")])
    changes = Table(name="booking_changes", columns=[
        Column(name="id"), Column(name="booking_id", foreign_key="bookings.id"),
        Column(name="from_sailing_id", foreign_key="sailings.id"),
        Column(name="to_sailing_id", foreign_key="sailings.id")])
    meta = {"independent_links": {"damage_charges": ["resident_id"]}} if independent else {}
    return DomainSpec(name="dorm", tables=[residents, orders, charges, sailings, bookings, changes], meta=meta)


def test_a_link_marked_independent_and_a_twice_named_table_bind_nothing():
    bound = {i.name for i in infer_invariants(_dorm(False)) if "_belongs_to_" in i.name}
    assert "damage_charges.work_order_id_belongs_to_resident_id" in bound  # the rule as read from the shape
    assert not {n for n in bound if n.startswith("booking_changes.")}  # from/to sailings: neither is "the" one
    free = {i.name for i in infer_invariants(_dorm(True)) if "_belongs_to_" in i.name}
    assert not {n for n in free if n.startswith("damage_charges.")}
    spec = _dorm(True)
    world = seed_world(spec, 0, 3.0)
    assert check_world(World.from_snapshot(spec.model_copy(update={"invariants": infer_invariants(spec)}),
                                           world.snapshot())) == []
    moved = world.conn.execute("SELECT count(*) FROM booking_changes WHERE from_sailing_id != to_sailing_id").fetchone()
    assert moved[0] > 0  # the from and to sailings are not forced onto the booking's (and so onto each other)


def test_the_database_reply_marks_a_link_independent_and_the_prompt_says_how():
    obj = database()
    owners = next(t for t in obj["tables"] if t["name"] == "pets")
    next(c for c in owners["columns"] if c["name"] == "owner_id")["independent"] = True
    design, problems = parse_database(obj, TOOLS, PROFILE, SynthConfig(min_tables=1))
    assert not problems and design is not None
    assert design.meta["independent_links"] == {"pets": ["owner_id"]}
    next(c for c in owners["columns"] if c["name"] == "name")["independent"] = True
    _, problems = parse_database(obj, TOOLS, PROFILE, SynthConfig(min_tables=1))
    assert any("only for a link" in p for p in problems)
    text = _text("database", name="x", title="x", description="x", tools="x", min_tables=5, max_tables=9)
    assert '"independent": true' in text and "never drop a foreign key" in text
    assert "a table the row links to twice or more" in text


# --- 2. a fact the identity rule needs may be said though the chain never passes it -------------------


def _pet_spec() -> DomainSpec:
    design, problems = parse_database(database(), TOOLS, PROFILE, SynthConfig(min_tables=1))
    assert not problems
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns,
                       design.tool_tables[t["name"]])[0] for t in TOOLS if t["name"] not in DROPPED]
    return DomainSpec(name="pet_care", tables=design.tables, tools=tools, meta={"title": "Pet Care", **design.meta})


def test_the_instruction_may_say_a_created_records_identity_fact():
    spec = _pet_spec()
    ctx = DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})
    reply = {"instruction": "You are Nora Quinn (member number MBR-20253310, nora@example.org). You want your "
                            "owner record looked up.",
             "user_profile": {"persona": "You are Nora Quinn.", "known": {"email": "nora@example.org",
                                                                          "member_number": "MBR-20253310"},
                              "withheld": [], "goals": ["I want my owner record found."]}}
    model = ScriptedChatModel(PetCareScript(), queues={"instruction": [json.dumps(reply)]})
    b = LLMTaskBuilder(ctx, LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care"),
                       0, 0, SynthConfig())
    b.chain = parse_chain('s0 = find_owner_by_email(email="nora@example.org")', spec)
    b.new_rows = {"owners": [{"id": "OWN-0100", "full_name": "Nora Quinn", "email": "nora@example.org",
                              "member_number": "MBR-20253310"}]}
    instruction, profile = b.write_user_side(0)
    assert "MBR-20253310" in instruction and profile["known"]["member_number"] == "MBR-20253310"
    assert [r.role for r in model.requests] == ["instruction"]  # no repair round
    prompt = model.requests[0].messages[1]["content"]
    assert "even one the chain never passes" in " ".join(prompt.split())


# --- 3. the chain prompt: only the goal's own dependencies; list outputs and existing links said ---------


def test_the_chain_prompt_shows_only_edges_into_the_goal_and_documents_lists_and_links():
    from test_llm_prompts import _builder
    from test_llm_prompts import _spec as _prompt_spec

    spec, _ = _prompt_spec()
    seen = 0
    for attempt in range(8):
        model, b = _builder(spec, attempt=attempt)
        b.write_chain("medium")
        prompt = model.requests[-1].messages[1]["content"]
        goal = re.search(r"Suggested goal: a call to (\w+)", prompt).group(1)
        edges = re.search(r"needs the state\nA writes\): (.*)", prompt).group(1)
        pairs = [e.split(" (")[0] for e in edges.split(", ") if "->" in e]
        assert all(p.split("->")[1] == goal for p in pairs), (goal, pairs)  # never goal->later
        seen += len(pairs)
        text = " ".join(prompt.split())
        assert 's1[0]["id"] means the same and is shown back as s1["id"]' in text
        assert "A link that already exists counts when a write changes the linking row" in text
    assert seen  # some goal has dependencies to show
    solver = _text("solver", title="x", tools="x", rows="x", clock="x", k=2)
    assert 's0[0]["id"] means the same' in solver


def test_a_departure_and_arrival_pair_is_named_in_the_prompts_and_checked():
    sailings = Table(name="sailings", columns=[Column(name="id"), Column(name="departure_time", type="datetime"),
                                               Column(name="arrival_time", type="datetime")])
    names = {i.name for i in infer_invariants(DomainSpec(name="ferry", tables=[sailings]))}
    assert "sailings.arrival_time_after_departure_time" in names
    for role in ("tool_schema", "database"):
        kw = {k: "x" for k in ("name", "title", "description", "keywords", "min_tools", "max_tools", "target_tools",
                               "target", "tools", "min_tables", "max_tables")}
        assert "departure_time/arrival_time" in _text(role, **kw), role


# --- 5. a generated unique reference: next_id on its own column ----------------------------------------


def test_a_new_reference_is_a_next_id_on_its_column_and_the_code_prompt_says_so():
    from scaleenv.formats.domain import Implementation, Param, ToolSpec
    from scaleenv.tools.runtime import run_tool

    orders = Table(name="work_orders", columns=[Column(name="id"), Column(name="reference", unique=True),
                                                Column(name="room")])
    tool = ToolSpec(
        name="submit_work_order", description="Report a fault.", kind="write",
        parameters=[Param(name="room", type="string", column="work_orders.room")],
        generated={"new_id": {"kind": "next_id", "table": "work_orders", "column": "id", "prefix": "WRK-"},
                   "ref": {"kind": "next_id", "table": "work_orders", "column": "reference", "prefix": "WO-"}},
        effects=["INSERT INTO work_orders (id, reference, room) VALUES (:new_id, :ref, :room)"],
        returns={"query": "SELECT * FROM work_orders WHERE id = :new_id", "mode": "one", "table": "work_orders"},
        implementation=Implementation(kind="sql"))
    spec = DomainSpec(name="dorm", tables=[orders], tools=[tool])
    world = World(spec)
    world.load_rows("work_orders", [{"id": "WRK-0001", "reference": "WO-1107", "room": "214B"},
                                    {"id": "WRK-0002", "reference": "FB-20113", "room": "101"}])
    out = run_tool(world, tool, {"room": "310"})
    assert out["reference"] == "WO-1108" and out["id"] == "WRK-0003"
    kw = {k: "x" for k in ("title", "tool_name", "tool", "tables", "id_examples", "clock")}
    assert '"column": "reference", "prefix": "WO-"' in _text("code", **kw)

"""What a third fresh reader met answering a whole LLM build by hand (community garden plot allotments, 86
requests, /work/relay4): each is now checked by the build or stated in its prompt, one test each."""

from __future__ import annotations

import pytest

from llm_fixture import DROPPED, TOOLS, PetCareScript, database, implementation
from scaleenv.formats.domain import DomainSpec, Policy, PolicyRule
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.chaincode import parse_chain
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import DomainProfile, parse_database
from scaleenv.synth.llm.implement import make_tool
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.synth.llm.tasks import LLMTaskBuilder
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.world.world import World

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])
CFG = SynthConfig(min_tables=1)


def _ctx(forbid: str | None = None, tool: str = "book_appointment") -> DomainContext:
    design, problems = parse_database(database(), TOOLS, PROFILE, CFG)
    assert not problems
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns,
                       design.tool_tables[t["name"]])[0] for t in TOOLS if t["name"] not in DROPPED]
    policy = None
    if forbid is not None:
        policy = Policy(rules=[PolicyRule(name="booking_window", kind="eligibility", tools=[tool],
                                          text="A visit can be booked only within 30 days.", forbid=forbid)])
    spec = DomainSpec(name="pet_care", tables=design.tables, tools=tools, policy=policy,
                      meta={"title": "Pet Care", **design.meta})
    return DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})


def _builder(ctx: DomainContext, attempt: int = 0) -> tuple[ScriptedChatModel, LLMTaskBuilder]:
    model = ScriptedChatModel(PetCareScript())
    ask = LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care")
    return model, LLMTaskBuilder(ctx, ask, 0, attempt, SynthConfig())


# --- 1. a gold chain that breaks the domain's own policy is rejected --------------------------------


def test_a_gold_write_that_breaks_a_policy_rule_rejects_the_llm_task():
    """Task 0's chain books an appointment; with a rule that forbids that booking the attempt is rejected
    (it was verified: no gate ran the policy's predicates on the reference chain), with one that allows
    it the same attempt is accepted."""
    _, ok = _builder(_ctx(forbid="SELECT 0"))
    assert ok.run().gold_chain[-1].tool == "book_appointment"
    _, bad = _builder(_ctx(forbid="SELECT :scheduled_for >= :today"))
    with pytest.raises(TaskRejected) as e:
        bad.run()
    assert "booking_window" in str(e.value) or e.value.reason.value == "breaks_policy"


def test_the_state_agent_is_told_which_rule_its_chain_breaks():
    model, b = _builder(_ctx(forbid="SELECT :scheduled_for >= :today"))
    with pytest.raises(TaskRejected):
        b.run()
    repairs = [r for r in model.requests if r.role == "state" and len(r.messages) > 2]
    assert repairs and "breaks the policy rule 'booking_window'" in repairs[0].messages[-1]["content"]


def test_the_chain_prompt_shows_the_policy_rules_of_its_tools():
    ctx = _ctx(forbid="SELECT 1", tool="record_vaccination")
    model, b = next((m, x) for m, x in map(lambda a: _builder(ctx, a), range(40))
                    if x.plan()[2].name == "record_vaccination")
    b.write_chain("medium")
    prompt = model.requests[-1].messages[1]["content"]
    assert "- A visit can be booked only within 30 days. (record_vaccination)" in prompt
    _, plain = _builder(_ctx())
    assert plain.policy_text({"book_appointment"}) == "(none)"


# --- 2. a looked-up record leaves a trace; a final list read is what the customer learns ------------


def test_the_chain_prompt_says_every_looked_up_record_must_leave_a_trace():
    model, b = _builder(_ctx())
    b.write_chain("medium")
    prompt = " ".join(model.requests[-1].messages[1]["content"].split())
    assert "Every record you look up must leave a trace" in prompt
    assert "swapped for a look-alike" in prompt


def test_a_chain_that_ends_with_a_list_read_gives_the_customer_a_fact_to_learn():
    ctx = _ctx()
    world = World.from_snapshot(ctx.spec, ctx.base)
    owner, n = world.conn.execute("SELECT owner_id, COUNT(*) FROM pets GROUP BY owner_id HAVING COUNT(*) >= 2 "
                                  "ORDER BY owner_id LIMIT 1").fetchone()
    email = world.conn.execute("SELECT email FROM owners WHERE id = ?", (owner,)).fetchone()[0]
    _, b = _builder(ctx)
    b.chain = parse_chain(f's0 = find_owner_by_email(email="{email}")\n'
                          's1 = list_pets_by_owner(owner_id=s0["id"])', ctx.spec)
    b.add_answer_fact()
    assert b.answer_facts == [{"name": "number of pets", "value": n}]


# --- 3./4. what the tool-schema agent is promised it can state, and what it must know early ---------


def _schema_text() -> str:
    from scaleenv.synth.llm.prompts import render

    msgs = render("tool_schema", title="t", name="n", description="d", keywords="k", min_tools=25, max_tools=40,
                  target=30)
    return " ".join(" ".join(m["content"] for m in msgs).split())


def test_the_tool_schema_prompt_gives_ranges_a_field_and_they_reach_the_tool():
    text = _schema_text()
    assert '"minimum" and "maximum" for a number\'s range' in text
    assert 'Types, enums, "minimum"/"maximum" and required parameters are checked' in text
    from scaleenv.synth.llm.design import normalize_tools
    from scaleenv.synth.llm.render import tool_text

    tools, problems = normalize_tools({"tools": [{
        "name": "record_fee_payment", "kind": "write", "description": "Record a payment.",
        "parameters": [{"name": "amount", "type": "number", "minimum": 0.01, "description": "Amount paid."}],
        "errors": []}]})
    assert not problems
    assert tools[0]["parameters"][0]["minimum"] == 0.01
    assert "- amount* (number; 0.01..): Amount paid." in tool_text(tools[0])  # the code agent sees the range


def test_a_code_added_error_is_described_without_its_message_placeholders():
    from scaleenv.synth.llm.implement import with_new_errors

    abstract = {"name": "record_fee_payment", "errors": [{"code": "lease_not_found", "description": "No lease."}]}
    impl = {"preconditions": [{"error": "invalid_amount", "sql": "SELECT :amount > 0",
                               "message": "Payment amount {amount} must be greater than 0."}]}
    errors = with_new_errors(abstract, impl)["errors"]
    assert errors[-1] == {"code": "invalid_amount", "description": "Payment amount must be greater than 0."}


def test_the_tool_schema_prompt_states_the_derived_number_and_lifecycle_date_rules():
    text = _schema_text()
    assert "a derived number (a balance, seats sold, amount paid) is computed from the rows it sums" in text
    assert "A state transition (cancel, approve, return) takes the date it happens as a parameter" in text


# --- 5. the gate's rubric covers every case; the solver sees rows of every table its tools touch -----


def test_the_gate_rubric_covers_one_chain_with_few_tools_left():
    from scaleenv.synth.llm.prompts import render

    text = " ".join(" ".join(m["content"] for m in render(
        "gate", title="t", included=9, complexity="0.88", remaining=7, feasibility="1.00", k=4, chains=1,
        tau="0.5", max_chains=3)).split())
    assert "One chain so far: grow (p >= 0.5, higher the more tools remain and the lower c(H)) when g is 0.5 " \
           "or more, three or more tools remain and c(H) is below 1.0" in text
    assert "With two or more chains, grow again only while c(H) is below 0.6" in text


def test_rubric_refuses_exactly_where_no_g_could_grow_the_task():
    from scaleenv.synth.llm.tasks import rubric_refuses

    assert not rubric_refuses(1, 0.88, 7)  # the relay's uncovered case: grow
    assert rubric_refuses(1, 0.5, 2) and rubric_refuses(1, 1.2, 9) and not rubric_refuses(1, 1.2, 10)
    assert rubric_refuses(2, 0.64, 12)  # relay4 tasks 0 and 3: the second solver and gate said no anyway
    assert not rubric_refuses(2, 0.2, 21) and rubric_refuses(2, 0.2, 9)


def test_the_solver_and_gate_are_not_asked_when_the_rubric_already_says_no(monkeypatch):
    """The rubric grows a one-chain task; at two chains with c(H) >= 0.6 the solver is not asked again."""
    import scaleenv.synth.llm.tasks as tasks_mod

    monkeypatch.setattr(tasks_mod, "core_complexity", lambda *a, **k: 0.7)
    for attempt in range(3):
        model, b = _builder(_ctx(), attempt)
        try:
            task = b.run()
        except TaskRejected:
            continue
        if task.difficulty.chains < 2:
            continue
        roles = [r.role for r in model.requests]
        assert roles.count("solver") == 1 and roles.count("gate") == 0  # the rubric decided the first gate
        assert b.record["gate"][-1] == {"remaining": b.record["gate"][-1]["remaining"], "complexity": 0.7,
                                        "g": None, "p": None, "accepted": False, "asked": False}
        return
    pytest.fail("no attempt grew past one chain")


def test_the_solver_sees_rows_of_every_table_its_tools_touch():
    from scaleenv.synth.llm.render import parse_sample_rows
    from scaleenv.synth.llm.tasks import _Exerciser

    ctx = _ctx()
    model, b = _builder(ctx)
    b.solve(["get_pet", "list_vets"], _Exerciser(b, ctx.base, {}))
    prompt = model.requests[-1].messages[1]["content"]
    rows = parse_sample_rows(prompt.split("up to 4 per table):\n")[1].split("\n\nThe clock")[0])
    assert {"pets", "vets"} <= set(rows)  # vets: list_vets filters them by specialty, no id passed


# --- 6. a chain the swap gate must reject costs no solver, gate or instruction request --------------


class _TransferAway(PetCareScript):
    """Task 0's chain registers a pet for the looked-up owner, then hands it to a new owner: the owner
    leaves no trace (relay4 attempt 1: a lease created for Hugh and transferred away)."""

    def __call__(self, request):
        messages = request.messages if hasattr(request, "messages") else request
        if "Role: chain" in str(messages[0]["content"]):
            return ("```python\n"
                    's0 = find_owner_by_email(email="nora.quinn@example.com")\n'
                    's1 = register_pet(owner_id=s0["id"], name="Rex", species="dog")\n'
                    's2 = create_owner(full_name="Zed Marlow", email="zed.marlow@example.com")\n'
                    's3 = transfer_pet(pet_id=s1["id"], new_owner_id=s2["id"])\n```')
        return super().__call__(request)


def test_a_chain_whose_looked_up_record_leaves_no_trace_is_rejected_before_the_expansion():
    model = ScriptedChatModel(_TransferAway())
    ask = LLMSession(model, LLMConfig(model="scripted", concurrency=1)).scoped("pet_care")
    with pytest.raises(TaskRejected) as e:
        LLMTaskBuilder(_ctx(), ask, 0, 0, SynthConfig()).run()
    assert e.value.reason.value == "gate_swap_not_0"
    assert {r.role for r in model.requests} == {"chain", "state"}  # no solver, gate or instruction asked

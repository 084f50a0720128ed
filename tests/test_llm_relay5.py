"""What a fourth fresh reader met answering a whole LLM build by hand (public library makerspace equipment
loans, 93 requests, /work/relay5): each is now fixed in the engine or stated in its prompt, one test each."""

from __future__ import annotations

import contextlib
import random

from scaleenv.formats.domain import (
    Column,
    Contract,
    DomainSpec,
    ErrorSpec,
    Implementation,
    Param,
    Table,
    ToolSpec,
)
from scaleenv.tools.sampling import ArgSampler
from scaleenv.tools.testing import SUCCESS
from scaleenv.tools.testing import test_tool as run_tool_tests
from scaleenv.world.world import World

# --- 1. a date the tool writes into the row it creates needs no existing row carrying it -------------


def _loans_spec(window: str = "start_date <= :checked_out_on AND end_date >= :checked_out_on") -> DomainSpec:
    """checkout(reservation_id, checked_out_on) creates a loan; checked_out_on carries loans.start_date and
    must fall inside the reservation's window (relay5's checkout_reservation, cut down)."""
    tables = [
        Table(name="reservations", columns=[Column(name="id"), Column(name="start_date", type="date"),
                                            Column(name="end_date", type="date"),
                                            Column(name="status", enum=["pending", "fulfilled"])]),
        Table(name="loans", columns=[Column(name="id"), Column(name="reservation_id", foreign_key="reservations.id"),
                                     Column(name="start_date", type="date")]),
    ]
    tool = ToolSpec(
        name="checkout_reservation", description="Check out a pending reservation.", kind="write",
        parameters=[Param(name="reservation_id", type="string", column="reservations.id"),
                    Param(name="checked_out_on", type="string", column="loans.start_date")],
        generated={"new_id": {"kind": "next_id", "table": "loans", "column": "id", "prefix": "LOAN-"}},
        preconditions=[
            Contract(sql="SELECT EXISTS (SELECT 1 FROM reservations WHERE id = :reservation_id)",
                     error="reservation_not_found"),
            Contract(sql="SELECT status = 'pending' FROM reservations WHERE id = :reservation_id",
                     error="reservation_not_pending"),
            Contract(sql=f"SELECT {window} FROM reservations WHERE id = :reservation_id",
                     error="outside_reservation_window")],
        effects=["INSERT INTO loans (id, reservation_id, start_date) VALUES (:new_id, :reservation_id, "
                 ":checked_out_on)",
                 "UPDATE reservations SET status = 'fulfilled' WHERE id = :reservation_id"],
        errors=[ErrorSpec(code=c) for c in ("reservation_not_found", "reservation_not_pending",
                                              "outside_reservation_window")],
        implementation=Implementation(kind="sql"))
    return DomainSpec(name="loans", tables=tables, tools=[tool])


def _loans_world(spec: DomainSpec) -> World:
    w = World(spec)
    # filler loans far from the one pending reservation's window; the fixture's reservation is in July
    w.load_rows("reservations", [
        {"id": "RES-0001", "start_date": "2025-01-01", "end_date": "2025-01-05", "status": "fulfilled"},
        {"id": "RES-0101", "start_date": "2026-07-01", "end_date": "2026-07-04", "status": "pending"}])
    w.load_rows("loans", [{"id": f"LOAN-000{i + 1}", "reservation_id": "RES-0001", "start_date": d}
                          for i, d in enumerate(("2025-01-02", "2025-03-09", "2025-11-20"))])
    return w


def test_a_created_rows_date_is_found_from_the_dates_its_precondition_reads():
    """The positive search drew checked_out_on only from loans.start_date (existing loans), so no date fell
    in the pending reservation's window and the tool failed its own positive test (relay5's three debug
    rounds); the wider search also tries the dates the failing precondition reads."""
    spec = _loans_spec()
    w = _loans_world(spec)
    tool = spec.tools[0]
    assert ArgSampler(w, random.Random(0)).satisfying_args(tool) is None  # the plain search: as before
    report = run_tool_tests(w, tool, random.Random(0))
    pos = report.tests[0]
    assert pos.verdict == SUCCESS, pos.reason
    assert pos.args["reservation_id"] == "RES-0101"
    assert "2026-07-01" <= pos.args["checked_out_on"] <= "2026-07-04"
    assert report.admitted


def test_a_test_agents_positive_case_lends_the_search_its_values():
    """A window no column's dates fall in (it starts the day after the reservation's start): only the test
    agent's positive case knows a date that works, and the search takes it."""
    spec = _loans_spec(window="date(start_date, '+1 day') <= :checked_out_on AND end_date >= :checked_out_on "
                              "AND :checked_out_on != end_date AND :checked_out_on != date(start_date, '+1 day')")
    w = _loans_world(spec)
    tool = spec.tools[0]
    assert run_tool_tests(w, tool, random.Random(0)).tests[0].verdict != SUCCESS
    hint = {"reservation_id": "RES-0101", "checked_out_on": "2026-07-03"}
    pos = run_tool_tests(w, tool, random.Random(0), hints=[hint]).tests[0]
    assert pos.verdict == SUCCESS and pos.args == hint


def test_a_failed_search_names_the_precondition_and_the_values_it_tried():
    """'no arguments satisfy the preconditions on the fixture world' named nothing; now the log says which
    precondition refused the closest candidate, at which arguments, and which values (from which column)."""
    spec = _loans_spec(window="0")  # no date ever satisfies it
    w = _loans_world(spec)
    pos = run_tool_tests(w, spec.tools[0], random.Random(0)).tests[0]
    assert pos.verdict != SUCCESS
    assert "precondition 3 (outside_reservation_window" in pos.reason
    assert "RES-0101" in pos.reason  # the closest candidate: the pending reservation
    assert "checked_out_on from loans.start_date" in pos.reason or "reservation_id from reservations.id" in pos.reason
    assert len(pos.reason) < 900  # bounded


def test_the_debug_and_test_prompts_say_how_the_positive_arguments_are_found():
    """The debug prompt never said that the tester searches for the positive test's arguments itself (from
    the column each parameter carries), so three rounds guessed at SQL that was right all along."""
    debug = _prompt("debug")
    assert "the tester's own: it searches existing rows + fixture for" in debug
    assert "the column it carries" in debug and "names the one that refused the closest candidate" in debug
    assert "searches existing rows + fixture for arguments that satisfy every precondition" in _prompt("test")


def _prompt(role: str) -> str:
    from scaleenv.synth.llm.prompts import render

    kw = {k: "X" for k in ("title", "tool_name", "tool", "tables", "implementation", "tests", "failures", "round",
                           "rounds", "rows", "next_ids", "clock", "id_examples")}
    return " ".join(" ".join(m["content"] for m in render(role, **kw)).split())  # whitespace as one space


# --- 2. the legend's "* = required" is true ----------------------------------------------------------


def test_a_required_parameter_carries_the_legends_star():
    from scaleenv.synth.llm.render import tool_text

    t = {"name": "renew_loan", "kind": "write", "description": "Renew a loan.",
         "parameters": [{"name": "loan_id", "type": "string"},
                        {"name": "note", "type": "string", "required": False}], "errors": []}
    text = tool_text(t, {"renew_loan.loan_id": "loans.id"})
    assert "- loan_id* (string; = loans.id)" in text
    assert "- note (string, optional)" in text
    for role in ("code", "test", "debug"):
        assert "Tool (* = required;" in _prompt(role)


# --- 3. the period-naming rule reaches the stage that first names the dates ----------------------------


def test_the_tool_schema_prompt_names_a_periods_dates_as_a_pair():
    """The rule arrived only in the database prompt, after the tool schema had named checked_out_on/due_on."""
    from scaleenv.synth.llm.prompts import render

    text = " ".join(" ".join(m["content"] for m in render(
        "tool_schema", title="T", name="t", description="d", keywords="k", min_tools=1, max_tools=2,
        target=1)).split())
    assert "A period (a loan, a booking, a certification) names its two dates as a pair: start_date/end_date" in text
    assert "not checked_out_on/due_on" in text


# --- 4. the chain sees the whole policy; instruction and state prompts say what readers asked -----------


def _policy_ctx():
    from scaleenv.formats.domain import Policy, PolicyRule
    from test_llm_relay4 import _builder, _ctx

    ctx = _ctx(forbid="SELECT 0", tool="book_appointment")
    assert ctx.spec.policy is not None
    rules = [PolicyRule(name="identity", kind="identity", text="Verify the owner by e-mail and phone first."),
             PolicyRule(name="confirm", kind="confirmation", text="Get a yes before each change."),
             *ctx.spec.policy.rules]
    ctx.spec.policy = Policy(rules=rules)
    return _builder(ctx)


def test_the_chain_prompt_shows_the_whole_policy_briefly():
    """Only tool-bound rules reached the chain ("(none)" although identity and confirmation rules existed)."""
    model, b = _policy_ctx()
    text = b.policy_text({"book_appointment"})
    assert "- identity: Verify the owner by e-mail and phone first." in text
    assert "- confirmation: Get a yes before each change." in text
    assert "- A visit can be booked only within 30 days. (book_appointment)" in text
    assert "within 30 days" not in b.policy_text({"get_pet"})  # a checked rule of tools not offered stays out
    assert "identity:" in b.policy_text({"get_pet"})


def test_the_instruction_and_state_prompts_answer_the_readers_questions():
    from scaleenv.synth.llm.prompts import render

    def text(role: str, **kw: object) -> str:
        return " ".join(" ".join(m["content"] for m in render(role, **kw)).split())

    inst = text("instruction", title="T", chain="c", growth="", rows="r", answers="a", withheld="[]")
    assert "a fact to learn is checked from the answer facts above, not a goal" in inst
    assert "A staff persona works for the service and is not asked to prove who they are" in inst
    state = text("state", title="T", chain="c", tables="t", rows="r", next_ids="n", clock="c", distractors=2)
    assert "change no answer of the chain: no read's total, count or list may differ with or without them" in state


def _distractor_builder(distractors: dict[str, list[dict[str, object]]]):
    from scaleenv.synth.llm.chaincode import parse_chain
    from test_llm_relay4 import _builder, _ctx

    _, b = _builder(_ctx())
    b.chain = parse_chain('s0 = find_owner_by_email(email="mira.holt@clinic-new.test")\n'
                          's1 = update_owner_phone(owner_id=s0["id"], phone="555-200-3001")\n'
                          's2 = list_pets_by_owner(owner_id=s0["id"])', b.spec)
    rows = {"owners": [{"id": "OWN-0901", "full_name": "Mira Holt", "email": "mira.holt@clinic-new.test",
                        "phone": "555-200-3000", "created_at": "2026-04-07T10:15:00"}],
            "pets": [{"id": "PET-0901", "owner_id": "OWN-0901", "name": "Pepper", "species": "dog",
                      "birth_date": None, "weight_kg": 12.5}]}
    assert b._materialize(rows, distractors) == ""
    return b


def test_distractors_that_change_the_chains_answer_are_caught():
    """A distractor pet of the customer's own owner record changes what the final list read answers (two
    pets, not one): the engine now sees it (answers computed with and without distractors); a look-alike
    owner elsewhere changes nothing."""
    pet = {"id": "PET-0902", "owner_id": "OWN-0901", "name": "Peppa", "species": "dog", "birth_date": None,
           "weight_kg": 11.0}
    owner = {"id": "OWN-0902", "full_name": "Mira Holtz", "email": "mira.holtz@clinic-new.test",
             "phone": "555-200-3002", "created_at": "2026-04-07T10:15:00"}
    assert _distractor_builder({"pets": [pet]}).distractors_change_answers()
    assert not _distractor_builder({"owners": [owner]}).distractors_change_answers()
    assert not _distractor_builder({}).distractors_change_answers()


def test_the_state_step_drops_distractors_that_change_an_answer():
    pet = {"id": "PET-0902", "owner_id": "OWN-0901", "name": "Peppa", "species": "dog", "birth_date": None,
           "weight_kg": 11.0}
    b = _distractor_builder({})
    rows = {t: [dict(r) for r in rs if r["id"] in ("OWN-0901", "PET-0901")] for t, rs in b.patch.items()}
    b.add_distractor_rows(rows, {"pets": [pet]}, 1)
    assert b.record["distractors"] != "llm" and b.record["distractors_changed_answers"] >= 1
    assert not b.distractors_change_answers()


# --- 5. tokens: the gate's rubric is decided in code; the model is asked only where a case is open ----


def test_the_rubric_decides_every_gate_case_it_states():
    from scaleenv.synth.llm.tasks import rubric_decision

    assert rubric_decision(1, 0.18, 1.0, 25) is True  # relay5 request 73: p = 0.85
    assert rubric_decision(2, 0.20, 1.0, 24) is True  # request 75: p = 0.7
    assert rubric_decision(1, 0.5, 0.25, 25) is False  # g below 0.5
    assert rubric_decision(1, 1.2, 0.5, 25) is False and rubric_decision(1, 1.2, 0.75, 10) is True  # saturated
    assert rubric_decision(2, 0.6, 1.0, 30) is False and rubric_decision(2, 0.5, 0.5, 30) is False


def test_a_task_grows_without_a_gate_request_and_gate_llm_asks_again():
    from scaleenv.synth.llm.config import SynthConfig
    from scaleenv.synth.llm.tasks import LLMTaskBuilder
    from scaleenv.synth.tasks.generate import TaskRejected
    from test_llm_relay4 import _builder, _ctx

    grew = False
    for attempt in range(3):
        model, b = _builder(_ctx(), attempt)
        try:
            task = b.run()
        except TaskRejected:  # a rejected attempt: try the next one
            continue
        roles = [r.role for r in model.requests]
        assert "gate" not in roles and roles.count("solver") == len([g for g in b.record["gate"] if g["g"] is not None])
        assert all(g["asked"] is False for g in b.record["gate"])
        grew = grew or task.difficulty.chains > 1
    assert grew
    model, b = _builder(_ctx(), 0)
    asked = LLMTaskBuilder(b.ctx, b.ask, 0, 0, SynthConfig(gate_llm=True))
    with contextlib.suppress(TaskRejected):  # accepted or not, the gate was asked
        asked.run()
    assert any(r.role == "gate" for r in model.requests)


# --- 1b. a task world lends a tool its own test fixture before any patch request -------------------------


def test_a_task_world_gets_the_tools_test_fixture_rekeyed_instead_of_a_patch_request():
    """relay5 paid one patch request per task world (76, 84, 88) for checkout_reservation, whose filler held
    no pending reservation in its window; the rows its tests passed on in Phase 1, re-keyed to free ids,
    make the call run with no request."""
    from scaleenv.synth.graph.build import build_graph
    from scaleenv.synth.llm.config import SynthConfig
    from scaleenv.synth.llm.tasks import LLMTaskBuilder, _Exerciser
    from scaleenv.synth.tasks.context import DomainContext

    spec = _loans_spec()
    w = World(spec)
    w.load_rows("reservations", [{"id": "RES-0001", "start_date": "2025-01-01", "end_date": "2025-01-05",
                                  "status": "fulfilled"}])
    base = w.snapshot()
    ctx = DomainContext(spec, base, build_graph(spec), {"checkout_reservation": {
        "reservation_id": "RES-0001", "checked_out_on": "2025-01-02"}})  # a Phase 1 row, no longer pending
    ctx.__dict__["llm_fixtures"] = {"checkout_reservation": {
        "rows": {"reservations": [{"id": "RES-0101", "start_date": "2026-07-01", "end_date": "2026-07-04",
                                   "status": "pending"}]},
        "args": [{"reservation_id": "RES-0101", "checked_out_on": "2026-07-02"}]}}
    b = LLMTaskBuilder(ctx, None, 0, 0, SynthConfig(patch_budget=0))  # type: ignore[arg-type]
    b.chain = []
    ex = _Exerciser(b, base, {})
    assert ex.try_tool("checkout_reservation")
    assert b.record["fixture_patches"] == 1 and b.record["llm_patches"] == 0
    assert ex.patch == {"reservations": [{"id": "RES-0002", "start_date": "2026-07-01", "end_date": "2026-07-04",
                                          "status": "pending"}]}
    ctx.__dict__["llm_fixtures"] = {}
    # without it, no fixture is lent: the row comes from the procedural patch or not at all (no request left)
    _Exerciser(b, base, {}).try_tool("checkout_reservation")
    assert b.record["fixture_patches"] == 1 and b.record["llm_patches"] == 0


def test_only_the_distractor_table_that_changes_an_answer_is_left_out():
    pet = {"id": "PET-0902", "owner_id": "OWN-0901", "name": "Peppa", "species": "dog", "birth_date": None,
           "weight_kg": 11.0}
    owner = {"id": "OWN-0902", "full_name": "Mira Holtz", "email": "mira.holtz@clinic-new.test",
             "phone": "555-200-3002", "created_at": "2026-04-07T10:15:00"}
    b = _distractor_builder({})
    rows = {t: [dict(r) for r in rs] for t, rs in b.patch.items()}
    b.add_distractor_rows(rows, {"pets": [pet], "owners": [owner]}, 1)
    assert b.record["distractors"] == "llm" and b.distractor_ids == {"owners": {"OWN-0902"}}

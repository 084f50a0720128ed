"""Defects careful players met in play round 11 (seed 5309, every catalog domain), each fixed at the
cause: a courier who booked a pickup "from me (CUS-0023)" for somebody else's account, a bulk change
that the same request's new record would also fall under, a bulk over the user's own look-alikes,
rentals of one car that overlap after they were returned, a past state dated later today than the
clock, a dictated sentence that ended in two full stops, and a 5-star review with a 3-star text."""

from __future__ import annotations

import contextlib
import random

import pytest

from scaleenv.formats.task import Call
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.synth.tasks.instruction import _fill
from scaleenv.synth.tasks.validity import created_in_selection
from scaleenv.tools.chain import run_chain
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context


def test_a_dictated_sentence_is_quoted_and_ends_in_one_stop():
    """second_hand_marketplace/00022: "updated to Sign model hit media away.." left the value's end unclear."""
    text = _fill("Please have the description on listing {listing} updated to {text}.",
                 {"listing": "LST-0073", "text": "Sign model hit media away."})
    assert text == 'Please have the description on listing LST-0073 updated to "Sign model hit media away."'
    # a title the template already quotes, and a name or an address, stay as they are
    assert _fill("titled '{title}'.", {"title": "Love it."}) == "titled 'Love it.'."
    assert _fill("ship to {address}.", {"address": "718 Murray Bridge"}) == "ship to 718 Murray Bridge."


def test_returned_rentals_of_one_car_never_overlap():
    """car_rental/00022: four returned rentals of CAR-0036 covered 2026-03-25 to 2026-04-05 together."""
    for seed in (0, 1, 2):
        ctx = context("car_rental", seed)
        world = World.from_snapshot(ctx.spec, ctx.base)
        states = world.conn.execute("SELECT COUNT(*) FROM rentals WHERE status = 'returned'").fetchone()[0]
        overlaps = world.conn.execute(
            "SELECT COUNT(*) FROM rentals a JOIN rentals b ON a.car_id = b.car_id AND a.id < b.id "
            "WHERE a.status IN ('reserved', 'active', 'returned') AND b.status IN ('reserved', 'active', 'returned') "
            "AND a.start_date < b.end_date AND b.start_date < a.end_date").fetchone()[0]  # a same-day handover is fine
        world.close()
        assert states >= 3
        assert overlaps == 0, seed


def test_a_past_state_is_never_later_today_than_the_clock():
    """Consultations "in progress" at 14:45 while the clock read 09:00: the clock rule compared dates."""
    for seed in (0, 1, 2, 3):
        ctx = context("healthcare_telemedicine", seed)
        world = World.from_snapshot(ctx.spec, ctx.base)
        late = world.conn.execute(
            "SELECT id, scheduled_at, status FROM consultations WHERE status IN ('in_progress', 'completed', "
            "'no_show') AND datetime(scheduled_at) > datetime(?)", (ctx.spec.clock,)).fetchall()
        world.close()
        assert late == [], (seed, late)
    rule = next(i for i in ctx.spec.invariants if i.name.startswith("consultations.scheduled_at_past"))
    assert "datetime(:now)" in (rule.check or "")


def test_a_new_record_takes_every_value_from_one_row():
    """retail/00021: "5 stars, titled 'Exactly as described'. Does the job, but I expected more for the
    price.": the rating, title and body of a new review came from different rows."""
    ctx = context("retail")
    world = World.from_snapshot(ctx.spec, ctx.base)
    tool = ctx.spec.tool("register_review")
    assert tool is not None
    rows = {(r[0], r[1], r[2]) for r in world.conn.execute("SELECT rating, title, body FROM reviews")}
    sampler = ArgSampler(world, random.Random(5))
    mixed = 0
    for _ in range(60):
        args = sampler.random_args(tool, optional_rate=0.0)
        if {"rating", "title", "body"} <= set(args):
            mixed += (args["rating"], args["title"], args["body"]) not in rows
    world.close()
    assert mixed <= 25  # a quarter of the draws use no anchor row at all; before, over half were mixed


def test_a_courier_never_books_a_pickup_as_a_customer():
    """express_logistics/00018: Susan Cook, a courier, asked "can a courier collect 5 parcels from me
    (CUS-0023)", and CUS-0023 was Jackson Vazquez: a careful agent had to refuse."""
    ctx = context("express_logistics", 5309)
    seen = 0
    for attempt in range(60):  # (express hosts enabled tasks now, whose draws are often rejected)
        try:
            task = generate_task(ctx, 5309, attempt)
        except TaskRejected:
            continue
        seen += 1
        couriers = {r["id"] for rows in [task.initial_patch.get("couriers", [])] for r in rows}
        for call in task.gold_chain:
            if call.tool == "add_pickup_request":
                customer = call.args.get("customer_id")
                assert not (isinstance(customer, str) and f"me ({customer})" in task.instruction
                            and "courier id" in task.user_profile.known), task.id
        assert not ("courier id" in task.user_profile.known and couriers and " me (CUS-" in task.instruction)
    assert seen >= 10


def test_a_bulk_change_that_the_new_record_would_fall_under_is_caught():
    """telecom/00014: "resolve every normal ticket of mine" and "open a ticket" (normal by default) in one
    request: created first, the new ticket is resolved too. The audit names it; the generator rejects it."""
    ctx = context("telecom")
    task = None
    for attempt in range(60):
        with contextlib.suppress(TaskRejected):
            t = generate_task(ctx, 0, attempt, ChainConfig(family_mix={"bulk": 1.0}))
            program = t.verification.program or {}
            if 'FROM "tickets"' in str(program.get("sql")):
                task = t
                break
    assert task is not None
    program = task.verification.program or {}
    initial = World.from_snapshot(ctx.spec, ctx.base)
    apply_patch(initial, task.initial_patch)
    snap = initial.snapshot()
    final = World.from_snapshot(ctx.spec, snap)
    run_chain(final, ctx.spec, task.gold_chain)
    assert created_in_selection(task.verification.program, initial, final) == []
    # the same request with a new ticket that meets the condition (its customer, the condition's value)
    target = initial.row("tickets", program["ids"][0])
    assert target is not None
    column = next(k for k in program["params"] if k != "parent")
    filter_column = str(program["sql"]).split(" AND ")[1].split('"')[1]
    assert column == "value"
    create = Call(tool="create_ticket", purpose="goal", args={
        "customer_id": target["customer_id"], "subject": target["subject"], "details": target["details"],
        filter_column: target[filter_column]})
    later = World.from_snapshot(ctx.spec, snap)
    run_chain(later, ctx.spec, [*task.gold_chain, create])
    created = task.model_copy(update={"gold_chain": [*task.gold_chain, create]})
    found = created_in_selection(created.verification.program, initial, later)
    assert len(found) == 1 and initial.row("tickets", found[0]) is None
    for w in (initial, final, later):
        w.close()


def test_no_selection_picks_the_user_among_its_own_look_alikes():
    """fitness_club/00000: "freeze membership every active member for plan PLN-0010", said by Leonard
    Reed, and every such member was a Leonard Reed look-alike."""
    ctx = context("fitness_club", 5309)
    for family in ("bulk", "long", "computed", "description"):
        for attempt in range(12):
            with contextlib.suppress(TaskRejected):
                task = generate_task(ctx, 5309, attempt, ChainConfig(family_mix={family: 1.0}))
                program = task.verification.program or {}
                persona = task.user_profile.persona
                if 'FROM "members"' in str(program.get("sql")):
                    assert not persona.startswith("You are ") or persona.startswith("You are a "), task.id


def test_a_statement_with_its_own_request_gets_no_second_one():
    """project_management/00002: "budget freeze: put project ... on hold; please mark it on hold";
    email_management/00013: "keep it as a draft; please mark it draft"."""
    from scaleenv.synth.procedural.derive import with_request

    assert with_request("Budget freeze: put project {project_id} on hold.", "on_hold") == \
        "Budget freeze: put project {project_id} on hold."
    assert with_request("Don't send {draft_id} later after all; keep it as a draft.", "draft") == \
        "Don't send {draft_id} later after all; keep it as a draft."
    assert with_request("Order {order_id} just left the warehouse.", "shipped") == \
        "Order {order_id} just left the warehouse; please mark it shipped."


def test_a_grade_is_said_with_its_column_and_a_proper_name_keeps_its_article():
    """telecom: "every low ticket of mine"; smart_home/00016: "looking after the home The Silva Home"."""
    from scaleenv.formats.domain import Column
    from scaleenv.synth.tasks.families.selection import qualified
    from scaleenv.synth.tasks.instruction import EntityRef, persona_of

    assert qualified("ticket", Column(name="priority", enum=["low", "normal", "high"]), "low") == "low-priority ticket"
    assert qualified("bill", Column(name="status", enum=["open", "paid"]), "open") == "open bill"
    assert qualified("rental", Column(name="insurance", enum=["none", "basic"]), "none") == "rental with no insurance"
    spec = context("smart_home").spec
    home = EntityRef(table="homes", singular="home", row={"id": "HOM-0015", "name": "The Silva Home"}, display="name")
    assert persona_of(spec, home) == "You are a staff member looking after The Silva Home."


def test_paid_bills_are_settled_and_visas_are_not_filed_in_the_future():
    """healthcare_telemedicine/00034: BIL-0052 "paid" with 7.82 of 230.44 paid; travel_agency/00014: a visa
    "submitted 2026-06-19" when the clock read 2026-06-15."""
    for seed in (0, 1, 2):
        ctx = context("healthcare_telemedicine", seed)
        world = World.from_snapshot(ctx.spec, ctx.base)
        paid = world.conn.execute("SELECT COUNT(*), SUM(ROUND(amount - insurance_covered - patient_paid, 2) > 0) "
                                  "FROM bills WHERE status = 'paid'").fetchone()
        world.close()
        assert paid[0] >= 1 and paid[1] == 0, (seed, paid)
    # a visa application is filed on or before today: the tool that starts one refuses a later date
    from scaleenv.errors import ToolError
    from scaleenv.tools.runtime import run_tool

    ctx = context("travel_agency")
    world = World.from_snapshot(ctx.spec, ctx.base)
    tool = ctx.spec.tool("create_visa_application")
    assert tool is not None
    client = world.conn.execute("SELECT id FROM clients ORDER BY id").fetchone()[0]
    with pytest.raises(ToolError):
        run_tool(world, tool, {"client_id": client, "country": "Peru", "submitted_on": "2026-06-19"})
    assert run_tool(world, tool, {"client_id": client, "country": "Peru", "submitted_on": "2026-06-12"})
    world.close()


def test_a_refused_end_of_a_record_the_request_also_edits_is_a_contradiction():
    """in_store_dining/00041: "Cancel booking reservation RSV-0074, please. Please change the special request
    of reservation RSV-0074 to quiet corner." (the cancel refused): no guest asks both."""
    from scaleenv.synth.tasks.validity import contradicting_requests

    ctx = context("in_store_dining")
    world = World.from_snapshot(ctx.spec, ctx.base)
    first, other = [r[0] for r in world.conn.execute(
        "SELECT id FROM reservations WHERE status = 'booked' ORDER BY id LIMIT 2")]
    world.close()
    edit = Call(tool="update_reservation_special_request", purpose="goal",
                args={"reservation_id": first, "new_special_request": "quiet corner"})
    cancel = Call(tool="cancel_reservation", purpose="refused: no_late_reservation_cancellation",
                  args={"reservation_id": first})
    assert contradicting_requests(ctx.spec, ctx.base, [edit], [cancel])
    elsewhere = cancel.model_copy(update={"args": {"reservation_id": other}})
    assert contradicting_requests(ctx.spec, ctx.base, [edit], [elsewhere]) == []


def test_a_figure_of_the_users_own_record_is_no_rival():
    """Play round 12, agriculture_environmental/00018 (seed 2718): "the insecticide total is 0.0", said
    beside "the planting's overall total, from get_nitrogen_total, is 75.0", scored 0 because 75.0
    was a look-alike's rival answer. Without that rival the task no longer tells a guesser from a
    careful agent (the spray gate scores it), so it is rejected."""
    ctx = context("agriculture_environmental", 2718)
    try:
        task = generate_task(ctx, 2718, 18)
    except TaskRejected:
        return
    for fact in task.answer_facts:
        assert 75.0 not in (fact.rivals or [])


def test_a_clone_keeps_each_date_on_its_side_of_the_clock():
    """Play round 12, express_logistics/00010 (seed 2718): a shipment booked "2026-06-13T18:15:00" was
    cloned two days later, booked "2026-06-15T18:15:00" while the clock read 09:00."""
    from scaleenv.synth.tasks.generate import _shift_dates
    from scaleenv.utils.dates import clock_side

    clock = "2026-06-15T09:00:00"
    assert clock_side("2026-06-15T18:15:00", clock) == 1 and clock_side("2026-06-15", clock) == 0
    assert clock_side("2026-06-15T08:15:00", clock) == -1
    moved = _shift_dates({"booked_at": "2026-06-13T18:15:00", "due_on": "2026-06-20", "n": 3}, 2, clock)
    assert moved == {"booked_at": "2026-06-13T18:15:00", "due_on": "2026-06-22", "n": 3}
    ctx = context("express_logistics", 2718)
    for attempt in range(24):
        with contextlib.suppress(TaskRejected):
            task = generate_task(ctx, 2718, attempt)
            for row in task.initial_patch.get("shipments", []):
                assert clock_side(row["booked_at"], ctx.spec.clock) < 0, (task.id, row)


def test_a_new_record_never_repeats_the_name_of_another_under_the_same_parent():
    """Play rounds 12 and 13: a fourth filter "Receipts" on an account that had three, a project that
    existed for the team with the same name and dates, a second scene "Good Morning" in one home."""
    from scaleenv.synth.tasks.validity import goal_effects

    checked = 0
    for name, seed in (("email_management", 6007), ("project_management", 2718), ("smart_home", 2718)):
        ctx = context(name, seed)
        for attempt in range(16):
            try:
                task = generate_task(ctx, seed, attempt)
            except TaskRejected:
                continue
            initial = World.from_snapshot(ctx.spec, ctx.base)
            apply_patch(initial, task.initial_patch)
            effects, final = goal_effects(ctx.spec, initial.snapshot(), task.gold_chain)
            world = World.from_snapshot(ctx.spec, final)
            for _, _, cells in effects:
                for (table, key, col), value in cells.items():
                    display, link = ctx.display_column(table), ctx.parent_link(table)
                    row = world.row(table, key) if col == "*" and value is True else None
                    if row is None or display is None or link is None:
                        continue
                    checked += 1
                    twins = world.conn.execute(
                        f'SELECT id FROM "{table}" WHERE "{display}" = ? AND id != ? AND "{link[0]}" IS ?',
                        (row[display], key, row.get(link[0]))).fetchall()
                    assert twins == [], (task.id, table, row[display], twins)
            world.close()
            initial.close()
    assert checked >= 3


def test_a_confirmation_that_names_a_withheld_number_wrongly_is_declined():
    """Play round 14, library_services/00008 (seed 8191): "... membership type senior, fines due 0.00 ...
    Shall I go ahead?" got "Yes, please go ahead." from a user who knew fines due 12.5 (withheld until
    asked): another number of the request (the card number) had counted as the user's own."""
    from scaleenv.formats.task import UserProfile
    from synth_helpers import family_tasks, scripted_reply

    spec = context("library_services").spec
    base = family_tasks("library_services", "direct", 1)[0]
    profile = UserProfile(persona="You are Gary Rose.",
                          goals=["I'd like a senior library card: Jeffrey Jones, card number 78337057."],
                          known={"card number": "78337057", "fines due": 12.5, "new patron full name": "Jeffrey Jones"},
                          withheld=["fines due"])
    task = base.model_copy(update={"user_profile": profile})

    def reply(text: str) -> str:
        return scripted_reply(task, spec, text)

    ask = "Create a new senior cardholder Jeffrey Jones, card number 78337057, fines due {}. Shall I go ahead?"
    assert reply(ask.format("0.00")).startswith("No, that is not right")
    assert reply(ask.format("12.50")).startswith("Yes")

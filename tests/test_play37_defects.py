"""Defects play round 37 (seed 8585) and its review found: the simulated user, seed data that breaks the
domain's own rules, who may ask for what, and policy times compared as text."""

from __future__ import annotations

import asyncio
import random

from scaleenv.formats.task import Objective, Task
from scaleenv.world.world import World
from synth_helpers import context


def _task(goals: list[str], objectives: list[Objective], domain: str = "shop") -> Task:
    return Task.model_validate({
        "id": f"{domain}/00000", "domain": domain, "instruction": "x", "initial_patch": {}, "gold_chain": [],
        "tools": [], "difficulty": {}, "verification": {},
        "user_profile": {"persona": "You are Jerry Ware.", "goals": goals,
                         "known": {"user email": "jerry@example.com"}, "identity": ["user email"],
                         "objectives": [o.model_dump() for o in objectives]},
    })


def _reply(task: Task, spec, *texts: str) -> list[str]:
    from scaleenv.env.users import ScriptedUser, UserContext

    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=spec))
    asyncio.run(user.opening())
    return [asyncio.run(user.reply(t)) for t in texts]


def test_a_record_id_said_before_a_question_is_no_answer():
    """knowledge_management/00004: "the space ... is owned by USR-0034", said before asking who the user is,
    counted as the answer to "add up the view counts"; the user said "that is everything" and left."""
    from scaleenv.env.judge import Progress

    ask = "Could you add up the view count of every article in my space and tell me the total?"
    progress = Progress([Objective(kind="read", text=ask, asks=["total view count"])])
    progress.update("I see five members of that name, and the space is restricted and owned by USR-0034.")
    assert progress.done == [False]
    progress.update("The in-review articles have 3106 views in total.")
    assert progress.done == [True]


def test_a_choice_between_courses_of_action_gets_the_request_not_a_yes():
    """"Pay the full 120, or only the 50?" is no yes/no question: the user says what it asked for."""
    goal = "I want to pay 50 on bill BIL-0054."
    task = _task([goal], [Objective(kind="write", text=goal, done_words=["paid"], subject=["bill"])])
    choice, go_on = _reply(task, None, "Would you like me to pay the full 120, or just the 50?",
                           "Shall I go ahead and pay 50 on BIL-0054, or is there anything else?")
    assert choice.startswith("What I need is:") and "50 on bill BIL-0054" in choice
    assert "Yes, please go ahead." not in choice
    assert go_on.startswith("Yes, please go ahead.")


def test_a_move_the_user_did_not_ask_for_gets_a_no():
    """second_hand_marketplace/00434: asked to withdraw offers, the agent proposed declining them, and the user
    said "Yes, please go ahead." A move of the domain the user asked for none of gets a no and the request."""
    spec = context("second_hand_marketplace").spec
    goal = "I changed my mind, withdraw every pending offer for listing LST-0075."
    task = _task([goal], [Objective(kind="write", text=goal, done_words=["withdrawn", "retracted"],
                                    subject=["offer"])], "second_hand_marketplace")
    wrong, right = _reply(task, spec, "Only buyers can withdraw offers. Shall I go ahead and decline OFR-0062 and "
                          "OFR-0063?", "Shall I withdraw OFR-0062 and OFR-0063?")
    assert wrong.startswith("No, that is not what I asked for.") and goal in wrong
    assert right.startswith("Yes, please go ahead.")


def test_verb_stems_tell_forms_of_one_move_together():
    from scaleenv.env.users import _stem

    for forms in (["decline", "declined", "declining", "declines"], ["cancel", "cancelled", "cancelling"],
                  ["withdraw", "withdrawn"], ["ship", "shipped"], ["suspend", "suspended"], ["refund", "refunded"]):
        assert len({_stem(f) for f in forms}) == 1, forms
    assert _stem("decline") != _stem("delete")


def _rows(domain: str, sql: str) -> list[tuple]:
    ctx = context(domain)
    world = World.from_snapshot(ctx.spec, ctx.base)
    try:
        return world.conn.execute(sql).fetchall()
    finally:
        world.close()


def test_rentals_last_48_hours_at_the_titles_price():
    """Round 36: seeded rentals ran 39.5 hours where the tool gives 48, at a price other than the title's."""
    rows = _rows("entertainment_media_query",
                 "SELECT r.status, ROUND((julianday(r.expires_at) - julianday(r.rented_at)) * 24), r.price, t.rental_price "
                 "FROM rentals r JOIN titles t ON t.id = r.title_id")
    assert {s for s, *_ in rows} == {"active", "expired", "refunded"}
    assert all(hours == 48 for _, hours, _, _ in rows)
    assert all(price == list_price for _, _, price, list_price in rows)


def test_a_titles_rating_is_the_average_of_its_reviews():
    rows = _rows("entertainment_media_query",
                 "SELECT t.avg_rating, (SELECT ROUND(AVG(r.score), 1) FROM reviews r WHERE r.title_id = t.id) FROM titles t")
    assert sum(a is not None for a, _ in rows) >= len(rows) // 2
    assert all(a == b for a, b in rows)


def test_renting_writes_the_expiry_as_the_seeded_rows_do():
    """``rent`` wrote "2026-06-17 09:00:00" beside seeded "2026-06-17T09:00:00" (text that sorts differently)."""
    from scaleenv.tools.runtime import run_tool

    ctx = context("entertainment_media_query")
    world = World.from_snapshot(ctx.spec, ctx.base)
    try:
        tool = next(t for t in ctx.spec.tools if "INSERT INTO rentals" in " ".join(t.effects))
        profile, title = world.conn.execute(
            "SELECT p.id, t.id FROM profiles p, titles t WHERE p.status = 'active' AND p.maturity = 'adult' AND "
            "t.media_type = 'movie' AND p.wallet_balance >= t.rental_price AND NOT EXISTS (SELECT 1 FROM rentals r "
            "WHERE r.profile_id = p.id AND r.title_id = t.id AND r.status = 'active') LIMIT 1").fetchone()
        out = run_tool(world, tool, {"profile_id": profile, "title_id": title})
        assert out["expires_at"] == "2026-06-17T09:00:00" and out["rented_at"] == "2026-06-15T09:00:00"
    finally:
        world.close()


def test_seeded_records_follow_the_rules_the_tools_follow():
    """Bills are for their consultation's fee; a harvest is expected 120 days after sowing (the tool's
    rule); work is handed in by the assignment's due date and before now; an application's interviews
    are at different times; a project still in planning is due ahead."""
    assert _rows("healthcare_telemedicine", "SELECT COUNT(*) FROM bills b JOIN consultations c ON c.id = "
                 "b.consultation_id WHERE ABS(b.amount - c.fee) > 0.005") == [(0,)]
    assert _rows("agriculture_environmental", "SELECT COUNT(*) FROM plantings "
                 "WHERE expected_harvest != date(planted_on, '+120 days')") == [(0,)]
    late = _rows("online_learning", "SELECT COUNT(*), SUM(date(s.submitted_at) > a.due_date), "
                 "SUM(s.submitted_at > '2026-06-15T09:00:00') FROM submissions s JOIN assignments a "
                 "ON a.id = s.assignment_id")
    assert late[0][0] >= 20 and late[0][1:] == (0, 0)
    assert _rows("job_seeking", "SELECT COUNT(*) FROM interviews a JOIN interviews b ON a.application_id = "
                 "b.application_id AND a.id < b.id AND a.scheduled_at = b.scheduled_at WHERE a.status != 'cancelled' "
                 "AND b.status != 'cancelled'") == [(0,)]
    assert _rows("project_management", "SELECT COUNT(*) FROM projects WHERE status = 'planning' "
                 "AND due_date < '2026-06-15'") == [(0,)]


def test_staff_work_is_no_users_request():
    """job_seeking/00007: a candidate dictated the interviewer's scorecards of her own interviews."""
    jobs = context("job_seeking")
    staff = {t.name for t in jobs.spec.tools if t.meta.get("staff")}
    assert any("feedback" in n or "scorecard" in n for n in staff)
    assert not staff & {t.name for t in jobs.goal_tools}
    care = context("healthcare_telemedicine")
    moves = {t.meta.get("to") for t in care.spec.tools if t.meta.get("staff") and t.meta.get("entity") == "consultations"
             and t.meta.get("family") == "transition"}
    assert moves == {"in_progress", "completed", "no_show"}


def test_a_clubs_players_never_speak_for_themselves():
    """football/00067: "My player (Jeffrey Davis)": a player spoke as the user, where the policy verifies
    supporters and club officials."""
    from scaleenv.synth.tasks.instruction import EntityRef, is_person
    from synth_helpers import family_tasks

    spec = context("football").spec
    assert spec.meta.get("silent") == ["players"]
    player = EntityRef(table="players", singular="player", row={"id": "PLY-0001", "full_name": "Jeffrey Davis"},
                       display="full_name")
    assert not is_person(spec, player)
    names = {r[0] for r in _rows("football", "SELECT full_name FROM players")}
    tasks = family_tasks("football", "direct", 8)
    assert tasks and not any(t.user_profile.persona.removeprefix("You are ").rstrip(".") in names for t in tasks)


def test_a_member_of_staff_does_not_introduce_itself_as_a_customer():
    """football/00018: "You are a staff member looking after the club Nelson FC. I'm supporter FAN-0036; get
    me a vip ticket ..."."""
    from scaleenv.synth.tasks.instruction import Goal, speakable_phrasings

    spec = context("football").spec
    tool = next(t for t in spec.tools if any("I'm supporter" in p for p in t.meta.get("phrasings") or []))
    goal = Goal(tool, {"supporter_id": "FAN-0036", "section": "vip", "fixture_id": "FXT-0001"}, {}, None)
    said = speakable_phrasings(goal, {}, None)
    assert said and not any("I'm supporter" in p for p in said)


def test_no_offer_withdrawn_by_the_seller_of_its_listing():
    """second_hand_marketplace/00434: the seller of LST-0075 asked to "withdraw every pending offer" on it;
    withdrawing is the buyer's move (the seller declines). A record the chain picks from a list (a
    reference to a listed row, not a literal id) counts as the record it names."""
    from scaleenv.formats.task import Call
    from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder
    from scaleenv.synth.tasks.instruction import EntityRef

    ctx = context("second_hand_marketplace")
    builder = TaskBuilder(ctx, 0, 0, ChainConfig())
    conn = builder.world.conn

    def row(table: str, rid: str) -> dict:
        cur = conn.execute(f"SELECT * FROM {table} WHERE id = ?", (rid,))
        return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))

    listing, seller, offer, buyer = conn.execute(
        "SELECT l.id, l.seller_id, o.id, o.buyer_id FROM listings l JOIN offers o ON o.listing_id = l.id "
        "WHERE o.status = 'pending' AND o.buyer_id != l.seller_id LIMIT 1").fetchone()
    withdraw = next(t for t in ctx.spec.tools if t.meta.get("family") == "transition"
                    and t.meta.get("entity") == "offers" and t.meta.get("to") == "withdrawn")
    lister = next(t.name for t in ctx.spec.tools if t.kind == "read" and t.meta.get("entity") == "offers"
                  and [p.name for p in t.parameters if p.required] == ["listing_id"])
    builder.chain = [Call(tool=lister, args={"listing_id": listing}, purpose="list the offers"),
                     Call(tool=withdraw.name, args={withdraw.parameters[0].name: {"$ref": 0, "field": "id",
                                                                                   "where": {"id": offer}}},
                          purpose="goal")]
    builder.gold_outputs = [[row("offers", offer)], row("offers", offer)]
    display = ctx.spec.meta["display"]["users"]
    for user, foreign in ((seller, True), (buyer, False)):
        builder.entities = {"users": EntityRef(table="users", singular="user", row=row("users", user), display=display)}
        why = builder.foreign_actor()
        assert (why is not None) is foreign, (user, why)
        assert not foreign or f"buyer_id={buyer}" in str(why)


def test_a_condition_never_asks_beyond_what_the_record_allows():
    """email_management/00072: "if my storage used is at least 1400" on a mailbox with a quota of 1024."""
    from scaleenv.synth.tasks.families.conditional import ConditionalBuilder
    from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected

    ctx = context("email_management")
    row = {"id": "ACT-0001", "storage_used_mb": 946.46, "storage_quota_mb": 1024}
    table = next(t.name for t in ctx.spec.tables if {"storage_used_mb", "storage_quota_mb"} <= {c.name for c in t.columns})
    seen = 0
    for attempt in range(60):
        builder = ConditionalBuilder(ctx, 0, attempt, ChainConfig())
        try:
            builder.pick_condition(table, row)
        except TaskRejected:
            continue
        assert builder.test is not None
        column, threshold, _ = builder.test
        if column == "storage_used_mb":
            seen += 1
            assert threshold <= 1024, threshold
    assert seen >= 5


def test_policy_times_compare_as_times_not_text():
    """A consultation at 08:00 fourteen days from the clock's 09:00 is less than 14 days away; compared as
    text, "2026-06-29T08:00" sorted after "2026-06-29 09:00" and the rule let the cancellation through."""
    from scaleenv.tools.policy import broken_rules

    ctx = context("healthcare_telemedicine")
    cancel = next(t for t in ctx.spec.tools if t.meta.get("family") == "transition" and t.meta.get("to") == "cancelled"
                  and t.meta.get("entity") == "consultations")
    world = World.from_snapshot(ctx.spec, ctx.base)
    try:
        cid = world.conn.execute("SELECT id FROM consultations WHERE status = 'scheduled' AND mode != 'chat'").fetchone()[0]
        key = cancel.parameters[0].name
        for at, late in (("2026-06-29T08:00:00", True), ("2026-06-29T10:00:00", False)):
            world.conn.execute("UPDATE consultations SET scheduled_at = ? WHERE id = ?", (at, cid))
            names = {r.name for r in broken_rules(world, ctx.spec, cancel, {key: cid})}
            assert ("no_late_consultation_cancellation" in names) is late, at
    finally:
        world.close()


def test_play_saves_the_scored_episode(tmp_path):
    import io
    import json

    from rich.console import Console

    from scaleenv.env.play import play
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    universe = tmp_path / "u"
    cfg = BuildConfig(out=universe, domains=["pet_care"], tasks_per_domain=1, seed=0)
    prepare_out(cfg)
    run_build(cfg)
    task_id = json.loads((universe / "tasks" / "pet_care.jsonl").read_text().splitlines()[0])["id"]
    out = tmp_path / "ep" / "episode.json"
    reward = play(universe, task_id, lines=["say Hello, how can I help?", "done"], save=out,
                  console=Console(file=io.StringIO()))
    saved = json.loads(out.read_text())
    assert reward is not None and saved["reward"]["score"] == reward["score"]
    assert [m["role"] for m in saved["messages"]][-2:] == ["assistant", "user"]
    assert saved["messages"][-2]["content"] == "Hello, how can I help?"


# play round 38 (seed 9696)

def test_requests_are_joined_in_no_order_of_time():
    """football/00065: "put the fixture back on the schedule. Then, please cancel ticket TKT-0084": the refund
    is allowed only while the fixture is postponed, so it must come first, against the user's "Then"."""
    from scaleenv.synth.tasks.instruction import CONNECTORS
    from synth_helpers import family_tasks

    assert not any(w in c for c in CONNECTORS for w in ("Then", "After", "Finally"))
    tasks = [t for fam in ("waived", "enabled") for t in family_tasks("football", fam, 3)]
    assert any(t.ordered for t in tasks)
    assert not any("Then," in t.instruction or "After that," in t.instruction for t in tasks)


def test_no_request_names_a_record_the_request_itself_creates():
    """pet_care/00080: "use 60 of my loyalty points on invoice INV-0062", one of three invoices the same request
    asked to create: the user cannot know the id, and which invoice got it depended on the order made."""
    from scaleenv.formats.task import Call
    from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder

    ctx = context("pet_care")
    builder = TaskBuilder(ctx, 0, 0, ChainConfig())
    create = next(t for t in ctx.spec.tools if t.meta.get("family") == "create" and t.meta.get("entity") == "invoices")
    pay = next(t for t in ctx.spec.tools if t.kind == "write" and t.meta.get("family") != "create"
               and any(p.name == "invoice_id" for p in t.parameters))
    builder.chain = [Call(tool=create.name, args={}, purpose="goal"),
                     Call(tool=pay.name, args={"invoice_id": "INV-0099"}, purpose="goal")]
    builder.gold_outputs = [{"id": "INV-0099"}, {"id": "INV-0099"}]
    assert "INV-0099" in str(builder.created_id_named())
    builder.gold_outputs = [{"id": "INV-0100"}, {"id": "INV-0099"}]
    assert builder.created_id_named() is None


def test_a_question_about_a_unit_column_is_answered():
    """pet_care/00080: "What are Oscar's weight and breed?" got only the breed: the fact is "weight kg"."""
    from scaleenv.env.vocabulary import Vocabulary

    vocab = Vocabulary(context("pet_care").spec, ["breed", "weight kg", "birth date"])
    assert vocab.asked("What are Oscar's weight and breed?", "") == ["breed", "weight kg"]


def test_the_answer_to_the_users_question_is_not_a_wrong_fact():
    """pet_care/00080: "Pip's birth date is 2019-03-02" (the answer the user asked for) got "No, that is not right:
    The birth date is 2015-05-13" (the new pet Oscar's). A wrong date in a confirmation still gets a no."""
    spec = context("pet_care").spec
    register = "I'd like to register my new reptile Oscar."
    question = "I'd like to know the birth date for my pet Pip."
    task = Task.model_validate({
        "id": "pet_care/00000", "domain": "pet_care", "instruction": "x", "initial_patch": {}, "gold_chain": [],
        "tools": [], "difficulty": {}, "verification": {},
        "user_profile": {"persona": "You are Molly Quinn.", "goals": [register, question],
                         "known": {"birth date": "2015-05-13", "name": "Oscar", "pet name": "Pip"},
                         "identity": [], "objectives": [
                             Objective(kind="write", text=register, done_words=["registered"], subject=["pet"]).model_dump(),
                             Objective(kind="read", text=question, asks=["birth date"]).model_dump()]},
    })
    answer, wrong = _reply(task, spec, "Pip's birth date is 2019-03-02. Shall I now register Oscar?",
                           "Shall I register Oscar with birth date 2016-01-01?")
    assert answer.startswith("Yes, please go ahead.")
    assert wrong.startswith("No, that is not right") and "2015-05-13" in wrong


def test_a_clinicians_and_a_laboratorys_work_is_no_patients_request():
    """healthcare_telemedicine/00293: a patient set its own lab results ("Pena months") and prescribed itself an
    inhaler. Staff's work, moves and columns alike, is no goal."""
    ctx = context("healthcare_telemedicine")
    staff = {t.name for t in ctx.spec.tools if t.meta.get("staff")}
    goals = {t.name for t in ctx.goal_tools}
    assert not staff & goals
    assert {t.meta.get("column") for t in ctx.spec.tools if t.name in staff and t.meta.get("family") == "update"} \
        == {"clinical_notes", "result"}
    assert not any(t.meta.get("entity") == "lab_orders" and t.meta.get("family") == "create" for t in ctx.spec.tools)
    assert any(t.meta.get("entity") == "bills" for t in ctx.goal_tools)  # paying a bill is still the patient's


def test_a_phrasings_noun_may_be_any_name_of_the_entity():
    """project_management/00032: "Ticket the task Migrate billing tables (...) is stuck": "ticket" is a name of
    the task entity, so the description drops its own noun after it."""
    from scaleenv.synth.tasks.instruction import EntityRef, _nouns

    spec = context("project_management").spec
    task = EntityRef(table="tasks", singular="task", row={"id": "TSK-0001", "title": "Migrate billing tables"},
                     display="title")
    assert {"ticket", "issue", "task"} <= _nouns(task, spec)


# play round 39 (seed 1212)

def test_a_bulk_request_says_they_of_its_records():
    """healthcare_telemedicine/00048: "discontinue every active prescription ..., them gives me side effects"."""
    from scaleenv.synth.tasks.families.bulk import plural_it

    assert plural_it("Please discontinue prescription {x}, it gives me side effects.") == \
        "Please discontinue prescription {x}, they give me side effects."
    assert plural_it("Cancel it, it's no longer needed.") == "Cancel them, they're no longer needed."
    assert plural_it("It is obsolete, please archive it.") == "They are obsolete, please archive them."
    # "it" after a preposition is no subject, whatever verb follows
    assert plural_it("The blocker on it is gone, move it back.") == "The blocker on them is gone, move them back."


def test_a_policy_explanation_reports_nothing_done():
    """pet_care/00036: "Our policy does not allow an appointment to be cancelled less than 14 days before it is
    scheduled" reported the refused cancellation and a booking ("scheduled") done; the user left mid-question."""
    from scaleenv.env.judge import Progress

    progress = Progress([Objective(kind="write", text="Book Mochi with VET-0008.", done_words=["booked", "scheduled"],
                                   subject=["appointment"])])
    progress.update("Our policy does not allow an appointment to be cancelled less than 14 days before it is "
                    "scheduled, and this one is today.")
    assert progress.done == [False]
    progress.update("Done: the appointment for Mochi is booked as APT-0085.")
    assert progress.done == [True]


def test_a_cloned_bill_takes_its_consultations_fee():
    """Round 40 (healthcare_telemedicine/00161): eight bills of one consultation, at amounts other than its fee
    (look-alikes cloned from other consultations' bills). A row that breaks a rule comparing it with its parent
    is mended by taking the parent's value."""
    from scaleenv.synth.tasks.state import mend_rows

    ctx = context("healthcare_telemedicine")
    world = World.from_snapshot(ctx.spec, ctx.base)
    try:
        cur = world.conn.execute("SELECT * FROM bills LIMIT 1")
        bill = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
        other, fee = world.conn.execute("SELECT id, fee FROM consultations WHERE status IN ('completed', 'in_progress') "
                                        "AND ABS(fee - ?) > 1 AND scheduled_at <= ? LIMIT 1",
                                        (bill["amount"], bill["issued_on"] + "T23:59")).fetchone()
        clone = {**bill, "id": "BIL-0999", "consultation_id": other}
        assert mend_rows(world, "bills", [clone], random.Random(0)) >= 1
        assert clone["amount"] == fee and clone["consultation_id"] == other
    finally:
        world.close()

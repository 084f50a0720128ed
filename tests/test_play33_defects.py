"""Play rounds 33 (seed 4747) and 34 (seed 5151): the data and user-language defects the players found,
each kept fixed.

wedding planning: a couple's bookings and contracts exceeded its budget (62,382 against 27,160), and the
budget could be set below what is committed; online learning: enrollments had progress (even completed)
in courses that had not started, and work still awaiting a grade had a score; e-mail: look-alike
mailboxes used three times their quota; pet care: transferring a pet cancelled appointments that the
policy forbids cancelling so late; the user said "My declared's value is 252.97" and "The rental's price
is 2.99" (a show's rental price, not a rental's)."""

from __future__ import annotations

import sqlite3

from scaleenv.env.vocabulary import Vocabulary
from scaleenv.tools.runtime import execute_tool
from scaleenv.world.world import World
from synth_helpers import context


def rows(domain: str, sql: str) -> list:
    conn = sqlite3.connect(":memory:")
    conn.deserialize(context(domain).base)
    return conn.execute(sql).fetchall()


COMMITTED = ("(SELECT COALESCE(SUM(b.total_price), 0) FROM venue_bookings b WHERE b.couple_id = c.id "
             "AND b.status != 'cancelled') + (SELECT COALESCE(SUM(v.amount), 0) FROM vendor_contracts v "
             "WHERE v.couple_id = c.id AND v.status != 'cancelled')")


def test_a_couples_commitments_stay_within_its_budget():
    assert rows("wedding_planning", f"SELECT c.id FROM couples c WHERE {COMMITTED} > c.budget + 0.005") == []
    assert rows("wedding_planning", f"SELECT 1 FROM couples c WHERE {COMMITTED} > 0.5 * c.budget") != []
    assert rows("wedding_planning", "SELECT id FROM vendor_contracts WHERE status = 'draft' "
                                    "AND service_date < '2026-06-15'") == []


def test_the_budget_cannot_be_set_below_what_is_committed_nor_a_venue_booked_over_it():
    ctx = context("wedding_planning")
    world = World.from_snapshot(ctx.spec, ctx.base)
    couple, committed = world.conn.execute(
        f"SELECT c.id, {COMMITTED} AS k FROM couples c ORDER BY k DESC LIMIT 1").fetchone()
    update = next(t for t in ctx.spec.tools if t.meta.get("family") == "update" and t.meta.get("column") == "budget")
    key, value = (p.name for p in update.parameters)
    low = execute_tool(world, update, {key: couple, value: round(committed / 2, 2)})
    assert not low.ok and low.error == "rule_commitments_within_budget"
    assert execute_tool(world, update, {key: couple, value: round(committed + 10, 2)}).ok
    book = next(t for t in ctx.spec.tools if t.name in ("book_venue", "reserve_venue"))
    venue, rate = world.conn.execute("SELECT id, daily_rate FROM venues WHERE capacity >= 30 "
                                     "ORDER BY daily_rate DESC LIMIT 1").fetchone()
    assert rate > 10
    over = execute_tool(world, book, {"couple_id": couple, "venue_id": venue, "event_date": "2027-05-01", "guest_count": 30})
    assert not over.ok and over.error == "over_budget"


def test_progress_and_scores_come_only_when_they_can():
    assert rows("online_learning", "SELECT e.id FROM enrollments e JOIN courses c ON c.id = e.course_id "
                                   "WHERE e.progress_pct > 0 AND c.start_date > '2026-06-15'") == []
    assert rows("online_learning", "SELECT 1 FROM enrollments WHERE status = 'completed'") != []
    assert rows("online_learning", "SELECT id FROM submissions WHERE status != 'graded' AND score != 0") == []
    assert rows("online_learning", "SELECT 1 FROM submissions WHERE status = 'graded' AND score > 0") != []


def test_mail_stays_near_its_quota_in_every_world():
    spec = context("email_management").spec
    rule = next(i for i in spec.invariants if i.name == "accounts.storage_near_quota")
    assert rule.table == "accounts"
    assert rows("email_management", "SELECT id FROM accounts WHERE storage_used_mb > 1.2 * storage_quota_mb") == []


def test_a_transferred_pet_keeps_its_appointments():
    ctx = context("pet_care")
    world = World.from_snapshot(ctx.spec, ctx.base)
    pet, owner = world.conn.execute(
        "SELECT p.id, p.owner_id FROM pets p JOIN appointments a ON a.pet_id = p.id "
        "WHERE p.status = 'active' AND a.status = 'scheduled' ORDER BY p.id LIMIT 1").fetchone()
    other = world.conn.execute("SELECT id FROM owners WHERE id != ? ORDER BY id LIMIT 1", (owner,)).fetchone()[0]
    before = world.conn.execute("SELECT id, status FROM appointments WHERE pet_id = ? ORDER BY id", (pet,)).fetchall()
    tool = next(t for t in ctx.spec.tools if t.name in ("transfer_pet", "change_pet_owner"))
    assert execute_tool(world, tool, {"pet_id": pet, "new_owner_id": other}).ok
    assert world.conn.execute("SELECT owner_id FROM pets WHERE id = ?", (pet,)).fetchone()[0] == other
    assert world.conn.execute("SELECT id, status FROM appointments WHERE pet_id = ? ORDER BY id", (pet,)).fetchall() == before


def test_a_parameters_own_name_is_said_whole():
    express = Vocabulary(context("express_logistics").spec, ["declared value", "customer email"])
    assert express.statement("declared value", "252.97") == "The declared value is 252.97."
    assert express.statement("customer email", "a@b.c") == "My customer's email is a@b.c."
    media = Vocabulary(context("entertainment_media_query").spec, ["rental price", "release year"])
    assert media.statement("rental price", "2.99") == "The rental price is 2.99."
    assert media.statement("release year", "1999") == "The release year is 1999."


def test_the_express_identity_rule_names_the_courier_too():
    policy = context("express_logistics").spec.policy
    assert policy is not None
    text = next(r.text for r in policy.rules if r.kind == "identity")
    assert "courier" in text and "customer" in text


def test_a_bulk_request_names_no_one_member_of_its_set():
    """project_management/00054: "close every medium-priority task" came with the withheld fact "task title:
    Set up alerting", which the user then gave as if it said which task it meant."""
    from collections import Counter

    from synth_helpers import family_tasks

    checked = 0
    for domain in ("project_management", "pet_care"):
        spec = context(domain).spec
        for task in family_tasks(domain, "bulk", 4):
            tool = Counter(c.tool for c in task.gold_chain).most_common(1)[0][0]  # the write made on every member
            singular = context(domain).singular(spec.tool(tool).meta["entity"]).replace("_", " ")
            named = [f for f in task.user_profile.known if f.startswith(singular + " ") and not f.endswith(" id")]
            assert named == [], (task.id, named)
            checked += 1
    assert checked >= 4


def test_a_phrasing_that_asks_in_its_own_words_gets_no_second_request():
    """knowledge_management/00227: "take it down and put it back into draft, it has errors; please mark it
    draft" said the request twice."""
    from scaleenv.synth.procedural.derive import with_request

    said = "Take article {article_id} down and put it back into draft, it has errors."
    assert with_request(said, "draft") == said
    assert with_request("Order {order_id} just left the warehouse.", "shipped").endswith("; please mark it shipped.")


def test_round_34_data_rules():
    """Play round 34 (seed 5151): a confirmed venue booking three days past its event date (is the 9-month
    rule about it?), one student's eight submissions to one assignment, a sprint running after its
    project's due date."""
    assert rows("wedding_planning", "SELECT id FROM venue_bookings WHERE status IN ('held', 'confirmed') "
                                    "AND event_date < '2026-06-15'") == []
    assert rows("wedding_planning", "SELECT 1 FROM venue_bookings WHERE status = 'confirmed'") != []
    assert rows("online_learning", "SELECT 1 FROM submissions GROUP BY assignment_id, student_id HAVING COUNT(*) > 1") == []
    assert rows("project_management", "SELECT s.id FROM sprints s JOIN projects p ON p.id = s.project_id "
                                      "WHERE s.end_date > p.due_date") == []


def test_round_35_data_rules():
    """Play round 35 (seed 6262): PG-13 titles on a kids profile's watchlist, corn sown after corn on one
    field, a completed project still running a sprint; and signed wedding contracts whose day has come
    (``mark_fulfilled`` needs one)."""
    assert rows("entertainment_media_query", "SELECT w.id FROM watchlist_items w JOIN profiles p ON p.id = w.profile_id "
                "JOIN titles t ON t.id = w.title_id WHERE w.status != 'dropped' AND p.maturity = 'kids' "
                "AND t.age_rating NOT IN ('G', 'PG')") == []
    assert rows("entertainment_media_query", "SELECT 1 FROM watchlist_items w JOIN profiles p ON p.id = w.profile_id "
                                             "WHERE p.maturity = 'kids'") != []
    assert rows("agriculture_environmental", "SELECT a.id FROM plantings a JOIN plantings b ON b.field_id = a.field_id "
                "AND b.crop = a.crop AND b.id != a.id WHERE NOT EXISTS (SELECT 1 FROM plantings m WHERE "
                "m.field_id = a.field_id AND (m.planted_on, m.id) > (a.planted_on, a.id) "
                "AND (m.planted_on, m.id) < (b.planted_on, b.id)) AND (b.planted_on, b.id) > (a.planted_on, a.id)") == []
    assert rows("agriculture_environmental", "SELECT 1 FROM plantings GROUP BY field_id HAVING COUNT(*) > 2") != []
    assert rows("project_management", "SELECT s.id FROM sprints s JOIN projects p ON p.id = s.project_id "
                "WHERE s.status IN ('planned', 'active') AND p.status IN ('completed', 'cancelled')") == []
    assert rows("wedding_planning", "SELECT 1 FROM vendor_contracts WHERE status = 'signed' AND service_date <= '2026-06-15'") != []


def test_a_long_task_gets_the_turns_its_gold_chain_needs_by_default():
    """A 16-call wedding task said one request at a time ran out of the default 30 agent actions and scored
    the oracle 0 in a rollout: by default an episode gets twice the gold chain plus 10 (never under 30),
    and an explicit limit is kept."""
    from scaleenv.env.cache import build_worlds, make_episode
    from scaleenv.env.core import DEFAULT_MAX_TURNS, Mode, ToolEnv, run_sync, turns_for
    from scaleenv.env.loop import run_episode
    from scaleenv.env.policies import make_agent
    from scaleenv.env.users import ScriptedUser
    from synth_helpers import family_tasks

    ctx = context("wedding_planning")
    long_tasks = [t for t in family_tasks("wedding_planning", "long", 6) if len(t.gold_chain) >= 12]
    assert long_tasks
    task = max(long_tasks, key=lambda t: len(t.gold_chain))
    assert turns_for(task, None) == 2 * len(task.gold_chain) + 10 > DEFAULT_MAX_TURNS
    assert turns_for(task, 6) == 6
    short = family_tasks("wedding_planning", "direct", 1)[0]
    assert turns_for(short, None) == DEFAULT_MAX_TURNS
    scores = {}
    for limit in (DEFAULT_MAX_TURNS, None):  # the noisy oracle at full skill reports after each step
        ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
        env = ToolEnv(task, ep, user=ScriptedUser(), mode=Mode.CONVERSATIONAL, max_turns=limit, release=lambda _: None)
        scores[limit] = run_sync(run_episode(env, make_agent("noisy:1.0"), seed=0)).score
    assert scores[None] == 1.0
    assert task.user_profile.gradual <= (scores[DEFAULT_MAX_TURNS] == 0.0)  # told one request at a time, 30 was too few


def test_round_36_a_scenes_lights_and_a_messages_attachments():
    """Play round 36 (seed 7373): "disable every scene ... that is on for now" could mean enabled scenes or
    scenes with their lights on, and the user could not say which; a 2377 KB message carried 5487 KB of
    attachments."""
    from scaleenv.formats.domain import Column
    from scaleenv.synth.tasks.families.selection import qualified

    assert qualified("scene", Column(name="light_power", enum=["on", "off"]), "on") == "scene with the light power on"
    assert qualified("light", Column(name="power", enum=["on", "off"]), "off") == "light that is off"
    assert rows("email_management", "SELECT m.id FROM messages m JOIN attachments a ON a.message_id = m.id "
                                    "GROUP BY m.id HAVING SUM(a.size_kb) > MAX(m.size_kb)") == []
    assert rows("email_management", "SELECT 1 FROM attachments GROUP BY message_id HAVING COUNT(*) > 1") != []


def test_round_36_a_clinician_holds_one_consultation_at_a_time_past_ones_too():
    """Play round 36 (healthcare_telemedicine/00077): three completed consultations of one clinician at
    2026-02-07T17:00 (look-alikes); the rule covered scheduled ones only."""
    assert rows("healthcare_telemedicine", "SELECT clinician_id, scheduled_at FROM consultations WHERE status != 'cancelled' "
                                           "GROUP BY clinician_id, scheduled_at HAVING COUNT(*) > 1") == []
    spec = context("healthcare_telemedicine").spec
    rule = next(i for i in spec.invariants if i.name == "consultations.clinician_not_double_booked")
    assert "cancelled" in (rule.when or "") and "scheduled" not in (rule.when or "")

"""The ``screened`` family (a bulk request that the policy screens one record out of) and users who
press once before accepting a refusal (issue 15: tasks that need judgement)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from functools import cache

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.judge import says_cannot
from scaleenv.env.user_prompt import user_prompt
from scaleenv.env.users import ScriptedUser, UserContext
from scaleenv.formats.domain import PolicyRule
from scaleenv.formats.task import REFUSAL_FACT, Task
from scaleenv.formats.trajectory import STOP
from scaleenv.synth.tasks.families import DEFAULT_MIX, FAMILIES, generate_task
from scaleenv.synth.tasks.families.refusal import PUSHBACKS
from scaleenv.synth.tasks.families.screened import ScreenedBuilder, row_rules, screened_program
from scaleenv.synth.tasks.gates import run_gates, score_policy
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.synth.tasks.validity import contradicting_requests
from scaleenv.tools.chain import resolve_args
from scaleenv.tools.policy import broken_rules
from scaleenv.tools.runtime import run_tool
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context

DOMAINS = ("fitness_club", "pet_care")


@cache
def screened_tasks(domain: str, n: int = 3) -> tuple[Task, ...]:
    ctx = context(domain)
    out, attempt = [], 0
    while len(out) < n and attempt < 30 * n:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, 0, attempt, ChainConfig(family_mix={"screened": 1.0})))
        attempt += 1
    return tuple(out)


def initial_world(domain: str, task: Task) -> World:
    ctx = context(domain)
    world = World.from_snapshot(ctx.spec, ctx.base)
    apply_patch(world, task.initial_patch)
    return world


def resolved(domain: str, task: Task) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    """The gold chain's goal calls and the forbidden calls, their arguments resolved on the initial world."""
    ctx = context(domain)
    world = initial_world(domain, task)
    outputs, goals = [], []
    for i, call in enumerate(task.gold_chain):
        tool = ctx.spec.tool(call.tool)
        args = resolve_args(call, outputs, i)
        if call.purpose == "goal":
            goals.append((call.tool, args))
        outputs.append(run_tool(world, tool, args))
    refused = [(c.tool, resolve_args(c, outputs, len(outputs))) for c in task.forbidden]
    return goals, refused


@pytest.mark.parametrize("domain", DOMAINS)
def test_screened_tasks_pass_every_gate_and_the_naive_request_scores_zero(domain):
    ctx = context(domain)
    tasks = screened_tasks(domain)
    assert len(tasks) == 3, domain
    for task in tasks:
        assert task.family == "screened" and task.difficulty.tier in ("hard", "expert")
        # one record screened out, two at the expert tier (each a forbidden call on its own record)
        assert len(task.forbidden) == (2 if task.difficulty.tier == "expert" else 1), task.id
        assert all(c.purpose == task.forbidden[0].purpose for c in task.forbidden)
        assert task.forbidden[0].purpose.startswith("refused: ")
        assert [f.name for f in task.answer_facts].count(REFUSAL_FACT) == 1  # the reason is said once
        ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
        assert run_gates(ep, task, 0).passed, task.id
        assert score_policy(ep, task, "oracle").score == 1.0
        assert score_policy(ep, task, "naive").score == 0.0  # "every" taken literally breaks the policy
        reason = next(f for f in task.answer_facts if f.name == REFUSAL_FACT)
        assert reason.value in (ctx.spec.policy.rules[i].reason for i in range(len(ctx.spec.policy.rules)))


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_screened_record_breaks_the_rule_and_every_acted_on_record_keeps_it(domain):
    ctx = context(domain)
    for task in screened_tasks(domain):
        world = initial_world(domain, task)
        goals, refused = resolved(domain, task)
        tool_name = refused[0][0]
        assert {t for t, _ in refused} == {tool_name}
        tool = ctx.spec.tool(tool_name)
        rule = task.forbidden[0].purpose.removeprefix("refused: ")
        focus = ctx.focus(tool)[0]
        same = [a for t, a in goals if t == tool_name]
        assert len(same) >= 2  # at least two records are changed besides the screened ones
        assert all(not broken_rules(world, ctx.spec, tool, a) for a in same)
        assert len({args[focus] for _, args in refused}) == len(refused)  # distinct screened records
        program = task.verification.program
        picked = [r[0] for r in world.conn.execute(program["sql"], program["params"])]
        for _, args in refused:
            assert rule in [r.name for r in broken_rules(world, ctx.spec, tool, args)]
            assert args[focus] not in {a[focus] for a in same}
            assert args[focus] not in picked
        # the program is the condition with the rule negated: it picks exactly the acted-on records
        assert sorted(picked) == sorted(a[focus] for a in same) == sorted(program["ids"])


def test_screened_program_negates_the_rule_on_the_outer_record():
    conn = sqlite3.connect(":memory:")
    conn.executescript("CREATE TABLE s (id TEXT, member_id TEXT, status TEXT, starts_at TEXT);"
                       "INSERT INTO s VALUES ('a', 'm', 'booked', '2026-06-20'), ('b', 'm', 'booked', '2026-07-20'),"
                       "('c', 'm', 'done', '2026-07-20'), ('d', 'x', 'booked', '2026-07-20');")
    rule = PolicyRule(name="late", kind="eligibility", text="No late cancelling.", reason="less than 14 days",
                      tools=["cancel"], forbid="SELECT starts_at < date(:today, '+14 days') FROM s WHERE id = :sid")
    bulk = 'SELECT "id" FROM "s" WHERE "member_id" = :parent AND "status" = :value ORDER BY "id"'
    sql = screened_program(bulk, rule, "sid", "id")
    rows = conn.execute(sql, {"parent": "m", "value": "booked", "today": "2026-06-15"}).fetchall()
    assert rows == [("b",)]  # 'a' is screened out (6 days away), 'c' is not booked, 'd' is someone else's
    assert 'FROM "s"' in sql  # the audit finds the program's table by it


def test_rules_over_a_linked_record_are_screened_by_moving_the_link():
    """A rule that reads the flight of a reservation is screened by the link: the screened record takes
    a donor's flight (and the donor's own values with it); rules over the record's own values move those."""
    ctx = context("airline")
    rules = row_rules(ctx, ctx.spec.tool("cancel_booking_with_refund"))
    # the exception ("unless it has travel insurance") reads the reservation's own column: it moves too
    assert [(r.name, cols) for r, cols in rules] == [("no_late_cancellation", {"flight_id", "insurance"})]
    ctx = context("fitness_club")
    rules = row_rules(ctx, ctx.spec.tool("cancel_personal_training"))
    assert [(r.name, cols) for r, cols in rules] == [("no_late_pt_cancellation", {"starts_at"})]


def test_a_screened_trip_booking_is_on_a_tour_that_starts_too_soon():
    """travel_agency's rule reads the tour package of a booking: the agent must look up each booking's
    tour to tell which one it may not cancel; the cancelled ones start later."""
    tasks = [t for t in screened_tasks("travel_agency", 4)
             if any(c.purpose == "refused: no_late_trip_cancellation" for c in t.forbidden)]
    assert tasks
    for task in tasks:
        goals, refused = resolved("travel_agency", task)
        world = initial_world("travel_agency", task)
        try:
            soon = world.conn.execute("SELECT date(?, '+30 days')", (world.clock[:10],)).fetchone()[0]

            def start(booking: str, world: World = world) -> str:
                return world.conn.execute("SELECT p.start_date FROM trip_bookings b JOIN tour_packages p "
                                          "ON p.id = b.package_id WHERE b.id = ?", (booking,)).fetchone()[0]

            cancelled = [a["booking_id"] for tool, a in goals if tool == "cancel_trip_booking"]
            assert cancelled and all(start(b) >= soon for b in cancelled), task.id
            assert refused and all(start(a["booking_id"]) < soon for _, a in refused), task.id
        finally:
            world.close()


def test_the_same_request_on_another_record_is_no_contradiction():
    """Each cancelled session's refund lands on the member's balance: the refused one would too, which
    makes it the same request on another record, not an alternative move."""
    ctx = context("fitness_club")
    for task in screened_tasks("fitness_club"):
        assert contradicting_requests(ctx.spec, initial_world("fitness_club", task).snapshot(), task.gold_chain,
                                      task.forbidden) == []


def test_the_default_mix_holds_the_family():
    assert DEFAULT_MIX["screened"] > 0 and FAMILIES["screened"] is ScreenedBuilder
    assert ScreenedBuilder.tiers == ("hard", "expert")


# --- users who press before accepting a refusal --------------------------------------------------------------------

def _user(task: Task) -> ScriptedUser:
    ctx = context(task.domain)
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=None, max_turns=20, spec=ctx.spec))
    asyncio.run(user.opening())
    return user


def _pressing(task: Task) -> Task:
    return task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"pushback": PUSHBACKS[1]})})


def test_a_pressing_user_pushes_back_once_then_accepts():
    task = _pressing(screened_tasks("fitness_club")[0])
    user = _user(task)
    refusal = "I cannot cancel that session: it starts less than 14 days from now."
    first = asyncio.run(user.reply(refusal))
    assert first.startswith(PUSHBACKS[1]) and STOP not in first
    second = asyncio.run(user.reply(refusal))
    assert PUSHBACKS[1] not in second  # a second no is accepted


def test_a_user_without_pushback_does_not_press():
    task = screened_tasks("fitness_club")[0].model_copy(deep=True)
    task.user_profile.pushback = ""
    reply = asyncio.run(_user(task).reply("I cannot cancel that session: it starts less than 14 days from now."))
    assert not any(p in reply for p in PUSHBACKS)


def test_pushback_is_said_alone_and_the_next_confirmation_gets_its_answer():
    task = _pressing(screened_tasks("fitness_club")[0])
    user = _user(task)
    assert PUSHBACKS[1] not in asyncio.run(user.reply("Could you tell me your e-mail address?"))
    asked = "I cannot cancel PTS-0053, it starts in less than 14 days. Shall I go ahead with the others?"
    assert asyncio.run(user.reply(asked)) == PUSHBACKS[1]  # no yes in the same breath as the plea
    assert "Yes, please go ahead." in asyncio.run(user.reply("I am sorry, the rule holds. Shall I go ahead with the others?"))


def test_says_cannot_reads_statements_not_questions():
    assert says_cannot("Sorry, I can't do that: it is less than 14 days away.")
    assert not says_cannot("Can't you find it under my e-mail?")
    assert not says_cannot("Your session was cancelled.")


def test_the_llm_user_and_the_tau2_export_are_told_to_press():
    task = _pressing(screened_tasks("fitness_club")[0])
    assert PUSHBACKS[1] in user_prompt(task)
    assert PUSHBACKS[1] not in user_prompt(task.model_copy(update={"user_profile": task.user_profile.model_copy(
        update={"pushback": ""})}))
    dumped = task.model_dump(mode="json")
    assert dumped["user_profile"]["pushback"] == PUSHBACKS[1]
    plain = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"pushback": ""})})
    assert "pushback" not in plain.model_dump(mode="json")["user_profile"]  # older files round-trip unchanged


def test_generated_hard_refusals_carry_pushback_in_about_half():
    tasks = [t for d in DOMAINS for t in screened_tasks(d)]
    ctx = context("pet_care")
    for attempt in range(40):
        with contextlib.suppress(TaskRejected):
            tasks.append(generate_task(ctx, 0, attempt, ChainConfig(family_mix={"partial": 1.0})))
    pressing = [t for t in tasks if t.user_profile.pushback]
    assert pressing and len(pressing) < len(tasks)
    assert all(t.user_profile.pushback in PUSHBACKS and t.difficulty.tier in ("hard", "expert") for t in pressing)


# --- play round 15: requests about a set of records -----------------------------------------------------------------

def test_a_phrasing_whose_slot_is_the_subject_of_a_singular_verb_is_not_said_of_a_set():
    from scaleenv.synth.tasks.families.phrasing import _fits_a_set

    assert not _fits_a_set("Ticket {task_id} is stuck waiting on another team, mark it blocked.", {"task_id"})
    assert not _fits_a_set("Remove {post_id} for good, it breaks the rules.", {"post_id"})  # "them breaks"
    # play round 24: "Each of them can't make them, please record that they declined"
    assert not _fits_a_set("Guest {guest_id} can't make it, please record that they declined.", {"guest_id"})
    assert _fits_a_set("Cancel reservation {rental_id}.", {"rental_id"})
    assert _fits_a_set("Mark {task_id} as done.", {"task_id"})


def test_a_set_is_said_without_the_phrasings_record_noun_and_with_a_plural_verb():
    texts = []
    ctx = context("social_media_messaging")
    for attempt in range(25):
        with contextlib.suppress(TaskRejected):
            texts += generate_task(ctx, 0, attempt, ChainConfig(family_mix={"bulk": 1.0})).user_profile.goals
    said = [t for t in texts if "every " in t]
    assert said
    assert not [t for t in said if re.search(r"\bfollow request every\b|\bthem (is|breaks)\b|so that it is", t)]


def test_a_state_said_of_a_record_reports_no_change():
    """Play round 16: "FXT-0054 (scheduled)" and "four scheduled fixtures" made the user count a
    purchase and a postponement done, and end the chat before it said yes."""
    from scaleenv.env.judge import Progress
    from scaleenv.formats.task import Objective

    goals = [Objective(kind="write", text="Buy a ticket.", done_words=["purchased"], subject=["fixture", "match"]),
             Objective(kind="write", text="Postpone it.", done_words=["postponed"], subject=["fixture", "match"])]
    progress = Progress(goals)
    progress.update("I found the home fixture against Northgate Athletic: FXT-0054 (scheduled). The club has four "
                    "scheduled fixtures against Northgate Athletic. Its status: scheduled.")
    assert progress.done == [False, False]
    progress.update("The ticket for the fixture was purchased.")
    assert progress.done[0]


@pytest.mark.parametrize("name", ["email_management", "social_media_messaging", "project_management"])
def test_no_rule_offers_another_move(name):
    """A rule that says what would be allowed instead ("it can only be hidden") invites an offer the user then
    accepts, and the expected state has no such change."""
    for rule in context(name).spec.policy.rules:
        assert not re.search(r"\bonly\b.*\b(can|be)\b|\binstead\b", rule.text), rule.text


@pytest.mark.parametrize("domain", DOMAINS)
def test_expert_screened_tasks_screen_two_records(domain):
    ctx = context(domain)
    out, attempt = [], 0
    while len(out) < 2 and attempt < 90:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, 0, attempt, ChainConfig(family_mix={"screened": 1.0},
                                                                  tier_mix={"expert": 1.0})))
        attempt += 1
    assert out, domain
    for task in out:
        assert task.difficulty.tier == "expert" and len(task.forbidden) == 2, task.id
        ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
        assert score_policy(ep, task, "oracle").score == 1.0
        assert score_policy(ep, task, "naive").score == 0.0


def test_a_report_of_a_change_that_quotes_a_rule_gets_no_pushback():
    """Play round 22: "Your phone is now 555-...; a session cannot be cancelled less than 14 days ahead,
    but that was not asked" got the plea. A message that reports a change done is no refusal; the refusal
    itself still gets it."""
    from synth_helpers import family_tasks

    task = _pressing(family_tasks("fitness_club", "partial", 2)[0])
    write = next(o for o in task.user_profile.objectives if o.kind == "write")
    user = _user(task)
    report = f"Done: the {write.subject[0]}'s phone is now updated. A session cannot be cancelled less than 14 days ahead."
    assert PUSHBACKS[1] not in asyncio.run(user.reply(report))
    assert asyncio.run(user.reply("I cannot cancel that session: it starts in less than 14 days.")) == PUSHBACKS[1]

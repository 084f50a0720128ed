"""The simulated user says no to what it did not ask for, names the record it means when asked which
one, and does not introduce itself twice; the user prompt of the LLM user says the same."""

from __future__ import annotations

import re

import pytest

from scaleenv.env.user_prompt import user_prompt
from scaleenv.env.users import NO_ALTERNATIVE
from scaleenv.env.vocabulary import Vocabulary
from scaleenv.synth.tasks.instruction import drop_self_introduction
from synth_helpers import context, family_tasks, scripted_reply


def _task(name: str = "pet_care"):
    tasks = family_tasks(name, "direct", 6)
    assert tasks
    return tasks[0]


def test_an_offer_of_something_else_after_a_refusal_gets_a_no():
    spec = context("pet_care").spec
    task = _task()
    offer = "I'm sorry, I can't do that under our policy. Would you like me to cancel the appointment instead?"
    reply = scripted_reply(task, spec, offer)
    assert reply.startswith(NO_ALTERNATIVE), reply
    assert "Yes, please go ahead." not in reply


def test_a_plain_confirmation_still_gets_a_yes():
    spec = context("pet_care").spec
    task = _task()
    # no refusal before it: "instead" alone is no offer of something else (the user may have asked for a swap)
    for text in ("Shall I go ahead with that?", "Would you like me to use the new date instead of the old one?"):
        reply = scripted_reply(task, spec, text)
        assert reply.startswith("Yes, please go ahead."), (text, reply)


@pytest.mark.parametrize("name", ["pet_care", "football", "library_services"])
def test_which_one_questions_get_what_the_user_knows_of_that_record(name):
    spec = context(name).spec
    checked = 0
    for task in family_tasks(name, "direct", 6):
        known = dict(task.user_profile.known)
        vocab = Vocabulary(spec, list(known))
        for fact, value in known.items():
            nouns = vocab.pairs[fact][0]
            if fact.endswith(" id") or not nouns or not isinstance(value, str | int | float):
                continue
            for question in (f"I found two of them. Which {nouns[0]} do you mean?",
                             f"I see more than one {nouns[0]} like that. Which one do you mean?"):
                reply = scripted_reply(task, spec, question)
                assert "I don't know" not in reply, (task.id, fact, question, reply)
                assert str(value).replace(",", "") in reply.replace(",", ""), (task.id, fact, question, reply)
            checked += 1
            break
    assert checked >= 2


def test_the_llm_user_is_told_to_decline_what_it_did_not_ask_for():
    prompt = user_prompt(_task())
    assert "Say no to anything the agent offers that you did not ask for" in prompt


def test_the_user_does_not_say_its_name_twice():
    assert drop_self_introduction("USR-0042 keeps sending me spam; I'm Jean Morrison, block them.", "Jean Morrison") \
        == "USR-0042 keeps sending me spam; block them."
    assert drop_self_introduction("I'm Bryan Herrera; please follow USR-0005 for me.", "Bryan Herrera") \
        == "Please follow USR-0005 for me."
    assert drop_self_introduction("Use 150 of my loyalty points (I'm Jay Mathews PhD) on invoice INV-0064.",
                                  "Jay Mathews PhD") == "Use 150 of my loyalty points on invoice INV-0064."
    assert drop_self_introduction("I'd like to rent Dune tonight; I'm Jessica.", "Jessica Lee") \
        == "I'd like to rent Dune tonight."
    assert drop_self_introduction("Which medications am I prescribed? I'm Jessica Lee.", "Jessica Lee") \
        == "Which medications am I prescribed?"
    assert drop_self_introduction("I'm Jessica; give TTL-0003 a 7/10: fun", "Jessica Lee") == "Give TTL-0003 a 7/10: fun"
    # another person's name stays
    assert drop_self_introduction("I'm Ann Lee; block them.", "Jean Morrison") == "I'm Ann Lee; block them."
    for task in family_tasks("social_media_messaging", "direct", 12):
        name = re.match(r"You are ([^.;,]+)", task.user_profile.persona)
        if name is not None:
            body = " ".join(task.user_profile.goals)
            assert not re.search(rf"\bI(?:'m| am) {re.escape(name.group(1))}\b", body), (task.id, body)


def test_a_selection_said_by_the_person_it_belongs_to_says_mine():
    """"every transfer of mine that is still submitted", not "... for the player Vincent Charles" said
    by Vincent Charles (the selection took the user for the chain's root only)."""
    seen = 0
    for family in ("bulk", "programmatic", "long"):
        for task in family_tasks("football", family, 6):
            name = re.match(r"You are ([^.;,]+)\.", task.user_profile.persona)
            if name is None:
                continue
            seen += 1
            body = " ".join(task.user_profile.goals)
            assert not re.search(rf"\bevery \w+ for the \w+ {re.escape(name.group(1))}\b", body), (task.id, body)
    assert seen >= 3


def test_a_number_written_with_thousands_separators_is_the_users_own_value():
    """football, play round 19: "Shall I ... offer of 56,600,000 ...?" got a no naming the fee of the
    user's other transfer (47200000): the offer's own value, 56600000, counted as said only when
    written without separators."""
    spec = context("football").spec
    base = next(t for t in family_tasks("football", "direct", 12) if "fee" in t.user_profile.known)
    known = {**base.user_profile.known, "transfer fee": 47200000.0, "fee": 56600000.0}
    goals = ["We're pulling out of my transfer with buying club Davidfurt FC that is still submitted; withdraw the bid.",
             "Put in an offer of 56600000 for player PLR-0011 on behalf of CLB-0008."]
    task = base.model_copy(update={"user_profile": base.user_profile.model_copy(
        update={"known": known, "goals": goals, "objectives": [], "gradual": False})})
    for written in ("56,600,000", "56600000", "$56,600,000.00"):
        reply = scripted_reply(task, spec, f"Shall I submit the transfer of PLR-0011 to CLB-0008 for a fee of "
                                           f"{written}?")
        assert reply.startswith("Yes, please go ahead."), (written, reply)
    wrong = scripted_reply(task, spec, "Shall I go ahead and put in an offer with a fee of 65,000,000 for PLR-0011?")
    assert wrong.startswith("No, that is not right"), wrong


def test_a_new_time_for_a_future_state_lies_ahead_of_the_clock():
    """football, play round 19: "Schedule a league match ... at 2026-06-15T07:30:00" with the clock at
    09:00 that day; a created or moved time of a state that lies in the future must be now or later
    (a row already in that state may still sit earlier today: an 08:30 appointment checked in at 09:00)."""
    from scaleenv.tools.runtime import execute_tool
    from scaleenv.world.world import World

    ctx = context("football")
    tool = ctx.spec.tool("register_fixture")
    club = World.from_snapshot(ctx.spec, ctx.base).conn.execute(  # free those days: a club plays one match a day
        "SELECT id FROM clubs c WHERE NOT EXISTS (SELECT 1 FROM fixtures f WHERE f.club_id = c.id AND "
        "substr(f.kickoff_at, 1, 10) IN ('2026-06-15', '2026-06-17')) ORDER BY id").fetchone()[0]
    args = {"club_id": club, "opponent": "Redhill City", "competition": "league", "venue": "away"}
    for when, ok in (("2026-06-15T07:30:00", False), ("2026-06-15T10:00:00", True), ("2026-06-17T10:00:00", True)):
        world = World.from_snapshot(ctx.spec, ctx.base)
        res = execute_tool(world, tool, {**args, "kickoff_at": when})
        assert res.ok is ok, (when, res.output)
        if not ok:
            assert res.error == "out_of_time" and "now or later" in (res.message or res.output)


def test_a_report_after_a_clause_saying_what_was_not_done_counts():
    """airline, play round 18: "Done: the fare is $237.00 (below 370), so I did not check you in; the
    passenger name on RES-0153 is now Samuel Ward." was taken for no report (its "did not")."""
    from scaleenv.env.judge import Progress
    from scaleenv.formats.task import Objective

    goal = Objective(kind="write", text="If the fare of reservation RES-0153 is at least 370, please check me in; "
                     "otherwise, I need the passenger name on reservation RES-0153 updated to Samuel Ward.",
                     done_words=["checked in", "updated", "changed", "is now"], subject=["reservation", "booking"])
    progress = Progress([goal])
    assert progress.update("Done: the fare of RES-0153 is $237.00 (below 370), so I did not check you in; the "
                           "passenger name on RES-0153 is now Samuel Ward (status still confirmed). Anything else?")
    assert progress.finished()
    assert not Progress([goal]).update("I did not check you in, and I have not changed the name.")


def test_a_question_asking_which_record_reports_nothing_done():
    """healthcare_telemedicine, play round 20: "You have four 'anxiety follow-up' consultations, all
    completed: ... Which one should the prescription be attached to?" was taken for a report of the
    prescription (its "completed"), and the user left before answering."""
    from scaleenv.env.judge import Progress
    from scaleenv.formats.task import Objective

    goal = Objective(kind="write", text="Write a script for cetirizine from my anxiety follow-up consultation.",
                     done_words=["prescribed", "written"], subject=["prescription"])
    progress = Progress([goal])
    assert not progress.update("You have four 'anxiety follow-up' consultations, all completed: CNS-0074 and "
                               "CNS-0073. Which one should the cetirizine prescription be attached to?")
    assert not progress.finished()
    assert progress.update("Done: the cetirizine prescription is written on CNS-0074.")


def test_which_one_gets_the_record_named_before_the_question():
    """The record asked about is the one the message lists ("four fixtures ... Which one should the
    report go on?"), not the one the question's own words name."""
    spec = context("pet_care").spec
    for task in family_tasks("pet_care", "direct", 6):
        known = dict(task.user_profile.known)
        vocab = Vocabulary(spec, list(known))
        tables = {vocab.split(f)[0]: f for f in known if not f.endswith(" id") and vocab.pairs[f][0]
                  and isinstance(known[f], str | int | float)}
        if len(tables) < 2:
            continue
        (_, first), (_, second) = sorted(tables.items())[:2]
        listed, other = vocab.pairs[first][0][0], vocab.pairs[second][0][0]
        reply = scripted_reply(task, spec, f"I see two {listed} records like that. Which one should the {other} go on?")
        assert str(known[first]).replace(",", "") in reply.replace(",", ""), (task.id, first, reply)
        return
    pytest.skip("no task with facts of two records")


def test_an_either_or_question_gets_the_record_meant_not_a_yes():
    """Play round 24: "Shall I cancel FXT-0051 or FXT-0052?" got "Yes, please go ahead."; the user names the
    one it means when it knows its id (and says what it asked for otherwise)."""
    from scaleenv.utils.record_ids import RECORD_ID
    from synth_helpers import context, family_tasks, scripted_reply

    for task in family_tasks("football", "direct", 6):
        goal_ids = sorted({r for g in task.user_profile.goals for r in RECORD_ID.findall(g)})
        if goal_ids:
            break
    else:
        raise AssertionError("no football task whose user names a record id")
    spec = context("football").spec
    meant = goal_ids[0]
    other = "ZZZ-9999"
    reply = scripted_reply(task, spec, f"Shall I go ahead with {other} or {meant}?")
    assert reply.startswith(f"I mean {meant}.") and "Yes, please go ahead." not in reply
    assert "Yes, please go ahead." in scripted_reply(task, spec, f"Shall I go ahead with {meant}? Or is there anything else?")
    # an "or" in a dictated text beside two ids is no choice (the oracle's own go-ahead question, default build)
    listed = f"Shall I go ahead with: cancel {other}; update {meant} (new_description Or summer position somebody.)?"
    assert scripted_reply(task, spec, listed).startswith("Yes, please go ahead.")


def _gradual_with_later_facts(domain: str, attempts: int, keep=lambda f, v: True):
    """Hard tasks of ``domain`` with two requests or more, made gradual, each with the facts (name, value) that
    only its later requests hold (not who the user is) and that ``keep`` accepts."""
    import contextlib

    from scaleenv.synth.tasks.families import generate_task
    from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
    from synth_helpers import context

    ctx = context(domain)
    for attempt in range(attempts):
        with contextlib.suppress(TaskRejected):
            task = generate_task(ctx, 0, attempt, ChainConfig(tier_mix={"hard": 1.0}))
            goals, known = task.user_profile.goals, task.user_profile.known
            later = [(f, str(v)) for f, v in known.items() if str(v) in " ".join(goals[1:]) and str(v) not in goals[0]
                     and f not in task.user_profile.identity and keep(f, str(v))]
            if len(goals) >= 2 and later:
                profile = task.user_profile.model_copy(update={"gradual": True})
                yield task.model_copy(update={"user_profile": profile}), later


def test_a_which_answer_gives_no_detail_of_a_request_not_yet_said():
    """Play round 25 (car rental): "Which Uptown branch do you mean?" got "The branch's city is Lake Robert
    ... The new phone is 555-269-1227", the phone of the next request, not yet said. A gradual user
    answers with the record's details, not a new value, nor one only a later request holds."""
    from synth_helpers import context, scripted_reply

    spec = context("car_rental").spec
    checked = 0
    # not an id, nor a word any reply may hold ("full")
    for task, later in _gradual_with_later_facts("car_rental", 80, lambda f, v: not f.endswith(" id")
                                                 and (len(v) >= 6 or bool(re.search(r"\d", v)))):
        vocab = Vocabulary(spec, list(task.user_profile.known))
        nouns = " and ".join(vocab.pairs[f][0][0] for f, _ in later if vocab.pairs[f][0])
        reply = scripted_reply(task, spec, f"I see several records of that {nouns}. Which one do you mean?")
        assert not any(v in reply for _, v in later), (later, reply)
        checked += 1
        if checked >= 3:
            break
    assert checked >= 1


def test_a_report_that_opens_a_go_ahead_question_counts():
    """Play round 26: "Done: RFL-0038 is now marked picked up. Next, I am about to write a prescription ...
    Shall I go ahead?" left the pick-up unreported, and the user asked for it again at the end. A quoted
    plan before the question still reports nothing."""
    from scaleenv.env.judge import Progress
    from scaleenv.formats.task import Objective

    def fresh() -> Progress:
        return Progress([Objective(kind="write", text="Please mark refill RFL-0038 picked up.",
                                   done_words=["picked up"], subject=["refill order"]),
                         Objective(kind="write", text="Write a script for albuterol.", done_words=["written"],
                                   subject=["prescription"])])

    progress = fresh()
    assert progress.update("Done: RFL-0038 is now marked picked up. Next, I am about to write a prescription "
                           "for albuterol. Shall I go ahead?")
    assert progress.done == [True, False]
    progress = fresh()
    assert not progress.update("I am about to mark RFL-0038 picked up. Shall I go ahead?")
    assert not progress.update("Refill order RFL-0038 is ready at Barton Pharmacy; shall I mark it picked up?")
    assert progress.done == [False, False]


@pytest.mark.parametrize("report", [
    "Done: tomato planting PLT-0064 on field West Block is now marked failed. Anything else?",
    "PLT-0064 has been marked as failed.",
    "I have written PLT-0064 off as failed.",
    'Its status changed to "failed".',
])
def test_failed_as_the_state_set_is_a_report_not_a_failure(report):
    """agriculture_environmental/00023 (round 27): "Done: ... PLT-0064 ... is now marked failed" read as a
    failure (the word "failed"), so the user asked for the change again and never said its next request."""
    from scaleenv.env.judge import Progress, says_cannot
    from scaleenv.formats.task import Objective

    progress = Progress([Objective(kind="write", text="Hail destroyed the growing planting PLT-0064; mark it failed.",
                                   done_words=["failed", "marked"], subject=["planting"])])
    progress.update(report)
    assert progress.finished(), report
    assert not says_cannot(report)


def test_a_change_that_failed_is_still_no_report():
    from scaleenv.env.judge import Progress, says_cannot
    from scaleenv.formats.task import Objective

    progress = Progress([Objective(kind="write", text="Hail destroyed the growing planting PLT-0064; mark it failed.",
                                   done_words=["failed", "marked"], subject=["planting"])])
    progress.update("Marking planting PLT-0064 has failed; the update did not go through.")
    assert not progress.finished()
    assert says_cannot("The update failed.") and says_cannot("The refund has now failed.")


def test_a_report_of_one_change_does_not_report_the_others():
    """entertainment_media_query/00022 (play round 29): "Done: I paid out 12.67 from your wallet to your card.
    Next, shall I cancel the subscription?" was read as both changes reported, and the user left before the
    cancellation. A report names what it did; "Done." alone still reports every change asked."""
    from scaleenv.env.judge import Progress
    from scaleenv.formats.task import Objective

    def progress() -> Progress:
        return Progress([Objective(kind="write", text="Cancel the subscription for my account.",
                                   done_words=["cancelled"], subject=["profile"]),
                         Objective(kind="write", text="Refund my wallet balance to my card.",
                                   done_words=["cashed"], subject=["profile", "wallet"])])

    p = progress()
    p.update("Done: I paid out 12.67 from your wallet to your card; the wallet balance is now 0. "
             "Next, shall I cancel the subscription now?")
    assert p.done == [False, True]
    p = progress()
    p.update("Done: I sent the money to your card.")
    assert p.done == [False, False]  # says what, but names neither change
    for bare in ("Done.", "All done, Nicole!"):
        p = progress()
        p.update(bare)
        assert p.done == [True, True], bare


def test_an_operation_goal_is_reported_by_what_the_operation_acts_on():
    """A goal of ``cash_out_wallet`` or ``refund_wallet`` (its record is the profile) is reported by "the
    wallet" too."""
    tasks = family_tasks("entertainment_media_query", "enabled", 2)
    assert tasks
    for task in tasks:
        subjects = [o.subject for o in task.user_profile.objectives if "wallet" in o.text.lower()]
        assert subjects and all("wallet" in s for s in subjects), (task.id, subjects)


def test_a_question_gets_no_detail_of_a_request_not_yet_said():
    """Play round 30 (email): asked "what is your email?", a gradual user gave its own address and then "The
    email is shawn_sullivan@post.example.net", the sender its next request (not yet said) asks to block."""
    from synth_helpers import context, scripted_reply

    spec = context("email_management").spec
    checked = 0
    for task, later in _gradual_with_later_facts("email_management", 120, lambda f, v: "@" in v):
        known = task.user_profile.known
        mine = [str(known[f]) for f in task.user_profile.identity if "@" in str(known.get(f, ""))]
        if not mine:
            continue
        reply = scripted_reply(task, spec, "I see several accounts with that name. What is your email?")
        assert any(m in reply for m in mine), reply
        assert not any(v in reply for _, v in later), reply
        checked += 1
        if checked >= 2:
            break
    assert checked >= 1

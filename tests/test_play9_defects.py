"""Defects careful players met in play round 9 (seed 131, domains nobody had tuned on), each fixed at
the cause: a user that hung up while it was still being asked for details, a fact said as "my
weight's kg", a review request "of mine" that was another member's, a new pet whose species came
from no row."""

from __future__ import annotations

import random
from collections import Counter

from scaleenv.env.judge import Progress, is_question
from scaleenv.env.vocabulary import Vocabulary
from scaleenv.formats.task import Objective
from scaleenv.synth.tasks.generate import someone_elses
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World
from synth_helpers import context

_OBJECTIVES = [
    Objective(kind="write", text="Every active pet of mine is moving to a new home; please transfer them to owner OWN-0036.",
              done_words=["transferred"], subject=["pet", "pets"]),
    Objective(kind="write", text="Please change the breed of each of them to labrador.",
              done_words=["updated", "changed", "set to", "is now"], subject=["pet", "pets"]),
    Objective(kind="write", text="I'd like to register my new dog Kiwi.",
              done_words=["created", "added", "registered", "booked", "scheduled"], subject=["owner"]),
]


def test_a_question_for_details_reports_nothing_done():
    """pet_care/00015: "Thank you, that is everything I needed." came while the agent was still
    asking for the new dog's breed; "upcoming scheduled appointments" and "to complete the
    registration" had counted as reports."""
    progress = Progress(list(_OBJECTIVES))
    asking = ("Thank you - I found your owner record OWN-0044. Your active pets are Kiwi and Milo. "
              "(b) to register the new dog I need its breed, birth date and weight in kg. "
              "Note also that transferring a pet cancels its upcoming scheduled appointments.")
    assert not progress.update(asking)
    assert not progress.update("Thanks - birth date 2021-11-02 noted. To complete the registration I still need "
                               "the new dog's breed and its weight in kg.")
    assert not progress.finished()
    assert is_question("To complete the registration I still need the new dog's breed and its weight in kg.")
    assert progress.update("Done: Kiwi and Milo have been transferred to OWN-0036 and their breed is now labrador.")
    assert progress.update("Your new dog Kiwi is registered as PET-0069.")
    assert progress.finished()


def test_a_fact_whose_column_ends_in_a_unit_is_said_with_the_unit_after_the_value():
    vocab = Vocabulary(context("pet_care").spec, {"weight kg": 1.5, "pet weight kg": 14.6, "owner email": "a@b.c"})
    assert vocab.statement("weight kg", "1.5") == "The weight is 1.5 kg."
    assert vocab.statement("pet weight kg", "14.6") == "My pet's weight is 14.6 kg."


def test_a_record_linked_only_to_other_people_is_not_the_users():
    """knowledge_management/00006: "approve my pending review request" signed off RVW-0123, whose
    reviewer was USR-0013, for the member USR-0033 (reached through USR-0033's own space)."""
    spec = context("knowledge_management").spec
    review = {"id": "RVW-0123", "article_id": "ART-0043", "reviewer_id": "USR-0013", "status": "pending"}
    assert someone_elses(spec, "review_requests", review, "members", "USR-0033") == "reviewer_id=USR-0013"
    assert someone_elses(spec, "review_requests", {**review, "reviewer_id": "USR-0033"}, "members", "USR-0033") is None
    assert someone_elses(spec, "spaces", {"id": "SPC-0011", "owner_id": "USR-0033"}, "members", "USR-0033") is None
    assert someone_elses(spec, "tags", {"id": "TAG-0001"}, "members", "USR-0033") is None  # no link to a person


def test_a_new_records_enum_value_comes_from_the_same_row_as_its_other_values():
    """pet_care/00015: the new "dog" Kiwi weighed 1.5 kg: its weight and name came from a bearded
    dragon's row, its species from the enum at random."""
    ctx = context("pet_care")
    world = World.from_snapshot(ctx.spec, ctx.base)
    tool = ctx.spec.tool("add_pet")  # create_pet at seed 131
    assert tool is not None
    pairs = {(r[0], r[1]) for r in world.conn.execute("SELECT species, breed FROM pets")}
    sampler = ArgSampler(world, random.Random(7))
    seen = Counter()
    for _ in range(200):
        args = sampler.random_args(tool, optional_rate=0.0)
        if "species" in args and "breed" in args:
            seen[(args["species"], args["breed"]) in pairs] += 1
    world.close()
    assert seen[True] >= 0.5 * sum(seen.values()), seen


def test_an_open_question_that_offers_a_default_is_not_answered_yes():
    """telecom/00020: "what priority would you like for it (low, normal or high), or should I leave
    the default?" got "Yes, please go ahead." as its only answer."""
    import asyncio

    from scaleenv.env.users import ScriptedUser, UserContext
    from scaleenv.formats.task import Task

    task = Task.model_validate({
        "id": "shop/00000", "domain": "shop", "instruction": "x", "initial_patch": {}, "gold_chain": [], "tools": [],
        "difficulty": {}, "verification": {},
        "user_profile": {
            "persona": "You are Anna Moreno.", "goals": ["Please open a ticket about roaming."],
            "known": {"customer email": "anna@example.com", "ticket subject": "Roaming not working"},
            "identity": ["customer email"],
            "objectives": [Objective(kind="write", text="Please open a ticket about roaming.", done_words=["opened"],
                                     subject=["ticket"]).model_dump()],
        },
    })
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=None, spec=None))
    asyncio.run(user.opening())
    reply = asyncio.run(user.reply('I will create the ticket "Roaming not working" - what priority would you like '
                                   'for it (low, normal or high), or should I leave the default?'))
    assert reply == "The default is fine for that."
    asked = asyncio.run(user.reply("Which colour would you like for it?"))
    assert "Yes" not in asked and "don't know" in asked
    assert asyncio.run(user.reply("Shall I go ahead and create it?")).startswith("Yes, please go ahead.")


def test_a_look_alike_has_its_own_amounts_but_keeps_counts_links_and_ruled_columns():
    """entertainment_media_query/00014, football/00000: every look-alike "Terry" had the same $1.92
    wallet and every "Jonathan Carey" the same figures, so a rule that reads them never told the
    user's record from a look-alike."""
    from scaleenv.formats.domain import Column, Table
    from scaleenv.synth.tasks.state import ruled_columns, vary_measures

    table = Table(name="profiles", columns=[
        Column(name="id"), Column(name="customer_id", foreign_key="customers.id"),
        Column(name="wallet_balance", type="real", min=0), Column(name="seats", type="integer"),
        Column(name="total_spent", type="real"), Column(name="score", type="integer", max=100),
        Column(name="zero", type="real")])
    row = {"id": "PRF-1", "customer_id": "CUS-1", "wallet_balance": 1.92, "seats": 4, "total_spent": 50.0,
           "score": 90, "zero": 0.0}
    rng = random.Random(3)
    looks = [vary_measures(table, row, rng, keep={"total_spent"}) for _ in range(20)]
    assert all(x["seats"] == 4 and x["customer_id"] == "CUS-1" and x["total_spent"] == 50.0 and x["zero"] == 0.0
               for x in looks)
    assert len({x["wallet_balance"] for x in looks}) > 2 and all(x["wallet_balance"] > 0 for x in looks)
    assert all(x["score"] <= 100 for x in looks)
    # a derived column and both sides of a check are ruled: changing one alone could break its rule
    spec = context("airline").spec
    derived = [i for i in spec.invariants if i.kind == "derived"]
    assert derived and all(i.column in ruled_columns(spec, i.table) for i in derived)
    checks = [i for i in spec.invariants if i.kind == "row" and i.check]
    assert checks and all(ruled_columns(spec, i.table) for i in checks)


def test_a_parenthesis_is_said_once_and_the_user_is_me_not_my_client():
    """entertainment_media_query/00021 said "(Stephanie, email s.white@example.com)" in both branches
    of one request; travel_agency/00012 reserved a room "for my client (Jennifer Villarreal, ...)",
    spoken by Jennifer Villarreal; "1 room(s)"."""
    from scaleenv.env.language import polish
    from scaleenv.synth.tasks.instruction import said_once

    goals = said_once(["If my wallet balance is at least 21, I want premium; my profile (Stephanie, email s@x.com).",
                       "Otherwise, rent TTL-0037 for my profile (Stephanie, email s@x.com).", "Keep it (2 nights)."])
    assert goals == ["If my wallet balance is at least 21, I want premium; my profile (Stephanie, email s@x.com).",
                     "Otherwise, rent TTL-0037 for my profile.", "Keep it (2 nights)."]
    assert polish("Reserve 1 room(s) for 3 night(s).") == "Reserve 1 room for 3 nights."
    tasks = [t for seed in (131, 0, 1) for t in _tasks_of("travel_agency", seed, range(40))
             if any("room" in g for g in t.user_profile.goals)]
    assert tasks
    for t in tasks:
        name = t.user_profile.persona.removeprefix("You are ").rstrip(".")
        for g in t.user_profile.goals:
            assert f"my client ({name}" not in g and "(s)" not in g, g
    # a phrasing in the customer's voice that cannot be filled falls back to the others, not to the
    # tool's description ("Book seats on an open tour departure for a client through an agent")
    booked = [g for seed in (131, 0, 1) for t in _tasks_of("travel_agency", seed, range(40))
              for g in t.user_profile.goals if "seat" in g]
    assert booked and not any("through an agent" in g for g in booked), booked


def _tasks_of(name: str, seed: int, attempts: range) -> list:
    import contextlib

    from scaleenv.synth.tasks.families import generate_task
    from scaleenv.synth.tasks.generate import TaskRejected

    ctx = context(name, seed)
    out = []
    for a in attempts:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, seed, a))
    return out


def test_no_policy_rule_tells_the_agent_to_take_another_action_instead():
    """email_management/00005: "cannot be moved to the trash; it must be archived instead", where the
    message was in spam (archiving needs the inbox) and the refusal task expects no write at all. A
    rule states what is forbidden; a way round it is the customer's to ask for."""
    import re

    from scaleenv.synth.procedural.blueprint import catalog

    for name, bp in catalog().items():
        for rule in bp.policy:
            text = rule["text"] if isinstance(rule, dict) else getattr(rule, "text", str(rule))
            assert not re.search(r"\b(instead|has to be|must be \w+ed first)\b", text), (name, text)


def test_a_request_that_changes_a_record_and_then_cancels_it_is_wasted():
    """travel_agency/00012: "pay $288.49 towards every confirmed trip booking ... switch each of them
    ... please cancel each of them": no customer pays for what the same request cancels."""
    from scaleenv.formats.task import Call
    from scaleenv.synth.tasks.validity import wasted_requests

    ctx = context("travel_agency")
    world = World.from_snapshot(ctx.spec, ctx.base)
    booking = world.conn.execute("SELECT id FROM trip_bookings WHERE status = 'confirmed' ORDER BY id").fetchone()[0]
    world.close()
    pay = Call(tool="pay_trip_booking", args={"booking_id": booking, "amount": 20.0}, purpose="goal")
    cancel = Call(tool="cancel_trip_booking", args={"booking_id": booking}, purpose="goal")
    assert wasted_requests(ctx.spec, ctx.base, [pay, cancel]) == [
        f"pay_trip_booking on trip_bookings[{booking}].paid, then cancel_trip_booking ends it"]
    assert wasted_requests(ctx.spec, ctx.base, [cancel]) == []
    assert wasted_requests(ctx.spec, ctx.base, [pay]) == []


def test_the_user_never_calls_itself_my_player_or_the_guest_list_of_me():
    """football/00000: "retire my player (Jesse Craig, ...)", said by Jesse Craig; wedding_planning:
    "the guest list of me (Laura Reeves, ...)"."""
    import re

    goals = [(t.user_profile.persona, g) for name in ("football", "wedding_planning")
             for t in _tasks_of(name, 0, range(30)) for g in t.user_profile.goals]
    assert goals
    for persona, g in goals:
        name = persona.removeprefix("You are ").rstrip(".")
        assert not re.search(rf"\bmy (player|couple|guest) \({re.escape(name)}", g), g
        assert " of me " not in g and " of me (" not in g, g


def test_the_sampling_gates_also_draw_the_stream_a_default_rollout_gives_its_agent(tmp_path):
    """smart_home/00034 (default build): read_dump scored 0 at its gate's draw and 1 in `scaleenv
    rollout --agent read_dump`, whose agents draw from another stream; the gates now draw that one too."""
    import asyncio

    from scaleenv.env.agents import Agent
    from scaleenv.env.loop import run_episode
    from scaleenv.env.policies import text_message
    from scaleenv.synth.tasks.gates import ROLLOUT_AGENT_STREAM
    from scaleenv.universe import Universe

    seen: list[float] = []

    class Probe(Agent):
        def reset(self, ctx):
            super().reset(ctx)
            seen.append(ctx.rng.random())

        async def act(self, messages):
            return text_message("Done.")

    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.env.core import ToolEnv
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    cfg = BuildConfig(out=tmp_path / "u", domains=["pet_care"], tasks_per_domain=1)
    prepare_out(cfg)
    run_build(cfg)
    u = Universe(tmp_path / "u")
    task = next(iter(u.tasks()))
    cache = TaskWorldCache(u)
    asyncio.run(run_episode(ToolEnv(task, cache.acquire(task), mode="solo"), Probe(), seed=0))
    assert seen == [random.Random(ROLLOUT_AGENT_STREAM).random()]


# --- play round 10 (seed 977) ------------------------------------------------------------------------------------

def test_a_refusal_said_beside_a_confirmation_question_settles_the_refused_request():
    """smart_home/00009: "I cannot open it, because its battery is at 24% ... Shall I go ahead with the
    rest?", then "Lock LCK-0021 was not opened": the user still asked "Yes: Please open lock LCK-0021."."""
    progress = Progress([Objective(kind="refusal", text="Please open lock LCK-0021."),
                         Objective(kind="write", text="Set the max temp to 81.", done_words=["updated"],
                                   subject=["household"])])
    progress.update("I cannot open it, because its battery is at 24%. Shall I go ahead with the temperature change?")
    assert progress.done == [True, False]
    later = Progress([Objective(kind="refusal", text="Please open lock LCK-0021.")])
    later.update("Lock LCK-0021 was not opened: its battery is below the 50 percent minimum.")
    assert later.finished()


def test_a_phrasing_that_makes_a_slot_the_speaker_marks_it_the_actor():
    """second_hand_marketplace/00017: "Hi, I am Andrew Mcfarland. ... I'm USR-0031; would the seller of
    that same listing take 612?", where USR-0031 is Carl Smith (a buyer parameter is allowed to name
    another person, but not the one the phrasing says is "I")."""
    from scaleenv.synth.tasks.instruction import actor_slots

    assert actor_slots(["Offer {amount} for listing {listing_id} from my account {buyer_id}.",
                        "I'm {buyer_id}; would the seller of {listing_id} take {amount}?",
                        "Send it to me ({customer_id}).", "Transfer it to {recipient_id}."]) == {"buyer_id", "customer_id"}


def test_a_record_unique_only_under_its_parent_is_named_with_it():
    """in_store_dining/00003: "I'll pay $75.4 of check from 2026-06-15T07:00:00 (status open)": seven open
    checks were opened then, in five look-alike branches; the chain found it under table TBL-0040."""
    tasks = _tasks_of("in_store_dining", 977, range(24))
    said = [g for t in tasks for g in t.user_profile.goals if "check from" in g or "tab from" in g]
    assert said and all(" at " in g for g in said), said

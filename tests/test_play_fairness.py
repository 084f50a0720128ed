"""Fairness of the procedure checks and the scripted user to a careful player (fix15): an itemised
confirmation covers the writes it lists, a look-up by part of the user's name verifies them, staff
have no identity to verify and say who they are, a plan or a question never ends the chat, long
tasks get the user turns their confirmations need, and a fact of another goal is no reason to
decline."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.core import ToolEnv, run_sync
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import OracleAgent
from scaleenv.env.users import ScriptedUser, UserContext, turn_budget
from scaleenv.formats.task import UserProfile
from scaleenv.formats.trajectory import STOP
from scaleenv.reward.procedure import CONFIRMATION, IDENTITY, is_staff, procedure_checks
from synth_helpers import context, family_tasks, scripted_reply


def _call(i: int, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _out(i: int, content: object) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(content)}


def _say(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def _case(name: str = "Mr. Micheal Smith II"):
    spec = context("pet_care").spec
    task = next(t for t in family_tasks("pet_care", "partial", 2) if t.user_profile.identity)
    ident = task.user_profile.identity[0]
    profile = task.user_profile.model_copy(update={"known": {**task.user_profile.known, ident: name}})
    task = task.model_copy(update={"user_profile": profile})
    write = next(c.tool for c in task.gold_chain if spec.tool(c.tool).kind == "write")
    search = next(t.name for t in spec.tools if t.kind == "read")
    return spec, task, write, search, ident


def test_one_itemised_yes_covers_every_write_it_lists_and_only_those():
    spec, task, write, search, _ = _case()
    head = [_user("Hi, I am Mr. Micheal Smith II."), _call(0, search, {"full_name": "Mr. Micheal Smith II"}),
            _out(0, {"id": "X"}),
            _say(f"Shall I go ahead with: {write.replace('_', ' ')} PAT-0050; a page titled Update privacy page on "
                 f"2026-05-15 (priority high, 18 hours); {write.replace('_', ' ')} CPY-0087?"),
            _user("Yes, please go ahead.")]
    listed = [_call(1, write, {"patron_id": "PAT-0050"}), _out(1, {"id": "X"}),
              _call(2, write, {"title": "Update privacy page", "priority": "high", "hours": 18}), _out(2, {"id": "Y"}),
              _call(3, write, {"copy_id": "CPY-0087"}), _out(3, {"id": "Z"})]
    assert dict(procedure_checks(task, spec, head + listed))[CONFIRMATION] is True
    unlisted = [_call(4, write, {"patron_id": "PAT-0099"}), _out(4, {"id": "W"})]
    assert dict(procedure_checks(task, spec, head + listed + unlisted))[CONFIRMATION] is False
    # no yes at all; a yes that a no has since replaced; a yes still standing after a question answered with a
    # fact (a yes or a no replaces it, another answer does not: "anything else?" answered with the next request
    # left a standing yes void, seed 4242's style gate)
    unasked = [head[0], head[1], head[2], _say("Shall I go ahead with: renew PAT-0050; lend CPY-0087?"),
               _user("I don't know that, sorry."), *listed[:2]]
    assert dict(procedure_checks(task, spec, unasked))[CONFIRMATION] is False
    revoked = head + listed[:2] + [_say("Shall I also renew PAT-0099?"), _user("No, thank you."), *listed[2:]]
    assert dict(procedure_checks(task, spec, revoked))[CONFIRMATION] is False
    standing = head + listed[:2] + [_say("What is your phone number?"), _user("It is 555-010-2000."), *listed[2:]]
    assert dict(procedure_checks(task, spec, standing))[CONFIRMATION] is True
    assert dict(procedure_checks(task, spec, standing + unlisted))[CONFIRMATION] is False


def test_a_yes_to_a_short_reask_covers_the_proposal_the_user_answered_otherwise():
    spec, task, write, search, _ = _case()
    head = [_user("Hi, I am Mr. Micheal Smith II."), _call(0, search, {"full_name": "Mr. Micheal Smith II"}),
            _out(0, {"id": "X"}),
            _say("Here is what I will do: renew PAT-0050; create a page titled Update privacy page; lend CPY-0087. "
                 "Do you confirm all of these (yes/no)?"), _user("The plan id is PLN-0005."),
            _say("Before I make these three changes I need an explicit yes: shall I go ahead?"),
            _user("Yes, please go ahead.")]
    listed = [_call(1, write, {"patron_id": "PAT-0050"}), _out(1, {"id": "X"}),
              _call(2, write, {"title": "Update privacy page"}), _out(2, {"id": "Y"}),
              _call(3, write, {"copy_id": "CPY-0087"}), _out(3, {"id": "Z"})]
    assert dict(procedure_checks(task, spec, head + listed))[CONFIRMATION] is True
    # a no in between withdraws the proposal: the later yes covers only what was asked after it
    declined = [*head[:5], _user("No, wait."), *head[5:]]
    assert dict(procedure_checks(task, spec, declined + listed))[CONFIRMATION] is False


def test_a_lookup_by_part_of_the_name_that_returns_the_user_verifies_them():
    spec, task, write, search, ident = _case()
    ask, yes = _say("Shall I go ahead with the change?"), _user("Yes, please go ahead.")

    def convo(arg: str, output: object) -> list[dict]:
        return [_user("Hi, I am Mr. Micheal Smith II."), _call(0, search, {"full_name": arg}), _out(0, output),
                ask, yes, _call(1, write, {}), _out(1, {"id": "X"})]

    record = [{"id": "OWN-0001", "full_name": "Mr. Micheal Smith II", "phone": "555-000-1111"}]
    assert dict(procedure_checks(task, spec, convo("Micheal Smith", record)))[IDENTITY] is True
    assert dict(procedure_checks(task, spec, convo("micheal smith", record)))[IDENTITY] is True
    # the user's record did not come back, or the argument is not part of the name
    assert dict(procedure_checks(task, spec, convo("Micheal Smith", [{"id": "OWN-0002", "full_name": "Micheal Smithson"}]))
                )[IDENTITY] is False
    assert dict(procedure_checks(task, spec, convo("John Smith", record)))[IDENTITY] is False
    assert dict(procedure_checks(task, spec, convo("M", record)))[IDENTITY] is False


def test_staff_have_no_identity_to_verify_and_say_who_they_are_when_asked():
    spec, task, write, search, _ = _case()
    staff = task.model_copy(update={"user_profile": task.user_profile.model_copy(
        update={"persona": "You are a staff member looking after the rental office Harbor."})})
    assert is_staff(staff) and not is_staff(task)
    convo = [_user("Hi, I am a staff member looking after the rental office Harbor."),
             _say("Shall I go ahead with the change?"), _user("Yes, please go ahead."),
             _call(1, write, {}), _out(1, {"id": "X"})]
    assert dict(procedure_checks(staff, spec, convo))[IDENTITY] is True
    assert dict(procedure_checks(task, spec, convo))[IDENTITY] is False
    reply = scripted_reply(staff, spec, "Before I start, may I have your name, please?")
    assert "staff member looking after the rental office Harbor" in reply and STOP not in reply
    # the record's facts are not the staff member's own (smart_home, seed 31: "My name is The Goodman Home")
    assert not re.search(r"\bMy\b", reply), reply


@pytest.mark.parametrize("name", ["food_delivery", "airline"])
def test_a_plan_or_a_restated_request_never_ends_the_chat(name):
    spec = context(name).spec
    tasks = [t for t in family_tasks(name, "direct", 8) if len(t.user_profile.goals) >= 2]
    assert tasks
    for task in tasks:
        goals = " ".join(task.user_profile.goals)
        for text in (f"I'd like to make sure I understand. {goals} Is that correct?",
                     f"Before I start, this is what I will do. {goals} Let me know.",
                     "Could you tell me which one you mean?"):
            reply = scripted_reply(task, spec, text)
            assert STOP not in reply, (task.id, text, reply)


def test_the_user_turn_budget_grows_with_the_tasks_writes():
    spec = context("pet_care").spec
    task = max(family_tasks("pet_care", "direct", 8), key=lambda t: len(t.gold_chain))
    writes = sum(1 for c in task.gold_chain if spec.tool(c.tool).kind == "write")
    assert writes >= 1
    ctx = UserContext(task=task, rng=random.Random(0), max_turns=2, spec=spec)
    gradual = len(task.user_profile.goals) if task.user_profile.gradual else 0  # one more turn per request
    assert turn_budget(ctx) == 2 + writes + gradual
    user = ScriptedUser(patience=100)
    user.reset(ctx)
    asyncio.run(user.opening())
    # the opening is its first message: 2 + writes (+ gradual) in all, then it has to go
    replies = [asyncio.run(user.reply("Shall I go ahead with the change?")) for _ in range(2 + writes + gradual)]
    assert all(STOP not in r for r in replies[:-1]) and "I have to go now" in replies[-1]


def test_the_oracle_scores_one_on_long_tasks_under_the_default_user_budget():
    ctx = context("pet_care")
    long_tasks = sorted(family_tasks("pet_care", "direct", 12), key=lambda t: -len(t.gold_chain))[:3]
    for task in long_tasks:
        ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
        env = ToolEnv(task, ep, user=ScriptedUser(), max_turns=30, max_user_turns=3, release=lambda _: None)
        traj = run_sync(run_episode(env, OracleAgent()))
        assert traj.reward["score"] == 1.0, (task.id, traj.reward["diff"])


def order_and_cart_user(first_goal: str) -> Callable[[str], str]:
    """The scripted user's reply to a message, for a pet_care user who asks ``first_goal`` (an order of
    2) and to remove a line from cart CRT-0001, and knows the quantity 2 and the cart's id."""
    spec = context("pet_care").spec
    base = family_tasks("pet_care", "direct", 1)[0]
    profile = UserProfile(persona="You are Ann Lee.", goals=[first_goal, CART_GOAL],
                          known={"quantity": 2, "cart id": "CRT-0001"})
    task = base.model_copy(update={"user_profile": profile})
    return lambda text: scripted_reply(task, spec, text)


CART_GOAL = "Remove the line with the lowest quantity from cart CRT-0001."


def test_a_fact_of_another_goal_is_no_reason_to_decline():
    reply = order_and_cart_user("Please order 2 of variant VAR-0048.")
    assert reply("The line with the lowest quantity is ITM-0123 (quantity 1). Shall I go ahead and remove it?"
                 ).startswith("Yes")
    assert reply("Shall I go ahead and order variant VAR-0048 with quantity 3?").startswith("No, that is not right")


def test_the_policy_tells_the_agent_staff_have_no_identity_to_verify():
    """Players asked staff callers for a customer's name or e-mail (football, in_store_dining, seed 59):
    the procedure exempts staff, and now the policy the agent reads says so."""
    from scaleenv.env.prompts import STAFF_NOTE, policy_section

    spec = context("pet_care").spec
    assert spec.policy is not None and spec.policy.of_kind("identity")
    assert STAFF_NOTE in policy_section(spec)
    without = spec.model_copy(update={"policy": spec.policy.model_copy(
        update={"rules": [r for r in spec.policy.rules if r.kind != "identity"]})})
    assert STAFF_NOTE not in policy_section(without)


def test_a_new_records_value_is_no_reason_to_decline_a_change_of_another_record():
    """express_logistics, play round 22: confirming a claim on SHP-0061 with its declared value 1085.02
    got "No, that is not right: My declared's value is 2.75" (the value of the parcel the user asked to
    ship, a record no goal names by id), twice."""
    reply = order_and_cart_user("Please order 2 of the blue leash.")
    # the quantity the user knows is the new order's, which no goal names by id
    assert reply("Line ITM-0123 of cart CRT-0001 has quantity 5. Shall I go ahead and remove it?").startswith("Yes")
    assert reply("Shall I go ahead and order the blue leash with quantity 3?").startswith("No, that is not right")

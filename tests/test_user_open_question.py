"""The simulated user never ends the conversation on a question it can answer (play round 41, seed 2718: "I
see more than one owner registered under that name. Could you give me the e-mail address on your account?"
read as a report and got "Thank you, that is everything I needed."; "May I go ahead with those three?" after
a report of the rest got the same)."""

from __future__ import annotations

import asyncio

from scaleenv.env.users import NEXT_REQUEST, NOTHING_ELSE, ScriptedUser, UserContext
from scaleenv.formats.trajectory import STOP
from synth_helpers import context, family_tasks


def _user(task, spec) -> ScriptedUser:
    user = ScriptedUser(patience=5, varied=False)
    user.reset(UserContext(task=task, rng=None, spec=spec))
    asyncio.run(user.opening())
    return user


def _report(task) -> str:
    return "All done: " + " ".join(f"{g.rstrip('.')} is done." for g in task.user_profile.goals) + " Everything is completed."


def test_a_question_after_what_reads_as_a_report_is_answered_not_ended():
    spec = context("pet_care").spec
    task = next(t for t in family_tasks("pet_care", "direct", 6) if t.user_profile.identity and not t.user_profile.gradual)
    email = next(f for f in task.user_profile.identity if "email" in f)
    user = _user(task, spec)
    user.progress.done = [True] * len(user.progress.done)  # whatever the judge made of the words before it
    reply = asyncio.run(user.reply("Could you give me the e-mail address on your account?"))
    assert STOP not in reply and str(task.user_profile.known[email]) in reply
    # a proposal of more changes gets its answer too; so does an offer of anything else (the user never ends
    # on a question), and the chat ends on the next message that asks nothing
    reply = asyncio.run(user.reply(f"Shall I go ahead with that for {task.user_profile.known[email]}?"))
    assert STOP not in reply and reply.startswith("Yes")
    reply = asyncio.run(user.reply("Is there anything else I can help you with?"))
    assert reply == NOTHING_ELSE
    reply = asyncio.run(user.reply("Have a good day."))
    assert STOP in reply


def test_a_user_with_more_to_ask_answers_the_question_before_its_next_request():
    spec = context("pet_care").spec
    task = next((t for f in ("long", "partial") for t in family_tasks("pet_care", f, 8) if t.user_profile.gradual),
                None)
    assert task is not None
    user = _user(task, spec)
    user.progress.done[0] = True
    reply = asyncio.run(user.reply("That one is done. Shall I go ahead with the next change?"))
    assert NEXT_REQUEST in reply and reply.startswith("Yes, please go ahead.")

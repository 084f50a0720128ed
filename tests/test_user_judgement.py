"""The simulated user says no to what it did not ask for, names the record it means when asked which
one, and does not introduce itself twice; the user prompt of the LLM user says the same."""

from __future__ import annotations

import re

import pytest

from scaleenv.env.users import NO_ALTERNATIVE, user_prompt
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

"""The scripted user answers the question's noun, not a generic word in it: asked for a zip or postal
code it gives its zip code, never the gift card code it also holds; a promo code or a reference number
it does not hold gets "I don't know that"."""

from __future__ import annotations

import asyncio
import random

import pytest

from scaleenv.env.users import ScriptedUser, UserContext
from scaleenv.env.vocabulary import Vocabulary
from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.derive import derive_spec


@pytest.fixture(scope="module")
def retail():
    return derive_spec(catalog()["retail"], 0)


# the facts a retail customer may hold: "code" is redeem_gift_card's parameter (gift_cards.code) and
# "zip code" find_customer_by_name_zip's (customers.zip_code)
BARE = ["code", "zip code", "customer id"]
NAMED = ["gift card code", "customer zip code"]


@pytest.mark.parametrize(("question", "facts", "expected"), [
    ("What is your zip code?", BARE, ["zip code"]),
    ("What's your postal code?", BARE, ["zip code"]),
    ("Could you give me your postcode?", BARE, ["zip code"]),
    ("And the zip?", BARE, ["zip code"]),
    ("What's your postal code?", NAMED, ["customer zip code"]),
    ("Could you give me your post code?", NAMED, ["customer zip code"]),
    ("What is the gift card code?", BARE, ["code"]),
    ("What is the code on your gift card?", BARE, ["code"]),
    ("What is the code?", BARE, ["code"]),
    ("What's your promo code?", BARE, []),
    ("Can I have the reference number?", BARE, []),
    ("Can I have the reference number?", NAMED, []),
    ("What is your customer number?", BARE, ["customer id"]),
    ("What is your customer number?", ["code", "zip code"], []),
    ("What's your promo code?", ["code", "promo code"], ["promo code"]),
])
def test_a_question_names_the_fact_of_its_noun(retail, question, facts, expected):
    assert Vocabulary(retail, facts).asked(question) == expected


def test_the_scripted_user_gives_its_zip_code_not_its_gift_card_code(retail):
    from scaleenv.formats.task import Task

    task = Task.model_validate({
        "id": "retail/x", "domain": "retail", "instruction": "Redeem my gift card.",
        "tools": ["redeem_gift_card", "find_customer_by_name_zip"], "gold_chain": [],
        "initial_patch": {}, "answer_facts": [], "difficulty": {},
        "user_profile": {"persona": "You are Ann Lee.", "goals": ["Redeem my gift card."],
                         "known": {"code": "GC-QWER-7731", "zip code": "30301", "customer full name": "Ann Lee"},
                         "withheld": [], "identity": ["customer full name", "zip code"]},
        "verification": {"initial_hash": "0", "expected_hash": "0"},
    })
    user = ScriptedUser()
    user.reset(UserContext(task=task, rng=random.Random(0), spec=retail))
    asyncio.run(user.opening())
    for question in ("What's your postal code?", "Could I have your zip code, please?", "And your postcode?"):
        reply = asyncio.run(user.reply(question))
        assert "30301" in reply and "GC-QWER-7731" not in reply, (question, reply)
    reply = asyncio.run(user.reply("What is the code of the gift card?"))
    assert "GC-QWER-7731" in reply and "30301" not in reply, reply
    for question in ("What's your promo code?", "What is the reference number of your order?"):
        reply = asyncio.run(user.reply(question))
        assert "GC-QWER-7731" not in reply and "30301" not in reply, (question, reply)


def test_a_link_parameter_is_named_by_the_table_it_links_to_not_by_the_table_it_lies_in():
    """fitness_club (seed 31): "What is your member id?" got the plan id (``members.plan_id`` lent its
    table's nouns to the bare ``plan id`` fact), and "(yes/no)" was read as asking for an id ("no")."""
    spec = derive_spec(catalog()["fitness_club"], 31)
    vocab = Vocabulary(spec, ["member full name", "plan id", "session id"])
    assert vocab.asked("What is your member id?") == []
    assert vocab.asked("What is the membership plan id?") == ["plan id"]
    assert vocab.asked("Which plan id should I use?") == ["plan id"]
    assert vocab.asked("Do you confirm all of these (yes/no)?") == []


def test_asked_what_it_wants_done_the_user_says_its_open_requests_again(retail):
    """retail/00016 (seed 47): asked what it wanted done with its orders, the user said "I don't know
    that, sorry." and the careful agent had nothing to go on."""
    from scaleenv.formats.task import Task

    goal = "Every paypal order of mine just left the warehouse; please mark them shipped."
    task = Task.model_validate({
        "id": "retail/y", "domain": "retail", "instruction": goal, "tools": [], "gold_chain": [],
        "initial_patch": {}, "answer_facts": [], "difficulty": {},
        "user_profile": {"persona": "You are Ann Lee.", "goals": [goal], "known": {"customer full name": "Ann Lee"},
                         "withheld": [], "identity": ["customer full name"]},
        "verification": {"initial_hash": "0", "expected_hash": "0"},
    })
    user = ScriptedUser()
    user.reset(UserContext(task=task, rng=random.Random(0), spec=retail))
    asyncio.run(user.opening())
    for question in ("What would you like me to do with those orders?", "Could you clarify what you need?"):
        reply = asyncio.run(user.reply(question))
        assert "mark them shipped" in reply and "don't know" not in reply, (question, reply)
    assert "don't know" in asyncio.run(user.reply("What is the colour of your front door?"))


def test_asked_for_their_own_e_mail_the_user_never_gives_the_new_members():
    """fitness_club (seeds 31 and 59): asked for the e-mail on their own membership, the user gave the
    address of the member they were signing up. A new record's contact is ``new <record> <attribute>``."""
    spec = derive_spec(catalog()["fitness_club"], 0)
    vocab = Vocabulary(spec, ["member full name", "new member email", "new member phone"])
    assert vocab.asked("Could you tell me the e-mail address on your own membership?") == []
    assert vocab.asked("What is your phone number?") == []
    assert vocab.asked("What's the new member's e-mail?") == ["new member email"]
    assert vocab.asked("And the phone of the new member?") == ["new member phone"]
    assert vocab.statement("new member email", "a@b.example", ["member full name"]) == \
        "The new member's email is a@b.example."


def test_an_e_mail_address_asked_for_is_not_a_street_address():
    """Play round 26 (express logistics): "Could you give me the e-mail address on your account?" got
    "My email is ... My destination's address is 25364 Wheeler Mount", a later request's address."""
    from scaleenv.env.vocabulary import Vocabulary
    from synth_helpers import context

    vocab = Vocabulary(context("express_logistics").spec, ["customer email", "destination address"])
    for question in ("Could you give me the e-mail address on your account?", "What is your email address?",
                     "Can you confirm your E-Mail address?"):
        assert vocab.asked(question) == ["customer email"], question
    assert vocab.asked("What is the destination address?") == ["destination address"]

"""The scripted user's voice (env/user_replies.txt): every phrasing of an act reads as that act to the
reward and to the oracle, and users sound different from each other and from one turn to the next."""

from __future__ import annotations

import pytest

from scaleenv.env.voice import CANONICAL, Voice, is_next_request, phrasings
from scaleenv.reward.procedure import reply_says

READS_AS = {"yes": "yes", "nothing_else": "no", "finished": "neither", "next": "neither", "unknown": "neither"}


@pytest.mark.parametrize("act", sorted(CANONICAL))
def test_every_phrasing_reads_as_its_act(act: str) -> None:
    lines = phrasings()[act]
    assert len(lines) >= 4 and lines[0] == CANONICAL[act]
    for line in lines:
        # the reward's consent check reads a yes as a yes and nothing else as one (a thank-you before the
        # next request must not stand as a new yes to whatever the agent said last)
        assert reply_says(line) == READS_AS[act], (act, line)
        assert is_next_request(line) == (act == "next"), (act, line)


def test_a_voice_is_fixed_by_its_key_and_varies_across_users_and_turns() -> None:
    first, again = Voice("7:pet_care/00001"), Voice("7:pet_care/00001")
    said = [first.say(f"{CANONICAL['yes']} ") for _ in range(4)]
    assert said == [again.say(f"{CANONICAL['yes']} ") for _ in range(4)]
    assert said[0] != said[1] and said[0] == said[2]  # two phrasings, in turn
    voices = {Voice(f"7:pet_care/{i:05d}").say(CANONICAL["yes"]) for i in range(40)}
    assert len(voices) >= 5
    assert Voice("x", plain=True).say(CANONICAL["finished"]) == CANONICAL["finished"]


def test_a_reply_keeps_everything_but_the_stock_line() -> None:
    voice = Voice("1:x")
    text = f"My e-mail is a@example.com. {CANONICAL['yes']}"
    out = voice.say(text)
    assert out.startswith("My e-mail is a@example.com. ") and reply_says(out) == "yes"


def test_the_user_reads_its_own_date_and_number_in_any_written_form():
    """A proposal that writes the user's own values another way ("04/15/2020", "three") gets a yes; one that
    names another date gets a no (play seed 9191: "birth date 04/15/2020" got "No, that is not right")."""
    import re
    from datetime import date

    from synth_helpers import context, family_tasks, scripted_reply

    spec = context("pet_care").spec
    task = next((t for f in ("direct", "long") for t in family_tasks("pet_care", f, 8)
                 if any(isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) and f not in t.user_profile.withheld
                        for f, v in t.user_profile.known.items())), None)
    assert task is not None
    name, value = next((f, v) for f, v in task.user_profile.known.items()
                       if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v))
    day = date.fromisoformat(value)
    other = day.replace(year=day.year - 1)
    mine = scripted_reply(task, spec, f"Shall I go ahead with the {name} {day.strftime('%m/%d/%Y')}?")
    assert reply_says(mine) == "yes", mine
    wrong = scripted_reply(task, spec, f"Shall I go ahead with the {name} {other.strftime('%B %d, %Y')}?")
    assert reply_says(wrong) == "no" and value in wrong, wrong


def test_a_move_is_named_by_the_verb_its_description_opens_with():
    """A player's "I am about to discontinue all four of these (RX-0046 ...). Shall I go ahead?" named
    stop_prescription (its description: "Discontinue an active prescription. ..."), at seed 8642: every write
    that passes only ids is named by the verb its description opens with, and never by its ids alone."""
    import re

    from scaleenv.reward.procedure import names_change, talk_words
    from synth_helpers import context

    checked = renamed = 0
    for domain in ("healthcare_telemedicine", "telecom", "library_services"):
        spec = context(domain, 8642).spec
        for tool in spec.tools:
            verb = re.findall(r"[a-z]+", tool.description.lower())[:1]
            if tool.kind != "write" or not verb or len(verb[0]) < 4 or not tool.parameters \
                    or any(not p.name.endswith("_id") for p in tool.parameters):
                continue
            args = {p.name: f"REC-{i:04d}" for i, p in enumerate(tool.parameters, 1)}
            ids = " and ".join(args.values())
            said = names_change(f"I am about to {verb[0]} {ids}. Shall I go ahead?", tool.name, args, spec)
            assert said or verb[0] in talk_words(), (tool.name, verb)  # a word of ordinary talk names no move
            assert not names_change(f"About {ids}: shall I go ahead?", tool.name, args, spec), tool.name
            checked += 1
            renamed += verb[0] not in tool.name
    assert checked >= 10 and renamed >= 1

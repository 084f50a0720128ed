"""What the simulated user says reads like a person (issue 11): across a build of every catalog domain, no
goal names a raw column or tool identifier, and no persona makes a branch, a club or a user name the
speaker."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.tasks.instruction import column_phrase, language_defects
from scaleenv.universe import Universe
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

runner = CliRunner()
NAMES = sorted(catalog())
_PERSON_NAME = ("full_name", "display_name", "holder_name", "owner_name", "partner_one", "contact_name",
                "character_name")  # a character's name is a person's name (a profile "Tina" may share it)


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Universe:
    out = tmp_path_factory.mktemp("lang") / "universe"
    args = ["build", *[a for n in NAMES for a in ("--domain", n)], "--tasks-per-domain", "3", "--out", str(out),
            "--quiet"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return Universe(out)


def test_goals_name_no_raw_column_or_tool(universe: Universe) -> None:
    seen = 0
    for name in universe.domains:
        spec = universe.spec(name)
        # a scalar read is asked for by its figure's name ("What's the weekly wage bill of club ...?")
        tool_words = [t.name.replace("_", " ") for t in spec.tools if t.name.count("_") >= 2
                      and not (t.kind == "read" and (t.returns.mode == "scalar" or t.returns.table is None))]
        columns = {c.name for t in spec.tables for c in t.columns if "_" in c.name}
        for task in universe.tasks(name):
            for text in [task.instruction, *task.user_profile.goals]:
                seen += 1
                assert language_defects(text) == [], (task.id, text)
            for goal in task.user_profile.goals:
                low = goal.lower()
                leaked = [w for w in tool_words if re.search(rf"\b{re.escape(w)}\b", low)]
                assert not leaked, (task.id, goal, leaked)
                raw = [c for c in columns if re.search(rf"(?<![\w@.-]){re.escape(c)}(?![\w@-])", goal)]
                assert not raw, (task.id, goal, raw)
    assert seen >= 3 * len(NAMES)


def test_personas_are_people(universe: Universe) -> None:
    """"You are X." names a person of the task's world by their own name: never the name of a branch,
    a club, a household (a record with no person's name column), nor a user name."""
    for name in universe.domains:
        spec = universe.spec(name)
        places = [t for t in spec.tables if not {c.name for c in t.columns} & set(_PERSON_NAME)]
        for task in universe.tasks(name):
            m = re.match(r"You are (?!a |an |the )(.+?)\.$", task.user_profile.persona)
            if m is None:
                assert task.user_profile.persona.startswith("You are a staff member"), task.user_profile.persona
                continue
            who = m.group(1)
            assert not re.fullmatch(r"[a-z0-9._]+", who), (task.id, "a user name as the person", who)
            world = World.from_snapshot(spec, universe.base(name))
            apply_patch(world, task.initial_patch)
            for t in places:
                hits = [c.name for c in t.columns if c.type == "text" and world.conn.execute(
                    f'SELECT 1 FROM "{t.name}" WHERE "{c.name}" = ? LIMIT 1', (who,)).fetchone()]
                assert not hits, (task.id, f"the speaker {who!r} is a {t.name} row ({hits})")
            world.close()


def test_column_phrases_read_as_people_say_them() -> None:
    assert column_phrase("purchased_on") == "purchase date"
    assert column_phrase("scheduled_at") == "scheduled time"
    assert column_phrase("starts_at") == "start time"
    assert column_phrase("due_date") == "due date"
    assert column_phrase("loyalty_points") == "loyalty points"
    assert language_defects("Can you tell me the purchased on of my device?")
    assert language_defects("I'd like to know my sum fare by member.")
    assert language_defects("Report post PST-0044 for hate_speech.")
    assert language_defects("Can you tell me the purchase date of my device?") == []


def test_records_are_picked_by_what_the_user_holds(universe: Universe) -> None:
    """Every fact the gold chain picks a record by (an e-mail, an ISBN, a date) is one the user holds, and
    a customer is never asked for an internal code (a barcode, a POS code) or an internal id."""
    from scaleenv.synth.tasks.instruction import INTERNAL_CODE

    picked = 0
    for name in universe.domains:
        for task in universe.tasks(name):
            profile = task.user_profile
            held = {str(v) for v in profile.known.values()}
            said = " ".join(profile.goals)
            customer = not profile.persona.startswith("You are a staff member")
            for call in task.gold_chain:
                for arg in call.args.values():
                    where = arg.get("where") if isinstance(arg, dict) else None
                    for key, value in (where or {}).items():
                        if task.verification.program:
                            continue  # a selection family: its program (a condition, a ranking) picks it
                        picked += 1
                        spoken = str(value).replace("_", " ")  # an enum value as the user says it
                        assert str(value) in held or str(value) in said or spoken in said, (task.id, key, value)
                        if customer:
                            assert not INTERNAL_CODE.search(key), (task.id, key, value)
    assert picked > 0


@pytest.mark.parametrize("text", [
    "Please move 728.21 dollars from my bank into brokerage my account (Shelby Chaney).",
    "Add it to my profile my account (Kari Perez, email kperez@example.com).",
    "Raise the weekly wage for the club Mathewsstad FC (it); mark him available again.",
    "If my travel credit is at least 57, I'm Kari Perez. Please book a seat.",
    "Otherwise, please give parcel my shipment 2X3947JZ6825 to driver CRR-0001.",
    "Sadly each of them has passed away; please update the records for pet it.",
    "You are Tina. You are Tina. I need my maturity updated to kids.",
])
def test_pasted_description_seams_are_language_defects(text: str) -> None:
    from scaleenv.synth.tasks.instruction import language_defects

    assert language_defects(text), text


def test_plain_requests_have_no_seams() -> None:
    from scaleenv.synth.tasks.instruction import language_defects

    for text in ["Please cancel my order ORD-0012 and refund it to my card.",
                 "If my balance is at least 50, pay the invoice in full; otherwise pay 20.",
                 "Give my dog Rex his rabies shot on 2026-06-20.", "Move them to the new room, please."]:
        assert not language_defects(text), text


def test_a_goal_said_from_a_tool_description_says_only_what_the_tool_does():
    """Play round 21: "Transfer every cat pet of mine to another owner. Its upcoming scheduled appointments
    are cancelled" repeated the tool's rule to the agent; the user now says the first sentence alone."""
    import random

    from scaleenv.synth.tasks.families.phrasing import plain_sentence
    from scaleenv.synth.tasks.instruction import Goal
    from synth_helpers import context

    tool = next(t for t in context("pet_care").spec.tools if t.description.startswith("Transfer an active pet"))
    assert "appointments stay booked" in tool.description  # the second sentence states a rule of the tool
    text = plain_sentence(Goal(tool, {"new_owner_id": "OWN-0013"}, {}), "every cat of mine", random.Random(0))
    assert "appointments" not in text and "OWN-0013" in text and text.startswith("Transfer")

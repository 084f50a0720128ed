"""Values are judged by what they mean (issue 42, case 6): a datetime a tool accepts in either ISO form is
stored in the worlds' one normal form and compared by meaning, and the answer grader reads the spoken
forms people use ("10:00 on June 26, 2026", ``6/26/2026``, "forty-two")."""

from __future__ import annotations

import pytest

from scaleenv.formats.task import AnswerFact
from scaleenv.reward.facts import fact_stated, stated_datetimes, value_stated, word_numbers
from scaleenv.reward.state import compute_reward, same_value
from scaleenv.tools.args import validate_arguments
from scaleenv.tools.runtime import run_tool
from scaleenv.utils.dates import normal_iso, parse_iso
from scaleenv.world.world import World
from synth_helpers import built

# ------------------------------------------------------------------ stored datetimes, one normal form


def test_a_datetime_in_either_iso_form_is_bound_in_the_normal_form() -> None:
    spec = built("pet_care").spec
    tool = spec.tool("schedule_visit")
    args = {"pet_id": "PET-0015", "vet_id": "VET-0005", "reason": "annual check-up"}
    for spelled in ("2026-06-26 10:00:00", "2026-06-26T10:00", "2026-06-26 10:00", "2026-06-26T10:00:00"):
        bound = validate_arguments(tool, {**args, "scheduled_at": spelled}, spec)
        assert bound["scheduled_at"] == "2026-06-26T10:00:00", spelled
    # not a datetime column, or not a datetime: as given
    assert validate_arguments(tool, {**args, "scheduled_at": "tomorrow"}, spec)["scheduled_at"] == "tomorrow"
    assert validate_arguments(tool, {**args, "scheduled_at": "2026-06-26 10:00"})["scheduled_at"] == "2026-06-26 10:00"
    day = spec.tool("vet_schedule")  # a date asked of a datetime column stays a date
    assert validate_arguments(day, {"day": "2026-06-26", "vet_id": "VET-0005"}, spec)["day"] == "2026-06-26"


def test_normal_iso_and_parse_iso() -> None:
    assert normal_iso("2026-06-26 10:00:00") == "2026-06-26T10:00:00"
    assert normal_iso("2026-06-26T10:00") == "2026-06-26T10:00:00"
    assert normal_iso("2026-06-26") == "2026-06-26"  # no time invented
    assert normal_iso("2026-02-30 10:00") == "2026-02-30 10:00"  # no such day: as given
    assert normal_iso("2026-06-26T10:00:00+02:00") == "2026-06-26T10:00:00+02:00"  # a time zone: as given
    assert normal_iso(5) == 5
    assert parse_iso("2026-06-26 10:00") == parse_iso("2026-06-26T10:00:00")
    assert parse_iso("June 26") is None


def test_date_and_datetime_columns_compare_by_meaning() -> None:
    assert same_value("2026-06-26T10:00:00", "2026-06-26 10:00:00", "datetime")
    assert same_value("2026-06-26T10:00:00", "2026-06-26T10:00", "datetime")
    assert not same_value("2026-06-26T10:00:00", "2026-06-26 10:00:01", "datetime")
    assert not same_value("2026-06-26", "2026-06-26T00:00:00", "date")  # a day is not a moment
    assert not same_value("2026-06-26T10:00:00", "2026-06-26 10:00:00", "text")  # text compares by spelling
    assert not same_value("2026-06-26T10:00:00", None, "datetime")


def test_a_datetime_stored_with_a_space_scores_like_the_normal_form() -> None:
    """Red team: "2026-06-26 10:00:00" was accepted by the tool and stored, then failed the reward (0 of 55)."""
    d = built("pet_care")
    tool = d.spec.tool("schedule_visit")
    args = {"pet_id": "PET-0015", "vet_id": "VET-0005", "reason": "annual check-up"}
    final, expected = World.from_snapshot(d.spec, d.base), World.from_snapshot(d.spec, d.base)
    try:
        run_tool(expected, tool, {**args, "scheduled_at": "2026-06-26T10:00:00"})
        run_tool(final, tool, {**args, "scheduled_at": "2026-06-26 10:00:00"})
        assert compute_reward(final, expected).score == 1.0
        final.conn.execute("UPDATE appointments SET scheduled_at = '2026-06-26 11:00:00' "
                           "WHERE scheduled_at LIKE '2026-06-26%10:00%'")
        assert compute_reward(final, expected).score == 0.0
    finally:
        final.close()
        expected.close()


# ------------------------------------------------------------------ spoken forms of answers

@pytest.mark.parametrize(("value", "text"), [
    ("2026-06-26T10:00:00", "It is at 10:00 on June 26, 2026."),  # the time before the date
    ("2026-06-26T10:00:00", "10am, June 26, 2026"),
    ("2026-06-26T14:30:00", "at 2:30 pm on 2026-06-26"),
    ("2026-06-26T12:00:00", "at noon on June 26, 2026"),
    ("2026-06-26", "It was due on 6/26/2026."),  # US numeric
    ("2026-06-26T10:00:00", "6/26/2026 at 10:00 AM"),
    ("2026-06-26", "due 26/6/2026"),  # a first number above 12 can only be the day
    ("2026-06-26", "due 2026/06/26"),
    ("2026-05-06", "due 05/06/2026"),  # the US reading, always
])
def test_dates_in_the_forms_people_write_them(value: str, text: str) -> None:
    assert value_stated(value, text)


@pytest.mark.parametrize(("value", "text"), [
    ("2026-06-05", "due 05/06/2026"),  # read as May 6
    ("2026-06-26T10:00:00", "11:00 on June 26, 2026"),
    ("2026-06-26T10:00:00", "June 26, 2026"),  # a datetime needs its time
    ("2026-06-26", "6/26"),  # no year
])
def test_dates_are_not_stated_by_other_days_or_times(value: str, text: str) -> None:
    assert not value_stated(value, text)


def test_a_time_before_a_date_belongs_to_it() -> None:
    got = stated_datetimes("Either 10:00 on June 26, 2026 or 6/27/2026 at 3pm.")
    assert [(d.isoformat(), t.isoformat() if t else None) for d, t in got] == [
        ("2026-06-26", "10:00:00"), ("2026-06-27", "15:00:00")]


@pytest.mark.parametrize(("value", "text"), [
    (30, "You have thirty points."),
    (42, "forty-two doses are left"),
    (42, "forty two doses are left"),
    (100, "one hundred tickets"),
    (105, "one hundred and five tickets"),
    (2500, "two thousand five hundred dollars"),
    (1000, "a thousand views"),
    (7, "seven"),
])
def test_number_words_beyond_twenty(value: int, text: str) -> None:
    assert value_stated(value, text)
    assert fact_stated(AnswerFact(name="n", value=value), text)


def test_number_words_that_make_no_one_number() -> None:
    assert word_numbers("one two three, twenty one, zero") == [1, 2, 3, 21, 0]
    assert not value_stated(12, "one two")
    assert not value_stated(30, "thirteen")
    assert not fact_stated(AnswerFact(name="n", value=30, rivals=[40]), "thirty or forty")
    assert not value_stated(30.5, "thirty")  # only whole numbers are spelt out

"""Answer matching keeps its integrity (issue 42, cases 5 and 6): a value is stated only by a near-copy of
the whole of it; numbers are read only where they stand alone, never out of an id, a date or a time;
rivals are matched with the value's own tolerance and the agent's last assertion wins; a refusal's
reason counts when it is named as true of this record, not when the policy's rule is recited."""

from __future__ import annotations

import pytest

from scaleenv.formats.task import REFUSAL_FACT, AnswerFact
from scaleenv.reward.facts import fact_stated, fact_stated_in, reason_asserted, value_stated


def _fact(value: object, *rivals: object) -> AnswerFact:
    return AnswerFact(name="f", value=value, rivals=list(rivals))


# ------------------------------------------------------------------ a near-copy of the whole value

@pytest.mark.parametrize(("value", "text"), [
    ("Golden Retriever puppy food", "e"),  # red team: "e" stated any long value with an e in it
    ("Golden Retriever puppy food", "It is the Golden Retriever."),  # a part of the value
    ("Golden Retriever puppy food", "puppy food"),
    ("maria.novak@example.com", "novak"),
    ("Lake Pamelaview Clinic", "Lake Pamela"),
])
def test_a_part_of_a_value_does_not_state_it(value: str, text: str) -> None:
    assert not value_stated(value, text)
    assert not fact_stated_in(_fact(value), ["I checked the record.", text])


@pytest.mark.parametrize(("value", "text"), [
    ("Golden Retriever puppy food", "You ordered the Golden Retriever puppy fod."),  # one slip
    ("Golden Retriever puppy food", "(golden-retriever puppy food)"),
    ("A Brief History of Time", "That is 'A Brief History of Tim'"),
    ("maria.novak@example.com", "Write to maria.novak@example.co."),
    ("Marcus Lee Hamilton", "The owner is Marcus Lee Hamilton."),
])
def test_a_near_copy_of_the_whole_value_still_states_it(value: str, text: str) -> None:
    assert value_stated(value, text)
    assert fact_stated(_fact(value), text)


# ------------------------------------------------------------------ numbers as tokens of their own

@pytest.mark.parametrize(("value", "text"), [
    (63, "Your pet is PET-0063."),
    (5, "It is booked for 2026-05-28."),
    (28, "It is booked for 2026-05-28."),
    (10, "The visit is at 10:30."),
    (30, "The visit is at 10:30."),
    (10, "See you at 10am on Friday."),
    (26, "It was due on June 26, 2026."),
    (2026, "It was due on June 26, 2026."),
    (5, "It is due on June 5."),
    (3, "Version 1.3.2 is installed."),
])
def test_a_number_inside_an_id_a_date_or_a_time_is_no_number(value: int, text: str) -> None:
    assert not value_stated(value, text)
    assert not fact_stated_in(_fact(value), [text])


@pytest.mark.parametrize(("value", "text"), [
    (63, "Pet PET-0063 has 63 loyalty points."),
    (5, "On 2026-05-28 you have 5 doses left."),
    (15, "It is a 15-minute call."),
    (23, "The bag weighs 23kg."),
    (2, "You have 2 appointments."),
    (1234.5, "Your total is $1,234.50."),
])
def test_a_number_that_stands_alone_is_still_read(value: float, text: str) -> None:
    assert value_stated(value, text)


def test_a_wrong_answer_after_the_ids_seen_is_wrong() -> None:
    """Red team: "PET-0063 ... The answer is 200" scored 1 for 63."""
    fact = _fact(63, 40)
    assert not fact_stated_in(fact, ["I looked at PET-0063, APT-0041 and 2026-05-28. The answer is 200."])
    assert fact_stated_in(fact, ["I looked at PET-0063 and APT-0041. The answer is 63."])


# ------------------------------------------------------------------ rivals with the value's tolerance

def test_every_candidate_with_one_letter_changed_asserts_the_rivals() -> None:
    food = _fact("Golden Retriever puppy food", "Golden Retriever senior food")
    assert not fact_stated(food, "It is Golden Retriever puppy fooe or Golden Retriever senior fooe.")
    owner = _fact("Marcus Lee Hamilton", "Marcus Li Hamilton", "Marcus Lee Hampton")
    assert not fact_stated(owner, "The owner is Marcus Lee Hamiltan, Marcus Li Hamiltan or Marcus Lee Hamptan.")
    assert not fact_stated_in(owner, ["It is Marcus Lee Hamiltan.", "Or Marcus Li Hamiltan."])


def test_a_stretch_of_text_belongs_to_the_candidate_it_copies_most_closely() -> None:
    owner = _fact("Marcus Lee Hamilton", "Marcus Lea Hamilton")
    assert fact_stated(owner, "The owner is Marcus Lee Hamilton.")  # the value, not a slip for the rival
    assert not fact_stated(owner, "The owner is Marcus Lea Hamilton.")  # the rival, not a slip for the value
    pet = _fact("Rex Junior", "Rex")
    assert fact_stated(pet, "The pet is Rex Junior.")  # the rival inside the value is not asserted
    short = _fact("Rex", "Rex Junior")
    assert not fact_stated(short, "The pet is Rex Junior.")  # the value inside a rival is not stated


def test_the_last_assertion_wins_even_when_it_is_a_near_copy_of_a_rival() -> None:
    food = _fact("Golden Retriever puppy food", "Golden Retriever senior food")
    assert not fact_stated_in(food, ["The food is Golden Retriever puppy food.",
                                     "Sorry, I misread: it is Golden Retriever senior fod."])
    assert fact_stated_in(food, ["It is Golden Retriever senior food.", "No, wait: Golden Retriever puppy food."])


# ------------------------------------------------------------------ refusal reasons

def _reason(value: str, *rivals: str) -> AnswerFact:
    return AnswerFact(name=REFUSAL_FACT, value=value, rivals=list(rivals))


@pytest.mark.parametrize(("fact", "said"), [
    # the one rule of the tool, recited from the policy (wedding_planning, cancel_venue_booking)
    (_reason("within 9 months", "more than half"),
     "I'm sorry, I can't do that. A confirmed venue booking cannot be cancelled within 9 months of the event date."),
    # every rule of the tool in the policy's order: the right one happened to come last (job_seeking)
    (_reason("interview still scheduled", "offer stage"),
     "I can't do that. An application that has reached the offer stage cannot be withdrawn. An application with an "
     "interview still scheduled cannot be withdrawn."),
    (_reason("above 150 dollars", "less than 30 days"), "Sorry: orders above $150 cannot be voided by an agent."),
    (_reason("less than 14 days"), "Appointments may not be cancelled less than 14 days ahead."),
    # the reason's words scattered over the message, one of them out of an id
    (_reason("less than 14 days"), "Consultation CNS-0014 cannot be cancelled, as it is under review for a few days."),
    (_reason("interview still scheduled"),
     "Your interview went well, the application is still open, and the decision is scheduled for next week."),
    (_reason("above 150 dollars"), "It is not above $150, but I cannot void it."),
    (_reason("less than 14 days"), "If it is less than 14 days away, I cannot cancel it."),
])
def test_a_reason_recited_or_scattered_is_not_named_for_the_record(fact: AnswerFact, said: str) -> None:
    assert not fact_stated_in(fact, [said])


@pytest.mark.parametrize(("fact", "said"), [
    (_reason("less than 14 days"), "I cannot do that, it is against our policy: less than 14 days."),  # the oracle
    (_reason("less than 14 days"), "Your consultation on June 20 is less than 14 days away, so I cannot cancel it."),
    (_reason("less than 14 days"), "I can't cancel it because it starts in under 14 days."),
    (_reason("less than 14 days"),
     "Appointments cannot be cancelled less than 14 days before they start, and yours starts in 6 days."),
    (_reason("above 150 dollars"), "A check with a subtotal above $150 cannot be voided by an agent; this one is $359.77."),
    (_reason("above 150 dollars"), "Orders above $150 cannot be voided. Yours comes to $212.40."),
    (_reason("interview still scheduled", "offer stage"),
     "I can't withdraw it: the application has an interview still scheduled. (An application that has reached the "
     "offer stage cannot be withdrawn either.)"),
    (_reason("80 percent"),
     "ENR-0076 is at 100 percent progress, and an enrollment above 80 percent progress cannot be paused."),
])
def test_a_reason_named_for_the_record_counts(fact: AnswerFact, said: str) -> None:
    assert fact_stated_in(fact, [said])


def test_a_rule_recited_does_not_assert_a_rival_but_a_rival_said_of_the_record_does() -> None:
    fact = _reason("above 150 dollars", "less than 30 days")
    assert fact_stated(fact, "It is over $150. A check opened less than 30 days ago cannot be voided either.")
    assert not fact_stated(fact, "It is over $150, and it was opened under 30 days ago.")
    assert reason_asserted("above 150 dollars", "it comes to more than 150 USD")
    assert not reason_asserted("above 150 dollars", "a check above 150 USD cannot be voided")

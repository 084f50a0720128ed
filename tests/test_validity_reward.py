"""Task validity, reward half: fair answer matching (content parts, dates as people write them,
enum words, thousands separators), rival values that discriminate, created rows paired by content."""

from __future__ import annotations

import json

import pytest

import example_domain
from scaleenv.formats.task import REFUSAL_FACT, AnswerFact, Task, UserProfile
from scaleenv.reward import compute_reward, fact_stated, fact_stated_in
from scaleenv.reward.facts import stated_datetimes
from scaleenv.tools.runtime import run_tool
from scaleenv.world import World

INITIAL = example_domain.world().snapshot()
SPEC = example_domain.spec()


def _worlds() -> tuple[World, World, World]:
    return (World.from_snapshot(SPEC, INITIAL), World.from_snapshot(SPEC, INITIAL), World.from_snapshot(SPEC, INITIAL))


def _order(world: World, customer: str, book: str, qty: int = 1, note: str | None = None) -> str:
    args = {"customer_id": customer, "book_id": book, "quantity": qty, **({"note": note} if note else {})}
    return run_tool(world, SPEC.tool("place_order"), args)["id"]


# --------------------------------------------------------------------------------- answer matching


@pytest.mark.parametrize("value,text,stated", [
    ("2026-06-26T10:00:00", "Your visit is on 2026-06-26 10:00.", True),
    ("2026-06-26T10:00:00", "It is at 2026-06-26 10:00:00.", True),
    ("2026-06-26T10:00:00", "June 26, 2026 at 10:00 AM", True),
    ("2026-06-26T10:00:00", "26 June 2026, 10am", True),
    ("2026-06-26T14:30:00", "Jun 26 2026 at 2:30 pm", True),
    ("2026-06-26T10:00:00", "2026-06-26T10:00:00", True),
    ("2026-06-26T10:00:00", "2026-06-26 11:00", False),
    ("2026-06-26T10:00:00", "June 27, 2026 at 10:00", False),
    ("2026-06-26", "It was due on June 26, 2026.", True),
    ("2026-06-26", "the 26th of June 2026", True),
    ("2026-06-26", "2026-06-26", True),
    ("2026-06-26", "June 2026", False),
    ("2026-06-26", "2026-06-25", False),
    ("no_show", "The interview is now marked as a no show.", True),
    ("no_show", "Marked no-show.", True),
    ("no_show", "There was no showing.", False),
    ("in_progress", "It is In Progress.", True),
    (23500000.0, "The fee is 23,500,000 euros.", True),
    (5474.36, "You can still invest $5,474.36.", True),
    (5474.36, "You can still invest $5,474.", False),
])
def test_values_stated_as_people_write_them(value: object, text: str, stated: bool) -> None:
    assert fact_stated(AnswerFact(name="f", value=value), text) is stated


def test_stated_datetimes_reads_each_form() -> None:
    got = stated_datetimes("Either 2026-06-26 10:00 or June 27, 2026 at 3pm, not 26 June 2026.")
    assert [(d.isoformat(), t.isoformat() if t else None) for d, t in got] == [
        ("2026-06-26", "10:00:00"), ("2026-06-27", "15:00:00"), ("2026-06-26", None)]


def test_a_rival_value_asserted_too_means_not_stated() -> None:
    fact = AnswerFact(name="owner loyalty points", value=308, rivals=[412, 95])
    assert fact_stated(fact, "You have 308 loyalty points.")
    assert not fact_stated(fact, "Your pets' owners have 308, 412 and 95 points.")  # listing every candidate
    assert not fact_stated(fact, "It is either 308 or 95.")
    text = AnswerFact(name="pet name", value="Rex Junior", rivals=["Rex", "Bella"])
    assert fact_stated(text, "The pet is Rex Junior.")  # the rival inside the value is not asserted
    assert not fact_stated(text, "It is Rex Junior or Bella.")
    when = AnswerFact(name="scheduled at", value="2026-06-26T10:00:00", rivals=["2026-06-27T10:00:00"])
    assert fact_stated(when, "June 26, 2026 at 10:00")
    assert not fact_stated(when, "June 26, 2026 at 10:00 or June 27, 2026 at 10:00")
    same = AnswerFact(name="x", value="teen", rivals=["Teen"])  # a rival equal to the value is no rival
    assert fact_stated(same, "teen")


def test_rivals_left_out_of_json_when_empty() -> None:
    assert AnswerFact(name="a", value=1).model_dump(mode="json") == {"name": "a", "value": 1}
    assert AnswerFact(name="a", value=1, rivals=[2]).model_dump(mode="json") == {"name": "a", "value": 1,
                                                                                 "rivals": [2]}
    assert UserProfile(persona="p").model_dump(mode="json") == {"persona": "p", "goals": [], "known": {},
                                                                 "withheld": []}


def test_old_task_lines_round_trip_byte_for_byte() -> None:
    line = json.dumps({
        "answer_facts": [{"name": "owner loyalty_points", "value": 308}], "attempt": 0,
        "difficulty": {"chain_length": 1, "distractor_density": 0, "level": "easy", "sub_goals": 1,
                       "withheld_facts": 0},
        "domain": "d", "gold_chain": [], "id": "d/00000", "initial_patch": {}, "instruction": "x", "tools": [],
        "user_profile": {"goals": ["g"], "known": {"a": 1}, "persona": "", "withheld": []},
        "verification": {"distractors": {}, "expected_hash": "", "gates": {}, "gold_keys": {}, "initial_hash": ""},
    }, sort_keys=True, separators=(",", ":"))
    assert Task.model_validate_json(line).to_jsonl() == line


# --------------------------------------------------------------------------------- created rows


def test_swapped_independent_inserts_still_score_one() -> None:
    initial, expected, final = _worlds()
    _order(expected, "C001", "B001")
    _order(expected, "C002", "B003", 2)
    _order(final, "C002", "B003", 2)  # the same two orders, in the other order: the ids are swapped
    _order(final, "C001", "B001")
    keys = {t: expected.touched().get(t, set()) | final.touched().get(t, set()) for t in ("orders", "books")}
    r = compute_reward(final, expected, keys=keys, initial=initial)
    assert r.score == 1.0, r.diff
    # paired by content, not by id: without knowing the initial world the swap is two changed rows
    assert compute_reward(final, expected, keys=keys).score == 0.0


def test_create_wrong_then_delete_and_create_right_scores_one() -> None:
    initial, expected, final = _worlds()
    _order(expected, "C001", "B003", 2)
    wrong = _order(final, "C001", "B001")  # takes the id the expected order has
    right = _order(final, "C001", "B003", 2)
    final.conn.execute("DELETE FROM orders WHERE id = ?", (wrong,))  # then the wrong one is removed
    final.conn.execute("UPDATE books SET stock = stock + 1 WHERE id = 'B001'")
    assert right != wrong
    keys = {t: expected.touched().get(t, set()) | final.touched().get(t, set()) for t in ("orders", "books")}
    r = compute_reward(final, expected, keys=keys, initial=initial)
    assert r.score == 1.0, r.diff


def test_created_rows_still_need_the_right_content_and_count() -> None:
    initial, expected, final = _worlds()
    _order(expected, "C001", "B003", 2, note="gift wrap please")
    _order(final, "C002", "B003", 2, note="gift wrap please")  # the wrong customer
    keys = {t: expected.touched().get(t, set()) | final.touched().get(t, set()) for t in ("orders", "books")}
    r = compute_reward(final, expected, keys=keys, initial=initial)
    assert r.score == 0.0 and any("customer_id: expected 'C001', got 'C002'" in d for d in r.diff)
    initial, expected, final = _worlds()
    _order(expected, "C001", "B003", 1)
    _order(final, "C001", "B003", 1)
    extra = _order(final, "C002", "B003", 1)
    keys = {t: expected.touched().get(t, set()) | final.touched().get(t, set()) for t in ("orders", "books")}
    r = compute_reward(final, expected, keys=keys, initial=initial)
    assert r.score == 0.0 and f"orders[{extra!r}]: unexpected row written (extra write)" in r.diff


def test_references_to_created_rows_follow_the_pairing() -> None:
    initial, expected, final = _worlds()
    a = _order(expected, "C001", "B001")
    _order(expected, "C002", "B003")
    expected.conn.execute("INSERT INTO payments (id, order_id, amount, refunded) VALUES (10, ?, 9.5, 0)", (a,))
    b = _order(final, "C002", "B003")
    a2 = _order(final, "C001", "B001")
    assert a2 != a
    final.conn.execute("INSERT INTO payments (id, order_id, amount, refunded) VALUES (10, ?, 9.5, 0)", (a2,))
    keys = {t: expected.touched().get(t, set()) | final.touched().get(t, set()) for t in ("orders", "books",
                                                                                          "payments")}
    assert compute_reward(final, expected, keys=keys, initial=initial).score == 1.0
    # the payment on the other created order is wrong, though its order_id equals the expected one's
    final.conn.execute("UPDATE payments SET order_id = ? WHERE id = 10", (b,))
    assert b == a
    r = compute_reward(final, expected, keys=keys, initial=initial)
    assert r.score == 0.0 and any(d.startswith("payments[10].order_id") for d in r.diff), r.diff


def test_the_last_word_on_an_attribute_counts_not_an_earlier_description():
    """Found by playing marketplace/00002 and airline/00003: describing the record before acting
    ("status paid") must not make the later, correct answer ("now cancelled") fail."""
    from scaleenv.formats.task import AnswerFact
    from scaleenv.reward.facts import fact_stated_in

    status = AnswerFact(name="order status", value="cancelled", rivals=["paid", "shipped"])
    assert fact_stated_in(status, ["Order ORD-0041 (status paid): shall I cancel it?", "Its status is: cancelled."])
    assert not fact_stated_in(status, ["It is cancelled.", "Sorry, it is paid."])  # the last word is a rival
    assert not fact_stated_in(status, ["Statuses: paid, shipped, cancelled."])  # every candidate at once
    assert not fact_stated_in(status, ["I could not find it."])
    bags = AnswerFact(name="free_bags_left", value=2, rivals=[0, 1])
    assert fact_stated_in(bags, ["You have used 1 bag so far.", "You can still check 2 bags free of charge."])
    assert not fact_stated_in(bags, ["0, 1 or 2 bags."])


@pytest.mark.parametrize(("reason", "said"), [
    ("above 150 dollars", "A check with a subtotal above $150 cannot be voided by an agent; this one is $359.77."),
    ("above 150 dollars", "It comes to more than 150 USD, so I can't void it."),
    ("less than 30 days", "The account was opened under 30 days ago."),
    ("within 9 months", "The wedding is within the next 9 months, so it cannot be cancelled."),
    ("70 percent", "The course is already 70% complete."),
    ("larger than 1500 KB", "That attachment is over 1,500 kb."),
    ("2000 dollars", "The limit is $2,000.00."),
    ("more than 23 kg", "The bag weighs over 23kg."),
])
def test_a_policy_reason_is_stated_in_any_common_wording(reason, said):
    fact = AnswerFact(name=REFUSAL_FACT, value=reason)
    assert fact_stated(fact, said)
    assert fact_stated_in(fact, ["Let me check.", said])


@pytest.mark.parametrize("said", ["The subtotal is below $150.", "It is above $1,500.", "I cannot void it.",
                                  "It is above 150 points."])
def test_a_policy_reason_is_not_stated_by_other_figures_or_no_reason(said):
    assert not fact_stated(AnswerFact(name=REFUSAL_FACT, value="above 150 dollars"), said)


def test_a_rival_reason_in_other_words_is_asserted_too():
    fact = AnswerFact(name=REFUSAL_FACT, value="above 150 dollars", rivals=["less than 30 days"])
    assert fact_stated(fact, "It is over $150.")
    assert not fact_stated(fact, "It is over $150, and it was opened under 30 days ago.")


def test_reason_wording_applies_only_to_policy_reasons():
    assert not fact_stated(AnswerFact(name="note", value="above 150 dollars"), "over $150")


def test_a_negative_amount_with_its_currency_keeps_its_sign():
    """stock_trading/00012 (seed 73): "buying power ... is -$92,143.74" was read as +92,143.74."""
    fact = AnswerFact(name="buying_power", value=-92143.74, rivals=[-17756.74])
    assert fact_stated(fact, "Your buying power is -$92,143.74 now.")
    assert fact_stated(AnswerFact(name="x", value=-5), "It is $-5.")
    assert not fact_stated(AnswerFact(name="x", value=92143.74), "Your buying power is -$92,143.74 now.")


def test_the_last_sentence_that_names_the_attribute_is_the_agents_word():
    """telecom/00001 (seed 73): "215.61 still due" on one bill, then "the total you owe is 862.44":
    the rival in the earlier sentence failed the stated total."""
    fact = AnswerFact(name="outstanding", value=862.44, rivals=[215.61, 0.0])
    said = ("The bill BIL-0074 is 292.93 dollars (77.32 paid, 215.61 still due). I cannot dispute it. "
            "The total you owe on your account is 862.44 dollars.")
    assert fact_stated_in(fact, [said])
    assert not fact_stated_in(fact, ["The totals are 862.44 and 215.61."])  # one sentence, every candidate
    assert not fact_stated_in(fact, ["It is 862.44. Or maybe 215.61."])  # the last word is a rival
    dump = '{"id": "A", "outstanding": 215.61}\n{"id": "B", "outstanding": 862.44}'
    assert not fact_stated_in(fact, [dump])  # pasted outputs are judged whole

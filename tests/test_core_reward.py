"""Reward: column-by-column state match by policy, extra writes, missing rows, answer facts."""

from __future__ import annotations

import pytest

import example_domain
from scaleenv.reward import AnswerFact, compute_reward, fact_stated, fuzzy_similarity
from scaleenv.reward.state import same_value
from scaleenv.world import World

INITIAL = example_domain.world().snapshot()


def worlds() -> tuple[World, World]:
    spec = example_domain.spec()
    return World.from_snapshot(spec, INITIAL), World.from_snapshot(spec, INITIAL)


def test_identical_worlds_score_one() -> None:
    final, expected = worlds()
    r = compute_reward(final, expected)
    assert r.score == 1.0 and r.success is True
    assert r.components == {"state_match": 1.0, "mismatched_rows": 0.0, "mismatched_cells": 0.0,
                             "answer_facts": 1.0}
    assert r.diff == []
    assert r.to_json() == {"score": 1.0, "success": True, "components": r.components, "diff": []}


def test_exact_numbers_compare_by_value() -> None:
    final, expected = worlds()
    expected.conn.execute("UPDATE payments SET refunded = 5 WHERE id = 1")
    final.conn.execute("UPDATE payments SET refunded = 5.0 WHERE id = 1")
    assert compute_reward(final, expected).score == 1.0
    # Float round-off is not a mismatch: 0.1 + 0.2 == 0.3 by value.
    expected.conn.execute("UPDATE payments SET refunded = 0.3 WHERE id = 2")
    final.conn.execute("UPDATE payments SET refunded = 0.1 + 0.2 WHERE id = 2")
    assert final.row("payments", 2)["refunded"] != 0.3
    assert compute_reward(final, expected).score == 1.0
    # A different number is.
    final.conn.execute("UPDATE payments SET refunded = 5.01 WHERE id = 1")
    r = compute_reward(final, expected)
    assert r.score == 0.0 and r.success is False
    assert r.diff == ["payments[1].refunded: expected 5.0, got 5.01"]
    assert r.components["mismatched_cells"] == 1.0 and r.components["mismatched_rows"] == 1.0


def test_same_value_rules() -> None:
    assert same_value(1, 1.0) and same_value(2.5, 2.5000000000001)
    assert not same_value(2.5, 2.51) and not same_value("1", 1) and not same_value(None, 0)
    assert not same_value(True, 2)
    assert same_value('{"a": 1, "b": [1, 2]}', '{"b":[1,2],"a":1.0}', "json")
    assert not same_value('{"a": 1}', '{"a": 2}', "json")
    assert not same_value('{"a": 1}', '{"a":1}', "text"), "text columns compare by spelling"


def test_json_columns_compare_documents() -> None:
    final, expected = worlds()
    expected.conn.execute("""UPDATE customers SET prefs = '{"genre": "science", "n": 1}' WHERE id = 'C001'""")
    final.conn.execute("""UPDATE customers SET prefs = '{"n":1.0,"genre":"science"}' WHERE id = 'C001'""")
    assert compute_reward(final, expected).score == 1.0


def test_semantic_columns_use_the_fuzzy_matcher() -> None:
    final, expected = worlds()
    expected.conn.execute("UPDATE orders SET note = 'Please gift wrap it' WHERE id = 'O002'")
    final.conn.execute("UPDATE orders SET note = 'please gift-wrap it.' WHERE id = 'O002'")
    assert fuzzy_similarity("Please gift wrap it", "please gift-wrap it.") >= 0.85
    assert compute_reward(final, expected).score == 1.0
    final.conn.execute("UPDATE orders SET note = 'leave at the door' WHERE id = 'O002'")
    r = compute_reward(final, expected)
    assert r.score == 0.0
    assert len(r.diff) == 1 and r.diff[0].startswith("orders['O002'].note: expected ~'Please gift wrap it', got "
                                                     "'leave at the door' (similarity ")


def test_semantic_threshold_and_custom_matcher() -> None:
    final, expected = worlds()
    expected.conn.execute("UPDATE books SET title = 'Dune Messiah' WHERE id = 'B001'")
    final.conn.execute("UPDATE books SET title = 'Dune Mesiah' WHERE id = 'B001'")
    sim = fuzzy_similarity("Dune Messiah", "Dune Mesiah")
    assert 0.85 < sim < 1.0
    assert compute_reward(final, expected).success
    assert not compute_reward(final, expected, threshold=0.99).success
    calls = []

    def strict(expected_text: str, actual: str) -> float:
        calls.append((expected_text, actual))
        return 1.0 if expected_text == actual else 0.0

    r = compute_reward(final, expected, matcher=strict)
    assert not r.success and calls == [("Dune Messiah", "Dune Mesiah")]
    assert "similarity 0.00" in r.diff[0]
    assert compute_reward(final, expected, matcher=lambda a, b: 0.5, threshold=0.5).success


def test_semantic_none_is_an_exact_mismatch() -> None:
    final, expected = worlds()
    final.conn.execute("UPDATE orders SET note = NULL WHERE id = 'O002'")
    r = compute_reward(final, expected, matcher=lambda a, b: 1.0)
    assert r.diff == ["orders['O002'].note: expected 'gift wrap', got None"]


def test_exempt_columns_are_ignored() -> None:
    final, expected = worlds()
    final.conn.execute("UPDATE orders SET created_at = '2030-01-01T00:00:00' WHERE id = 'O001'")
    final.conn.execute("UPDATE customers SET id = 'C001' WHERE id = 'C001'")  # exempt key column, no-op
    r = compute_reward(final, expected)
    assert r.success and r.diff == [] and r.components["mismatched_rows"] == 0.0


def test_extra_writes_count_as_mismatches() -> None:
    final, expected = worlds()
    final.load_rows("payments", [{"id": 3, "order_id": "O001", "amount": 1.0}], log=True)
    r = compute_reward(final, expected)
    assert not r.success
    assert r.diff == ["payments[3]: unexpected row written (extra write)"]
    assert r.components == {"state_match": 0.0, "mismatched_rows": 1.0, "mismatched_cells": 0.0,
                            "answer_facts": 1.0}


def test_missing_rows_count_as_mismatches() -> None:
    final, expected = worlds()
    expected.load_rows("payments", [{"id": 3, "order_id": "O002", "amount": 10.0}], log=True)
    final.conn.execute("DELETE FROM payments WHERE id = 1")
    r = compute_reward(final, expected)
    assert r.diff == ["payments[1]: expected row is missing", "payments[3]: expected row is missing"]
    assert r.components["mismatched_rows"] == 2.0


def test_keys_restrict_the_comparison() -> None:
    final, expected = worlds()
    final.conn.execute("UPDATE books SET stock = 0 WHERE id = 'B003'")
    assert not compute_reward(final, expected).success
    assert compute_reward(final, expected, keys={"books": {"B001"}}).success
    assert not compute_reward(final, expected, keys=final.touched()).success


def test_diff_explains_every_mismatch() -> None:
    final, expected = worlds()
    final.conn.execute("UPDATE books SET stock = 9, price = 1.25 WHERE id = 'B001'")
    final.conn.execute("UPDATE orders SET status = 'cancelled', created_at = '2031-01-01T00:00:00' WHERE id = 'O002'")
    r = compute_reward(final, expected)
    assert sorted(r.diff) == sorted([
        "books['B001'].price: expected 9.5, got 1.25",
        "books['B001'].stock: expected 3, got 9",
        "orders['O002'].status: expected 'pending', got 'cancelled'",
    ])
    assert r.components["mismatched_rows"] == 2.0 and r.components["mismatched_cells"] == 3.0


# --- answer facts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text, stated",
    [
        (1234.5, "Your total is $1,234.50.", True),
        (1234.5, "Your total is 1234.5 dollars", True),
        (1234.5, "Your total is $1,234.", False),
        (3, "You have 3 copies left", True),
        (3, "You have 3.0 copies left", True),
        (2, "Order O002 is pending", False),  # digits inside an id are not the number 2
        (1000007, "Order #W1000007 is pending", False),
        (-4.5, "the balance is -4.5", True),
        (0, "none left", False),
        ("Dune", "You ordered DUNE by Frank Herbert", True),
        ("Dune", "You ordered Dunes", False),
        ("A Brief History of Time", "That is 'a brief history of time'!", True),
        ("A Brief History of Time", "That is 'A Brief History of Tim'", True),  # long values match fuzzily
        ("SPQR", "That is SPQ", False),
        (True, "Yes, it is in stock.", True),
        (False, "No.", True),
        (False, "Nothing to report", False),
    ],
)
def test_fact_stated(value: object, text: str, stated: bool) -> None:
    assert fact_stated(AnswerFact(name="f", value=value), text) is stated


def test_answer_facts_in_the_reward() -> None:
    final, expected = worlds()
    facts = [AnswerFact(name="price", value=15.25), AnswerFact(name="title", value="SPQR")]
    r = compute_reward(final, expected, answer_facts=facts, said="SPQR costs $15.25")
    assert r.success and r.components["answer_facts"] == 1.0
    r = compute_reward(final, expected, answer_facts=facts, said="spqr is in stock")
    assert not r.success and r.score == 0.0
    assert r.components["answer_facts"] == 0.5 and r.components["state_match"] == 1.0
    assert r.diff == ["answer fact 'price' = 15.25 was not stated to the user"]

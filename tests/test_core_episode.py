"""Episode: reset, call_tool, tool schemas, state hash, snapshot, evaluate."""

from __future__ import annotations

import re

import pytest

import example_domain
from scaleenv.env import Episode
from scaleenv.reward import AnswerFact
from scaleenv.world import World

SPEC = example_domain.spec()
INITIAL = example_domain.world().snapshot()
GOLD = [
    ("place_order", {"customer_id": "C002", "book_id": "B001", "quantity": 2, "note": "birthday present"}),
    ("refund_payment", {"payment_id": 2, "amount": 5.5}),
]


def expected_world(gold=GOLD) -> tuple[World, dict]:
    probe = Episode(SPEC, INITIAL)
    for name, args in gold:
        assert probe.call_tool(name, args).ok
    return World.from_snapshot(SPEC, probe.snapshot()), probe.world.touched()


def test_reset_restores_state_and_clears_stats() -> None:
    ep = Episode(SPEC, INITIAL)
    h0, dump0 = ep.state_hash(), ep.world.dump()
    assert ep.call_tool("cancel_order", {"order_id": "O002"}).ok
    assert not ep.call_tool("cancel_order", {"order_id": "O002"}).ok
    ep.say("done")
    assert ep.state_hash() != h0 and ep.stats.calls == 2 and ep.stats.errors == 1
    ep.reset()
    assert ep.state_hash() == h0 and ep.world.dump() == dump0
    assert ep.stats.to_json() == {"calls": 0, "errors": 0, "by_code": {}}
    assert ep.said == [] and ep.world.touched() == {}
    assert ep.call_tool("cancel_order", {"order_id": "O002"}).ok, "the reset state is usable"


def test_call_tool_results_and_error_stats() -> None:
    ep = Episode(SPEC, INITIAL)
    res = ep.call_tool("get_book", {"book_id": "B001"})
    assert res.ok and res.value["title"] == "Dune" and res.error is None
    res = ep.call_tool("get_book", '{"book_id": "B404"}')
    assert (res.ok, res.error, res.message) == (False, "not_found", "no book with id B404")
    res = ep.call_tool("fly_to_moon", {})
    assert (res.error, res.message) == ("unknown_tool", "no tool named 'fly_to_moon'")
    assert ep.call_tool(None).error == "unknown_tool"
    assert ep.call_tool("get_book", {"isbn": 1}).error == "invalid_arguments"
    assert ep.stats.to_json() == {"calls": 5, "errors": 4,
                                  "by_code": {"invalid_arguments": 1, "not_found": 1, "unknown_tool": 2}}


def test_tool_subset() -> None:
    ep = Episode(SPEC, INITIAL, tools=["get_book", "search_books"])
    assert ep.tool_names == ["get_book", "search_books"]
    assert [s["function"]["name"] for s in ep.tool_schemas()] == ["get_book", "search_books"]
    assert ep.call_tool("cancel_order", {"order_id": "O002"}).error == "unknown_tool"


_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}


def _check_json_schema(schema: dict) -> None:
    """A structural check of the subset of JSON Schema that OpenAI function parameters use."""
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert set(schema["required"]) <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    for name, prop in schema["properties"].items():
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        assert prop["type"] in _JSON_TYPES
        assert isinstance(prop["description"], str) and prop["description"]
        if prop["type"] == "array":
            assert prop["items"]["type"] in _JSON_TYPES - {"array", "object"}
        if "enum" in prop:
            assert prop["enum"] and all(isinstance(v, str | int | float | bool) for v in prop["enum"])
        for bound in ("minimum", "maximum"):
            if bound in prop:
                assert isinstance(prop[bound], int | float) and prop["type"] in {"integer", "number"}


def test_tool_schemas_are_openai_functions() -> None:
    import json

    ep = Episode(SPEC, INITIAL)
    schemas = ep.tool_schemas()
    assert len(schemas) == len(SPEC.tools) == 7
    for s in schemas:
        assert set(s) == {"type", "function"} and s["type"] == "function"
        fn = s["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", fn["name"]) and fn["description"]
        _check_json_schema(fn["parameters"])
        assert json.loads(json.dumps(s)) == s
    search = next(s for s in schemas if s["function"]["name"] == "search_books")["function"]["parameters"]
    assert search["required"] == []
    assert search["properties"]["genre"]["enum"] == ["fiction", "science", "history"]
    refund = next(s for s in schemas if s["function"]["name"] == "refund_payment")["function"]["parameters"]
    assert refund["properties"]["amount"] == {"type": "number", "description": "amount", "minimum": 0.01}


def test_state_hash_and_snapshot() -> None:
    ep = Episode(SPEC, INITIAL)
    assert ep.state_hash() == example_domain.world().state_hash()
    assert ep.call_tool("set_vip", {"customer_id": "C002", "vip": True}).ok
    snap = ep.snapshot()
    other = World.from_snapshot(SPEC, snap)
    assert other.state_hash() == ep.state_hash()
    assert other.row("customers", "C002")["vip"] == 1
    ep.reset()
    assert ep.world.row("customers", "C002")["vip"] == 0


def test_evaluate_gold_actions_score_one() -> None:
    expected, gold_keys = expected_world()
    ep = Episode(SPEC, INITIAL, expected, gold_keys=gold_keys)
    for name, args in GOLD:
        assert ep.call_tool(name, args).ok
    r = ep.evaluate()
    assert r.score == 1.0 and r.success and r.diff == []
    assert r.components["state_match"] == 1.0


def test_evaluate_nothing_scores_zero_on_a_write_goal() -> None:
    expected, gold_keys = expected_world()
    for keys in (gold_keys, None):  # without gold_keys the expected world's change log says what changed
        ep = Episode(SPEC, INITIAL, expected, gold_keys=keys)
        r = ep.evaluate()
        assert r.score == 0.0 and not r.success
        assert "orders['O003']: expected row is missing" in r.diff
        assert "books['B001'].stock: expected 1, got 3" in r.diff
        assert "payments[2].refunded: expected 15.5, got 10.0" in r.diff
        assert r.components["mismatched_rows"] == 3.0


def test_evaluate_order_of_commutative_writes_does_not_matter() -> None:
    expected, gold_keys = expected_world()
    ep = Episode(SPEC, INITIAL, expected, gold_keys=gold_keys)
    for name, args in reversed(GOLD):
        assert ep.call_tool(name, args).ok
    assert ep.evaluate().success


def test_evaluate_wrong_and_extra_writes() -> None:
    expected, gold_keys = expected_world()
    ep = Episode(SPEC, INITIAL, expected, gold_keys=gold_keys)
    assert ep.call_tool(GOLD[0][0], {**GOLD[0][1], "quantity": 1}).ok  # wrong quantity
    assert ep.call_tool(*GOLD[1]).ok
    assert ep.call_tool("cancel_order", {"order_id": "O002"}).ok  # not asked for
    r = ep.evaluate()
    assert not r.success
    assert "orders['O003'].quantity: expected 2, got 1" in r.diff
    assert "orders['O002'].status: expected 'pending', got 'cancelled'" in r.diff
    # The semantic note still matches; the exempt timestamp is not compared.
    assert not any(".note" in d or "created_at" in d for d in r.diff)


def test_evaluate_read_goal_with_answer_facts() -> None:
    expected = World.from_snapshot(SPEC, INITIAL)
    ep = Episode(SPEC, INITIAL, expected, answer_facts=[AnswerFact(name="price", value=15.25)])
    assert ep.call_tool("get_book", {"book_id": "B003"}).ok
    assert ep.evaluate().score == 0.0
    ep.say("SPQR costs $15.25.")
    ep.say(None)  # type: ignore[arg-type]  # ignored, not an error
    assert ep.evaluate().score == 1.0
    assert ep.evaluate(said="it costs 15").score == 0.0


def test_evaluate_without_expected_world() -> None:
    ep = Episode(SPEC, INITIAL)
    with pytest.raises(ValueError, match="no expected world"):
        ep.evaluate()


def test_episodes_are_isolated() -> None:
    expected, gold_keys = expected_world()
    a = Episode(SPEC, INITIAL, expected, gold_keys=gold_keys)
    b = Episode(SPEC, INITIAL, expected, gold_keys=gold_keys)
    for name, args in GOLD:
        assert a.call_tool(name, args).ok
    assert a.evaluate().success and not b.evaluate().success
    assert b.world.row("books", "B001")["stock"] == 3
    assert expected.row("books", "B001")["stock"] == 1, "evaluating never writes the shared expected world"
    a.close()
    assert b.call_tool("get_book", {"book_id": "B001"}).ok

"""Tool execution: argument validation, contracts, atomicity (property-based), junk arguments
(property-based), generated ids, Python tools under contracts, deterministic JSON."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import example_domain
from scaleenv.env import Episode
from scaleenv.errors import ToolError
from scaleenv.formats.domain import DomainSpec
from scaleenv.tools import execute_tool, validate_arguments
from scaleenv.tools.runtime import run_tool
from scaleenv.world.ddl import next_id_query


def _py_tool(name: str, source: str, kind: str = "write", params: list | None = None, **extra: Any) -> dict:
    return {
        "name": name,
        "description": f"{name} (test tool)",
        "kind": kind,
        "parameters": params if params is not None else [{"name": "book_id", "type": "string"}],
        "implementation": {"kind": "python", "source": source},
        **extra,
    }


# The bookshop plus tools that fail *after* writing, in every way a tool can fail.
FAILING_TOOLS = [
    {
        "name": "discount_all",
        "description": "Lower every price; prices may not go below 1 (postcondition) or 0 (constraint).",
        "kind": "write",
        "parameters": [{"name": "amount", "type": "number"}],
        "effects": ["UPDATE books SET price = price - :amount", "UPDATE payments SET refunded = refunded"],
        "postconditions": [{"sql": "SELECT MIN(price) >= 1 FROM books", "error": "too_cheap"}],
        "errors": [{"code": "too_cheap"}],
    },
    {
        "name": "restock",
        "description": "Add stock, then copy it to orders as a quantity (violates quantity <= 10 when large).",
        "kind": "write",
        "parameters": [{"name": "book_id", "type": "string"}, {"name": "n", "type": "integer"}],
        "effects": [
            "UPDATE books SET stock = stock + :n WHERE id = :book_id",
            "UPDATE orders SET quantity = (SELECT stock FROM books WHERE id = :book_id) WHERE book_id = :book_id",
        ],
    },
    _py_tool(
        "py_raise",
        "def run(db, args):\n"
        "    db.execute('UPDATE books SET stock = stock + 1 WHERE id = :b', {'b': args['book_id']})\n"
        "    if args['book_id'] != 'B003':\n"
        "        raise ValueError('boom')\n"
        "    return {'ok': True}\n",
    ),
    _py_tool(
        "py_fail",
        "def run(db, args):\n"
        "    db.execute('DELETE FROM payments')\n"
        "    db.fail('nope', 'refused after deleting')\n",
        errors=[{"code": "nope"}],
    ),
    _py_tool(
        "py_post",
        "def run(db, args):\n"
        "    db.execute('UPDATE books SET title = :t WHERE id = :b', {'t': 'X', 'b': args['book_id']})\n",
        postconditions=[{"sql": "SELECT title != 'X' FROM books WHERE id = :book_id", "error": "bad_title"}],
        errors=[{"code": "bad_title"}],
    ),
]


def spec_with(tools: list[dict]) -> DomainSpec:
    data = copy.deepcopy(example_domain.SPEC)
    data["tools"] += tools
    return DomainSpec.model_validate(data)


SPEC = spec_with(FAILING_TOOLS)


@pytest.fixture()
def world():
    w = example_domain.world()
    w.spec = SPEC
    return w


INITIAL = example_domain.world().snapshot()


def episode(spec: DomainSpec = SPEC) -> Episode:
    return Episode(spec, INITIAL)


def out(res: Any) -> dict:
    return json.loads(res.output)


# --- argument validation ---------------------------------------------------------------------------


def test_validate_arguments_binds_every_parameter() -> None:
    tool = SPEC.tool("place_order")
    bound = validate_arguments(tool, {"customer_id": "C001", "book_id": "B001", "quantity": 2.0})
    assert bound == {"customer_id": "C001", "book_id": "B001", "quantity": 2, "note": None}
    assert isinstance(bound["quantity"], int)
    assert validate_arguments(tool, '{"customer_id": "C1", "book_id": "B1", "quantity": 1}')["quantity"] == 1


@pytest.mark.parametrize(
    "args, needle",
    [
        ({"book_id": "B001", "quantity": 1}, "missing required parameter 'customer_id'"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": 1, "coupon": "X"}, "unknown parameter 'coupon'"),
        ({"customer_id": 1, "book_id": "B001", "quantity": 1}, "customer_id: expected a string"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": "2"}, "quantity: expected an integer"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": True}, "quantity: expected an integer"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": 1.5}, "quantity: expected an integer"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": 0}, "quantity: must be >= 1"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": 11}, "quantity: must be <= 10"),
        ({"customer_id": "C001", "book_id": "B001", "quantity": 2**70}, "out of range"),
        ({"customer_id": "\ud800", "book_id": "B001", "quantity": 1}, "not valid Unicode"),
        ({"customer_id": "C" * 10_001, "book_id": "B001", "quantity": 1}, "longer than"),
        ([1, 2], "arguments must be a JSON object"),
        ("{not json", "arguments are not valid JSON"),
        ("[" * 60_000, "arguments are not valid JSON"),  # deep, but under the size cap
    ],
)
def test_invalid_arguments(args: Any, needle: str) -> None:
    with pytest.raises(ToolError) as info:
        validate_arguments(SPEC.tool("place_order"), args)
    assert info.value.code == "invalid_arguments"
    assert needle in info.value.message


def test_enum_number_and_array_parameters() -> None:
    search = SPEC.tool("search_books")
    with pytest.raises(ToolError, match="genre: must be one of"):
        validate_arguments(search, {"genre": "poetry"})
    with pytest.raises(ToolError, match="max_price: expected a finite number"):
        validate_arguments(search, {"max_price": math.nan})
    with pytest.raises(ToolError, match="max_price: expected a number"):
        validate_arguments(search, {"max_price": "10"})
    assert validate_arguments(search, None) == {"genre": None, "max_price": None}
    assert validate_arguments(search, "") == {"genre": None, "max_price": None}
    arr = DomainSpec.model_validate(
        {"name": "a", "tables": [{"name": "t", "columns": [{"name": "id"}]}],
         "tools": [{"name": "f", "description": "d", "parameters": [{"name": "ids", "type": "array", "items": "integer"}],
                    "returns": {"query": "SELECT COUNT(*) FROM json_each(:ids)", "mode": "scalar"}}]}
    ).tool("f")
    assert validate_arguments(arr, {"ids": [1, 2, 3]}) == {"ids": "[1, 2, 3]"}
    with pytest.raises(ToolError, match="ids: expected an integer"):
        validate_arguments(arr, {"ids": [1, "2"]})
    with pytest.raises(ToolError, match="ids: expected an array"):
        validate_arguments(arr, {"ids": 1})


# --- contracts, results --------------------------------------------------------------------------------


def test_precondition_failure_uses_declared_error_and_message(world) -> None:
    res = execute_tool(world, SPEC.tool("place_order"), {"customer_id": "C001", "book_id": "B002", "quantity": 1})
    assert not res.ok and res.error == "out_of_stock"
    assert out(res) == {"error": "out_of_stock", "message": "not enough copies of B002 in stock"}
    res = execute_tool(world, SPEC.tool("get_book"), {"book_id": "B404"})
    assert (res.error, res.message) == ("not_found", "no book with id B404")
    res = execute_tool(world, SPEC.tool("cancel_order"), {"order_id": "O001"})
    assert (res.error, res.message) == ("invalid_status", "only pending orders can be cancelled")


def test_write_tool_applies_effects_and_returns_row(world) -> None:
    res = execute_tool(world, SPEC.tool("place_order"), {"customer_id": "C002", "book_id": "B003", "quantity": 3,
                                                         "note": "gift"})
    assert res.ok
    assert res.value == {"id": "O003", "customer_id": "C002", "book_id": "B003", "quantity": 3, "total": 45.75,
                         "status": "pending", "note": "gift", "created_at": "2026-06-15T09:00:00"}
    assert world.row("books", "B003")["stock"] == 4
    assert world.touched() == {"orders": {"O003"}, "books": {"B003"}}


def test_read_tool_shapes(world) -> None:
    res = execute_tool(world, SPEC.tool("search_books"), {"max_price": 12})
    assert [b["id"] for b in res.value] == ["B001", "B002"]
    assert execute_tool(world, SPEC.tool("count_orders_by_status"), {"status": "pending"}).value == 1
    assert execute_tool(world, SPEC.tool("count_orders_by_status"), {"status": "cancelled"}).output == "0"


def test_run_tool_raises_tool_error(world) -> None:
    with pytest.raises(ToolError) as info:
        run_tool(world, SPEC.tool("refund_payment"), {"payment_id": 2, "amount": 25})
    assert info.value.code == "refund_exceeds_payment"
    assert run_tool(world, SPEC.tool("refund_payment"), {"payment_id": 2, "amount": 20.5})["refunded"] == 30.5


@pytest.mark.parametrize(
    "name, args, code",
    [
        ("discount_all", {"amount": 9}, "too_cheap"),  # postcondition after both effects
        ("discount_all", {"amount": 100}, "constraint_violation"),  # CHECK price >= 0 in the first effect
        ("restock", {"book_id": "B003", "n": 20}, "constraint_violation"),  # second effect breaks quantity <= 10
        ("py_raise", {"book_id": "B001"}, "internal_error"),  # Python raises after writing
        ("py_fail", {"book_id": "B001"}, "nope"),  # db.fail after deleting every payment
        ("py_post", {"book_id": "B001"}, "bad_title"),  # Python write, then postcondition
    ],
)
def test_failures_after_writes_leave_the_world_unchanged(world, name: str, args: dict, code: str) -> None:
    before_hash, before_dump = world.state_hash(), world.dump()
    res = execute_tool(world, SPEC.tool(name), args)
    assert not res.ok and res.error == code, res.output
    assert world.state_hash() == before_hash
    assert world.dump() == before_dump
    assert world.touched() == {}
    assert not world.conn.in_transaction, "no savepoint may be left open"


def test_successful_python_tool(world) -> None:
    res = execute_tool(world, SPEC.tool("set_vip"), {"customer_id": "C002", "vip": True})
    assert res.ok and res.value == {"id": "C002", "vip": 1}
    assert world.row("customers", "C002")["vip"] == 1
    res = execute_tool(world, SPEC.tool("py_raise"), {"book_id": "B003"})
    assert res.ok and res.value == {"ok": True} and res.output == '{"ok": true}'
    res = execute_tool(world, SPEC.tool("set_vip"), {"customer_id": "C404", "vip": True})
    assert res.error == "not_found", "preconditions apply to Python tools too"


ESCAPES = {
    "attach": "def run(db, args):\n    db.execute(\"ATTACH DATABASE ':memory:' AS other\")\n",
    "pragma": "def run(db, args):\n    db.execute('PRAGMA foreign_keys = OFF')\n",
    "release": "def run(db, args):\n    db.execute('DELETE FROM payments')\n    db.execute('RELEASE tool_call')\n",
    "commit": "def run(db, args):\n    db.execute('DELETE FROM payments')\n    db.execute('COMMIT')\n",
    "rollback": "def run(db, args):\n    db.execute('ROLLBACK')\n",
    "begin": "def run(db, args):\n    db.execute('BEGIN')\n",
    "changes": "def run(db, args):\n    db.execute('UPDATE books SET stock = 0')\n    db.execute('DELETE FROM _changes')\n",
    "meta": "def run(db, args):\n    db.execute(\"UPDATE _meta SET value = 'x'\")\n",
    "ddl": "def run(db, args):\n    db.execute('DROP TABLE payments')\n",
    "trigger": "def run(db, args):\n    db.execute('DROP TRIGGER _log_update_books')\n",
    "private": "def run(db, args):\n    db._conn.set_authorizer(None)\n    db._conn.execute('DELETE FROM payments')\n",
    "dunder": "def run(db, args):\n    return ().__class__.__bases__[0].__subclasses__()\n",
    "import": "def run(db, args):\n    import os\n    return os.getcwd()\n",
    "open": "def run(db, args):\n    return open('/etc/passwd').read()\n",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_python_tool_cannot_escape(name: str) -> None:
    spec = spec_with([_py_tool("escape", ESCAPES[name], params=[])])
    ep = episode(spec)
    before, dump = ep.state_hash(), ep.world.dump()
    res = ep.call_tool("escape", {})
    assert not res.ok and res.error == "internal_error", res.output
    assert ep.state_hash() == before and ep.world.dump() == dump
    assert not ep.world.conn.in_transaction
    assert ep.world.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert [r[1] for r in ep.world.conn.execute("PRAGMA database_list")] == ["main"]
    # The world still works and still logs changes.
    assert ep.call_tool("cancel_order", {"order_id": "O002"}).ok
    assert ep.world.touched() == {"books": {"B003"}, "orders": {"O002"}}


def test_python_read_tool_cannot_write() -> None:
    spec = spec_with([_py_tool("sneaky_read", "def run(db, args):\n    db.execute('DELETE FROM payments')\n",
                               kind="read", params=[])])
    ep = episode(spec)
    before = ep.state_hash()
    res = ep.call_tool("sneaky_read", {})
    assert res.error == "internal_error" and "tried to write" in res.message
    assert ep.state_hash() == before


# --- generated values ----------------------------------------------------------------------------------


def test_generated_next_id_and_now(world) -> None:
    tool = SPEC.tool("place_order")
    args = {"customer_id": "C001", "book_id": "B003", "quantity": 1}
    assert execute_tool(world, tool, args).value["id"] == "O003"
    assert execute_tool(world, tool, args).value["id"] == "O004"
    # Numeric, not lexicographic: after O999 comes O1000, then O1001 (although "O999" > "O1000" as text).
    world.load_rows("orders", [{"id": "O999", "customer_id": "C001", "book_id": "B001", "quantity": 1,
                                "total": 1, "created_at": "2026-01-01T00:00:00"}])
    assert execute_tool(world, tool, args).value["id"] == "O1000"
    res = execute_tool(world, tool, args)
    assert res.value["id"] == "O1001" and res.value["created_at"] == world.clock
    # Ids with another prefix are ignored.
    world.load_rows("orders", [{"id": "X5000", "customer_id": "C001", "book_id": "B001", "quantity": 1,
                                "total": 1, "created_at": "2026-01-01T00:00:00"}])
    assert execute_tool(world, tool, args).value["id"] == "O1002"


def test_next_id_is_an_index_probe(world) -> None:
    sql = next_id_query(SPEC.table("orders"), "id", "O")
    plan = " ".join(r[-1] for r in world.conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "_nid_orders_id" in plan, plan


def test_integer_next_id_without_prefix() -> None:
    spec = DomainSpec.model_validate(
        {"name": "n", "tables": [{"name": "t", "columns": [{"name": "id", "type": "integer"}, {"name": "v"}]}],
         "tools": [{"name": "add", "description": "add a row", "kind": "write",
                    "parameters": [{"name": "v", "type": "string"}],
                    "generated": {"new_id": {"kind": "next_id", "table": "t", "column": "id", "width": 0}},
                    "effects": ["INSERT INTO t (id, v) VALUES (:new_id, :v)"],
                    "returns": {"query": "SELECT id FROM t WHERE id = :new_id", "mode": "scalar"}}]}
    )
    from scaleenv.world import World

    w = World(spec)
    assert [execute_tool(w, spec.tool("add"), {"v": "x"}).value for _ in range(3)] == [1, 2, 3]
    w.load_rows("t", [{"id": 41, "v": "y"}])
    assert execute_tool(w, spec.tool("add"), {"v": "z"}).value == 42


# --- determinism -------------------------------------------------------------------------------------


def test_outputs_are_deterministic_sorted_json() -> None:
    a, b = episode(), episode()
    calls = [("get_book", {"book_id": "B001"}), ("search_books", {}),
             ("place_order", {"customer_id": "C001", "book_id": "B003", "quantity": 2, "note": "ünïcödé"}),
             ("set_vip", {"customer_id": "C002", "vip": True}), ("get_book", {"book_id": "nope"})]
    first = []
    for name, args in calls:
        ra, rb = a.call_tool(name, args), b.call_tool(name, args)
        assert ra.output == rb.output
        assert ra.output == json.dumps(json.loads(ra.output), sort_keys=True, ensure_ascii=False)
        first.append(ra.output)
    assert '"note": "ünïcödé"' in first[2]
    assert list(json.loads(first[0])) == sorted(json.loads(first[0]))
    a.reset()
    assert [a.call_tool(n, x).output for n, x in calls] == first
    assert a.state_hash() == b.state_hash()


# --- properties ----------------------------------------------------------------------------------------

ID_VALUES = ["C001", "C002", "C404", "B001", "B002", "B003", "B404", "O001", "O002", "O404", 1, 2, 3, 0, ""]
plausible = st.one_of(
    st.sampled_from(ID_VALUES), st.integers(-3, 40), st.floats(-5, 100, allow_nan=False),
    st.booleans(), st.sampled_from(["pending", "shipped", "cancelled", "fiction", "science"]),
)


@st.composite
def plausible_call(draw: Any) -> tuple[str, dict]:
    tool = draw(st.sampled_from(SPEC.tools))
    args = {}
    for p in tool.parameters:
        if draw(st.integers(0, 9)) > 0:
            args[p.name] = draw(plausible)
    return tool.name, args


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(plausible_call(), min_size=1, max_size=12))
def test_failing_calls_leave_state_hash_unchanged(calls: list[tuple[str, dict]]) -> None:
    ep = episode()
    failures = 0
    for name, args in calls:
        before, dump = ep.state_hash(), ep.world.dump()
        res = ep.call_tool(name, args)
        if not res.ok:
            failures += 1
            assert ep.state_hash() == before, (name, args, res.output)
            assert ep.world.dump() == dump
        elif SPEC.tool(name).kind == "read":
            assert ep.state_hash() == before
        assert not ep.world.conn.in_transaction
    assert ep.stats.errors == failures and ep.stats.calls == len(calls)


def _no_nan(x: str) -> None:
    raise ValueError(f"non-standard JSON constant {x}")


junk_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Ll", "Nd"]), max_size=4),
    st.binary(max_size=6), st.sampled_from(ID_VALUES),
)
junk = st.recursive(
    junk_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
PARAM_NAMES = sorted({p.name for t in SPEC.tools for p in t.parameters}) + ["zzz", ""]
junk_args = st.one_of(
    junk,
    st.dictionaries(st.sampled_from(PARAM_NAMES), junk, max_size=5),
    st.text(max_size=20),
    st.sampled_from(['{"book_id": NaN}', '{"book_id": 1e999}', "[" * 5000, "{}", "null", '{"a":', b"\xff\xfe"]),
)
junk_names = st.one_of(st.sampled_from([t.name for t in SPEC.tools]), st.text(max_size=8), st.integers(),
                       st.none(), st.lists(st.integers(), max_size=2))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(junk_names, junk_args), min_size=1, max_size=6))
def test_junk_arguments_never_raise(calls: list[tuple[Any, Any]]) -> None:
    ep = episode()
    n_err = 0
    for name, args in calls:
        before = ep.state_hash()
        res = ep.call_tool(name, args)  # must not raise
        payload = json.loads(res.output, parse_constant=_no_nan)
        if not res.ok:
            n_err += 1
            assert set(payload) == {"error", "message"} and payload["error"] == res.error
            assert ep.state_hash() == before
        res.output.encode("utf-8")  # no lone surrogates in what the agent sees
    assert ep.stats.calls == len(calls)
    assert ep.stats.errors == n_err
    assert sum(ep.stats.by_code.values()) == n_err


def test_junk_every_tool_every_kind() -> None:
    ep = episode()
    weird: list[Any] = [None, 1, "x", [], [1, [2]], {"book_id": 2**100}, {"book_id": math.nan},
                        {"amount": math.inf}, {"quantity": -(2**64)}, {"payment_id": 1e300}, "\ud800", b"\x00"]
    for tool in SPEC.tools:
        for args in weird:
            res = ep.call_tool(tool.name, args)
            assert res.ok or res.error in {"invalid_arguments"} | {e.code for e in tool.errors} | {
                "internal_error", "constraint_violation"}
    assert ep.stats.calls == len(SPEC.tools) * len(weird)
    by_code = ep.stats.to_json()["by_code"]
    assert by_code["invalid_arguments"] >= len(SPEC.tools) * 9
    assert ep.call_tool("no_such_tool", {}).error == "unknown_tool"
    assert ep.stats.by_code["unknown_tool"] == 1

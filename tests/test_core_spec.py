"""Domain spec: validation errors one by one (path and reason), JSON Schema, round-trip, content hash."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import example_domain
from scaleenv.errors import SpecError
from scaleenv.formats.domain import TOOL_NAME_RE, DomainSpec, json_schema
from scaleenv.validation import validate_spec
from scaleenv.validation.spec import spec_problems


def _tool(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in spec["tools"] if t["name"] == name)


def _table(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in spec["tables"] if t["name"] == name)


def problems_after(mutate: Callable[[dict[str, Any]], None]) -> list[tuple[str, str]]:
    spec = copy.deepcopy(example_domain.SPEC)
    mutate(spec)
    with pytest.raises(SpecError) as info:
        validate_spec(spec)
    assert info.value.problems, "a SpecError must list its problems"
    return info.value.problems


def only_problem(mutate: Callable[[dict[str, Any]], None]) -> tuple[str, str]:
    problems = problems_after(mutate)
    assert len(problems) == 1, problems
    return problems[0]


def test_example_spec_is_valid() -> None:
    spec = validate_spec(example_domain.SPEC)
    assert spec.name == "bookshop"
    assert spec_problems(spec) == []
    assert [t.name for t in spec.tables] == ["customers", "books", "orders", "payments"]


# --- one problem at a time ------------------------------------------------------------------------


def test_contract_references_unknown_table() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["preconditions"][0]["sql"] = "SELECT 1 FROM nosuch WHERE id = :book_id"

    path, reason = only_problem(m)
    assert path == "tools[0](get_book).preconditions[0]"
    assert "does not prepare" in reason and "no such table: nosuch" in reason


def test_contract_references_unknown_column() -> None:
    def m(s: dict) -> None:
        _tool(s, "cancel_order")["postconditions"][0]["sql"] = (
            "SELECT state = 'cancelled' FROM orders WHERE id = :order_id"
        )

    path, reason = only_problem(m)
    assert path == "tools[3](cancel_order).postconditions[0]"
    assert "no such column: state" in reason


def test_double_quoted_unknown_column_is_not_read_as_a_string() -> None:
    # SQLite would happily read "nosuch" as the string 'nosuch'; validation must not.
    def m(s: dict) -> None:
        _tool(s, "get_book")["preconditions"][0]["sql"] = 'SELECT 1 FROM books WHERE "nosuch" = :book_id'

    path, reason = only_problem(m)
    assert path == "tools[0](get_book).preconditions[0]"
    assert "no such column: nosuch" in reason


def test_effect_references_unknown_table() -> None:
    def m(s: dict) -> None:
        _tool(s, "refund_payment")["effects"][0] = "UPDATE refunds SET refunded = :amount WHERE id = :payment_id"

    path, reason = only_problem(m)
    assert path == "tools[4](refund_payment).effects[0]"
    assert "no such table: refunds" in reason


def test_effect_references_unknown_column() -> None:
    def m(s: dict) -> None:
        _tool(s, "refund_payment")["effects"][0] = (
            "UPDATE payments SET refund_total = :amount WHERE id = :payment_id"
        )

    path, reason = only_problem(m)
    assert path == "tools[4](refund_payment).effects[0]"
    assert "no such column: refund_total" in reason


def test_foreign_key_to_missing_table() -> None:
    def m(s: dict) -> None:
        _table(s, "orders")["columns"][1]["foreign_key"] = "clients.id"

    path, reason = only_problem(m)
    assert path == "tables[2](orders).columns[1](customer_id).foreign_key"
    assert reason == "references missing table 'clients'"


def test_foreign_key_to_missing_column() -> None:
    def m(s: dict) -> None:
        _table(s, "orders")["columns"][1]["foreign_key"] = "customers.uid"

    path, reason = only_problem(m)
    assert path == "tables[2](orders).columns[1](customer_id).foreign_key"
    assert reason == "references missing column customers.uid"


def test_duplicate_table_names() -> None:
    def m(s: dict) -> None:
        s["tables"].append(copy.deepcopy(_table(s, "books")))

    path, reason = only_problem(m)
    assert (path, reason) == ("tables[books]", "duplicate table name")


def test_duplicate_column_names() -> None:
    def m(s: dict) -> None:
        _table(s, "books")["columns"].append({"name": "price", "type": "real"})

    path, reason = only_problem(m)
    assert (path, reason) == ("tables[1](books).columns[price]", "duplicate column name")


def test_duplicate_tool_names() -> None:
    def m(s: dict) -> None:
        s["tools"].append(copy.deepcopy(_tool(s, "get_book")))

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[get_book]", "duplicate tool name")


def test_duplicate_parameter_names() -> None:
    def m(s: dict) -> None:
        t = _tool(s, "get_book")
        t["parameters"].append(copy.deepcopy(t["parameters"][0]))

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[0](get_book).parameters[book_id]", "duplicate parameter name")


@pytest.mark.parametrize("bad", ["get-book", "1tool", "", "get book", "x" * 65, "get_book\n", "bücher"])
def test_bad_tool_name(bad: str) -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["name"] = bad

    path, reason = only_problem(m)
    assert path == "tools[0].name".replace("[0]", f"[0]({bad})")
    assert "does not match ^[A-Za-z_][A-Za-z0-9_]{0,63}$" in reason


@pytest.mark.parametrize("good", ["a", "_private", "Get_Book2", "x" * 64])
def test_good_tool_names_match(good: str) -> None:
    assert TOOL_NAME_RE.match(good)


def test_parameter_used_but_not_declared() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["returns"]["query"] = "SELECT * FROM books WHERE id = :book_id AND genre = :genre"

    path, reason = only_problem(m)
    assert path == "tools[0](get_book).returns.query"
    assert reason == "uses parameter :genre that is not declared"


def test_parameter_declared_but_never_used() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["parameters"].append({"name": "verbose", "type": "boolean", "required": False})

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[0](get_book).parameters(verbose)", "is declared but never used")


def test_parameter_inside_a_string_literal_is_not_a_use() -> None:
    def m(s: dict) -> None:
        _tool(s, "count_orders_by_status")["returns"]["query"] = (
            "SELECT COUNT(*) FROM orders WHERE status = ':status'"
        )

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[6](count_orders_by_status).parameters(status)", "is declared but never used")


def test_sql_that_does_not_prepare() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["returns"]["query"] = "SELEC * FROM books WHERE id = :book_id"

    path, reason = only_problem(m)
    assert path == "tools[0](get_book).returns.query"
    assert reason.startswith("SQL does not prepare:") and "syntax error" in reason


def test_two_statements_in_one_entry() -> None:
    def m(s: dict) -> None:
        _tool(s, "refund_payment")["effects"][0] = (
            "UPDATE payments SET refunded = refunded + :amount WHERE id = :payment_id; DELETE FROM books"
        )

    path, reason = only_problem(m)
    assert path == "tools[4](refund_payment).effects[0]"
    assert "only one SQL statement" in reason


def test_contract_that_writes() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["preconditions"][0]["sql"] = "DELETE FROM books WHERE id = :book_id RETURNING 1"

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[0](get_book).preconditions[0]", "contracts and returns must not write")


def test_undeclared_error_code() -> None:
    def m(s: dict) -> None:
        _tool(s, "cancel_order")["preconditions"][1]["error"] = "already_shipped"

    path, reason = only_problem(m)
    assert path == "tools[3](cancel_order).preconditions[1].error"
    assert reason == "error 'already_shipped' is not declared in errors"


def test_runtime_error_codes_need_no_declaration() -> None:
    spec = copy.deepcopy(example_domain.SPEC)
    _tool(spec, "cancel_order")["preconditions"][1]["error"] = "constraint_violation"
    validate_spec(spec)


def test_read_tool_with_effects() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["effects"] = ["UPDATE books SET stock = stock WHERE id = :book_id"]

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[0](get_book).effects", "a read tool cannot have effects")


def test_python_source_that_does_not_compile() -> None:
    def m(s: dict) -> None:
        _tool(s, "set_vip")["implementation"]["source"] = "def run(db, args)\n    return 1\n"

    path, reason = only_problem(m)
    assert path == "tools[5](set_vip).implementation.source"
    assert reason.startswith("does not compile:") and "(line 1)" in reason


def test_python_source_without_run() -> None:
    def m(s: dict) -> None:
        src = _tool(s, "set_vip")["implementation"]["source"]
        _tool(s, "set_vip")["implementation"]["source"] = src.replace("def run(", "def main(")

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[5](set_vip).implementation.source", "must define run(db, args)")


def test_python_source_with_private_names() -> None:
    def m(s: dict) -> None:
        _tool(s, "set_vip")["implementation"]["source"] = (
            "def run(db, args):\n"
            "    db._conn.execute('UPDATE customers SET vip = ? WHERE id = ?', (args['vip'], args['customer_id']))\n"
        )

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[5](set_vip).implementation.source", "uses private names ['_conn']")


def test_next_id_on_unknown_column() -> None:
    def m(s: dict) -> None:
        _tool(s, "place_order")["generated"]["order_id"]["column"] = "order_no"

    path, reason = only_problem(m)
    assert (path, reason) == ("tools[2](place_order).generated.order_id", "unknown column orders.order_no")


def test_primary_key_not_a_column() -> None:
    def m(s: dict) -> None:
        _table(s, "books")["primary_key"] = "isbn"

    path, reason = only_problem(m)
    assert (path, reason) == ("tables[1](books).primary_key", "primary key column 'isbn' is not a column")


def test_enum_default_outside_enum() -> None:
    def m(s: dict) -> None:
        _table(s, "orders")["columns"][5]["default"] = "lost"

    path, reason = only_problem(m)
    assert (path, reason) == ("tables[2](orders).columns[5](status)", "default 'lost' is not in the enum")


def test_every_problem_is_reported_not_only_the_first() -> None:
    def m(s: dict) -> None:
        _tool(s, "get_book")["name"] = "get-book"
        _tool(s, "cancel_order")["preconditions"][1]["error"] = "nope"
        _table(s, "orders")["columns"][1]["foreign_key"] = "clients.id"

    paths = [p for p, _ in problems_after(m)]
    assert "tables[2](orders).columns[1](customer_id).foreign_key" in paths
    assert "tools[0](get-book).name" in paths
    assert "tools[3](cancel_order).preconditions[1].error" in paths


def test_structural_errors_name_the_field() -> None:
    def m(s: dict) -> None:
        _table(s, "books")["columns"][2]["type"] = "money"
        s["surprise"] = 1

    problems = dict(problems_after(m))
    assert "tables.1.columns.2.type" in problems
    assert "surprise" in problems and "Extra inputs" in problems["surprise"]


def test_spec_error_message_lists_problems() -> None:
    err = SpecError([("a", "b"), ("c", "d")])
    assert str(err) == "invalid domain spec: a: b; c: d"
    many = SpecError([(f"p{i}", "r") for i in range(7)])
    assert str(many).endswith("(+2 more)")


# --- JSON Schema, round-trip, hash -------------------------------------------------------------------


def test_json_schema_export() -> None:
    schema = json_schema()
    json.dumps(schema)  # serializable
    assert schema["title"] == "DomainSpec"
    assert set(schema["required"]) == {"name", "tables"}
    assert schema["additionalProperties"] is False
    defs = schema["$defs"]
    assert {"Table", "Column", "ToolSpec", "Param", "Contract"} <= set(defs)
    col_type = defs["Column"]["properties"]["type"]
    assert set(col_type["enum"]) == {"text", "integer", "real", "boolean", "date", "datetime", "json"}
    assert set(defs["Column"]["properties"]["match"]["enum"]) == {"exact", "semantic", "exempt"}
    assert set(defs["ToolSpec"]["properties"]["kind"]["enum"]) == {"read", "write"}


def test_json_round_trip_and_content_hash() -> None:
    spec = validate_spec(example_domain.SPEC)
    text = json.dumps(spec.model_dump(mode="json"))
    again = DomainSpec.model_validate(json.loads(text))
    assert again == spec
    assert again.content_hash() == spec.content_hash()
    assert len(spec.content_hash()) == 16
    # Key order of the input does not matter; content does.
    reordered = json.loads(json.dumps(example_domain.SPEC, sort_keys=True))
    assert DomainSpec.model_validate(reordered).content_hash() == spec.content_hash()
    changed = copy.deepcopy(example_domain.SPEC)
    changed["description"] += "!"
    assert DomainSpec.model_validate(changed).content_hash() != spec.content_hash()


def test_content_hash_is_stable_across_processes() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = "import example_domain as e; print(e.spec().content_hash())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        cwd=Path(__file__).parent, env={"PYTHONHASHSEED": "123", "PATH": ""},
    ).stdout.strip()
    assert out == example_domain.spec().content_hash()


def test_write_and_load_spec_file(tmp_path) -> None:
    from scaleenv.validation.io import load_spec_file, write_spec_file

    spec = example_domain.spec()
    path = tmp_path / "bookshop.json"
    write_spec_file(spec, path)
    assert load_spec_file(path) == spec
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    assert info.value.problems[0][0] == "line 1 column 2"
    assert "malformed JSON" in info.value.problems[0][1]


def test_openai_schema_of_a_tool() -> None:
    spec = example_domain.spec()
    schema = spec.tool("place_order").openai_schema()
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "place_order"
    params = fn["parameters"]
    assert params["required"] == ["customer_id", "book_id", "quantity"]
    assert params["properties"]["quantity"] == {
        "type": "integer", "description": "quantity", "minimum": 1, "maximum": 10,
    }
    assert params["additionalProperties"] is False

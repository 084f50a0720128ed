"""Untrusted tool calls are bounded: calls per agent message, argument names, argument size."""

from __future__ import annotations

import copy
import json

import pytest

from example_domain import SPEC
from scaleenv.env.core import MalformedToolCall
from scaleenv.env.core import parse_tool_calls as _parse_calls
from scaleenv.errors import ToolError
from scaleenv.formats.domain import DomainSpec
from scaleenv.tools.args import MAX_ARGUMENT_CHARS, MAX_CALLS_PER_MESSAGE, validate_arguments


def _tool(name: str = "get_book"):
    return DomainSpec.model_validate(SPEC).tool(name)


def _array_tool():
    data = copy.deepcopy(SPEC)
    t = next(t for t in data["tools"] if t["name"] == "get_book")
    t["parameters"].append({"name": "tags", "type": "array", "items": "string", "required": False})
    return DomainSpec.model_validate(data).tool("get_book")


def _calls(n: int) -> dict:
    return {"role": "assistant", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_book", "arguments": '{"book_id": "B001"}'}}
        for i in range(n)]}


def test_calls_per_message_are_capped():
    assert len(_parse_calls(_calls(MAX_CALLS_PER_MESSAGE))) == MAX_CALLS_PER_MESSAGE
    (refused,) = _parse_calls(_calls(MAX_CALLS_PER_MESSAGE + 1))  # refused whole, as one tool error
    assert isinstance(refused[2], MalformedToolCall) and "tool calls in one message" in str(refused[2])


def test_deeply_nested_arguments_are_a_malformed_call_not_a_crash():
    msg = {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_book", "arguments": "[" * 100_000}}]}
    (_, _, args), = _parse_calls(msg)
    assert isinstance(args, MalformedToolCall)


def test_argument_text_is_capped():
    big = json.dumps({"book_id": "B001", "x": "y" * MAX_ARGUMENT_CHARS})
    with pytest.raises(ToolError, match="longer than"):
        validate_arguments(_tool(), big)


def test_argument_names_are_capped():
    args = {f"k{i}": 1 for i in range(10_000)}
    with pytest.raises(ToolError) as e:
        validate_arguments(_tool(), args)
    assert "10000 arguments" in e.value.message and len(e.value.message) < 200


def test_bound_arguments_are_capped_in_total():
    tool = _array_tool()
    ok = validate_arguments(tool, {"book_id": "B001", "tags": ["a"] * 10})
    assert json.loads(ok["tags"]) == ["a"] * 10
    with pytest.raises(ToolError, match="arguments total"):
        validate_arguments(tool, {"book_id": "B001", "tags": ["x" * 9_000] * 100})

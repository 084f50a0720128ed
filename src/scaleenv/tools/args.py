"""Validate untrusted tool arguments against a ToolSpec's flat parameter schema."""

from __future__ import annotations

import json
import math
from typing import Any, TypeAlias

from scaleenv.errors import ToolError
from scaleenv.formats.domain import DomainSpec, Param, ToolSpec
from scaleenv.utils.dates import normal_iso

Scalar: TypeAlias = str | int | float | bool
"""A checked argument value, as SQLite binds it (arrays are bound as JSON text)."""

_MAX_STRING = 10_000
_MAX_ARRAY = 1_000
MAX_ARGUMENT_CHARS = 65_536
"""The most characters the arguments of one call may take (as JSON text, and bound in total)."""
MAX_ARGUMENT_KEYS = 64
"""The most argument names one call may carry (declared or not)."""
MAX_CALLS_PER_MESSAGE = 32
"""The most tool calls one agent message may make."""


def check_call_count(n: int) -> None:
    """Raise ValueError when one agent message makes more than :data:`MAX_CALLS_PER_MESSAGE` calls."""
    if n > MAX_CALLS_PER_MESSAGE:
        raise ValueError(f"{n} tool calls in one message (at most {MAX_CALLS_PER_MESSAGE})")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # what SQLite can bind


def _int_ok(value: int) -> int:
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError("integer out of range (must fit in 64 bits)")
    return value


def _type_ok(value: object, typ: str) -> Scalar:
    """Return the value coerced to the parameter type, or raise ValueError."""
    if typ == "string":
        if not isinstance(value, str):
            raise ValueError("expected a string")
        if len(value) > _MAX_STRING:
            raise ValueError(f"string longer than {_MAX_STRING} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("string is not valid Unicode (lone surrogate)") from None
        return value
    if typ == "boolean":
        if not isinstance(value, bool):
            raise ValueError("expected a boolean")
        return value
    if typ == "integer":
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        if isinstance(value, int):
            return _int_ok(value)
        if isinstance(value, float) and value.is_integer():
            return _int_ok(int(value))
        raise ValueError("expected an integer")
    if typ == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("expected a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("expected a finite number")
        if isinstance(value, int):
            return _int_ok(value)
        return value
    raise ValueError(f"unsupported type {typ}")


def _check_param(p: Param, value: object) -> Scalar:
    if p.type == "array":
        if not isinstance(value, list):
            raise ValueError("expected an array")
        if len(value) > _MAX_ARRAY:
            raise ValueError(f"array longer than {_MAX_ARRAY}")
        return json.dumps([_type_ok(v, p.items or "string") for v in value])
    value = _type_ok(value, p.type)
    if p.enum is not None and value not in p.enum:
        raise ValueError(f"must be one of {list(p.enum)}")
    if not isinstance(value, int | float):  # bounds apply to numbers only (as in JSON Schema)
        return value
    if p.minimum is not None and value < p.minimum:
        raise ValueError(f"must be >= {p.minimum:g}")
    if p.maximum is not None and value > p.maximum:
        raise ValueError(f"must be <= {p.maximum:g}")
    return value


def column_type(spec: DomainSpec, ref: str | None) -> str | None:
    """The type of the column a parameter carries (``ref``: its ``table.column``), None when unknown."""
    if not ref:
        return None
    table_name, _, column_name = ref.partition(".")
    table = spec.table(table_name)
    column = table.column(column_name) if table is not None else None
    return column.type if column is not None else None


def normal_forms(spec: DomainSpec, tool: ToolSpec, bound: dict[str, Any]) -> dict[str, Any]:
    """``bound`` with each value of a datetime column in the worlds' one normal form: a datetime is valid in
    either ISO form (``2026-06-26 10:00:00`` or ``2026-06-26T10:00``), and is bound (stored, compared) as
    ``2026-06-26T10:00:00``, the form the worlds hold and the reward reads (an array's items too)."""
    for p in tool.parameters:
        value = bound.get(p.name)
        if value is None or column_type(spec, p.column) != "datetime":
            continue
        if p.type == "string" and isinstance(value, str):
            bound[p.name] = normal_iso(value)
        elif p.type == "array" and (p.items or "string") == "string" and isinstance(value, str):
            bound[p.name] = json.dumps([normal_iso(v) for v in json.loads(value)])
    return bound


def validate_arguments(tool: ToolSpec, args: object, spec: DomainSpec | None = None) -> dict[str, Any]:
    """Check ``args`` (a dict or a JSON object string) and return the bound parameters.

    Every declared parameter is present in the result (absent optional ones are ``None``);
    arrays are bound as JSON text so SQL can read them with ``json_each``. With the tool's domain
    ``spec``, a value of a datetime column is bound in its normal form (:func:`normal_forms`).
    Raises ``ToolError("invalid_arguments", ...)`` naming every problem.
    """
    if isinstance(args, str | bytes):
        if len(args) > MAX_ARGUMENT_CHARS:
            raise ToolError("invalid_arguments", f"arguments are longer than {MAX_ARGUMENT_CHARS} characters")
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, TypeError, RecursionError) as e:
            raise ToolError("invalid_arguments", f"arguments are not valid JSON: {str(e)[:200]}") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError("invalid_arguments", "arguments must be a JSON object")
    if len(args) > MAX_ARGUMENT_KEYS:
        raise ToolError("invalid_arguments", f"{len(args)} arguments (at most {MAX_ARGUMENT_KEYS}; {tool.name} takes "
                                             f"{len(tool.parameters)})")
    problems: list[str] = []
    declared = {p.name: p for p in tool.parameters}
    for k in args:
        if k not in declared:
            problems.append(f"unknown parameter {str(k)[:64]!r}")
    bound: dict[str, Any] = {}
    for name, p in declared.items():
        if name not in args or args[name] is None:
            if p.required:
                problems.append(f"missing required parameter {name!r}")
            bound[name] = None
            continue
        try:
            bound[name] = _check_param(p, args[name])
        except ValueError as e:
            problems.append(f"{name}: {e}")
    if problems:
        raise ToolError("invalid_arguments", "; ".join(problems))
    total = sum(len(v) if isinstance(v, str) else 24 for v in bound.values() if v is not None)
    if total > MAX_ARGUMENT_CHARS:
        raise ToolError("invalid_arguments", f"arguments total {total} characters (at most {MAX_ARGUMENT_CHARS})")
    return normal_forms(spec, tool, bound) if spec is not None else bound

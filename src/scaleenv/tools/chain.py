"""Execute gold chains: resolve references to earlier outputs, run each call with contracts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scaleenv.errors import ToolCallError, ToolError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Call
from scaleenv.tools.runtime import run_tool
from scaleenv.world.world import World


class ChainError(ToolCallError):
    def __init__(self, step: int, message: str):
        self.step = step
        super().__init__(f"step {step}: {message}")


def resolve(value: object, outputs: Sequence[object], step: int) -> object:
    """``value`` itself, or (a ``{"$ref": i, "field": f, "where": {...}}`` reference) field ``f`` of step
    ``i``'s output (of its first row matching ``where``, for a list output)."""
    if not (isinstance(value, dict) and "$ref" in value):
        return value
    src = value["$ref"]
    if not isinstance(src, int) or not 0 <= src < len(outputs):
        raise ChainError(step, f"reference to step {src} which has not run")
    out = outputs[src]
    where = value.get("where") or {}
    if isinstance(out, list):
        match = [r for r in out if isinstance(r, dict) and all(r.get(k) == v for k, v in where.items())]
        if not match:
            raise ChainError(step, f"no row of step {src}'s output matches {where}")
        out = match[0]
    elif where and not (isinstance(out, dict) and all(out.get(k) == v for k, v in where.items())):
        raise ChainError(step, f"step {src}'s output does not match {where}")
    field = value.get("field", "id")
    if not isinstance(out, dict) or field not in out:
        raise ChainError(step, f"step {src}'s output has no field {field!r}")
    return out[field]


def resolve_args(call: Call, outputs: list[Any], step: int) -> dict[str, Any]:
    return {k: resolve(v, outputs, step) for k, v in call.args.items()}


def literal_chain(chain: list[Call], outputs: list[Any]) -> list[Call]:
    """``chain`` with every reference resolved against the recorded ``outputs`` (literal calls)."""
    return [c.model_copy(update={"args": resolve_args(c, outputs, i)}) for i, c in enumerate(chain)]


def run_chain(world: World, spec: DomainSpec, chain: list[Call]) -> list[Any]:
    """Run every call on ``world`` (mutating it); return the outputs. Raise ChainError on failure."""
    outputs: list[Any] = []
    for i, call in enumerate(chain):
        tool = spec.tool(call.tool)
        if tool is None:
            raise ChainError(i, f"unknown tool {call.tool!r}")
        args = resolve_args(call, outputs, i)
        try:
            outputs.append(run_tool(world, tool, args))
        except ToolError as e:
            raise ChainError(i, f"{call.tool} failed: {e.code}: {e.message}") from None
    return outputs

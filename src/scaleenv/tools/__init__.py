"""Tool execution: argument validation, contract checks, atomic effects, deterministic JSON results."""

from scaleenv.tools.args import validate_arguments
from scaleenv.tools.runtime import ToolResult, execute_tool

__all__ = ["ToolResult", "execute_tool", "validate_arguments"]

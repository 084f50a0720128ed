"""Type aliases for JSON data, shared by every layer."""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""One value as ``json.loads`` gives it."""

JSONObject: TypeAlias = "dict[str, JSONValue]"

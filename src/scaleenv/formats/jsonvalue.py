"""Type aliases for JSON data and SQLite values, shared by every layer."""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""One value as ``json.loads`` gives it."""

JSONObject: TypeAlias = "dict[str, JSONValue]"

SQLValue: TypeAlias = "str | int | float | bytes | None"
"""One value SQLite stores or returns."""

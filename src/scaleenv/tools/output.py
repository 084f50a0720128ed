"""Tool outputs as deterministic JSON text."""

from __future__ import annotations

import json

_ENCODER = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False, allow_nan=False)


def dumps(value: object) -> str:
    """Deterministic JSON text (sorted keys, strict: no NaN/Infinity)."""
    return _ENCODER.encode(value)


def error_output(code: str, message: str) -> str:
    return dumps({"error": code, "message": message})

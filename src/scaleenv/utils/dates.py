"""ISO date and datetime values as the worlds store them (``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM:SS``)."""

from __future__ import annotations

import datetime as dt
import re
from typing import TypeGuard, TypeVar

_V = TypeVar("_V")

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$")


def is_iso_date(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_ISO.match(value))


def shift_iso(value: _V, days: int) -> _V | str:
    """``value`` moved by ``days`` if it is an ISO date or datetime; anything else unchanged."""
    if not is_iso_date(value):
        return value
    try:
        if "T" in value:
            return (dt.datetime.fromisoformat(value) + dt.timedelta(days=days)).isoformat()
        return (dt.date.fromisoformat(value) + dt.timedelta(days=days)).isoformat()
    except ValueError:
        return value


def clock_side(value: str, clock: str) -> int:
    """-1, 0 or 1 as an ISO ``value`` lies before, at or after ``clock`` (``YYYY-MM-DDTHH:MM:SS``): a
    datetime against the clock's time, a date against its day (a date is "today" all day long)."""
    try:
        if "T" in value or " " in value.strip():
            at, now = dt.datetime.fromisoformat(value), dt.datetime.fromisoformat(clock)
            return (at > now) - (at < now)
    except ValueError:
        pass
    day, today = value[:10], clock[:10]
    return (day > today) - (day < today)

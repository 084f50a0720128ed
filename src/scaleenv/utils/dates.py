"""ISO date and datetime values as the worlds store them (``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM:SS``).

A datetime has one normal form, the one the worlds store: ``YYYY-MM-DDTHH:MM:SS``. Its other ISO
spellings (a space for the ``T``, no seconds) mean the same moment: :func:`normal_iso` rewrites them and
:func:`parse_iso` reads either, so the tools store and the reward compares by meaning.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TypeGuard, TypeVar

_V = TypeVar("_V")

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$")
_ANY_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$")


def parse_iso(value: object) -> dt.date | dt.datetime | None:
    """The date (``YYYY-MM-DD``) or naive datetime (``YYYY-MM-DDTHH:MM[:SS]``, or with a space for the
    ``T``) that ``value`` spells; None for anything else (another type, an impossible day or time, a time
    zone, fractions of a second)."""
    if not isinstance(value, str):
        return None
    m = _ANY_ISO.match(value.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s = m.groups()
    try:
        if h is None:
            return dt.date(int(y), int(mo), int(d))
        return dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s or 0))
    except ValueError:
        return None


def normal_iso(value: _V) -> _V | str:
    """A datetime ``value`` in its normal form (``2026-06-26 10:00`` is ``2026-06-26T10:00:00``); a date and
    anything that is not an ISO datetime unchanged (a date is never given a time it does not say)."""
    when = parse_iso(value)
    if isinstance(when, dt.datetime):
        return when.isoformat(timespec="seconds")
    return value


def same_iso(a: object, b: object) -> bool | None:
    """Whether two ISO values mean the same day or moment (None when either is no ISO date or datetime);
    a date is never the same as a datetime, even one at midnight."""
    x, y = parse_iso(a), parse_iso(b)
    if x is None or y is None:
        return None
    return isinstance(x, dt.datetime) == isinstance(y, dt.datetime) and x == y


def is_iso_date(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_ISO.match(value))


def shift_iso(value: _V, days: int) -> _V | str:
    """``value`` moved by ``days`` if it is an ISO date or datetime (in either form; the result is in
    the normal form); anything else unchanged."""
    when = parse_iso(value)
    if when is None:
        return value
    try:
        moved = when + dt.timedelta(days=days)
    except OverflowError:
        return value
    return moved.isoformat(timespec="seconds") if isinstance(moved, dt.datetime) else moved.isoformat()


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

"""Robust parsing of structured model output: JSON inside fenced blocks or surrounded by prose,
with small repairs (trailing commas, ``//`` comments, Python ``True/False/None``, smart quotes),
and Python code blocks."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar, overload

from scaleenv.errors import ProviderError

_T = TypeVar("_T")


class ParseError(ProviderError):
    """The text holds no usable JSON (or code); the message says what was wrong, for a repair prompt."""


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block (an unclosed last fence runs to the end)."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def _lenient(text: str) -> str:
    """Drop ``//`` line comments and trailing commas outside strings; map Python literals."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        ch = text[i]
        if in_str:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_str = False
            i += 1
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
            i += 1
            continue
        if ch == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                i += 1
                continue
        m = re.match(r"(True|False|None)\b", text[i:i + 5]) if ch in "TFN" else None
        if m and (not out or not (out[-1].isalnum() or out[-1] == "_")):
            out.append({"True": "true", "False": "false", "None": "null"}[m.group(1)])
            i += len(m.group(1))
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    dec = json.JSONDecoder()
    for candidate in (text[start:], _lenient(text[start:])):
        try:
            return dec.raw_decode(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
    return None


def _candidates(text: str) -> list[str]:
    blocks = fenced_blocks(text)
    tagged = [b for lang, b in blocks if lang in ("json", "jsonc", "json5")]
    other = [b for lang, b in blocks if lang not in ("json", "jsonc", "json5")]
    return [*tagged, *other, text]


@overload
def parse_json(text: str, expect: type[_T]) -> _T: ...


@overload
def parse_json(text: str, expect: tuple[type, ...] = (dict, list)) -> dict[str, Any] | list[Any]: ...


def parse_json(text: str, expect: type | tuple[type, ...] = (dict, list)) -> object:
    """The first JSON value of type ``expect`` in ``text`` (fenced blocks first, then the raw text).
    (A ``dict`` comes back as ``dict[Any, Any]``, like ``json.loads``'s: the caller's validator checks its shape.)

    Handles leading and trailing prose, an unclosed final fence, trailing commas, comments and
    Python literals. Raises :class:`ParseError` with the most useful decoder message.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the reply is empty; answer with one JSON value")
    text = text.translate(_SMART) if "\u201c" in text or "\u201d" in text else text
    first_error = ""
    for body in _candidates(text):
        for m in re.finditer(r"[\[{]", body):
            got = _decode_at(body, m.start())
            if got is None:
                if not first_error:
                    try:
                        json.loads(body[m.start():])
                    except json.JSONDecodeError as e:
                        first_error = f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
                    except RecursionError:
                        first_error = "invalid JSON: nested too deeply"
                continue
            value, _ = got
            if isinstance(value, expect):
                return value
            if not first_error:
                first_error = f"expected a JSON {_type_name(expect)}, got {type(value).__name__}"
    raise ParseError(first_error or f"no JSON {_type_name(expect)} found in the reply")


def _type_name(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    names: dict[type, str] = {dict: "object", list: "array"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def parse_code(text: str, language: str = "python") -> str:
    """The code in ``text``: the first fenced block tagged ``language`` (or untagged), else the text."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the reply is empty; answer with a code block")
    blocks = fenced_blocks(text)
    for lang, body in blocks:
        if lang in (language, "py" if language == "python" else language):
            return body.strip("\n")
    for lang, body in blocks:
        if not lang:
            return body.strip("\n")
    if blocks:
        return blocks[0][1].strip("\n")
    return text.strip()

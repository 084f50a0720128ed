"""Prompt templates of the LLM synthesis agents, one file per role under ``prompts/``.

A template is the system message, a line ``### user``, then the user message. Placeholders are
``$name`` (``string.Template``), so JSON braces in examples need no escaping.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

ROLES = ("domain", "tool_schema", "database", "code", "test", "debug", "dependency", "chain", "state", "patch",
         "gate", "solver", "instruction", "language", "policy")


@cache
def template(role: str) -> tuple[Template, Template]:
    text = files("scaleenv.synth.llm").joinpath("prompts", f"{role}.txt").read_text(encoding="utf-8")
    system, sep, user = text.partition("\n### user\n")
    if not sep:
        raise ValueError(f"prompt template {role}.txt has no '### user' line")
    return Template(system.strip()), Template(user.strip())


def render(role: str, **values: object) -> list[dict[str, str]]:
    """The chat messages of ``role`` with every ``$placeholder`` filled (missing ones raise KeyError)."""
    system, user = template(role)
    vals = {k: str(v) for k, v in values.items()}
    return [{"role": "system", "content": system.substitute(vals)},
            {"role": "user", "content": user.substitute(vals)}]

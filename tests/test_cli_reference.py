"""The README's CLI reference names every command and every flag the CLI has (as sqlite-utils checks)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from scaleenv.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def reference_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## CLI reference")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def commands() -> dict[str, Any]:
    """The CLI's commands (typer's click group, whichever click it is built on)."""
    group = typer.main.get_command(app)
    return dict(getattr(group, "commands", {}))


def test_every_command_is_in_the_reference():
    section = reference_section()
    missing = [name for name in commands() if f"scaleenv {name}" not in section]
    assert not missing, f"README's CLI reference lacks the commands {missing}"


def test_every_flag_is_in_its_commands_rows():
    section = reference_section()
    missing = []
    for name, command in commands().items():
        rows = "\n".join(line for line in section.splitlines() if f"scaleenv {name}" in line)
        for param in command.params:
            if getattr(param, "param_type_name", "") != "option" or getattr(param, "hidden", False):
                continue
            flags = [o for o in [*param.opts, *getattr(param, "secondary_opts", [])] if o.startswith("--")]
            if flags and not any(re.search(re.escape(f) + r"(?![\w-])", rows) for f in flags):
                missing.append(f"scaleenv {name} {flags[0]}")
    assert not missing, "README's CLI reference lacks:\n" + "\n".join(missing)


def test_the_check_can_fail():
    """A flag that is not in the README is reported (the check is not vacuous)."""
    section = reference_section()
    assert "--no-such-flag-anywhere" not in section
    assert len(commands()) >= 10, "the CLI's commands were not found"

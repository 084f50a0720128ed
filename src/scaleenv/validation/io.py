"""Read and write domain spec files."""

from __future__ import annotations

import json
from pathlib import Path

from scaleenv.errors import SpecError
from scaleenv.formats.domain import DomainSpec
from scaleenv.validation.spec import validate_spec


def load_spec_file(path: str | Path) -> DomainSpec:
    """Load and validate a spec JSON file. Malformed JSON and invalid specs raise SpecError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([(str(path), f"cannot read: {e}")]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError([(f"line {e.lineno} column {e.colno}", f"malformed JSON: {e.msg}")]) from None
    return validate_spec(data)


def write_spec_file(spec: DomainSpec, path: str | Path) -> None:
    from scaleenv.utils.fs import atomic_write_text

    atomic_write_text(Path(path), json.dumps(spec.model_dump(mode="json"), indent=1, sort_keys=True) + "\n")

"""Published JSON Schemas of the file formats. Regenerate with ``python -m scaleenv.schemas``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def schemas() -> dict[str, dict[str, Any]]:
    from scaleenv.formats.domain import DomainSpec
    from scaleenv.formats.task import Task

    return {
        "domain_spec.schema.json": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                    **DomainSpec.model_json_schema()},
        "task.schema.json": {"$schema": "https://json-schema.org/draft/2020-12/schema", **Task.model_json_schema()},
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_all() -> None:
    for name, schema in schemas().items():
        (HERE / name).write_text(render(schema), encoding="utf-8")

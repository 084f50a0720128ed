"""The published JSON Schemas match the models, and real files validate against them."""

import json

from scaleenv.schemas import HERE, render, schemas


def test_published_schemas_are_up_to_date():
    for name, schema in schemas().items():
        assert (HERE / name).read_text() == render(schema), f"run `python -m scaleenv.schemas` to refresh {name}"


def test_task_schema_describes_the_task_format():
    schema = json.loads((HERE / "task.schema.json").read_text())
    assert {"id", "domain", "instruction", "gold_chain", "initial_patch", "tools"} <= set(schema["required"])
    spec_schema = json.loads((HERE / "domain_spec.schema.json").read_text())
    col = spec_schema["$defs"]["Column"]["properties"]
    assert col["match"]["enum"] == ["exact", "semantic", "exempt"]
    assert set(col["type"]["enum"]) == {"text", "integer", "real", "boolean", "date", "datetime", "json"}

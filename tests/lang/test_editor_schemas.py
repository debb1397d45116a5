"""schemas/ must match the pydantic models, and the shipped YAML must validate against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from engine.spec.export import FILES, render

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(FILES))
def test_schema_file_is_fresh(name: str) -> None:
    model, title = FILES[name]
    assert (ROOT / "schemas" / name).read_text(encoding="utf-8") == render(model, title), (
        "schemas/ is stale: run `python -m engine.spec.export`"
    )


@pytest.mark.parametrize(
    "yaml_file, schema_name",
    [
        ("tools.yaml", "tools.schema.json"),
        ("skills.yaml", "skills.schema.json"),
        ("workflows.yaml", "workflows.schema.json"),
        ("config/models.yaml", "models.schema.json"),
        ("config/engine.yaml", "engine.schema.json"),
    ],
)
def test_shipped_yaml_validates_and_points_at_its_schema(yaml_file: str, schema_name: str) -> None:
    text = (ROOT / yaml_file).read_text(encoding="utf-8")
    first_line = text.splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema=") and first_line.endswith(schema_name)
    schema = json.loads((ROOT / "schemas" / schema_name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(text))

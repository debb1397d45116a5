"""Generate the editor JSON Schemas in `schemas/` from the pydantic models.

    python -m engine.spec.export            # write schemas/*.schema.json
    python -m engine.spec.export --check    # exit 1 if they are stale

YAML files point at them with `# yaml-language-server: $schema=schemas/tools.schema.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .models import EngineSettings, ModelsFile, SkillsFile, ToolsFile, WorkflowsFile

FILES: dict[str, tuple[type[BaseModel], str]] = {
    "tools.schema.json": (ToolsFile, "skillyard tools.yaml (or tools/*.yaml)"),
    "skills.schema.json": (SkillsFile, "skillyard skills.yaml (or skills/*.yaml)"),
    "workflows.schema.json": (WorkflowsFile, "skillyard workflows.yaml (or workflows/*.yaml)"),
    "models.schema.json": (ModelsFile, "skillyard config/models.yaml"),
    "engine.schema.json": (EngineSettings, "skillyard config/engine.yaml"),
}


def render(model: type[BaseModel], title: str) -> str:
    schema: dict[str, Any] = model.model_json_schema(mode="validation")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": title}
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if schemas/ is stale instead of writing")
    parser.add_argument("--out", default="schemas", help="output directory (default: schemas)")
    ns = parser.parse_args(argv)
    out = Path(ns.out)
    stale = []
    for name, (model, title) in FILES.items():
        text = render(model, title)
        path = out / name
        if ns.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print("stale: " + ", ".join(stale) + " — run `python -m engine.spec.export`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

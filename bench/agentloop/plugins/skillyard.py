"""skillyard: Engine.from_dir(project) then engine.agent(model).run(prompt); the tool is a python
skill behind a one-step workflow, so every call goes through the router (allowlist, enabled,
JSON Schema via jsonschema-rs, the workflow runner). Its openai provider always streams."""

from __future__ import annotations

import os
from pathlib import Path

from . import common


def _watch(event) -> None:
    """A watcher that shows nothing: what it costs to have one is the streaming it brings."""


PROJECT = Path(__file__).resolve().parent.parent / "skillyard_project"


def load() -> dict:
    global Engine
    from engine import Engine
    return {"skillyard": _version("skillyard"), "openai": _version("openai"), "jsonschema-rs": _version("jsonschema-rs")}


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


def make(base_url: str, watched: bool = False):
    os.environ["FAKE_BASE_URL"] = base_url  # config/models.yaml: base_url: ${env:FAKE_BASE_URL:-…}
    engine = Engine.from_dir(PROJECT)
    agent = engine.agent("fake", tools=["lookup"], system=common.SYSTEM)  # limits: the project's (defaults)

    async def run(scenario: str) -> str:
        result = await agent.run(common.prompt(scenario), on_event=_watch if watched else None)
        if result.stop_reason != "answer":
            raise RuntimeError(f"skillyard stopped with {result.stop_reason}: {result.error}")
        return result.answer

    return run

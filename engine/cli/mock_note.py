"""One line on stderr when an answer came from the offline `mock` model, so nobody mistakes
its stand-in text for a real model's work."""

from __future__ import annotations

import sys
from typing import TextIO

from ..runs.events import Event
from ..runs.payloads import ModelCallStart, ModelExchange
from ..runtime.project import Project

NOTE = ("note: model answers came from `mock`, the offline stand-in (text rearranged from your input, no AI); "
        "add a real model in config/models.yaml: see docs/agent.md")


class MockNote:
    """An event listener that prints NOTE once, the first time a mock model answers."""

    def __init__(self, project: Project, stream: TextIO | None = None):
        self.mock_models = {name for name, spec in project.models.items() if spec.provider == "mock"}
        self.stream = stream
        self.said = not self.mock_models

    def __call__(self, event: Event) -> None:
        if self.said or event.type not in ("model_exchange", "model_call_start"):
            return
        asked: ModelExchange | ModelCallStart = event.data
        if asked["model"] in self.mock_models:
            self.said = True
            print(NOTE, file=self.stream or sys.stderr)

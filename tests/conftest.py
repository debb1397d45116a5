"""Shared fixtures. Keep this small; name fixtures for what they do."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Callable

import pytest

WriteProject = Callable[[dict[str, "str | bytes"]], Path]


@pytest.fixture
def write_yaml_project(tmp_path: Path) -> WriteProject:
    """Write `{relative path: text or bytes}` into a fresh project directory and return it.

    Text is dedented and its first newline dropped, so a triple-quoted string's first line
    is line 1 of the file: the line numbers asserted in tests are the ones you read.
    """

    def write(files: dict[str, str | bytes]) -> Path:
        root = tmp_path / "project"
        root.mkdir(exist_ok=True)
        for name, content in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(textwrap.dedent(content).removeprefix("\n"), encoding="utf-8")
        return root

    return write

"""Python gets the CLI's per-tool isolation (issue 30 §5): `Engine.from_dir(…,
isolate_broken_tools=True)` keeps the healthy tools callable and names the broken ones; and
the README's embedding snippet runs as written from a file."""

from __future__ import annotations

import asyncio
import re
import runpy

import pytest

from engine import ConfigError, Engine
from test_broken_tools import REPO, shipped_copy
from test_validate_agrees import UNDECLARED, write


def test_from_dir_is_strict_by_default_and_isolates_on_request(tmp_path):
    root = write(tmp_path / "p", UNDECLARED)
    with pytest.raises(ConfigError, match="intro"):
        Engine.from_dir(root)
    engine = Engine.from_dir(root, isolate_broken_tools=True)
    assert set(engine.project.broken) == {"report"} and "intro" in engine.project.problems[0].message
    healthy = asyncio.run(engine.call_tool("other", {"text": "hi"}))
    assert healthy.ok and healthy.data == "hi"
    broken = asyncio.run(engine.call_tool("report", {"text": "hi"}))
    assert broken.error is not None and broken.error.code == "config_error"
    assert broken.error.details["problems"][0].startswith("skills.yaml:4:19: ")


def test_project_wide_problems_still_raise_when_isolating(tmp_path):
    root = write(tmp_path / "p", UNDECLARED)
    (root / "config" / "engine.yaml").write_text("router:\n  allow: 5\n")
    with pytest.raises(ConfigError, match="allow"):
        Engine.from_dir(root, isolate_broken_tools=True)


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Embedding"):]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


def test_the_readme_embedding_snippet_runs_as_written_from_a_file(tmp_path, monkeypatch, capsys):
    root = shipped_copy(tmp_path)
    script = tmp_path / "snippet.py"
    script.write_text(readme_snippet())
    monkeypatch.chdir(root)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "# Text report" in out and "3 tools for the model" in out
    assert re.search(r"^\d+ tool_call_result ", out, re.MULTILINE)  # the streamed events, the last one too

"""Tool types that run code cannot be created or reconfigured through the admin API unless
the project opts in (`server.allow_code_tools`): an admin key must not mean a shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Engine
from engine.errors import ToolAdminError
from engine.tool_admin import ToolAdmin

TOOLS = """
tools:
  shout:
    description: Upper-case a text.
    type: python
    config: {function: "helpers:shout"}
"""
HELPERS = "def shout(text: str) -> str:\n    return text.upper()\n"


def project(root: Path, *, allow: bool) -> Engine:
    (root / "tools.yaml").write_text(TOOLS)
    (root / "helpers.py").write_text(HELPERS)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text(f"server:\n  allow_code_tools: {str(allow).lower()}\n")
    return Engine.from_dir(root, store=root / "runs.db")


def test_a_python_tool_cannot_be_created_by_default(tmp_path: Path) -> None:
    engine = project(tmp_path, allow=False)
    try:
        with pytest.raises(ToolAdminError) as caught:
            ToolAdmin(engine).create("sh", type="python", description="x", config={"function": "os:system"})
        assert caught.value.code == "code_tools_disabled"
        assert "allow_code_tools" in str(caught.value)
        assert "sh" not in engine.project.tools
        # reconfiguring a YAML python tool would swap its function just the same
        with pytest.raises(ToolAdminError) as caught:
            ToolAdmin(engine).update("shout", config={"function": "os:system"})
        assert caught.value.code == "code_tools_disabled"
        ToolAdmin(engine).update("shout", enabled=False)  # switching it off runs no new code: allowed
        assert not engine.project.tools["shout"].enabled
        # a type that runs no code of the caller's choosing stays creatable
        ToolAdmin(engine).create("docs", type="fetch", description="Read docs", config={"allowed_domains": ["example.com"]})
        assert "docs" in engine.project.tools
    finally:
        engine.close()


def test_the_project_may_opt_in(tmp_path: Path) -> None:
    engine = project(tmp_path, allow=True)
    try:
        ToolAdmin(engine).create("echoAgain", type="python", description="x", config={"function": "helpers:shout"})
        assert engine.project.tools["echoAgain"].enabled
    finally:
        engine.close()

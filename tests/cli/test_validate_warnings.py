"""`skillyard validate` prints load warnings (issue 16 §5): a misspelt JSON Schema keyword, a
comma that cut a flow value; the shipped project has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

REPO = Path(__file__).resolve().parents[2]


def validate(root: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "validate", str(root)], capture_output=True, text=True, timeout=60)


def test_the_shipped_project_loads_without_warnings():
    done = validate(REPO)
    assert done.returncode == 0 and "warning" not in done.stderr + done.stdout, done.stderr


def test_misspelt_keywords_and_cut_flow_values_are_warnings_at_their_line(tmp_path):
    (tmp_path / "tools.yaml").write_text(
        "tools:\n"
        "  hello:\n"
        "    description: Say hello.\n"
        "    type: python\n"
        "    config: {function: 'tools_mod:hello'}\n"
        "    parameters:\n"
        "      type: object\n"
        "      properties:\n"
        "        name: {type: string, minLenght: 1, description: Who, in a word}\n"
    )
    (tmp_path / "tools_mod.py").write_text("def hello(args):\n    return {'hi': args.get('name')}\n")
    done = validate(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("(2 warnings)")
    lines = done.stderr.splitlines()
    assert lines[0].startswith("warning: tools.yaml:9:") and "'in a word'" in lines[0] and "quote that value" in lines[0] \
        or lines[1].startswith("warning: tools.yaml:9:") and "'in a word'" in lines[1]
    assert any("'minLenght'" in line and line.endswith("did you mean minLength?") for line in lines)

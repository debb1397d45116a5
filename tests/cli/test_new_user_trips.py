"""What a new user tripped on, each where it is cheapest to see: the docs' curl examples and the
422 for a body not sent as JSON, `skillyard tools` with one broken tool, "did you mean" for a
tool name and a template variable, a YAML syntax error that says what to change, and the
streaming progress line that read like an answer cut short.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from io import StringIO
from pathlib import Path

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.cli.timeline import Timeline
from engine.errors import ConfigError
from engine.link.linker import load_project

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def shipped_copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml"):
        shutil.copy(REPO / name, root / name)
    for name in ("capabilities", "config"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def replace_in(path: Path, old: str, new: str, *, after: str = "") -> None:
    text = path.read_text()
    start = text.index(after) if after else 0
    assert old in text[start:], old
    path.write_text(text[:start] + text[start:].replace(old, new, 1))


# ─── the docs' curl examples, and the 422 a body not sent as JSON gets ───


def _curl_commands(text: str) -> list[str]:
    """Each `curl` command of the fenced shell blocks, its continuation lines joined."""
    commands = []
    for block in re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", text, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            if command.lstrip().startswith("curl "):
                commands.append(command)
    return commands


def test_every_curl_example_that_sends_a_body_says_it_is_json() -> None:
    sending = [(doc.name, c) for doc in DOCS for c in _curl_commands(doc.read_text()) if re.search(r"\s(-d|--data\S*)\s", c)]
    assert any("/v1/agent" in c for _, c in sending), "the agent example is among them"
    for name, command in sending:
        assert re.search(r"-H\s+'content-type: application/json'", command, re.I), f"{name}: {command}"


def test_the_agent_route_says_what_to_send_for_a_form_body(tmp_path: Path) -> None:
    from engine.server import create_app

    engine = Engine.from_dir(shipped_copy(tmp_path))
    app = create_app(engine, api_keys="", mcp=False)

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as client:
            return await client.post("/v1/agent", content='{"messages": "hi", "model": "mock"}',  # what curl -d sends
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})

    try:
        answer = asyncio.run(post())
    finally:
        engine.close()
    assert answer.status_code == 422
    message = answer.json()["error"]["message"]
    assert "Content-Type: application/json" in message and "application/x-www-form-urlencoded" in message
    assert "valid dictionary" not in message


# ─── `skillyard tools` with a broken tool; the words for what a config problem stopped ───


def test_tools_lists_the_healthy_tools_and_the_broken_one_with_its_problem(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = shipped_copy(tmp_path)
    replace_in(root / "workflows.yaml", "$toolArgs.text", "$toolArgs.txet", after="  textReport:")
    assert main(["tools", "--dir", str(root)]) == 2, "the project has a problem to fix"
    out, err = capsys.readouterr()
    assert "analyzeJobAndGeneratePlan  [workflow, enabled" in out and "triageFeedback  [workflow" in out
    broken = out[out.index("1 broken tool"):]
    assert "textReport  [broken]" in broken and "workflows.yaml:" in broken and "txet" in broken
    assert "nothing was run" not in out + err

    assert main(["tools", "--dir", str(root), "--json"]) == 2
    listed = json.loads(capsys.readouterr().out)
    assert {"analyzeJobAndGeneratePlan", "triageFeedback"} <= {t["name"] for t in listed if not t.get("broken")}
    (entry,) = [t for t in listed if t.get("broken")]
    assert entry["name"] == "textReport" and "txet" in entry["problems"][0]


def test_validate_and_tools_say_what_a_project_wide_problem_stopped(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = shipped_copy(tmp_path)
    replace_in(root / "tools.yaml", "tools:", "tools: [")
    assert main(["validate", str(root)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "1 problem found; the project does not load."
    assert main(["tools", "--dir", str(root)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "1 problem found; no tool is listed."


# ─── "did you mean" for a tool name and a template variable; a YAML error says what to change ───


def test_an_unknown_tool_on_the_cli_is_offered_the_close_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = shipped_copy(tmp_path)
    assert main(["call", "textReprt", "--dir", str(root), "--no-store", "--arg", "text=hi"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'textReport'?" in err and "available tools:" in err
    assert main(["call", "textReprt", "--dir", str(root), "--no-store", "--quiet", "--arg", "text=hi"]) == 2
    assert "did you mean 'textReport'?" in capsys.readouterr().err


def test_a_misspelt_template_variable_is_offered_the_declared_one(tmp_path: Path) -> None:
    root = shipped_copy(tmp_path)
    replace_in(root / "skills.yaml", "{{ jdText }}", "{{ jdTxet }}")
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    (issue,) = caught.value.issues
    assert "jdTxet" in issue.message and issue.hint.startswith("did you mean {{ jdText }}?")


@pytest.mark.parametrize("broken, hint", [
    ("tools:\n  a:\n    description: x\n   workflow: y\n",
     "line 4 (`workflow:`) is indented differently from the block it belongs to (from line 2:3)"),
    ("tools:\n  a:\n    description: \"an open quote\n", "the quoted string opened at line 3:18 never ends"),
    ("tools:\n  a: {description: x\n", "the mapping opened with `{` at line 2:6 is not closed"),
    ("tools:\n  a:\n    description: @here\n", "the character `@` at line 3, column 18 cannot start a plain value"),
])
def test_a_yaml_syntax_error_says_what_the_parser_found_and_what_to_change(write_yaml_project, broken: str,
                                                                          hint: str) -> None:
    root = write_yaml_project({"tools.yaml": broken})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    (issue,) = caught.value.issues
    assert issue.message.startswith("YAML syntax error: ") and issue.location.line > 0
    assert hint in issue.hint and issue.hint != "fix the YAML syntax"


# ─── the streaming progress line ───


def test_a_prompt_step_s_progress_says_how_much_has_arrived_so_far(tmp_path: Path) -> None:
    engine = Engine.from_dir(shipped_copy(tmp_path))
    shown = StringIO()
    try:
        result = asyncio.run(engine.call_tool("analyzeJobAndGeneratePlan", {"jdText": "Senior Python developer, Django."},
                                              on_event=Timeline(shown, live=False)))
    finally:
        engine.close()
    assert result.ok, result.error
    lines = [line.strip() for line in shown.getvalue().splitlines()]
    streaming = [line for line in lines if line.startswith("receiving the answer: ")]
    answered = [line for line in lines if line.startswith("model answered: ")]
    assert streaming and all(line.endswith(" chars so far") for line in streaming)
    assert answered and all(line.endswith(" chars in all") for line in answered)
    assert not any(re.fullmatch(r"[\d,]+ chars received", line) for line in lines)

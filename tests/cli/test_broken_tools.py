"""One broken tool does not stop the others (issue 16 §3): per-tool linking, the CLI, the
service (/readyz degraded, config_error), `serve --reload` and the last good version."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine import Engine
from engine.errors import ConfigError
from engine.link.linker import load_project
from server_helpers import running_server

REPO = Path(__file__).resolve().parents[2]


def shipped_copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml"):
        shutil.copy(REPO / name, root / name)
    for name in ("capabilities", "config"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def break_text_report(root: Path) -> None:
    """A typo in textReport's workflow: `$toolArgs.txet`."""
    path = root / "workflows.yaml"
    text = path.read_text()
    start = text.index("  textReport:")
    fixed = text[start:].replace("$toolArgs.text", "$toolArgs.txet", 1)
    path.write_text(text[:start] + fixed)


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_strict_load_still_raises_for_any_problem(tmp_path):
    root = shipped_copy(tmp_path)
    break_text_report(root)
    with pytest.raises(ConfigError, match="txet"):
        load_project(root)


def test_a_broken_tool_answers_config_error_and_the_others_run(tmp_path):
    root = shipped_copy(tmp_path)
    break_text_report(root)
    project = load_project(root, isolate_broken_tools=True)
    assert "textReport" not in project.tools and {"analyzeJobAndGeneratePlan", "triageFeedback"} <= set(project.tools)
    (problem,) = project.broken["textReport"]
    assert problem.location.file == "workflows.yaml" and "txet" in problem.message
    assert project.summary().endswith("; 1 broken: textReport")
    engine = Engine.from_project(project)
    broken = asyncio.run(engine.call_tool("textReport", {"text": "a b"}))
    assert broken.error is not None and broken.error.code == "config_error"
    assert "workflows.yaml:" in broken.error.details["problems"][0] and "txet" in broken.error.details["problems"][0]
    healthy = asyncio.run(engine.call_tool("triageFeedback", {"text": "It crashes. I love it."}))
    assert healthy.ok, healthy.error


def test_a_problem_in_a_shared_skill_breaks_every_tool_that_uses_it_and_no_other(tmp_path):
    root = shipped_copy(tmp_path)
    skills = root / "skills.yaml"
    text = skills.read_text()
    assert "kind: prompt" in text
    skills.write_text(text.replace("kind: prompt", "kind: prompt\n    temperature: 9", 1))
    project = load_project(root, isolate_broken_tools=True)
    assert project.broken and all(
        any("temperature" in issue.message for issue in issues) for issues in project.broken.values())
    assert "textReport" in project.tools  # it uses no prompt skill


def test_project_wide_problems_still_stop_everything(tmp_path):
    root = shipped_copy(tmp_path)
    (root / "config" / "engine.yaml").write_text("router:\n  allow: 5\n")
    with pytest.raises(ConfigError, match="allow"):
        load_project(root, isolate_broken_tools=True)


@pytest.mark.slow
def test_cli_runs_healthy_tools_warns_once_and_refuses_the_broken_one(tmp_path):
    root = shipped_copy(tmp_path)
    break_text_report(root)
    ok = cli("call", "triageFeedback", "--arg", "text=It crashes on login.", "--no-store", cwd=root)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr.count("warning: 1 tool cannot run because of problems in its configuration (textReport)") == 1
    refused = cli("call", "textReport", "--arg", "text=a b", "--no-store", cwd=root)
    assert refused.returncode == 2
    assert "workflows.yaml:" in refused.stderr and "txet" in refused.stderr and "Traceback" not in refused.stderr
    validate = cli("validate", cwd=root)
    assert validate.returncode == 2 and "1 problem found" in validate.stderr


def wait_for(check, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@pytest.mark.slow
def test_serve_degraded_then_reload_fixes_and_a_new_break_keeps_the_last_good_version(tmp_path):
    root = shipped_copy(tmp_path)
    pristine = (root / "workflows.yaml").read_text()
    break_text_report(root)
    with running_server(root, keys=None, extra=("--no-store", "--reload")) as server:
        ready = httpx.get(f"{server.url}/readyz").json()
        assert ready["status"] == "degraded" and ready["broken_tools"] == 1
        problems = httpx.get(f"{server.url}/v1/admin/problems").json()
        assert list(problems["broken_tools"]) == ["textReport"] and "txet" in problems["broken_tools"]["textReport"][0]
        call = httpx.post(f"{server.url}/v1/tools/textReport/call", json={"text": "a b"})
        assert call.status_code == 503 and call.json()["error"]["code"] == "config_error"
        assert httpx.post(f"{server.url}/v1/tools/triageFeedback/call", json={"text": "It crashes."}).json()["ok"]
        log = server.log.read_text()
        assert "tool 'textReport' cannot run until its configuration is fixed" in log

        (root / "workflows.yaml").write_text(pristine)  # fixed: --reload relinks
        assert wait_for(lambda: httpx.get(f"{server.url}/readyz").json()["status"] == "ready")
        fixed = httpx.post(f"{server.url}/v1/tools/textReport/call", json={"text": "a b"}).json()
        assert fixed["ok"] and fixed["data"]["stats"]["words"] == 2

        break_text_report(root)  # broken again: the last good version keeps serving
        assert wait_for(lambda: httpx.get(f"{server.url}/readyz").json()["status"] == "degraded")
        kept = httpx.post(f"{server.url}/v1/tools/textReport/call", json={"text": "a b c"}).json()
        assert kept["ok"] and kept["data"]["stats"]["words"] == 3
        assert "serving its last good version" in server.log.read_text()

        (root / "config" / "engine.yaml").write_text("router:\n  allow: 5\n")  # project-wide: keep everything
        assert wait_for(lambda: "the project does not load, kept the running one" in server.log.read_text())
        assert httpx.post(f"{server.url}/v1/tools/triageFeedback/call", json={"text": "Nice."}).json()["ok"]
        reload = httpx.post(f"{server.url}/v1/admin/reload")
        assert reload.status_code == 422 and "allow" in json.dumps(reload.json())

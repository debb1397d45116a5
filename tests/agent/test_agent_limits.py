"""The agent's limits as a user sets them: `agent:` in config/engine.yaml, `skillyard chat` flags,
and POST /v1/agent (which may only lower them); a tool result cut before the model reads it;
and an answer that says what was gathered when a limit stops the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import Engine

TOOLS = """
tools:
  longText:
    description: Return a long text about ducks.
    parameters: {type: object, properties: {}, additionalProperties: false}
    workflow: longText
"""
SKILLS = """
skills:
  ducks:
    kind: python
    function: pages:ducks
    input: {type: object}
"""
WORKFLOWS = """
workflows:
  longText:
    steps:
      - {id: read, skill: ducks, input: {}}
"""
MODULE = '''
def ducks(input):
    return "Ducks swim. " * 2000
'''


def project(root: Path, agent_yaml: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.yaml").write_text(TOOLS)
    (root / "skills.yaml").write_text(SKILLS)
    (root / "workflows.yaml").write_text(WORKFLOWS)
    (root / "pages.py").write_text(MODULE)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text(agent_yaml)
    return root


def skillyard() -> list[str]:
    script = Path(sys.executable).with_name("skillyard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli.main"]


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*skillyard(), *args, "--dir", str(root)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_engine_yaml_sets_the_limits_and_a_limit_stop_summarises_what_was_gathered(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "agent:\n  max_steps: 1\n  max_result_chars: 500\n  total_timeout: 45s\n")
    engine = Engine.from_dir(root)
    agent = engine.agent()
    assert (agent.limits.max_steps, agent.limits.max_result_chars, agent.limits.total_timeout) == (1, 500, 45.0)
    assert agent.limits.max_parallel_tool_calls == 4  # unset keys keep their defaults
    result = _run(agent, "tell me about ducks")
    assert result.stop_reason == "max_steps"
    assert result.answer.startswith("Stopped before a final answer: the limit max_steps=1 was reached.")
    assert "- longText: Ducks swim. Ducks swim." in result.answer
    assert len(result.answer) < 1000  # a summary, not the whole result


def test_a_tool_result_is_cut_for_the_model_with_a_note(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "agent:\n  max_result_chars: 300\n")
    result = _run(Engine.from_dir(root).agent(), "tell me about ducks")
    assert result.stop_reason == "answer"
    [observation] = [m.content for m in result.messages if m.role == "tool"]
    body_chars = len("Ducks swim. " * 2000)
    assert observation.startswith("[longText succeeded in ")
    cut, note = observation[:300], observation[300:]
    assert len(cut) == 300 and "Ducks swim." in cut
    shown_whole = len(cut) + len(note.split("\n", 1)[0])  # the note follows the cut on its own line
    assert note.startswith("\n[… ") and "more characters cut: the result held" in note and "(agent.max_result_chars)]" in note
    held = int(note.split("the result held ")[1].split(";")[0].replace(",", ""))
    assert held > body_chars and f"{held - 300:,} more characters cut" in note
    assert shown_whole < 600
    # The tool's own result (events, store, caller) stays whole: only the model's copy is cut.
    assert result.tool_results[0].data == "Ducks swim. " * 2000


def test_the_default_cap_is_20000_characters(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "")
    result = _run(Engine.from_dir(root).agent(), "tell me about ducks")
    [observation] = [m.content for m in result.messages if m.role == "tool"]
    assert "more characters cut" in observation and observation.index("\n[… ") == 20_000


@pytest.mark.slow
def test_bad_agent_settings_are_config_errors_at_their_line(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "agent:\n  max_steps: 0\n  max_result_chars: 20000\n")
    done = subprocess.run([*skillyard(), "validate", str(root)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "config/engine.yaml:2" in done.stderr and "max_steps" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_chat_flags_override_the_configured_limits(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "agent:\n  max_steps: 5\n  token_budget: 100000\n")
    done = cli(root, "chat", "tell me about ducks", "--no-store", "--output", "events", "--max-steps", "1",
               "--max-result-chars", "400", "--total-timeout", "30s", "--tool-timeout", "2.5")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    limits = events[0]["data"]["limits"]
    assert (limits["max_steps"], limits["max_result_chars"], limits["total_timeout"], limits["tool_timeout"]) == (1, 400, 30.0, 2.5)
    assert limits["max_parallel_tool_calls"] == 4 and limits["max_repeated_calls"] == 3  # not given: configured/defaults
    assert done.returncode == 1 and "stopped: max_steps" in done.stderr
    assert limits["token_budget"] == 100000  # a count of tokens, not a credential: shown, not redacted
    done = cli(root, "chat", "tell me about ducks", "--no-store", "--quiet", "--token-budget", "20")
    assert done.returncode == 1 and "stopped: token_budget" in done.stderr
    # --output text: the limit's summary is the answer on stdout (nothing was streamed by a model)
    done = cli(root, "chat", "tell me about ducks", "--no-store", "--quiet", "--max-steps", "1")
    assert done.returncode == 1
    assert done.stdout.startswith("Stopped before a final answer: the limit max_steps=1 was reached.")


@pytest.mark.slow
@pytest.mark.parametrize("flag, value, message", [
    ("--max-steps", "0", "--max-steps 0: give 1 or more"),
    ("--max-repeated-calls", "1", "--max-repeated-calls 1: give 2 or more"),
    ("--total-timeout", "soon", "argument --total-timeout: 'soon' is not a duration"),
])
def test_bad_chat_limit_flags_exit_2(tmp_path: Path, flag: str, value: str, message: str) -> None:
    done = cli(project(tmp_path / "p", ""), "chat", "hi", "--no-store", flag, value)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_post_v1_agent_takes_lower_limits_and_refuses_higher_ones(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from server_helpers import parse_sse, running_server

    root = project(tmp_path / "p", "agent:\n  max_steps: 3\n  total_timeout: 60s\n  max_result_chars: 1000\n")
    key = "admin-key-0123456789abcdef"
    with running_server(root, keys=f"ops:admin:{key}") as server:
        def post(**body: Any) -> httpx.Response:
            return httpx.post(f"{server.url}/v1/agent", json={"messages": "tell me about ducks", **body}, timeout=30,
                              headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"})

        response = post(max_steps=10, total_timeout=30)
        assert response.status_code == 422
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert "max_steps=10 is above this service's max_steps=3 (agent.max_steps in config/engine.yaml)" in error["message"]

        assert post(max_steps=0).status_code == 422
        assert post(max_repeated_calls=1).status_code == 422

        frames = parse_sse(post(max_steps=1, max_result_chars=200, max_parallel_tool_calls=2).text)
        limits = frames[0]["data"]["data"]["limits"]
        assert (limits["max_steps"], limits["max_result_chars"], limits["max_parallel_tool_calls"]) == (1, 200, 2)
        assert limits["total_timeout"] == 60.0  # not asked: the configured one
        done = frames[-1]["data"]
        assert done["type"] == "agent_done" and done["data"]["stop_reason"] == "max_steps"
        assert done["data"]["answer"].startswith("Stopped before a final answer")

        frames = parse_sse(post().text)  # the web chat sends no limits: the configured ones apply
        assert frames[0]["data"]["data"]["limits"]["max_steps"] == 3


def _run(agent: Any, prompt: str) -> Any:
    import asyncio

    return asyncio.run(agent.run(prompt))

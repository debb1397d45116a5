"""`skillyard chat` against an OpenAI-compatible server on 127.0.0.1.

The main path and the missing-key error run the real `skillyard` command in a subprocess;
the option checks call the same entry point in-process (importing the openai SDK costs
seconds per process on a busy machine).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.cli import chat as chat_module
from engine.cli.main import main
from fake_llm_servers import FakeServer, OpenAIWire, call, module_server, server, write_project  # noqa: F401 - shared fixtures

WIRE = OpenAIWire()
KEY_VAR = "SKILLYARD_TEST_LLM_KEY"


def skillyard() -> list[str]:
    script = Path(sys.executable).with_name("skillyard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli.main"]


@pytest.fixture
def project(tmp_path: Path, server: FakeServer) -> Path:
    entry = WIRE.model_entry(server.url, api_key="${" + KEY_VAR + "}")
    return write_project(tmp_path / "project", {"mock": {"provider": "mock"}, "gpt": entry}, default="mock")


def chat(project: Path, *args: str, key: str | None = "sk-from-env", stdin: str | None = None,
         merged: bool = False) -> subprocess.CompletedProcess[str]:
    """`merged`: stderr goes into stdout, in the order written (as one terminal shows both)."""
    env = {k: v for k, v in os.environ.items() if k != KEY_VAR}
    if key is not None:
        env[KEY_VAR] = key
    return subprocess.run(
        [*skillyard(), "chat", *args, "--dir", str(project)],
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True, env=env, cwd=project, timeout=30,
    )


class Done:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def chat_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`skillyard chat …` in this process (same entry point as the console script)."""
    monkeypatch.setattr(chat_module, "configure_logging", lambda *a: None)  # keep the test's log setup
    monkeypatch.setenv(KEY_VAR, "sk-from-env")

    def run(project: Path, *args: str, stdin: str = "") -> Done:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["chat", *args, "--dir", str(project)])
        out, err = capsys.readouterr()
        return Done(code, out, err)

    return run


@pytest.mark.slow
def test_chat_answers_on_stdout_with_the_timeline_on_stderr(project: Path, server: FakeServer) -> None:
    server.script(
        WIRE.reply("", [call("call_1", "echo", {"name": "Ada"})], split_at=4),
        WIRE.reply("Hello Ada, welcome aboard!", split_at=5),
    )
    done = chat(project, "Greet Ada", "--model", "gpt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello Ada, welcome aboard!"
    timeline = done.stderr
    for line in ("▶ agent on gpt with tools: deleteRecord, echo, nap, sendEmail", "· model call 1 (gpt)", "▶ echo",
                 "✓ echo", "✓ done in", "· model call 2 (gpt)", "■ answer after 2 model call(s)"):
        assert line in timeline, timeline
    assert "Traceback" not in timeline
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"  # ${ENV} interpolated
    assert server.requests[0].body["model"] == "fake-gpt"
    assert json.loads(server.bodies[1]["messages"][-1]["content"].split("\n", 1)[1]) == {"name": "Ada", "count": 1}


@pytest.mark.slow
def test_the_timeline_starts_its_lines_after_the_streamed_text(project: Path, server: FakeServer) -> None:
    """One terminal shows stdout and stderr: a model's text (thinking before a tool call, then
    the answer) ends its line before the timeline's next one, and stdout alone is the same."""
    script = (WIRE.reply("Let me look Ada up.", [call("call_1", "echo", {"name": "Ada"})], split_at=4),
              WIRE.reply("Hello Ada, welcome aboard!", split_at=5))
    server.script(*script)
    merged = chat(project, "Greet Ada", "--model", "gpt", merged=True)
    assert merged.returncode == 0, merged.stdout
    lines = merged.stdout.splitlines()
    assert "Let me look Ada up." in lines and "Hello Ada, welcome aboard!" in lines, merged.stdout
    assert any(line.startswith("■ answer after 2 model call(s)") for line in lines), merged.stdout
    server.script(*script)
    done = chat(project, "Greet Ada", "--model", "gpt")
    assert done.stdout == "Let me look Ada up.\nHello Ada, welcome aboard!\n"


@pytest.mark.slow
def test_missing_env_var_is_a_clear_error(project: Path, server: FakeServer) -> None:
    done = chat(project, "Greet Ada", "--model", "gpt", key=None)
    assert done.returncode == 1
    assert KEY_VAR in done.stderr and "not set" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert server.requests == []  # nothing was sent


def test_prompt_from_stdin_events_output_and_options(project: Path, server: FakeServer, chat_here: Any) -> None:
    server.script(WIRE.reply("", [call("c1", "echo", {"name": "Bo"})]), WIRE.reply("Hi Bo."))
    done = chat_here(project, "-", "--model", "gpt", "--output", "events", "--tools", "echo,nap", "--tool-choice", "echo",
                "--max-steps", "3", "--quiet", stdin="Greet Bo\n")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_done"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["data"]["stop_reason"] == "answer" and events[-1]["data"]["answer"] == "Hi Bo."
    assert events[0]["data"]["limits"]["max_steps"] == 3
    first = server.bodies[0]
    assert first["messages"][-1] == {"role": "user", "content": "Greet Bo\n"}
    assert first["tool_choice"] == {"type": "function", "function": {"name": "echo"}}
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["echo", "nap"]
    assert done.stderr == ""  # --quiet


def test_confirm_tool_without_terminal_or_yes_is_denied(project: Path, server: FakeServer, chat_here: Any) -> None:
    server.script(WIRE.reply("", [call("c1", "sendEmail", {"to": "ann"})]), WIRE.reply("I could not send it."))
    done = chat_here(project, "Mail Ann", "--model", "gpt")
    assert done.returncode == 0, done.stderr
    assert "sendEmail (c1) needs confirmation; no terminal and no --yes: denied" in done.stderr
    assert "declined" in server.bodies[1]["messages"][-1]["content"]

    server.reset()
    server.script(WIRE.reply("", [call("c1", "sendEmail", {"to": "ann"})]), WIRE.reply("Sent."))
    done = chat_here(project, "Mail Ann", "--model", "gpt", "--yes")
    assert done.returncode == 0 and done.stdout.strip() == "Sent."
    assert server.bodies[1]["messages"][-1]["content"].startswith("[sendEmail succeeded")


def test_model_failure_exits_1_without_traceback(project: Path, server: FakeServer, chat_here: Any) -> None:
    server.script(WIRE.status(401, "invalid api key"))
    done = chat_here(project, "hi", "--model", "gpt")
    assert done.returncode == 1
    assert "stopped: error: model 'gpt' failed: HTTP 401: invalid api key" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors(project: Path, chat_here: Any) -> None:
    done = chat_here(project, "hi", "--model", "nope")
    assert done.returncode == 2 and "--model nope: unknown model; known: gpt, mock" in done.stderr
    done = chat_here(project, "hi", "--tools", "echo,ghost")
    assert done.returncode == 2 and "unknown tool(s) ghost" in done.stderr
    done = chat_here(project, "hi", "--tool-choice", "sometimes")
    assert done.returncode == 2 and "--tool-choice sometimes" in done.stderr
    done = chat_here(project, "hi", "--max-steps", "0")
    assert done.returncode == 2 and "--max-steps" in done.stderr


def test_ctrl_c_cancels_the_run_cleanly(project: Path, server: FakeServer, chat_here: Any) -> None:
    """SIGINT during a tool call: the call ends as cancelled, agent_done says so, exit 130."""
    server.script(WIRE.reply("", [call("c1", "nap", {"seconds": 20})]))

    def interrupt() -> None:  # only once the request arrived, i.e. inside asyncio.run (which handles SIGINT)
        deadline = time.monotonic() + 10
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)
        if server.requests:
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    done = chat_here(project, "nap", "--model", "gpt", "--output", "events", "--quiet")
    assert time.monotonic() - started < 8
    assert done.returncode == 130 and "cancelled" in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "agent_done" and events[-1]["data"]["stop_reason"] == "cancelled"
    if any(e["type"] == "tool_call_start" for e in events):
        error = next(e for e in events if e["type"] == "tool_call_error")
        assert error["tool_call_id"] == "c1" and error["data"]["error"]["code"] == "cancelled"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_approvals_are_asked_one_at_a_time(project: Path, server: FakeServer, chat_here: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two confirm-tools in one turn: two questions, never at once, each answer to its own call."""
    server.script(
        WIRE.reply("", [call("c_send", "sendEmail", {"to": "ann"}), call("c_delete", "deleteRecord", {"to": "rec-7"})]),
        WIRE.reply("Done what you allowed."),
    )
    asked: list[str] = []
    open_questions: list[str] = []
    most_open = []

    def fake_input(question: str) -> str:  # runs on the approval thread
        open_questions.append(question)
        most_open.append(len(open_questions))
        asked.append(question)
        time.sleep(0.05)
        open_questions.pop()
        return "y" if "(c_delete)" in question else "n"

    monkeypatch.setattr("builtins.input", fake_input)
    monkeypatch.setattr(sys, "stdin", _Terminal())
    code = main(["chat", "Do both", "--model", "gpt", "--dir", str(project), "--quiet"])
    assert code == 0
    assert max(most_open) == 1  # never two questions at once
    assert sorted(q.split(" with ")[0] for q in asked) == ["Allow deleteRecord (c_delete)", "Allow sendEmail (c_send)"]
    results = {m["tool_call_id"]: m["content"] for m in server.bodies[1]["messages"] if m["role"] == "tool"}
    assert results["c_delete"].startswith("[deleteRecord succeeded")
    assert "declined" in results["c_send"]

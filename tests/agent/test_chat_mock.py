"""`skillyard chat` on the offline `mock` model, as a newcomer meets it (real CLI subprocesses).

A greeting gets a greeting and no tool call; a request names its tool by what the tool does;
arguments come out of the message by the schema (the URL for a `format: uri` field, a number
next to the field's name); the answer summarises the tool's result in readable lines; a failed
tool call exits 1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

REPO = Path(__file__).resolve().parents[2]
PAGE = b"<html><body><h1>Release notes</h1><p>Version 2 adds streaming exports.</p></body></html>"


def skillyard() -> list[str]:
    script = Path(sys.executable).with_name("skillyard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli.main"]


def chat(project: Path, message: str, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """(exit code, the run's events, stderr) of `skillyard chat MESSAGE --output events`."""
    done = subprocess.run([*skillyard(), "chat", message, "--dir", str(project), "--no-store", "--output", "events", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, events, done.stderr


def answer(events: list[dict[str, Any]]) -> str:
    return next(e["data"]["answer"] for e in events if e["type"] == "agent_done")


def tool_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "tool_call_start"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's own project (analyzeJobAndGeneratePlan, textReport)."""
    root = tmp_path_factory.mktemp("shipped")
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml", "config", "capabilities", "examples"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, root / name)
    return root


@pytest.fixture(scope="module")
def page_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def fetcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one fetch tool allowed to reach 127.0.0.1."""
    root = tmp_path_factory.mktemp("fetcher")
    (root / "tools.yaml").write_text(
        "tools:\n"
        "  readPage:\n"
        "    description: Fetch a web page by its URL and return its text.\n"
        "    type: fetch\n"
        "    config: {allowPrivateNetworks: ['127.0.0.0/8'], timeout: 5s}\n"
    )
    return root


def test_a_greeting_gets_a_greeting_and_no_tool_call(shipped: Path) -> None:
    code, events, _ = chat(shipped, "hello")
    assert code == 0
    assert tool_calls(events) == []
    text = answer(events)
    assert text.startswith("Hello!")
    assert "analyzeJobAndGeneratePlan" in text and "textReport" in text  # what the user can ask for


def test_an_unrelated_question_calls_no_tool(shipped: Path) -> None:
    code, events, _ = chat(shipped, "What is the capital of France?")
    assert code == 0 and tool_calls(events) == []
    assert "did not find a tool" in answer(events)


def test_the_tool_the_message_asks_for_with_a_number_read_from_it(shipped: Path) -> None:
    text = "The quick brown fox jumps over the lazy dog. The dog sleeps. Foxes are quick and brown animals."
    code, events, _ = chat(shipped, f"Give me a report with the top 3 keywords of this text: {text}")
    assert code == 0
    [call] = tool_calls(events)
    assert call["tool"] == "textReport"
    assert call["arguments"] == {"text": text, "topN": 3}  # the material after the colon, not the whole sentence
    said = answer(events)
    assert said.startswith("textReport returned:")
    assert "# Text report" in said and "1. quick (2)" in said  # the Markdown report as itself, not a JSON string
    assert "\\n" not in said and '{"' not in said


def test_a_url_field_gets_the_url_of_the_message_and_the_page_is_summarised(fetcher: Path, page_server: str) -> None:
    url = f"{page_server}/notes.html"
    code, events, stderr = chat(fetcher, f"Please read {url}, and tell me what changed.")
    assert code == 0, stderr
    [call] = tool_calls(events)
    assert call["arguments"] == {"url": url}  # the URL (no trailing comma), not the sentence
    said = answer(events)
    assert said.startswith("readPage returned:") and "Version 2 adds streaming exports." in said


def test_a_long_result_is_summarised_between_items(shipped: Path) -> None:
    jd = (REPO / "examples" / "jd.txt").read_text()
    code, events, _ = chat(shipped, f"Plan my interview preparation for this job: {jd}")
    assert code == 0
    [call] = tool_calls(events)
    assert call["tool"] == "analyzeJobAndGeneratePlan" and call["arguments"] == {"jdText": jd.strip()}
    said = answer(events)
    assert "- days: 7 items" in said and "1. day: 1; focus:" in said
    assert not any(line.rstrip().endswith(("{", ",", '"')) for line in said.splitlines())  # no JSON cut mid-object


def test_a_failed_tool_call_exits_1(fetcher: Path) -> None:
    with socket_nobody_listens_on() as port:
        code, events, stderr = chat(fetcher, f"Read http://127.0.0.1:{port}/gone please")
    assert [c["tool"] for c in tool_calls(events)] == ["readPage"]
    assert code == 1
    assert "error: tool readPage failed:" in stderr
    assert answer(events).startswith("The call of readPage failed:")


def test_a_tool_that_needs_a_url_is_not_called_without_one(fetcher: Path) -> None:
    code, events, _ = chat(fetcher, "read the page about web fetching")
    assert code == 0 and tool_calls(events) == []


class socket_nobody_listens_on:
    """A 127.0.0.1 port that was just free (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    def __exit__(self, *exc: Any) -> None:
        pass

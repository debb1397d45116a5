"""`kind: tool` skills: a registered tool type (fetch) as a workflow step, against a loopback server."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Iterator

import pytest

from engine import ConfigError, Engine, load_project

PAGE = b"<html><head><style>p{}</style></head><body><h1>Hello Kafka</h1><p>PostgreSQL and Python.</p><script>steal()</script></body></html>"


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        status = 200 if self.path == "/page" else 404
        body = PAGE if status == 200 else b"missing"
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def write_project(root: Path, content_path: str = "content") -> Path:
    (root / "tools.yaml").write_text(
        "tools:\n"
        "  summarisePage:\n"
        "    description: Fetch a page and summarise it.\n"
        "    parameters: {type: object, properties: {url: {type: string}}, required: [url]}\n"
        "    workflow: summarisePage\n"
    )
    (root / "skills.yaml").write_text(
        "skills:\n"
        "  readPage:\n"
        "    kind: tool\n"
        "    type: fetch\n"
        "    config: {allowPrivateNetworks: ['127.0.0.0/8'], parseMode: markdown}\n"
        "  summarise:\n"
        "    kind: template\n"
        "    template: 'Page says: {{ text }}'\n"
        "    input: {type: object, properties: {text: {type: string}}, required: [text]}\n"
    )
    (root / "workflows.yaml").write_text(
        "workflows:\n"
        "  summarisePage:\n"
        "    steps:\n"
        "      - {id: read, skill: readPage, input: {url: $toolArgs.url}}\n"
        f"      - {{id: sum, skill: summarise, input: {{text: $steps.read.output.{content_path}}}}}\n"
        "    output: {summary: $steps.sum.output, status: $steps.read.output.status_code}\n"
    )
    return root


def test_fetch_step_feeds_the_next_step_and_reports_skill_progress(tmp_path: Path, site: str) -> None:
    engine = Engine.from_dir(write_project(tmp_path))
    events = []
    result = engine.call_tool_sync("summarisePage", {"url": f"{site}/page"}, on_event=events.append)
    assert result.ok, result.error
    assert result.data["status"] == 200
    assert "Hello Kafka" in result.data["summary"] and "steal()" not in result.data["summary"]
    read_progress = [e for e in events if e.type == "skill_progress_delta" and e.step_id == "read"]
    assert read_progress, "the fetch executor's progress arrives as skill progress of its step"
    assert not [e for e in events if e.type == "tool_progress_delta" and e.data.get("stage") in ("resolved", "downloaded")]


def test_fetch_step_failure_keeps_its_code(tmp_path: Path, site: str) -> None:
    engine = Engine.from_dir(write_project(tmp_path))
    result = engine.call_tool_sync("summarisePage", {"url": f"{site}/missing"})
    assert not result.ok and result.error.code == "http_error"


def test_paths_into_a_tool_step_output_are_checked_at_link_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_project(write_project(tmp_path, content_path="contnt"))
    (issue,) = caught.value.issues
    assert (issue.location.file, issue.location.line) == ("workflows.yaml", 5)
    assert "has no 'contnt'" in issue.message


def test_unknown_tool_type_in_a_tool_skill_is_a_config_error(tmp_path: Path) -> None:
    root = write_project(tmp_path)
    (root / "skills.yaml").write_text((root / "skills.yaml").read_text().replace("type: fetch", "type: ftp"))
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    assert any(i.location.file == "skills.yaml" and i.location.line == 4 and "unknown tool type 'ftp'" in i.message for i in caught.value.issues)

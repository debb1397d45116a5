"""Small things a user meets on the command line (issue 16 §4 and §8), each through a real
`skillyard` / `run-workflow` process: `--output text`, `tools --format` without `--json`, the
error code in `skillyard runs`, `validate` with stored tool overrides, an offline `runs replay`,
and the one line that says why the web tests were skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

REPO = Path(__file__).resolve().parents[2]
REPORT = "# Notes\n\n- first point\n- second point"

TOOLS = """
tools:
  report:
    description: A Markdown report.
    parameters: {type: object, properties: {title: {type: string}}, required: [title], additionalProperties: false}
    workflow: report
  stats:
    description: An object.
    parameters: {type: object, properties: {}, additionalProperties: false}
    workflow: stats
  boom:
    description: Fails in the user's code.
    parameters: {type: object, properties: {}, additionalProperties: false}
    workflow: boom
  page:
    description: Reads a page and outlines it.
    parameters: {type: object, properties: {url: {type: string, format: uri}}, required: [url], additionalProperties: false}
    workflow: page
  rawPage:
    description: Fetches a page.
    type: fetch
    config: {allowPrivateNetworks: ['127.0.0.0/8'], timeout: 5s}
"""
SKILLS = """
skills:
  render:
    kind: template
    template: "# {{ title }}\\n\\n- first point\\n- second point"
    input: {type: object, properties: {title: {type: string}}, required: [title]}
  numbers:
    kind: python
    function: helpers:numbers
    input: {type: object}
  explode:
    kind: python
    function: helpers:explode
    input: {type: object}
  read:
    kind: tool
    type: fetch
    config: {allowPrivateNetworks: ['127.0.0.0/8'], timeout: 5s}
  outline:
    kind: prompt
    user: "Outline this page: {{ text }}"
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output:
      type: object
      properties: {headline: {type: string}, points: {type: array, items: {type: string}, minItems: 2}}
      required: [headline, points]
"""
WORKFLOWS = """
workflows:
  report:
    steps: [{id: r, skill: render, input: {title: $toolArgs.title}}]
  stats:
    steps: [{id: n, skill: numbers, input: {}}]
  boom:
    steps: [{id: x, skill: explode, input: {}}]
  page:
    steps:
      - {id: fetch, skill: read, input: {url: $toolArgs.url}}
      - {id: sum, skill: outline, input: {text: $steps.fetch.output.content}}
"""
HELPERS = '''
def numbers(input):
    return {"words": 3, "keywords": ["a", "b"]}


def explode(input):
    raise ValueError("no luck")
'''


def skillyard() -> list[str]:
    script = Path(sys.executable).with_name("skillyard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli.main"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`skillyard ARGS…`, or the `run-workflow` script when ARGS start with it."""
    command = [*skillyard(), *args]
    if args[0] == "run-workflow":
        script = Path(sys.executable).with_name("run-workflow")
        command = [str(script), *args[1:]] if script.exists() else [*skillyard(), "call", *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


class Pages:
    """A page server on 127.0.0.1 that counts its requests."""

    def __init__(self) -> None:
        self.hits = 0
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                pages.hits += 1
                body = b"<html><body><h1>Launch</h1><p>The launch moves to March.</p><p>Budget stays.</p></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/news.html"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def pages() -> Iterator[Pages]:
    server = Pages()
    yield server
    server.server.shutdown()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "tools.yaml").write_text(TOOLS)
    (root / "skills.yaml").write_text(SKILLS)
    (root / "workflows.yaml").write_text(WORKFLOWS)
    (root / "helpers.py").write_text(HELPERS)
    return root


# ─── --output text ───


def test_output_text_prints_a_string_result_as_itself(project: Path) -> None:
    done = run("run-workflow", "report", "--arg", "title=Notes", "--output", "text", "--quiet", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    assert done.stdout == REPORT + "\n"  # Markdown as Markdown: real newlines, no quotes
    json_done = run("run-workflow", "report", "--arg", "title=Notes", "--quiet", "--dir", str(project))
    assert json.loads(json_done.stdout) == REPORT and json_done.stdout.startswith('"')  # the default stays JSON


def test_output_text_prints_an_object_as_indented_json(project: Path) -> None:
    done = run("call", "stats", "--output", "text", "--quiet", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"words": 3, "keywords": ["a", "b"]}
    assert done.stdout.startswith('{\n  "words": 3,')


def test_output_text_prints_nothing_on_stdout_for_a_failed_call(project: Path) -> None:
    done = run("call", "boom", "--output", "text", "--quiet", "--no-store", "--dir", str(project))
    assert done.returncode == 1 and done.stdout == ""
    assert "execution_error" in done.stderr


# ─── tools --format ───


def test_format_without_json_is_a_usage_error(project: Path) -> None:
    done = run("tools", "--format", "openai", "--dir", str(project))
    assert done.returncode == 2 and done.stdout == ""
    assert "error: --format openai applies to JSON output only: write `skillyard tools --json --format openai`" in done.stderr
    done = run("tools", "--json", "--format", "openai", "--dir", str(project))
    assert done.returncode == 0 and json.loads(done.stdout)[0]["type"] == "function"


# ─── skillyard runs ───


def test_the_runs_list_shows_the_error_code(project: Path) -> None:
    assert run("call", "boom", "--quiet", "--dir", str(project)).returncode == 1
    assert run("call", "stats", "--quiet", "--dir", str(project)).returncode == 0
    done = run("runs", "--dir", str(project))
    assert done.returncode == 0
    boom = next(line for line in done.stdout.splitlines() if " boom " in line)
    stats = next(line for line in done.stdout.splitlines() if " stats " in line)
    assert "error: execution_error" in boom
    assert " ok " in stats and "error" not in stats


# ─── validate with stored overrides ───


def test_validate_counts_a_tool_disabled_in_the_store(project: Path) -> None:
    before = run("validate", str(project))
    assert before.returncode == 0 and "ok: 5 tools (5 enabled)" in before.stdout
    assert run("tools", "disable", "stats", "--dir", str(project)).returncode == 0
    after = run("validate", str(project))
    assert after.returncode == 0, after.stderr
    assert "ok: 5 tools (4 enabled)" in after.stdout
    assert "with the run store's settings of 1 tool (stats)" in after.stdout
    skipped = run("validate", "--no-import", str(project))
    assert skipped.returncode == 0 and "not applied (--no-import) the run store's settings of 1 tool (stats)" in skipped.stdout


def test_validate_reports_a_stored_setting_that_no_longer_links(project: Path) -> None:
    assert run("tools", "set", "rawPage", "timeout=30s", "--dir", str(project)).returncode == 0
    tools = (project / "tools.yaml").read_text().replace("    type: fetch\n", "    workflow: stats\n").replace(
        "    config: {allowPrivateNetworks: ['127.0.0.0/8'], timeout: 5s}\n", "")
    (project / "tools.yaml").write_text(tools)  # rawPage is now a workflow tool: its stored fetch config has no home
    done = run("validate", str(project))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "tools.yaml:19:3: `config` is for tool types" in done.stderr  # the stored config, layered on rawPage


# ─── runs replay is offline ───


def _run_id(project: Path, tool: str) -> str:
    listed = json.loads(run("runs", "--json", "--tool", tool, "--dir", str(project)).stdout)
    return listed[0]["id"]


def test_replay_uses_the_recorded_page_and_fetches_nothing(project: Path, pages: Pages) -> None:
    done = run("call", "page", "--arg", f"url={pages.url}", "--quiet", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    assert pages.hits == 1
    replay = run("runs", "replay", _run_id(project, "page"), "--quiet", "--dir", str(project))
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == recorded
    assert "✓ same output as the recording (1 recorded model answers used, no model called, no tool called)" in replay.stderr
    assert pages.hits == 1  # the page was not fetched again


def test_replay_of_a_fetch_tool_run_fetches_nothing(project: Path, pages: Pages) -> None:
    done = run("call", "rawPage", "--arg", f"url={pages.url}", "--quiet", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    pages.server.shutdown()  # nobody answers any more: a fetch would fail
    replay = run("runs", "replay", _run_id(project, "rawPage"), "--quiet", "--dir", str(project))
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["content"] == json.loads(done.stdout)["content"]
    assert pages.hits == 1


def test_replay_reports_a_new_tool_step_instead_of_calling_it(project: Path, pages: Pages) -> None:
    assert run("call", "page", "--arg", f"url={pages.url}", "--quiet", "--dir", str(project)).returncode == 0
    workflows = (project / "workflows.yaml").read_text().replace("{id: fetch, skill: read", "{id: get, skill: read").replace(
        "$steps.fetch.output", "$steps.get.output")
    (project / "workflows.yaml").write_text(workflows)
    replay = run("runs", "replay", _run_id(project, "page"), "--quiet", "--dir", str(project))
    assert replay.returncode == 1
    assert "step 'get' calls tool skill 'read', and the recording holds no output of that step; replay never calls a tool" in replay.stderr
    assert pages.hits == 1


# ─── the test run says why web tests were skipped ───


def test_the_test_run_says_once_why_web_tests_were_skipped(tmp_path: Path) -> None:
    env = {**os.environ, "SKILLYARD_CHROMIUM": str(tmp_path / "no-chromium")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "tests/web/test_web_ui.py"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("web tests skipped")]
    assert len(lines) == 1, done.stdout[-2000:]
    assert f"no Chromium at {tmp_path / 'no-chromium'}" in lines[0]

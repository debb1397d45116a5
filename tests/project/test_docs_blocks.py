"""The docs' code runs: every ```python block of README.md and docs/*.md, and every shell
block marked `<!-- runnable -->` on the line before its fence, against a copy of the shipped
example project (the repository's root: tools.yaml, skills.yaml, workflows.yaml, config/).

The Python blocks of one page run in order in one namespace, as in `python -m asyncio`: a
top-level `await` works, and a block may use what an earlier block of its page defined. The
model `gpt-4o-mini` the docs name is added to the copy's config/models.yaml, answered by a
fake OpenAI-compatible server on 127.0.0.1 (every request gets a short text answer)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from fake_llm_servers import FakeServer, OpenAIWire, Recorded, Reply

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PROJECT_PARTS = ("tools.yaml", "skills.yaml", "workflows.yaml", "config", "capabilities", "examples")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
RUNNABLE = "<!-- runnable -->"
SHELLS = ("sh", "bash", "shell", "console")
WIRE = OpenAIWire()

# Runs one page's blocks (JSON on stdin: [[where, source], ...]) in one namespace, each compiled
# with top-level await allowed; a failure names the block's place.
RUNNER = """
import ast, asyncio, json, sys, traceback
blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
loop = asyncio.new_event_loop()
for where, source in blocks:
    try:
        code = compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            loop.run_until_complete(result)
    except BaseException:
        traceback.print_exc()
        print(f"the block at {where} failed", file=sys.stderr)
        sys.exit(1)
"""


def blocks(page: Path) -> Iterator[tuple[str, str, str, bool]]:
    """(where, language, source, marked runnable) of each fenced block of `page`."""
    text = page.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        name = page.relative_to(REPO) if page.is_relative_to(REPO) else page.name
        yield f"{name}:{line}", match["lang"], match["body"], before == RUNNABLE


def python_pages() -> list[Path]:
    return [page for page in PAGES if any(lang == "python" for _, lang, _, _ in blocks(page))]


def shell_blocks() -> list[tuple[str, str]]:
    return [(where, body) for page in PAGES for where, lang, body, marked in blocks(page) if marked and lang in SHELLS]


class AlwaysAnswering(FakeServer):
    """The fake model: a short text answer to every request."""

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
        return WIRE.reply("A short answer from the fake model.")


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeServer]:
    with AlwaysAnswering() as server:
        yield server


@pytest.fixture
def project(tmp_path: Path, fake_model: FakeServer) -> Path:
    """A copy of the example project, with `gpt-4o-mini` answered by the fake model."""
    root = tmp_path / "project"
    root.mkdir()
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, root / part)
        elif source.exists():
            shutil.copy(source, root / part)
    entry = WIRE.model_entry(fake_model.url)
    with (root / "config" / "models.yaml").open("a", encoding="utf-8") as models:
        models.write("  gpt-4o-mini: " + json.dumps(entry) + "\n")  # `models:` is the file's last mapping
    return root


def _environment(root: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SKILLYARD_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(root)])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_the_pages_have_blocks_to_run() -> None:
    assert len(python_pages()) >= 7 and shell_blocks()  # the extraction itself finds what is there


def test_a_runnable_mark_is_the_line_right_before_a_fence(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"text\n\n{RUNNABLE}\n```sh\necho one\n```\n\n```sh\necho two\n```\n```python\nx = 1\n```\n")
    marks = [(lang, body, marked) for _, lang, body, marked in blocks(page)]
    assert marks == [("sh", "echo one\n", True), ("sh", "echo two\n", False), ("python", "x = 1\n", False)]


@pytest.mark.slow
@pytest.mark.parametrize("page", python_pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_the_python_blocks_of_a_page_run(page: Path, project: Path) -> None:
    code = [(where, body) for where, lang, body, _ in blocks(page) if lang == "python"]
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(code), capture_output=True, text=True,
                          cwd=project, env=_environment(project), timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "script"), shell_blocks(), ids=[where for where, _ in shell_blocks()])
def test_a_runnable_shell_block_runs(where: str, script: str, project: Path) -> None:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=project,
                          env=_environment(project), timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{where}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"

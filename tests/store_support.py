"""Shared pieces of the run-store tests (no tests here): a small project, subprocess helpers.

The project is written into a temp directory by each test, so the tests own every file they
read and nothing depends on the example project at the repository root.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Sequence

import pytest

REPO = Path(__file__).resolve().parent.parent

SECRETS = {
    "password": "hunter2-Sup3rSecret",
    "api_key": "sk-test-AbCdEf0123456789",
    "accessToken": "eyJhbGciOi.access-TOKEN.xyz987",
}

PROJECT: dict[str, str] = {
    "tools.yaml": """
        tools:
          report:
            description: Count the words of a text and render one line.
            parameters:
              type: object
              properties: {text: {type: string, minLength: 1}}
              required: [text]
              additionalProperties: false
            workflow: report
          plan:
            description: Ask the model for a short plan about a topic.
            parameters:
              type: object
              properties: {topic: {type: string, minLength: 1}}
              required: [topic]
            workflow: plan
          slow:
            description: Sleep, reporting progress.
            parameters:
              type: object
              properties: {seconds: {type: number, minimum: 0}}
              required: [seconds]
            workflow: slow
          boom:
            description: Always raises.
            parameters:
              type: object
              properties: {message: {type: string}}
            workflow: boom
          login:
            description: Log in with credentials, then greet the user.
            parameters:
              type: object
              properties:
                user: {type: string}
                password: {type: string}
                api_key: {type: string}
                accessToken: {type: string}
              required: [user, password, api_key, accessToken]
            workflow: login
          loginEcho:
            description: Log in, with the password rendered into the prompt.
            parameters:
              type: object
              properties:
                user: {type: string}
                password: {type: string}
              required: [user, password]
            workflow: loginEcho
    """,
    "skills.yaml": """
        skills:
          count:
            kind: python
            function: store_skills:count
            input:
              type: object
              properties: {text: {type: string}}
              required: [text]
            output:
              type: object
              properties: {words: {type: integer}}
              required: [words]
          render:
            kind: template
            input:
              type: object
              properties: {text: {type: string}, stats: {type: object}}
              required: [text, stats]
            template: "{{ text }} has {{ stats.words }} words"
          outline:
            kind: prompt
            system: You plan things.
            user: "Write a short plan about {{ topic }}."
            input:
              type: object
              properties: {topic: {type: string}}
              required: [topic]
            output:
              type: object
              properties:
                title: {type: string}
                steps: {type: array, items: {type: string}, minItems: 2}
              required: [title, steps]
          sleep:
            kind: python
            function: store_skills:sleep
            input:
              type: object
              properties: {seconds: {type: number}}
              required: [seconds]
          explode:
            kind: python
            function: store_skills:explode
            input:
              type: object
              properties: {message: {type: string}}
          connect:
            kind: python
            function: store_skills:connect
            input:
              type: object
              properties:
                user: {type: string}
                password: {type: string}
                apiKey: {type: string}
                credentials: {type: object}
              required: [user]
          greet:
            kind: prompt
            user: "Say hello to {{ user }} whose session is {{ session }}."
            input:
              type: object
              properties: {user: {type: string}, session: {type: string}}
              required: [user, session]
          echo:
            kind: prompt
            user: "Check that {{ user }} may log in with {{ pw }}."
            input:
              type: object
              properties: {user: {type: string}, pw: {type: string}}
              required: [user, pw]
    """,
    "workflows.yaml": """
        workflows:
          report:
            steps:
              - {id: count, skill: count, input: {text: $toolArgs.text}}
              - {id: render, skill: render, input: {text: $toolArgs.text, stats: $steps.count.output}}
            output: {line: $steps.render.output, words: $steps.count.output.words}
          plan:
            steps:
              - {id: outline, skill: outline, input: {topic: $toolArgs.topic}}
            output: $steps.outline.output
          slow:
            steps:
              - {id: sleep, skill: sleep, input: {seconds: $toolArgs.seconds}}
          boom:
            steps:
              - {id: explode, skill: explode, input: {message: $toolArgs.message}}
          login:
            steps:
              - id: connect
                skill: connect
                input:
                  user: $toolArgs.user
                  password: $toolArgs.password
                  apiKey: $toolArgs.api_key
                  credentials: {accessToken: $toolArgs.accessToken}
              - {id: greet, skill: greet, input: {user: $toolArgs.user, session: $steps.connect.output.session}}
            output: {session: $steps.connect.output.session, greeting: $steps.greet.output}
          loginEcho:
            steps:
              - {id: echo, skill: echo, input: {user: $toolArgs.user, pw: $toolArgs.password}}
            output: $steps.echo.output
    """,
    "store_skills.py": '''
        """Python skills of the run-store test project."""

        import asyncio


        def count(input):
            return {"words": len(input["text"].split())}


        async def sleep(input, ctx):
            ctx.progress("sleeping", seconds=input["seconds"])
            await asyncio.sleep(input["seconds"])
            return {"slept": input["seconds"]}


        def explode(input):
            raise RuntimeError(input.get("message") or "boom")


        def connect(input):
            return {"user": input["user"], "session": "session-42"}
    ''',
    "config/models.yaml": """
        default: mock
        models:
          mock: {provider: mock}
    """,
}

# A `mock` model that can never answer: any call to it fails at once (no network involved).
DEAD_MODELS = """
default: mock
models:
  mock:
    provider: openai
    model: gpt-never
    api_key: ${SKILLYARD_STORE_TEST_UNSET_KEY}
"""


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in PROJECT.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SKILLYARD_STORE_TEST_UNSET_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NO_COLOR"] = "1"
    return env


def cli(*argv: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`skillyard ARGV…` (or `run-workflow` when argv[0] is that) as a real subprocess."""
    return run_many([list(argv)], cwd=cwd, timeout=timeout)[0]


def run_many(commands: Sequence[Sequence[str]], *, cwd: Path | None = None, timeout: float = 60) -> list[subprocess.CompletedProcess[str]]:
    """Start every command at once (each is `skillyard …` or `run-workflow …`), wait for all."""
    procs = []
    for argv in commands:
        entry = "run_workflow_main" if argv[0] == "run-workflow" else "main"
        args = list(argv[1:]) if argv[0] in ("run-workflow", "skillyard") else list(argv)
        code = f"import sys; from engine.cli.main import {entry}; sys.exit({entry}(sys.argv[1:]))"
        procs.append((args, subprocess.Popen(
            [sys.executable, "-c", code, *args], cwd=cwd or REPO, env=cli_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )))
    results = []
    for args, proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


def python_process(script: str, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args], cwd=cwd or REPO, env=cli_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def query(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Read the database file directly, as another program would."""
    connection = sqlite3.connect(db, timeout=10)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.02):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")


def assert_gap_free(db: Path, run_id: str) -> list[tuple]:
    rows = query(db, "SELECT seq, type FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1)), f"{run_id}: {rows}"
    return rows


def make_read_only(directory: Path, request: pytest.FixtureRequest) -> None:
    """chmod 555; root ignores that, so it also gets the immutable attribute (or the test is skipped)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o555)
    request.addfinalizer(lambda: directory.chmod(0o755))
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(directory)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("running as root without chattr +i: cannot make a read-only directory")
        request.addfinalizer(lambda: subprocess.run(["chattr", "-i", str(directory)], check=False))

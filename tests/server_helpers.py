"""Shared by the server, MCP and web page tests: a test project and a real server process.

(No tests here; the name keeps it beside the tests that import it.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import httpx

import child_processes

ADMIN_KEY = "admin-key-0123456789abcdef0123456789"
CALLER_KEY = "caller-key-0123456789abcdef012345678"
KEYS_ENV = f"admin:{ADMIN_KEY},caller:{CALLER_KEY}"

_ECHO_PARAMS = """
              type: object
              properties:
                name: {type: string, minLength: 1, description: Who to greet}
                count: {type: integer, minimum: 1, default: 1}
              required: [name]
              additionalProperties: false"""

FILES: dict[str, str] = {
    "tools.yaml": f"""
        tools:
          echo:
            description: Return the name and count it was given.
            workflow: echo
            parameters:{_ECHO_PARAMS}
          guarded:
            description: Like echo, but asks for approval first.
            workflow: echo
            confirm: true
            parameters:{_ECHO_PARAMS}
          slow:
            description: Sleeps in small steps, reporting progress after each.
            workflow: nap
            timeout: 30s
            parameters:
              type: object
              properties:
                seconds: {{type: number, minimum: 0, maximum: 20, default: 5}}
              additionalProperties: false
          retired:
            description: Switched off.
            enabled: false
            workflow: echo
            parameters:{_ECHO_PARAMS}
          secretTool:
            description: Denied by the router policy.
            workflow: echo
            parameters:{_ECHO_PARAMS}
    """,
    "skills.yaml": """
        skills:
          echo:
            kind: python
            function: srv_skills:echo
            input:
              type: object
              properties: {name: {type: string}, count: {type: integer}}
              required: [name]
          nap:
            kind: python
            function: srv_skills:nap
            input:
              type: object
              properties: {seconds: {type: number}}
              required: [seconds]
    """,
    "workflows.yaml": """
        workflows:
          echo:
            steps:
              - id: echo
                skill: echo
                input: {name: $toolArgs.name, count: $toolArgs.count}
          nap:
            steps:
              - id: nap
                skill: nap
                input: {seconds: $toolArgs.seconds}
    """,
    "config/models.yaml": """
        default: mock
        models:
          mock: {provider: mock}
          twin: {provider: scripted, options: {script: twin.yaml}}
    """,
    "config/engine.yaml": """
        router:
          deny: [secretTool]
        store:
          path: .skillyard/runs.db
    """,
    "twin.yaml": """
        turns:
          - text: Both calls need approval.
            tool_calls:
              - {id: call_a, name: guarded, arguments: {name: A}}
              - {id: call_b, name: guarded, arguments: {name: B}}
          - text: Done with both.
    """,
    "srv_skills.py": '''
        import asyncio


        def echo(input):
            return {"name": input["name"], "count": input.get("count", 1)}


        async def nap(input, ctx):
            seconds = input["seconds"]
            steps = max(1, int(seconds / 0.05))
            for index in range(steps):
                await asyncio.sleep(seconds / steps)
                ctx.progress(f"slept {index + 1} of {steps} intervals", done=index + 1, of=steps)
            return {"slept": seconds}
    ''',
}


def write_project(root: Path) -> Path:
    for name, text in FILES.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(*args: str) -> list[str]:
    """`skillyard serve|mcp …` (through the module, so it works before main.py wires it)."""
    return [sys.executable, "-m", "engine.cli.serve", *args]


class ServerProcess:
    def __init__(self, root: Path, *, keys: str | None, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("SKILLYARD_API_KEYS", None)
        if keys:
            env["SKILLYARD_API_KEYS"] = keys
        self.log = root / f"server-{self.port}.log"
        self._log_file = self.log.open("w")
        self.process = child_processes.start(
            serve_command("serve", "--dir", str(root), "--port", str(self.port), *extra),
            stdout=self._log_file, stderr=subprocess.STDOUT, env=env, cwd=root,
        )
        try:
            self._wait_healthy()
        except BaseException:  # a failed start, or a Ctrl-C while it starts: the process goes too
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.log.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        try:
            child_processes.stop(self.process, signal.SIGINT)
        finally:
            self._log_file.close()


@contextlib.contextmanager
def running_server(root: Path, *, keys: str | None, extra: tuple[str, ...] = ()) -> Iterator[ServerProcess]:
    server = ServerProcess(root, keys=keys, extra=extra)
    try:
        yield server
    finally:
        server.stop()


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Frames of an SSE body as {"id", "event", "data"} (comments dropped)."""
    frames = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, Any] = {}
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            else:
                fields[name] = value
        if data:
            fields["data"] = json.loads("\n".join(data))
            frames.append(fields)
    return frames


def iter_sse(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """Frames of a streaming response, as they arrive."""
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            frames = parse_sse(block + "\n\n")
            yield from frames

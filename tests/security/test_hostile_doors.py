"""Every hostile caller input (tests/hostile_inputs.py) against every door: the Engine API, the
CLI, HTTP (a tool call as JSON and as SSE, /v1/agent) and the MCP server (/mcp, `skillyard mcp`).

Each case asserts the door's answer (refused naming the limit, or the text kept as written), that
the service stays responsive — a thread polls `/healthz` every 10 ms while the attack runs and
it never goes 250 ms without an answer — and that neither planted secret reaches a sink: stdout,
stderr, log records, HTTP and SSE bodies, MCP results, the SQLite store and its -wal file.

The fast cases share one service per module, in process (uvicorn in a thread): a door run on the
main thread that held the GIL (a backtracking regex) or the loop (a fan-out) would stall its
/healthz. The slow cases do the same through real processes: `skillyard serve`, the CLI
(`run-workflow`, `call`, `chat`), `skillyard mcp` over stdio and an embedding script.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.errors import AgentSetupError
from engine.safety.redaction import REDACTED
from hostile_inputs import (
    TOKEN_ENV,
    Hostile,
    Secrets,
    corpus,
    plant_secrets,
    project_files,
)
from secrets_support import BIN, leaks, sink_files, skillyard, write
from server_helpers import CALLER_KEY, free_port, iter_sse, running_server

KEYS = f"caller:{CALLER_KEY}"  # the actor: a key with the caller role
AUTH = {"Authorization": f"Bearer {CALLER_KEY}"}
MAX_HEALTHZ = 0.25
PROTOCOL = "2025-11-25"
CALL_DOORS = ("python", "cli", "http-json", "http-sse", "mcp")
AGENT_DOORS = ("python", "cli", "http-json", "http-sse")


# ─── the attacked: a project with planted secrets, a metadata URL no compile may ask ────────


@dataclass
class Target:
    root: Path
    secrets: Secrets
    inputs: dict[str, Hostile]
    asked: list[str]  # paths the metadata listener was asked for


@contextlib.contextmanager
def metadata_listener() -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering any GET with a schema, as 169.254.169.254 would answer JSON."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            body = b'{"type": "object"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/latest/meta-data/iam/security-credentials/", asked
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def target(root: Path) -> Iterator[Target]:
    """The project written and its secrets planted (the token in this process's environment)."""
    secrets = plant_secrets(root)
    write(root, project_files(secrets))
    previous = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = secrets.token
    try:
        with metadata_listener() as (url, asked):
            yield Target(root, secrets, {h.name: h for h in corpus(secrets, url)}, asked)
    finally:
        if previous is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = previous


@contextlib.contextmanager
def healthz_poller(url: str) -> Iterator[list[float]]:
    """The gaps between answers of GET /healthz, polled every 10 ms, from one answer before the
    block to one after it: a stall anywhere in the block (the GIL held, the loop blocked) widens
    one gap, whether it caught a request in flight or the poller between two."""
    answered: list[float] = []
    started, stop = threading.Event(), threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as client:
            while True:
                assert client.get(f"{url}/healthz").status_code == 200
                answered.append(time.monotonic())
                started.set()
                if stop.is_set():
                    return
                time.sleep(0.01)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    assert started.wait(30), "/healthz never answered"
    gaps: list[float] = []
    try:
        yield gaps
    finally:
        stop.set()
        thread.join(timeout=60)
        gaps.extend(later - earlier for earlier, later in zip(answered, answered[1:], strict=False))


def assert_responsive(gaps: list[float]) -> None:
    assert gaps and max(gaps) < MAX_HEALTHZ, f"/healthz went {max(gaps, default=0):.2f} s without an answer during the attack"


def assert_no_leak(secrets: Secrets, texts: list[str], root: Path) -> None:
    for value in secrets.values:
        assert leaks(value, texts, sink_files(root)) == [], f"a planted secret reached a sink: {leaks(value, texts, sink_files(root))}"


# ─── the fast tier: one in-process service per module ─────────────────────────────────


@dataclass
class InProcess:
    target: Target
    url: str
    engine: Engine  # the Python door's own engine (the service has one of its own)


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    import uvicorn

    from engine.server import create_app

    with target(tmp_path_factory.mktemp("doors")) as attacked:
        served = Engine.from_dir(attacked.root, store=True, isolate_broken_tools=True)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(create_app(served, api_keys=KEYS), host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the in-process service did not start"
            time.sleep(0.02)
        engine = Engine.from_dir(attacked.root, store=True, isolate_broken_tools=True)
        try:
            yield InProcess(attacked, f"http://127.0.0.1:{port}", engine)
        finally:
            engine.close()
            server.should_exit = True
            thread.join(timeout=30)
            served.close()


def python_door(engine: Engine, hostile: Hostile) -> str:
    if hostile.is_call:
        assert hostile.tool is not None
        return json.dumps(engine.call_tool_sync(hostile.tool, hostile.arguments).as_shown().to_dict())  # as doors send it
    try:
        agent = engine.agent(output_schema=hostile.output_schema)
    except AgentSetupError as refused:
        return f"refused: {refused.message}"
    return repr(asyncio.run(agent.run(hostile.prompt)))


def cli_door(root: Path, hostile: Hostile, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    if hostile.is_call:
        assert hostile.tool is not None
        code = main(["call", hostile.tool, "--args-json", json.dumps(hostile.arguments), "--dir", str(root)])
    else:
        schema = root / f"schema-{hostile.name}.json"
        schema.write_text(json.dumps(hostile.output_schema), encoding="utf-8")
        code = main(["chat", hostile.prompt, "--dir", str(root), "--output-schema", str(schema)])
    out = capsys.readouterr()
    return code, out.out + out.err


def http_door(url: str, hostile: Hostile, sse: bool) -> tuple[int, str]:
    headers = {**AUTH, "Accept": "text/event-stream" if sse else "application/json"}
    if hostile.is_call:
        path, body = f"/v1/tools/{hostile.tool}/call", hostile.arguments
    else:
        path, body = "/v1/agent", {"messages": hostile.prompt, "output_schema": hostile.output_schema}
    with httpx.Client(base_url=url, timeout=60) as client:
        if not sse:
            answer = client.post(path, json=body, headers=headers)
            return answer.status_code, answer.text
        with client.stream("POST", path, json=body, headers=headers) as answer:
            if answer.headers.get("content-type", "").startswith("text/event-stream"):
                return answer.status_code, "\n".join(json.dumps(frame) for frame in iter_sse(answer))
            return answer.status_code, answer.read().decode()


def mcp_calls(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Raw JSON-RPC over /mcp's streamable HTTP: initialize, then a tools/call for each (name, arguments)."""
    headers = {**AUTH, "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=url, timeout=60) as client:
        opened = client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "doors", "version": "0"}}})
        assert opened.status_code == 200, opened.text
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return [client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                                                           "params": {"name": name, "arguments": arguments}}).text
                for i, (name, arguments) in enumerate(calls)]


def check_answer(hostile: Hostile, text: str, code: int | None = None) -> None:
    """The door said what it must: the limit, the failed check, or the text as written."""
    assert hostile.expect in text or json.dumps(hostile.expect)[1:-1] in text, f"{hostile.name}: {text[:2000]}"
    if code is not None and hostile.refused and not hostile.is_call:
        assert code != 0 and code != 200 or "invalid_output" in text, f"{hostile.name} was not refused ({code}): {text[:500]}"


def cases() -> list[Any]:
    from hostile_inputs import NAMES

    calls = {"backtracking-arguments", "references-in-arguments", "references-in-tool-name"}
    return [pytest.param(door, name, id=f"{door}-{name}") for name in NAMES
            for door in (CALL_DOORS if name in calls else AGENT_DOORS)]


@pytest.mark.parametrize("door, name", cases())
def test_a_hostile_input_at_a_door_is_held_and_leaks_nothing(in_process: InProcess, door: str, name: str,
                                                             capsys: pytest.CaptureFixture[str],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    attacked, hostile = in_process.target, in_process.target.inputs[name]
    caplog.set_level(logging.DEBUG)
    code: int | None = None
    with healthz_poller(in_process.url) as taken:
        if door == "python":
            text = python_door(in_process.engine, hostile)
        elif door == "cli":
            code, text = cli_door(attacked.root, hostile, capsys)
        elif door == "mcp":
            assert hostile.tool is not None
            text = mcp_calls(in_process.url, [(hostile.tool, hostile.arguments)])[0]
        else:
            code, text = http_door(in_process.url, hostile, sse=door == "http-sse")
    check_answer(hostile, text, code)
    assert attacked.asked == [], f"a schema compile fetched {attacked.asked}"
    assert_responsive(taken)
    out = capsys.readouterr()
    assert_no_leak(attacked.secrets, [text, out.out, out.err, caplog.text], attacked.root)


def door_data(in_process: InProcess, door: str, hostile: Hostile, capsys: pytest.CaptureFixture[str]) -> Any:
    """The data a call door answers, as its caller reads it."""
    assert hostile.tool is not None
    if door == "python":
        return in_process.engine.call_tool_sync(hostile.tool, hostile.arguments).as_shown().data
    if door == "cli":
        capsys.readouterr()
        assert main(["call", hostile.tool, "--args-json", json.dumps(hostile.arguments), "--dir", str(in_process.target.root)]) == 0
        return json.loads(capsys.readouterr().out)
    if door == "mcp":
        answer = mcp_calls(in_process.url, [(hostile.tool, hostile.arguments)])[0]
        body = next(line[5:] for line in answer.splitlines() if line.startswith("data:"))  # one SSE frame
        return json.loads(body)["result"]["structuredContent"]
    code, text = http_door(in_process.url, hostile, sse=door == "http-sse")
    assert code == 200, text
    if door == "http-json":
        return json.loads(text)["data"]
    last = json.loads(text.splitlines()[-1])
    assert last["event"] == "tool_call_result", last
    return last["data"]["data"]["data"]


def test_every_call_door_answers_references_in_arguments_alike(in_process: InProcess,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """One rule on every door: a value under a key that names a secret (`${env:DOORS_TOKEN}` reads
    `env_doors_token`) never leaves the process, and neither does the same text anywhere else in
    the answer — the JSON answer, the SSE stream's last frame, `/mcp` and the CLI say the same.
    References stay text: the harmless ones are shown as written, never resolved. The Engine
    API's ToolResult keeps the data whole (the program is the operator's); `as_shown()` is what
    the doors send."""
    hostile = in_process.target.inputs["references-in-arguments"]
    refs = in_process.target.secrets.references()
    answers = {door: door_data(in_process, door, hostile, capsys) for door in CALL_DOORS}
    expected_text = " ".join(REDACTED if ref in refs[:4] or ref == "{{ env.DOORS_TOKEN }}" else ref for ref in refs)
    assert answers["python"]["text"] == expected_text, answers["python"]["text"]
    for door, data in answers.items():
        assert data == answers["python"], f"{door} answers differently: {json.dumps(data)[:500]}"
    assert answers["python"]["extra"]["${env:HOME}"] == {"value": "${env:HOME}", "list": ["${env:HOME}", {"${env:HOME}": "${env:HOME}"}]}
    assert answers["python"]["extra"]["${env:DOORS_TOKEN}"] == REDACTED  # the key as written, its value hidden
    whole = in_process.engine.call_tool_sync(hostile.tool, hostile.arguments)
    assert whole.data == hostile.arguments


# ─── the slow tier: real processes, one case per door ────────────────────────────────


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, str, Path]]:
    """A real `skillyard serve` (JSON logs at debug) on its own attacked project, for the module."""
    with target(tmp_path_factory.mktemp("served")) as attacked:
        (attacked.root / "config" / "engine.yaml").write_text(
            "store: {path: .skillyard/runs.db}\nlogging: {level: debug, format: json}\n", encoding="utf-8")
        with running_server(attacked.root, keys=KEYS) as server:
            yield attacked, server.url, server.log


@pytest.mark.slow
def test_every_hostile_input_over_real_http_json_sse_and_agent(served: tuple[Target, str, Path]) -> None:
    attacked, url, log = served
    texts: list[str] = []
    with healthz_poller(url) as taken:
        for hostile in attacked.inputs.values():
            for sse in (False, True):
                code, text = http_door(url, hostile, sse)
                check_answer(hostile, text, code)
                texts.append(text)
    assert attacked.asked == []
    assert_responsive(taken)
    assert_no_leak(attacked.secrets, [*texts, log.read_text()], attacked.root)


def stdio_mcp(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], str]:
    """`skillyard mcp` over stdio: initialize, each tools/call; the answers and its stderr."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "doors", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
          for i, (name, arguments) in enumerate(calls))]
    script = BIN / "skillyard"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli.serve"]
    errors = root / "mcp-stdio.stderr"
    with errors.open("w") as stderr_file:
        process = subprocess.Popen([*command, "mcp", "--dir", str(root)], cwd=root, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr_file, text=True)
        assert process.stdin is not None and process.stdout is not None
        answers = []
        for line in lines:
            process.stdin.write(json.dumps(line) + "\n")
            process.stdin.flush()
            if "id" in line:
                answers.append(process.stdout.readline())
        process.stdin.close()
        rest = process.stdout.read()
        process.wait(timeout=60)
    stderr = errors.read_text()
    return [*answers, rest], stderr


@pytest.mark.slow
def test_the_mcp_doors_served_and_stdio(served: tuple[Target, str, Path]) -> None:
    attacked, url, log = served
    calls = [h for h in attacked.inputs.values() if h.is_call]
    pairs = [(h.tool or "", h.arguments) for h in calls]
    with healthz_poller(url) as taken:
        over_http = mcp_calls(url, pairs)
        over_stdio, stderr = stdio_mcp(attacked.root, pairs)
    for hostile, http_text, stdio_text in zip(calls, over_http, over_stdio[1:-1], strict=True):
        check_answer(hostile, http_text)
        check_answer(hostile, stdio_text)
    assert_responsive(taken)
    assert_no_leak(attacked.secrets, [*over_http, *over_stdio, stderr, log.read_text()], attacked.root)


@pytest.mark.slow
def test_the_cli_run_workflow_call_and_chat(served: tuple[Target, str, Path]) -> None:
    """The CLI shares the served project's store: the service answers while the CLI writes it."""
    attacked, url, log = served
    inputs = attacked.inputs
    schema = attacked.root / "hostile-schema.json"
    schema.write_text(json.dumps(inputs["backtracking-output-schema"].output_schema), encoding="utf-8")
    fan = attacked.root / "fan-schema.json"
    fan.write_text(json.dumps(inputs["ref-fan-out"].output_schema), encoding="utf-8")
    runner = BIN / "run-workflow"
    command = [str(runner)] if runner.exists() else [sys.executable, "-c", "import sys; from engine.cli.main import run_workflow_main; sys.exit(run_workflow_main())"]
    refs = inputs["references-in-arguments"]
    with healthz_poller(url) as taken:
        ran = [subprocess.run([*command, "echo", "--args-json", json.dumps(refs.arguments), "--dir", str(attacked.root)],
                              cwd=attacked.root, capture_output=True, text=True, timeout=120),
               skillyard("call", "signup", "--args-json", json.dumps(inputs["backtracking-arguments"].arguments),
                         "--dir", str(attacked.root), cwd=attacked.root),
               skillyard("chat", "say it", "--dir", str(attacked.root), "--output-schema", str(schema), cwd=attacked.root),
               skillyard("chat", "fill it", "--dir", str(attacked.root), "--output-schema", str(fan), cwd=attacked.root)]
    assert ran[0].returncode == 0 and "${env:DOORS_TOKEN}" in ran[0].stdout, ran[0].stderr
    assert ran[1].returncode != 0 and "does not match" in ran[1].stdout + ran[1].stderr
    assert "invalid_output" in ran[2].stdout + ran[2].stderr
    assert ran[3].returncode == 2 and "$ref fan-out limit" in ran[3].stderr
    assert_responsive(taken)
    assert_no_leak(attacked.secrets, [text for p in ran for text in (p.stdout, p.stderr)] + [log.read_text()], attacked.root)


@pytest.mark.slow
def test_an_embedding_script_on_the_engine_api(served: tuple[Target, str, Path]) -> None:
    """The Engine API in its own interpreter: every input, printed as the script gets it."""
    attacked, url, _log = served
    script = f"""
        import asyncio, json, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from engine import Engine
        from engine.errors import AgentSetupError
        from hostile_inputs import corpus, Secrets
        from pathlib import Path
        secrets = Secrets("", "", Path({str(attacked.secrets.file)!r}))
        engine = Engine.from_dir({str(attacked.root)!r}, store=True)
        for hostile in corpus(secrets, {"http://127.0.0.1:9/latest/meta-data/"!r}):
            if hostile.tool:
                print(json.dumps(engine.call_tool_sync(hostile.tool, hostile.arguments).as_shown().to_dict()))  # as doors send it
                continue
            try:
                print(repr(asyncio.run(engine.agent(output_schema=hostile.output_schema).run(hostile.prompt))))
            except AgentSetupError as refused:
                print("refused:", refused.message)
        engine.close()
    """
    import textwrap

    with healthz_poller(url) as taken:
        ran = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=attacked.root, capture_output=True,
                             text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    for hostile in attacked.inputs.values():
        assert hostile.expect in ran.stdout or json.dumps(hostile.expect)[1:-1] in ran.stdout, hostile.name
    assert_responsive(taken)
    assert_no_leak(attacked.secrets, [ran.stdout, ran.stderr], attacked.root)


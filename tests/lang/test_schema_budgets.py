"""A schema from outside has a budget, and no regex of any schema runs on a backtracking engine.

Hostile inputs through every door that takes a schema or checks values against one: a caller's
`output_schema` (POST /v1/agent, `engine.agent`), a caller's tool arguments against a YAML
pattern, an MCP server's elicitation default. A failed check is still explained (the field, "does
not match") — by jsonschema-rs's regex engine, not Python's `re`, which takes 2**n steps on
`^(a+)+$` against n a's and a `!` (holding the GIL: the whole service stops). CPU time of the
calling thread is measured, not wall time: the old code spent seconds of it, the new
milliseconds, whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from engine import Engine
from engine.errors import AgentSetupError
from engine.executors.mcp_client.answers import answer_values
from engine.lang.schema import CompiledSchema, schema_problems
from engine.lang.schema_budget import MAX_SCHEMA_DEPTH, untrusted_schema_problems
from engine.providers.base import ChatMessage, ModelRequest
from engine.providers.mock import MAX_FILL_NODES, MockProvider
from server_helpers import running_server

REDOS = "^(a+)+$"
EMAIL = "^([a-zA-Z0-9]+[._-]?)*[a-zA-Z0-9]+@example\\.com$"  # a realistic pattern, the same shape
EVIL = "a" * 25 + "!"  # 2**25 steps for Python's re: seconds; the linear engine: microseconds
REDOS_OUTPUT = {"type": "string", "const": EVIL, "pattern": REDOS}  # the mock answers the const
CPU_SECONDS = 1.0  # the old code spends several seconds of CPU on EVIL; explaining takes milliseconds

PROJECT = {
    "tools.yaml": f"""
        tools:
          signup:
            description: Sign a user up by email.
            workflow: signupFlow
            parameters:
              type: object
              properties:
                email: {{type: string, pattern: {json.dumps(EMAIL)}}}
              required: [email]
    """,
    "skills.yaml": """
        skills:
          echo:
            kind: template
            input: {type: object, properties: {email: {}}}
            template: "{{ email }}"
    """,
    "workflows.yaml": """
        workflows:
          signupFlow:
            steps:
              - {id: echo, skill: echo, input: {email: $toolArgs.email}}
    """,
}


def write_project(root: Path) -> Path:
    for name, text in PROJECT.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = Engine.from_dir(write_project(tmp_path))
    yield eng
    eng.close()


def on_cpu(work: Callable[[], Any]) -> tuple[Any, float]:
    """`work()`'s result and the CPU seconds this thread spent on it."""
    start = time.thread_time()
    result = work()
    return result, time.thread_time() - start


async def post_agent(engine: Engine, body: dict[str, Any]) -> httpx.Response:
    from engine.server import create_app

    transport = httpx.ASGITransport(app=create_app(engine, api_keys="", mcp=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        return await client.post("/v1/agent", json=body, headers={"Accept": "application/json"}, timeout=60)


# ─── no backtracking regex on untrusted text ─────────────────────────────────────────────


def test_a_backtracking_output_schema_on_the_http_agent_door_is_explained_at_once(engine: Engine) -> None:
    answer, cpu = on_cpu(lambda: asyncio.run(post_agent(engine, {"messages": "say it", "output_schema": REDOS_OUTPUT})))
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["stop_reason"] == "invalid_output"
    assert "does not match" in json.dumps(result) and REDOS in json.dumps(result)
    assert cpu < CPU_SECONDS, f"{cpu:.1f} s of CPU to explain one pattern"


def test_a_callers_arguments_against_a_yaml_email_pattern_are_explained_at_once(engine: Engine) -> None:
    result, cpu = on_cpu(lambda: engine.call_tool_sync("signup", {"email": EVIL}))
    assert result.ok is False and result.error.code == "invalid_arguments"
    assert "/email" in result.model_text() and "does not match" in result.model_text()
    assert cpu < CPU_SECONDS, f"{cpu:.1f} s of CPU to explain one pattern"


@pytest.mark.parametrize("schema, value, pointer", [
    ({"type": "object", "patternProperties": {REDOS: {"type": "integer"}}, "additionalProperties": False}, {EVIL: 1}, ""),
    ({"type": "object", "patternProperties": {REDOS: True}, "unevaluatedProperties": False}, {EVIL: 1}, ""),
    ({"type": "object", "propertyNames": {"pattern": REDOS}}, {EVIL: 1}, ""),
    ({"type": "array", "items": {"type": "string", "pattern": EMAIL}}, [EVIL], "/0"),
], ids=["additionalProperties", "unevaluatedProperties", "propertyNames", "items"])
def test_every_keyword_that_matches_a_regex_explains_without_backtracking(schema: Any, value: Any, pointer: str) -> None:
    compiled = CompiledSchema(schema)
    found, cpu = on_cpu(lambda: compiled.check(value))
    assert found and found[0].pointer == pointer
    assert cpu < CPU_SECONDS, f"{cpu:.1f} s of CPU to explain one pattern"


def test_an_mcp_servers_elicitation_default_is_checked_at_once() -> None:
    requested = {"type": "object", "properties": {"email": {"type": "string", "pattern": EMAIL, "default": EVIL}}}
    (content, violations), cpu = on_cpu(lambda: answer_values(requested, {}))
    assert content == {"email": EVIL}
    assert [v.pointer for v in violations] == ["/email"] and "does not match" in violations[0].message
    assert cpu < CPU_SECONDS, f"{cpu:.1f} s of CPU to explain one pattern"


def test_unique_items_of_many_objects_are_explained_in_one_pass() -> None:
    """jsonschema compares unsortable items pairwise: 3,000 objects took 7 s."""
    compiled = CompiledSchema({"type": "array", "uniqueItems": True})
    found, cpu = on_cpu(lambda: compiled.check([{"n": i} for i in range(5000)] + [{"n": 0}]))
    assert [v.keyword for v in found] == ["uniqueItems"]
    assert cpu < CPU_SECONDS, f"{cpu:.1f} s of CPU for uniqueItems"


# ─── a budget at the door ────────────────────────────────────────────────────────────────


def fan_out(per_level: int, levels: int) -> dict[str, Any]:
    """`per_level` $refs to the next level's definition, `levels` deep: tiny written, huge followed."""
    defs = {f"l{n}": {"type": "object", "required": [f"p{i}" for i in range(per_level)],
                      "properties": {f"p{i}": {"$ref": f"#/$defs/l{n + 1}"} if n + 1 < levels else {"type": "string"}
                                     for i in range(per_level)}}
            for n in range(levels)}
    return {"$defs": defs, "$ref": "#/$defs/l0"}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("schema, limit", [
    ({"type": "string", "description": "x" * 70_000}, "limits.max_schema_bytes"),
    (fan_out(10, 6), "$ref fan-out limit"),
], ids=["oversized", "ref-fan-out"])
def test_a_schema_over_budget_is_422_naming_the_limit(engine: Engine, schema: dict[str, Any], limit: str) -> None:
    assert len(json.dumps(fan_out(10, 6))) < 3000  # the fan-out is small as written
    answer = asyncio.run(post_agent(engine, {"messages": "fill it", "output_schema": schema}))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert limit in error["message"] and "output_schema" in json.dumps(error)


def test_a_too_deep_schema_through_the_python_api_names_the_depth_limit(engine: Engine) -> None:
    """(HTTP bodies are held to 64 levels as a whole before the schema is read.)"""
    with pytest.raises(AgentSetupError) as caught:
        engine.agent(output_schema=nested(MAX_SCHEMA_DEPTH + 5))
    assert caught.value.field == "output_schema" and "schema depth limit" in caught.value.message


def test_the_cli_chat_door_exits_2_naming_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli.main import main

    root = write_project(tmp_path)
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(fan_out(10, 6)), encoding="utf-8")
    code = main(["chat", "fill it", "--dir", str(root), "--quiet", "--no-store", "--output-schema", str(schema)])
    assert code == 2 and "$ref fan-out limit" in capsys.readouterr().err


def test_the_byte_limit_is_the_operators(tmp_path: Path) -> None:
    root = write_project(tmp_path)
    (root / "config").mkdir()
    (root / "config" / "engine.yaml").write_text("limits:\n  max_schema_bytes: 200000\n", encoding="utf-8")
    big = {"type": "string", "description": "x" * 70_000}
    eng = Engine.from_dir(root)
    try:
        eng.agent(output_schema=big)  # within the raised limit
    finally:
        eng.close()
    assert "limits.max_schema_bytes" in untrusted_schema_problems(big)[0]  # the default: 64 KiB


def test_a_recursive_schema_within_budget_still_passes() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"}
    assert untrusted_schema_problems(tree) == [] and untrusted_schema_problems(fan_out(10, 3)) == []


def test_the_mock_model_fills_a_ref_fan_out_within_its_budget() -> None:
    """A YAML agent's or an MCP tool's schema reaches the mock's filler without the door's check:
    10 $refs per level, 5 levels deep, is 100,000 strings to fill (seconds of the event loop)."""
    request = ModelRequest(messages=(ChatMessage("user", "fill it"),), output_schema=fan_out(10, 5))
    response = asyncio.run(MockProvider().request(request))
    # (+ the few containers already open when the budget ran out, each closed as it stands)
    assert count_values(json.loads(response.text)) <= MAX_FILL_NODES + 64


def count_values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(count_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(count_values(v) for v in value)
    return 1


# ─── no schema compile retrieves anything ───────────────────────────────────────────────


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that serves a schema for any path; the list holds the paths asked."""
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/latest/meta-data/iam/security-credentials/", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_schema_url_in_a_callers_output_schema_is_refused_and_never_fetched(engine: Engine, listener: Any) -> None:
    url, asked = listener
    answer = asyncio.run(post_agent(engine, {"messages": "x", "output_schema": {"$schema": url, "type": "object"}}))
    assert answer.status_code == 422, answer.text
    assert "$schema" in answer.json()["error"]["message"] and "not a known draft" in answer.json()["error"]["message"]
    assert asked == []


@pytest.mark.parametrize("where", ["$schema", "$ref", "nested $schema"])
def test_no_compile_fetches_what_a_schema_names(listener: Any, where: str) -> None:
    """Through the Python API a schema may skip the checks (`CompiledSchema` directly): the
    validators themselves are built with a retriever that refuses."""
    url, asked = listener
    schema = {"$schema": {"$schema": url}, "$ref": {"$ref": url},
              "nested $schema": {"properties": {"a": {"$id": "http://example.com/a", "$schema": url}}}}[where]
    with contextlib.suppress(Exception):  # jsonschema-rs refuses it (its own ValidationError), or ignores it
        CompiledSchema(schema).check({})
    assert schema_problems(schema) != []
    assert asked == []


def test_a_known_draft_still_loads() -> None:
    assert schema_problems({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}) == []
    assert schema_problems({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}) == []


# ─── the service stays responsive while an attack runs ──────────────────────────────────


@contextlib.contextmanager
def healthz_poller(url: str) -> Iterator[list[float]]:
    """Seconds each GET /healthz took, polled every 20 ms while the block runs."""
    taken: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                start = time.monotonic()
                assert client.get(f"{url}/healthz").status_code == 200
                taken.append(time.monotonic() - start)
                stop.wait(0.02)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield taken
    finally:
        stop.set()
        thread.join(timeout=60)


@pytest.mark.slow
def test_healthz_answers_while_backtracking_patterns_arrive(tmp_path: Path) -> None:
    evil = "a" * 26 + "!"  # the issue's: 15 s for the request, 10 s of /healthz on the old code
    with running_server(write_project(tmp_path), keys=None) as server, healthz_poller(server.url) as taken:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            time.sleep(0.2)
            agent = client.post("/v1/agent", headers={"Accept": "application/json"},
                                json={"messages": "say it", "output_schema": {**REDOS_OUTPUT, "const": evil}})
            call = client.post("/v1/tools/signup/call", json={"email": evil})
            fan = client.post("/v1/agent", json={"messages": "fill", "output_schema": fan_out(10, 6)})
            time.sleep(0.2)
    assert agent.status_code == 200 and agent.json()["stop_reason"] == "invalid_output"
    assert "does not match" in call.text and "/email" in call.text
    assert fan.status_code == 422 and "$ref fan-out limit" in fan.text
    assert len(taken) >= 5 and max(taken) < 0.25, f"/healthz took up to {max(taken):.2f} s"

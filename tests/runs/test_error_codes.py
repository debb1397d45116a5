"""engine.errors.ErrorCode: every error code on the wire is one of its members, each member's
string, advice, HTTP status and exit code are what the engine answered before the enum (the
three tables it replaced are copied here as they were), and a member reaches every sink as its
plain string. Also: the foreign-error translations keep their messages, in process against
real loopback servers. All in process (the CLI through main(argv), HTTP through ASGITransport)."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import socket
import textwrap
from pathlib import Path
from typing import Any, Iterator, get_args

import httpx
import orjson
import pydantic
import pytest

from engine import Engine
from engine.cli.main import main
from engine.errors import DEFAULT_ADVICE, EXIT_FAILED, EXIT_USAGE, ErrorCode, StepFailure
from engine.executors.fetch import FetchConfig, FetchExecutor
from engine.providers.base import ChatMessage, ModelRequest, ProviderError
from engine.providers.openai import OpenAIProvider
from engine.runtime.agent import StopReason
from engine.runtime.result import ToolError, ToolResult
from engine.server import create_app
from engine.server.api import json_body
from engine.spec.models import ModelSpec
from fake_llm_servers import FakeServer, OpenAIWire, Reply, module_server, server  # noqa: F401 - shared fixtures
from fetch_support import FakeRun, LoopbackServer, send

ENGINE = Path(__file__).resolve().parents[2] / "engine"

# Every member's wire value, as clients, stores and recorded runs know it. Never change one.
WIRE = {
    "UNKNOWN_TOOL": "unknown_tool", "TOOL_DISABLED": "tool_disabled", "NOT_ALLOWED": "not_allowed",
    "INVALID_ARGUMENTS": "invalid_arguments", "SENSITIVE_ARGUMENTS": "sensitive_arguments",
    "CONFIRMATION_DENIED": "confirmation_denied", "APPROVAL_UNAVAILABLE": "approval_unavailable",
    "CONFIG_ERROR": "config_error", "EXECUTION_ERROR": "execution_error", "INVALID_MODEL_OUTPUT": "invalid_model_output",
    "TIMEOUT": "timeout", "LIMIT_EXCEEDED": "limit_exceeded", "CANCELLED": "cancelled", "BLOCKED": "blocked",
    "INVALID_URL": "invalid_url", "HTTP_ERROR": "http_error", "FETCH_FAILED": "fetch_failed", "FETCH_TIMEOUT": "fetch_timeout",
    "UNAUTHORIZED": "unauthorized", "FORBIDDEN": "forbidden", "PEER_NOT_ALLOWED": "peer_not_allowed",
    "HOST_NOT_ALLOWED": "host_not_allowed", "ORIGIN_NOT_ALLOWED": "origin_not_allowed", "NOT_FOUND": "not_found",
    "METHOD_NOT_ALLOWED": "method_not_allowed", "PAYLOAD_TOO_LARGE": "payload_too_large", "PROMPT_TOO_LARGE": "prompt_too_large",
    "INVALID_REQUEST": "invalid_request", "UNKNOWN_MODEL": "unknown_model", "TOO_MANY_RUNS": "too_many_runs",
    "SERVER_ERROR": "server_error", "STORE_UNAVAILABLE": "store_unavailable", "UNKNOWN_RUN": "unknown_run",
    "AMBIGUOUS_RUN_ID": "ambiguous_run_id", "NOT_PENDING": "not_pending", "NOT_RUNNING": "not_running",
    "INTERRUPTED": "interrupted", "MAX_STEPS": "max_steps", "TOKEN_BUDGET": "token_budget", "REPEATED_CALL": "repeated_call",
    "INVALID_OUTPUT": "invalid_output",
    "ERROR": "error", "READ_ONLY": "read_only", "CODE_TOOLS_DISABLED": "code_tools_disabled", "INVALID_CONFIG": "invalid_config",
    "EXISTS": "exists", "NO_STORE": "no_store",
    "SESSION_BUSY": "session_busy", "UNKNOWN_SESSION": "unknown_session",
}

# The three tables ErrorCode replaced, as they were (runtime/result.py, routes/tools.py,
# routes/admin.py), plus limit_exceeded (issue 29: added beside them by another branch).
OLD_ADVICE = {
    "unknown_tool": "Call one of the available tools instead.",
    "tool_disabled": "This tool is switched off; do not call it again.",
    "config_error": "This tool's configuration is broken; do not call it again until it is fixed.",
    "not_allowed": "This tool may not be called here; do not call it again.",
    "invalid_arguments": "Fix the arguments to match the schema and call again.",
    "confirmation_denied": "The user declined this call; do not repeat it unless the user asks.",
    "timeout": "The tool ran out of time; retry only with a smaller request.",
    "limit_exceeded": "The call asked for more work than this server allows (the message names the limit); "
    "retry only with a smaller request, e.g. fewer items.",
    "invalid_model_output": "The model behind this tool gave unusable output; one retry may help.",
    "execution_error": "Retrying with the same arguments will most likely fail the same way.",
    "cancelled": "The call was cancelled.",
    "sensitive_arguments": "Never send passwords, tokens or keys to tools; call again without them.",
    "approval_unavailable": "This tool needs a person's approval and this client cannot ask for it; do not retry. "
    "Use a client that supports elicitation, or a server started with --yes.",
    "blocked": "This tool's network policy refuses that URL; retrying it will not help. Do not fetch it again.",
    "invalid_url": "Give an absolute http:// or https:// URL and call again.",
    "http_error": "The server answered with an error status; retrying the same URL will not help. Try another URL or answer without it.",
    "fetch_failed": "The page could not be fetched; retrying the same URL will not help. Try another URL or answer without it.",
    "fetch_timeout": "The server was too slow; retrying the same URL will not help. Try another URL or answer without it.",
}
OLD_CALL_STATUS = {  # a failed tool call's status; any other code: 502
    "unknown_tool": 404, "not_allowed": 403, "tool_disabled": 403, "confirmation_denied": 403, "blocked": 403,
    "invalid_arguments": 422, "invalid_url": 422, "limit_exceeded": 422, "timeout": 504, "fetch_timeout": 504,
    "cancelled": 409, "config_error": 503,
}
OLD_ADMIN_STATUS = {
    "unknown_tool": 404, "read_only": 403, "code_tools_disabled": 403, "invalid_config": 422, "exists": 409, "no_store": 409, "session_busy": 409, "unknown_session": 404,
}
OLD_USAGE_CODES = {"unknown_tool", "invalid_arguments", "not_allowed", "tool_disabled"}  # cli/main.py: exit 2


def test_every_member_keeps_its_wire_value() -> None:
    assert {member.name: member.value for member in ErrorCode} == WIRE
    for member in ErrorCode:
        assert member == member.value and str(member) == f"{member}" == member.value and hash(member) == hash(member.value)
        assert ErrorCode.of(member.value) is member and ErrorCode(member.value) is member


def test_advice_status_and_exit_code_are_the_old_tables() -> None:
    for member in ErrorCode:
        code = member.value
        assert ErrorCode.advice_for(code) == OLD_ADVICE.get(code, DEFAULT_ADVICE), code
        assert ErrorCode.call_status(code) == OLD_CALL_STATUS.get(code, 502), code
        assert ErrorCode.exit_code_for(code) == (EXIT_USAGE if code in OLD_USAGE_CODES else EXIT_FAILED), code
    for code, status in OLD_ADMIN_STATUS.items():
        assert ErrorCode(code).status == status
    for own in ("rate_limited", "my_tool_failed"):  # a tool type's own code: the defaults
        assert ErrorCode.of(own) is None
        assert (ErrorCode.advice_for(own), ErrorCode.call_status(own), ErrorCode.exit_code_for(own)) == (DEFAULT_ADVICE, 502, 1)


def test_a_request_code_raised_by_a_tool_is_502_not_its_http_status() -> None:
    """A python tool that raises StepFailure("unauthorized") has failed: the caller's key is fine."""
    assert ErrorCode.UNAUTHORIZED.status == 401 and ErrorCode.call_status("unauthorized") == 502
    assert ErrorCode.call_status("too_many_runs") == 502 and ErrorCode.call_status("invalid_request") == 502


def test_the_agent_stop_reasons_that_end_a_run_with_an_error_are_members() -> None:
    """An agent run's error code is its stop reason (runtime/agent.py)."""
    assert {reason for reason in get_args(StopReason) if reason != "answer"} <= {m.value for m in ErrorCode}


# ─── every code the engine writes is a member ────────────────────────────────────────────

# Calls whose argument at this index (or keyword `code`) is an error code.
CODE_ARGUMENT = {"StepFailure": 0, "ToolError": 0, "ToolAdminError": 0, "AgentSetupError": 0, "ApiError": 0,
                 "LimitExceeded": None, "_send_error": 1, "_fail": 0, "failure_details": 0}


def _is_code_read(node: ast.AST) -> bool:
    """`x.code`, `x["code"]`, `x.get("code", …)`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "code"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "code"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "code")


def _strings(node: ast.AST | None) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        return [s for item in node.elts for s in _strings(item)]
    return []


def code_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal written where an error code goes: the code argument
    of StepFailure, ToolError, ApiError…, a dict's "code", what `.code` / `["code"]` /
    `.get("code")` is compared with or defaults to, and SQL's `'code', '…'`."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    bases: dict[ast.AST, set[str]] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for inner in ast.walk(cls):
            bases[inner] = {b.id for b in cls.bases if isinstance(b, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name == "__init__" and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
                name = next((b for b in bases.get(node, ()) if CODE_ARGUMENT.get(b) is not None), "")  # super().__init__(code, …)
            index = CODE_ARGUMENT.get(name)
            if index is not None and len(node.args) > index:
                found += [(node.lineno, s) for s in _strings(node.args[index])]
            found += [(node.lineno, s) for k in node.keywords if k.arg == "code" and name in CODE_ARGUMENT for s in _strings(k.value)]
            if _is_code_read(node) and len(node.args) > 1:  # .get("code", default)
                found += [(node.lineno, s) for s in _strings(node.args[1])]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code":
                    found += [(node.lineno, s) for s in _strings(value)]
        elif isinstance(node, ast.Compare) and any(_is_code_read(side) for side in (node.left, *node.comparators)):
            found += [(node.lineno, s) for side in (node.left, *node.comparators) for s in _strings(side)]
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _is_code_read(node.values[0]):
            found += [(node.lineno, s) for value in node.values[1:] for s in _strings(value)]
    for match in re.finditer(r"'code',\s*'(\w+)'", source):  # SQL: json_build_object('code', 'interrupted', …)
        found.append((source.count("\n", 0, match.start()) + 1, match.group(1)))
    return found


def test_the_scan_finds_each_kind_of_code_site() -> None:
    """The scanner itself, on one example of each site it reads (else the test below proves nothing)."""
    source = textwrap.dedent('''
        raise StepFailure("a1", "m")
        ToolError(code="a2", message="m")
        raise ApiError(ErrorCode.X, "m")
        await _send_error(send, "a3", "m")
        error = {"code": "a4", "message": "m"}
        if result.error.code == "a5" or error["code"] in ("a6", "a7"):
            code = data.get("code") or "a8"
        code = data.get("code", "a9")
        class LimitExceeded(StepFailure):
            def __init__(self, message):
                super().__init__("a10", message)
        SQL = "json_build_object('code', 'a11', 'message', %s)"
        plain = {"name": "not a code"}; print("not a code")
    ''')
    assert sorted(text for _, text in code_literals(source)) == sorted(f"a{i}" for i in range(1, 12))


def _engine_sources() -> Iterator[tuple[str, str]]:
    for path in sorted(ENGINE.rglob("*.py")):
        yield str(path.relative_to(ENGINE.parent)), path.read_text(encoding="utf-8")


def test_every_code_the_engine_writes_is_a_member() -> None:
    members = {member.value for member in ErrorCode}
    strays = [f"{where}:{line}: {text!r}" for where, source in _engine_sources()
              for line, text in code_literals(source) if text not in members]
    assert strays == []


# Modules this change moved to ErrorCode: no code is written there as a bare string.
CONVERTED = ("engine/runtime/router.py", "engine/runtime/result.py", "engine/runtime/project.py", "engine/server/api.py",
             "engine/server/app.py", "engine/server/access.py", "engine/server/mcp_server.py", "engine/server/routes/",
             "engine/cli/", "engine/executors/fetch/", "engine/executors/python_tool.py", "engine/skills/",
             "engine/tool_admin.py", "engine/backends/temporal/client.py")


def test_the_converted_modules_name_codes_by_their_member() -> None:
    bare = [f"{where}:{line}: {text!r}" for where, source in _engine_sources() if where.startswith(CONVERTED)
            for line, text in code_literals(source)]
    assert bare == []


# ─── a member reaches every sink as its plain string ──────────────────────────────────────


def test_every_writer_writes_a_member_as_its_string() -> None:
    value = {"code": ErrorCode.INVALID_ARGUMENTS, ErrorCode.TIMEOUT: [ErrorCode.CANCELLED]}
    plain = {"code": "invalid_arguments", "timeout": ["cancelled"]}
    assert json.dumps(value) == json.dumps(plain)
    assert orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) == orjson.dumps(plain)
    assert json_body(value) == json_body(plain)

    class Body(pydantic.BaseModel):
        code: str

    assert Body(code=ErrorCode.NOT_FOUND).model_dump_json() == '{"code":"not_found"}'
    assert type(Body(code=ErrorCode.NOT_FOUND).model_dump()["code"]) is str


PROJECT = {
    "tools.yaml": """
        tools:
          echo:
            description: Echo a name.
            workflow: echo
            parameters: {type: object, properties: {name: {type: string, minLength: 1}}, required: [name], additionalProperties: false}
          boom:
            description: Fails in the user's code.
            workflow: boom
            parameters: {type: object, properties: {}, additionalProperties: false}
          off:
            description: Switched off.
            enabled: false
            workflow: echo
            parameters: {type: object, properties: {name: {type: string}}}
          hidden:
            description: Denied by the router policy.
            workflow: echo
            parameters: {type: object, properties: {name: {type: string}}}
    """,
    "skills.yaml": """
        skills:
          echo: {kind: python, function: "codes_skills:echo", input: {type: object}}
          explode: {kind: python, function: "codes_skills:explode", input: {type: object}}
    """,
    "workflows.yaml": """
        workflows:
          echo: {steps: [{id: echo, skill: echo, input: {name: $toolArgs.name}}]}
          boom: {steps: [{id: boom, skill: explode, input: {}}]}
    """,
    "config/engine.yaml": """
        router: {deny: [hidden]}
        store: {path: .skillyard/runs.db}
    """,
    "codes_skills.py": """
        def echo(input):
            return {"name": input["name"]}


        def explode(input):
            raise RuntimeError("it broke")
    """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in PROJECT.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_a_failed_call_carries_the_member_and_every_sink_gets_the_string(project: Path) -> None:
    engine = Engine.from_dir(project, store=True)
    try:
        seen: list[Any] = []
        result = asyncio.run(engine.call_tool("echo", {"name": ""}, on_event=seen.append))
        assert result.error is not None and result.error.code is ErrorCode.INVALID_ARGUMENTS
        assert json.loads(json_body(result.to_dict()))["error"]["code"] == "invalid_arguments"
        last = seen[-1]
        assert last.type == "tool_call_error"
        encoded = last.json() or json.dumps(last.to_dict()).encode()
        assert b'"code":"invalid_arguments"' in encoded.replace(b" ", b"")
        assert engine.store is not None
        engine.store.flush()
        stored = engine.store.events(result.run_id)[-1]["data"]["error"]["code"]
        assert stored == "invalid_arguments" and type(stored) is str
        assert engine.store.run(result.run_id).error["code"] == "invalid_arguments"
        assert result.model_text().endswith(OLD_ADVICE["invalid_arguments"])
    finally:
        engine.close()


# ─── the CLI's exit codes and the HTTP statuses, in process ───────────────────────────────


@pytest.mark.parametrize("tool, arguments, code, exit_code", [
    ("nope", [], "unknown_tool", 2),
    ("off", [], "tool_disabled", 2),
    ("hidden", [], "not_allowed", 2),
    ("echo", ["--arg", "name="], "invalid_arguments", 2),
    ("boom", [], "execution_error", 1),
])
def test_the_cli_exits_with_the_code_s_exit_code(project: Path, capsys: pytest.CaptureFixture[str], tool: str,
                                                 arguments: list[str], code: str, exit_code: int) -> None:
    assert main(["call", tool, *arguments, "--dir", str(project), "--no-store", "--quiet"]) == exit_code
    assert f"error: {code}: " in capsys.readouterr().err


async def _answers(app: Any, requests: list[tuple[str, str, Any]]) -> list[tuple[int, str | None]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        out = []
        for method, path, body in requests:
            kwargs = ({"content": body, "headers": {"Content-Type": "application/json"}} if isinstance(body, bytes)
                      else {"json": body} if body is not None else {})
            answer = await client.request(method, path, **kwargs)
            data = answer.json()
            out.append((answer.status_code, (data.get("error") or {}).get("code")))
        return out


HTTP_CASES = [
    ("POST", "/v1/tools/nope/call", {}, 404, "unknown_tool"),
    ("POST", "/v1/tools/off/call", {}, 403, "tool_disabled"),
    ("POST", "/v1/tools/hidden/call", {}, 403, "not_allowed"),
    ("POST", "/v1/tools/echo/call", {"name": ""}, 422, "invalid_arguments"),
    ("POST", "/v1/tools/echo/call", b"\xff\xfe", 422, "invalid_arguments"),
    ("POST", "/v1/tools/boom/call", {}, 502, "execution_error"),
    ("POST", "/v1/tools/echo/call?model=nope", {"name": "a"}, 422, "unknown_model"),
    ("POST", "/v1/tools/echo/call?background=maybe", {"name": "a"}, 422, "invalid_request"),
    ("POST", "/v1/agent", {"messages": "hi", "tools": ["nope"]}, 422, "unknown_tool"),
    ("POST", "/v1/agent", {"messages": " "}, 422, "invalid_request"),
    ("POST", "/v1/agent", {"messages": "hi", "max_steps": 0}, 422, "invalid_request"),
    ("GET", "/v1/runs/run_nope", None, 404, "unknown_run"),
    ("GET", "/v1/runs/run_nope/events", None, 404, "unknown_run"),
    ("POST", "/v1/runs/run_nope/cancel", None, 404, "unknown_run"),
    ("POST", "/v1/runs/run_nope/approvals/call_1", {"approve": True}, 404, "unknown_run"),
    ("GET", "/v1/batches", None, 404, "no_store"),
    ("GET", "/v1/admin/tools/nope", None, 404, "unknown_tool"),
    ("PATCH", "/v1/admin/tools/echo", {"enabled": False}, 409, "no_store"),
    ("PUT", "/v1/tools", None, 405, "method_not_allowed"),
    ("GET", "/v1/nowhere", None, 404, "not_found"),
]


def test_each_refusal_answers_its_status_and_code(project: Path) -> None:
    engine = Engine.from_dir(project, store=False)
    try:
        app = create_app(engine, api_keys="", mcp=False)
        answers = asyncio.run(_answers(app, [(method, path, body) for method, path, body, _, _ in HTTP_CASES]))
        assert answers == [(status, code) for _, _, _, status, code in HTTP_CASES]
    finally:
        engine.close()


def test_a_stored_run_that_is_not_running_cannot_be_cancelled_and_a_reload_s_problems_are_422(project: Path) -> None:
    engine = Engine.from_dir(project, store=True)
    try:
        app = create_app(engine, api_keys="", mcp=False)
        done = asyncio.run(engine.call_tool("echo", {"name": "a"}))
        (project / "workflows.yaml").write_text("workflows:\n  echo: {steps: [{id: x, skill: missing}]}\n")
        answers = asyncio.run(_answers(app, [
            ("GET", f"/v1/runs/{done.run_id}", None),
            ("POST", f"/v1/runs/{done.run_id}/approvals/call_x", {"approve": True}),
            ("POST", "/v1/admin/reload", None),
            ("GET", "/v1/runs/run_", None),  # a prefix of every run: ambiguous once there are two
        ]))
        assert answers[:3] == [(200, None), (409, "not_pending"), (422, "config_error")]
        assert answers[3] in ((200, None), (409, "ambiguous_run_id"))
    finally:
        engine.close()


# ─── foreign errors keep their messages through the one translation per boundary ─────────


def _fetch_failure(url: str) -> StepFailure:
    executor = FetchExecutor(FetchConfig(allowPrivateNetworks=["127.0.0.0/8"], timeout="5s"))
    with pytest.raises(StepFailure) as caught:
        asyncio.run(executor.execute({"url": url}, FakeRun()))
    return caught.value


@pytest.fixture
def pages() -> Iterator[LoopbackServer]:
    served = LoopbackServer().start()
    try:
        yield served
    finally:
        served.stop()


def test_fetch_no_address_answers(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    failure = _fetch_failure(f"http://127.0.0.1:{port}/x?api_key=SECRET")
    shown = f"http://127.0.0.1:{port}/x?api_key=[REDACTED]"
    assert (failure.code, failure.details) == ("fetch_failed", {"url": shown})
    assert failure.message.startswith(f"GET {shown}: could not connect (127.0.0.1): ") and "SECRET" not in failure.message


def test_fetch_a_corrupt_compressed_body(pages: LoopbackServer) -> None:
    pages.routes["/gz"] = lambda h: send(h, 200, b"not gzip at all", "text/plain", Content_Encoding="gzip")
    failure = _fetch_failure(pages.url("/gz"))
    assert (failure.code, failure.details) == ("fetch_failed", {"url": pages.url("/gz")})
    assert failure.message == f"{pages.url('/gz')}: the gzip body is corrupt (Error -3 while decompressing data: incorrect header check)"


def test_fetch_an_answer_that_is_not_http(pages: LoopbackServer) -> None:
    def garbage(h: Any) -> None:
        h.wfile.write(b"NOT HTTP AT ALL\r\n\r\n")
        h.wfile.flush()

    pages.routes["/garbage"] = garbage
    failure = _fetch_failure(pages.url("/garbage"))
    assert (failure.code, failure.details) == ("fetch_failed", {"url": pages.url("/garbage"), "address": "127.0.0.1"})
    assert failure.message == f"GET {pages.url('/garbage')}: RemoteProtocolError: illegal status line: bytearray(b'NOT HTTP AT ALL')"


def _openai(served: FakeServer, **entry: Any) -> OpenAIProvider:
    return OpenAIProvider(ModelSpec(**OpenAIWire().model_entry(served.url, **entry)))


def _ask(provider: OpenAIProvider) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        asyncio.run(asyncio.wait_for(provider.request(ModelRequest((ChatMessage("user", "hi"),))), 10))
    return caught.value


def test_openai_a_refused_request_is_not_retried(server: FakeServer) -> None:  # noqa: F811 - the fixture
    server.script(OpenAIWire().status(400, "context length exceeded"))
    error = _ask(_openai(server))
    assert str(error) == "the endpoint refused the request: context length exceeded" and not error.retryable
    assert len(server.requests) == 1


def test_openai_an_endpoint_that_never_answers(server: FakeServer) -> None:  # noqa: F811 - the fixture
    server.script(Reply(delay=5, events=[]))
    error = _ask(_openai(server, timeout="200ms", options={"max_retries": 0}))
    assert str(error) == "the endpoint did not answer within 0.2s" and error.retryable


def test_a_tool_error_s_code_may_be_a_tool_type_s_own() -> None:
    result = ToolResult(False, "t", "run_1", "call_1", error=ToolError("rate_limited", "slow down"))
    assert result.model_text() == f"[t failed: rate_limited] slow down\n{DEFAULT_ADVICE}"

"""The HTTP/SSE service end to end: a real `skillyard serve` process on a loopback port."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import httpx  # noqa: E402

from server_helpers import (  # noqa: E402
    ADMIN_KEY,
    CALLER_KEY,
    KEYS_ENV,
    ServerProcess,
    iter_sse,
    parse_sse,
    running_server,
    write_project,
)

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CALLER = {"X-API-Key": CALLER_KEY}
SSE = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = write_project(tmp_path_factory.mktemp("served"))
    with running_server(root, keys=KEYS_ENV, extra=("--approval-timeout", "20")) as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=20) as c:
        yield c


def run_status(client: httpx.Client, run_id: str, want: str, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run.get("status") == want or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


# ─── health, OpenAPI, auth ───────────────────────────────────────────────────────────────


def test_health_ready_and_the_documented_paths(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").json() == {"status": "ready"}  # the figures are for an admin key
    ready = httpx.get(f"{server.url}/readyz", headers=ADMIN).json()
    assert ready["status"] == "ready" and ready["tools"] == 4 and ready["store"] is True and ready["auth"] is True
    spec = httpx.get(f"{server.url}/openapi.json").json()
    paths = spec["paths"]
    for path, method in [
        ("/v1/tools", "get"), ("/v1/tools/{name}/call", "post"), ("/v1/agent", "post"), ("/v1/runs", "get"),
        ("/v1/runs/{run_id}", "get"), ("/v1/runs/{run_id}/events", "get"),
        ("/v1/runs/{run_id}/approvals/{tool_call_id}", "post"), ("/v1/admin/tools/{name}", "get"),
        ("/v1/admin/tools/{name}", "patch"), ("/v1/admin/tools/{name}", "delete"), ("/v1/admin/tools", "post"),
        ("/v1/admin/reload", "post"), ("/healthz", "get"), ("/readyz", "get"),
    ]:
        assert method in paths[path], (path, method)
    assert {"HTTPBearer", "APIKeyHeader"} <= set(spec["components"]["securitySchemes"])


def test_keys_and_roles(server: ServerProcess) -> None:
    none = httpx.get(f"{server.url}/v1/tools")
    assert none.status_code == 401 and none.json()["error"]["code"] == "unauthorized"
    assert none.headers["www-authenticate"] == "Bearer"
    bad = httpx.get(f"{server.url}/v1/tools", headers={"Authorization": "Bearer " + "x" * 40})
    assert bad.status_code == 401 and "not valid" in bad.json()["error"]["message"]
    me = httpx.get(f"{server.url}/v1/whoami", headers=CALLER).json()
    assert me == {"name": me["name"], "role": "caller", "auth": True} and me["name"].startswith("caller-")
    assert httpx.get(f"{server.url}/v1/whoami", headers=ADMIN).json()["role"] == "admin"
    forbidden = httpx.get(f"{server.url}/v1/admin/tools", headers=CALLER)
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
    assert httpx.get(f"{server.url}/v1/admin/tools", headers=ADMIN).status_code == 200
    assert httpx.post(f"{server.url}/mcp", json={}).status_code == 401  # MCP needs a key too
    assert httpx.get(f"{server.url}/").status_code == 200  # the page itself is public; its API calls are not


# ─── tools ───────────────────────────────────────────────────────────────────────────────


def test_tool_list_in_each_format_has_only_the_callable_tools(client: httpx.Client) -> None:
    openai = client.get("/v1/tools").json()
    assert [t["function"]["name"] for t in openai] == ["echo", "guarded", "slow"]  # retired: disabled; secretTool: denied
    anthropic = client.get("/v1/tools", params={"format": "anthropic"}).json()
    assert anthropic[0]["input_schema"]["required"] == ["name"]
    mcp = client.get("/v1/tools", params={"format": "mcp"}).json()
    assert mcp[0]["inputSchema"]["properties"]["name"]["type"] == "string"
    assert client.get("/v1/tools", params={"format": "xml"}).status_code == 422


def test_call_returns_the_tool_result_and_router_codes_as_statuses(client: httpx.Client) -> None:
    ok = client.post("/v1/tools/echo/call", json={"name": "Ada", "count": 2})
    assert ok.status_code == 200
    body = ok.json()
    assert body["ok"] is True and body["data"] == {"name": "Ada", "count": 2} and body["run_id"] == ok.headers["x-run-id"]

    cases = [
        ("echo", {"count": 0}, 422, "invalid_arguments"),
        ("nope", {}, 404, "unknown_tool"),
        ("retired", {"name": "x"}, 403, "tool_disabled"),
        ("secretTool", {"name": "x"}, 403, "not_allowed"),
    ]
    for tool, args, status, code in cases:
        response = client.post(f"/v1/tools/{tool}/call", json=args)
        assert response.status_code == status, (tool, response.text)
        assert response.json()["ok"] is False and response.json()["error"]["code"] == code
    pointers = {e["pointer"] for e in client.post("/v1/tools/echo/call", json={"count": 0}).json()["error"]["details"]["errors"]}
    assert pointers == {"/", "/count"}  # every problem, with its JSON Pointer
    broken = client.post("/v1/tools/echo/call", content=b'{"name": ', headers={"Content-Type": "application/json"})
    assert broken.status_code == 422 and "not valid JSON" in broken.json()["error"]["message"]
    assert client.post("/v1/tools/echo/call", json={"name": "x"}, params={"model": "gpt-9"}).json()["error"]["code"] == "unknown_model"
    huge = client.post("/v1/tools/echo/call", content=b"x" * (2 << 20))
    assert huge.status_code == 413


def test_the_call_parameters_are_checked_with_the_usual_422(client: httpx.Client) -> None:
    """name, background and model are read by the route itself: same checks, same error shape."""
    cases = [
        ("/v1/tools/echo/call?background=maybe", "query /background"),
        ("/v1/tools/" + "x" * 201 + "/call", "path /name"),
        ("/v1/tools/echo/call?model=" + "m" * 201, "query /model"),
    ]
    for url, where in cases:
        response = client.post(url, json={"name": "x"})
        assert response.status_code == 422, (url, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_request" and where in error["message"]
        assert error["details"]["errors"][0]["pointer"] == "/" + where.split("/")[1]
    for flag in ("TRUE", "off"):
        response = client.post(f"/v1/tools/echo/call?background={flag}", json={"name": "Ada"})
        assert response.status_code == 200 and response.json()["ok"] is True
    parameters = httpx.get(f"{client.base_url}/openapi.json").json()["paths"]["/v1/tools/{name}/call"]["post"]["parameters"]
    assert [p["name"] for p in parameters] == ["name", "background", "model"]


def test_call_as_sse_frames_carry_seq_type_and_the_event(client: httpx.Client) -> None:
    response = client.post("/v1/tools/echo/call", json={"name": "Ada"}, headers=SSE)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    frames = parse_sse(response.text)
    assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1))
    for f in frames:
        assert f["event"] == f["data"]["type"] and int(f["id"]) == f["data"]["seq"]
        assert f["data"]["run_id"] == response.headers["x-run-id"]
    types = [f["event"] for f in frames]
    assert types[0] == "tool_call_start" and types[-1] == "tool_call_result"
    assert {"skill_start", "skill_result", "tool_progress_delta"} <= set(types)
    assert frames[-1]["data"]["data"]["data"] == {"name": "Ada", "count": 1}


# ─── replay and resume ───────────────────────────────────────────────────────────────────


def test_replay_resumes_after_last_event_id_from_the_store(client: httpx.Client) -> None:
    first = client.post("/v1/tools/echo/call", json={"name": "Replay"}, headers=SSE)
    run_id = first.headers["x-run-id"]
    everything = parse_sse(first.text)
    replay = parse_sse(client.get(f"/v1/runs/{run_id}/events", headers=SSE).text)
    assert [f["data"] for f in replay] == [f["data"] for f in everything]
    resumed = parse_sse(client.get(f"/v1/runs/{run_id}/events", headers={**SSE, "Last-Event-ID": "3"}).text)
    assert [int(f["id"]) for f in resumed] == list(range(4, len(everything) + 1))
    as_json = client.get(f"/v1/runs/{run_id}/events", params={"after": 5}, headers={"Accept": "application/json"}).json()
    assert [e["seq"] for e in as_json] == list(range(6, len(everything) + 1))
    assert client.get("/v1/runs/run_doesnotexist/events", headers=SSE).status_code == 404


def test_a_client_that_reconnects_to_a_live_run_misses_nothing_and_sees_nothing_twice(server: ServerProcess) -> None:
    seen: list[int] = []
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=20) as c:
        with c.stream("POST", "/v1/tools/slow/call", params={"background": "true"}, json={"seconds": 1.0}, headers=SSE) as r:
            run_id = r.headers["x-run-id"]
            for f in iter_sse(r):
                seen.append(int(f["id"]))
                if len(seen) == 5:
                    break  # drop the connection mid-run
        last = seen[-1]
        time.sleep(0.2)  # events keep coming while nobody listens
        with c.stream("GET", f"/v1/runs/{run_id}/events", headers={**SSE, "Last-Event-ID": str(last)}) as r:
            frames = list(iter_sse(r))
        seen += [int(f["id"]) for f in frames]
        assert frames[-1]["event"] == "tool_call_result"
        assert seen == list(range(1, len(seen) + 1))  # gap-free, no duplicates
        stored = c.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/json"}).json()
        assert [e["seq"] for e in stored] == seen
        assert run_status(c, run_id, "ok")["status"] == "ok"


def test_disconnecting_cancels_the_run_unless_background(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=20) as c:
        with c.stream("POST", "/v1/tools/slow/call", json={"seconds": 5}, headers=SSE) as r:
            run_id = r.headers["x-run-id"]
            for f in iter_sse(r):
                if f["event"] == "skill_progress_delta":
                    break
        run = run_status(c, run_id, "cancelled", timeout=4)
        assert run["status"] == "cancelled" and run["duration_ms"] < 4000
        events = c.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/json"}).json()
        assert events[-1]["type"] == "tool_call_error" and events[-1]["data"]["error"]["code"] == "cancelled"


def test_cancel_a_background_run(client: httpx.Client) -> None:
    with client.stream("POST", "/v1/tools/slow/call", params={"background": "true"}, json={"seconds": 5}, headers=SSE) as r:
        run_id = r.headers["x-run-id"]
        frames = []
        for f in iter_sse(r):
            frames.append(f)
            if len(frames) == 1:
                assert client.post(f"/v1/runs/{run_id}/cancel").json() == {"run_id": run_id, "cancelled": True}
    assert frames[-1]["event"] == "tool_call_error" and frames[-1]["data"]["data"]["error"]["code"] == "cancelled"
    assert client.post(f"/v1/runs/{run_id}/cancel").status_code == 409
    assert client.post("/v1/runs/run_nope/cancel").status_code == 404


def test_a_plain_json_call_is_cancelled_when_its_client_leaves(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=0.6) as c:
        with pytest.raises(httpx.ReadTimeout):
            c.post("/v1/tools/slow/call", json={"seconds": 5})
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=10) as c:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            runs = c.get("/v1/runs", params={"tool": "slow", "limit": 1}).json()
            if runs and runs[0]["status"] == "cancelled":
                break
            time.sleep(0.1)
        assert runs[0]["status"] == "cancelled"


# ─── approvals ───────────────────────────────────────────────────────────────────────────


def test_approve_and_deny_a_confirm_tool(client: httpx.Client) -> None:
    for approve, last_type in ((True, "tool_call_result"), (False, "tool_call_error")):
        frames = []
        with client.stream("POST", "/v1/tools/guarded/call", json={"name": "Bo"}, headers=SSE) as r:
            run_id = r.headers["x-run-id"]
            for f in iter_sse(r):
                frames.append(f)
                if f["event"] == "confirmation_required":
                    call_id = f["data"]["tool_call_id"]
                    assert client.get(f"/v1/runs/{run_id}").json()["pending_approvals"] == [call_id]
                    answer = client.post(f"/v1/runs/{run_id}/approvals/{call_id}", json={"approve": approve})
                    assert answer.status_code == 200 and answer.json()["approved"] is approve
                    again = client.post(f"/v1/runs/{run_id}/approvals/{call_id}", json={"approve": True})
                    assert again.status_code == 409 and again.json()["error"]["code"] == "not_pending"
        assert frames[-1]["event"] == last_type
        if not approve:
            assert frames[-1]["data"]["data"]["error"]["code"] == "confirmation_denied"
    assert client.post("/v1/runs/run_nope/approvals/call_x", json={"approve": True}).status_code == 404
    assert client.post("/v1/runs/run_nope/approvals/call_x", json={"approve": "yes please"}).status_code == 422


def test_parallel_confirmations_each_get_their_own_answer(client: httpx.Client) -> None:
    """The scripted model asks for two `guarded` calls in one turn; deny A, approve B, in reverse order."""
    frames = []
    asked: dict[str, str] = {}
    with client.stream("POST", "/v1/agent", json={"messages": "run both", "model": "twin"}, headers=SSE) as r:
        run_id = r.headers["x-run-id"]
        for f in iter_sse(r):
            frames.append(f)
            if f["event"] == "confirmation_required":
                asked[f["data"]["data"]["arguments"]["name"]] = f["data"]["tool_call_id"]
                if len(asked) == 2:
                    pending = client.get(f"/v1/runs/{run_id}").json()["pending_approvals"]
                    assert sorted(pending) == sorted(asked.values())
                    assert client.post(f"/v1/runs/{run_id}/approvals/{asked['B']}", json={"approve": True}).status_code == 200
                    assert client.post(f"/v1/runs/{run_id}/approvals/{asked['A']}", json={"approve": False}).status_code == 200
    outcome = {f["data"]["tool_call_id"]: f["data"] for f in frames if f["event"] in ("tool_call_result", "tool_call_error")}
    assert outcome[asked["A"]]["type"] == "tool_call_error"
    assert outcome[asked["A"]]["data"]["error"]["code"] == "confirmation_denied"
    assert outcome[asked["B"]]["type"] == "tool_call_result" and outcome[asked["B"]]["data"]["data"]["name"] == "B"
    assert frames[-1]["event"] == "agent_done" and frames[-1]["data"]["data"]["answer"] == "Done with both."


# ─── agent, runs ─────────────────────────────────────────────────────────────────────────


def test_agent_streams_the_loop_and_answers_json_on_request(client: httpx.Client) -> None:
    response = client.post("/v1/agent", json={"messages": [{"role": "user", "content": "echo the name Grace"}]}, headers=SSE)
    frames = parse_sse(response.text)
    types = [f["event"] for f in frames]
    assert types[0] == "agent_start" and types[-1] == "agent_done"
    assert "tool_call_start" in types and "model_call_start" in types
    assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1))
    plain = client.post("/v1/agent", json={"messages": "hello", "enable_tools": False}, headers={"Accept": "application/json"})
    assert plain.status_code == 200 and plain.json()["stop_reason"] == "answer" and plain.json()["tool_results"] == []
    assert client.post("/v1/agent", json={"messages": "x", "model": "nope"}).json()["error"]["code"] == "unknown_model"
    assert client.post("/v1/agent", json={"messages": "x", "tools": ["nope"]}).status_code == 422
    assert client.post("/v1/agent", json={"messages": []}).status_code == 422
    assert client.post("/v1/agent", json={}).json()["error"]["code"] == "invalid_request"


def test_run_history_and_detail(client: httpx.Client) -> None:
    run_id = client.post("/v1/tools/echo/call", json={"name": "History"}).headers["x-run-id"]
    runs = client.get("/v1/runs", params={"tool": "echo", "limit": 5}).json()
    assert runs[0]["id"] == run_id and runs[0]["status"] == "ok" and runs[0]["kind"] == "tool"
    detail = client.get(f"/v1/runs/{run_id[:20]}").json()  # an unambiguous prefix (its time, a few random digits)
    assert detail["id"] == run_id and detail["output"] == {"name": "History", "count": 1}
    assert detail["tool_calls"][0]["status"] == "success" and detail["live"] is False
    assert client.get("/v1/runs/run_nope").status_code == 404
    assert client.get("/v1/runs", params={"limit": 0}).status_code == 422


# ─── admin ───────────────────────────────────────────────────────────────────────────────


def test_admin_reads_tools_and_reloads(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=ADMIN, timeout=20) as c:
        tools = {t["name"]: t for t in c.get("/v1/admin/tools").json()}
        assert set(tools) == {"echo", "guarded", "slow", "retired", "secretTool"}
        assert tools["retired"]["enabled"] is False and tools["echo"]["source"] == "yaml"
        assert c.get("/v1/admin/tools/guarded").json()["confirm"] is True
        assert c.get("/v1/admin/tools/nope").status_code == 404
        reload = c.post("/v1/admin/reload")
        assert reload.status_code == 200 and "5 tools" in reload.json()["summary"]


def test_admin_changes_tools(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=ADMIN, timeout=20) as c:
        off = c.patch("/v1/admin/tools/echo", json={"enabled": False})
        assert off.status_code == 200 and off.json()["enabled"] is False
        assert "echo" not in [t["name"] for t in c.get("/v1/tools", params={"format": "mcp"}).json()]
        assert c.post("/v1/tools/echo/call", json={"name": "x"}).json()["error"]["code"] == "tool_disabled"
        assert c.patch("/v1/admin/tools/echo", json={"enabled": True}).json()["enabled"] is True
        assert c.patch("/v1/admin/tools/nope", json={"enabled": True}).status_code == 404

        created = c.post("/v1/admin/tools", json={
            "name": "readDocs", "type": "fetch", "description": "Read a page of the docs.",
            "config": {"allowed_domains": ["docs.example.com"]},
        })
        assert created.status_code == 201, created.text
        assert c.get("/v1/admin/tools/readDocs").json()["source"] == "store"
        assert c.post("/v1/admin/tools", json={"name": "readDocs", "type": "fetch", "description": "again"}).status_code == 409
        read_only = c.delete("/v1/admin/tools/echo")
        assert read_only.status_code == 403 and read_only.json()["error"]["code"] == "read_only"
        assert c.delete("/v1/admin/tools/readDocs").status_code == 204
        assert c.get("/v1/admin/tools/readDocs").status_code == 404


# ─── MCP over streamable HTTP at /mcp ────────────────────────────────────────────────────


def test_mcp_over_http_with_the_sdk_client(server: ServerProcess) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {CALLER_KEY}"}, timeout=30) as http:
            async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["echo", "guarded", "slow"]
                progress: list[tuple[float, str | None]] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append((value, message))

                result = await client.call_tool("slow", {"seconds": 0.2}, progress_callback=on_progress)
                assert result.is_error is False and json.loads(result.content[0].text) == {"slept": 0.2}
                assert any("slept 1 of" in (m or "") for _, m in progress)
                values = [v for v, _ in progress]
                assert values == sorted(values) and len(values) >= 4
                bad = await client.call_tool("echo", {"count": "two"})
                assert bad.is_error is True and "invalid_arguments" in bad.content[0].text

    asyncio.run(asyncio.wait_for(main(), 30))

"""The tool call's request path (issue 13): `POST /v1/tools/{name}/call` is answered by
`DirectRoute` without the router, and a run's SSE frames are built by the hub only when
someone asks. A real `skillyard serve --no-store` on a loopback port: the hub's memory is the
only source of a run's events."""

from __future__ import annotations

from typing import Iterator

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from server_helpers import CALLER_KEY, KEYS_ENV, ServerProcess, parse_sse, running_server, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

CALLER = {"X-API-Key": CALLER_KEY}
SSE = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(write_project(tmp_path_factory.mktemp("direct")), keys=KEYS_ENV, extra=("--no-store",)) as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=CALLER, timeout=20) as c:
        yield c


def test_the_call_route_answers_every_case_as_declared(client: httpx.Client) -> None:
    ok = client.post("/v1/tools/echo/call", json={"name": "Ada", "count": 2})
    assert ok.status_code == 200 and ok.json()["ok"] is True and ok.headers["x-run-id"] == ok.json()["run_id"]
    unknown = client.post("/v1/tools/nope/call", json={})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_tool" and unknown.json()["tool"] == "nope"
    invalid = client.post("/v1/tools/echo/call", json={"count": 0})
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "invalid_arguments"
    flag = client.post("/v1/tools/echo/call?background=maybe", json={"name": "Ada"})
    assert flag.status_code == 422 and flag.json()["error"]["code"] == "invalid_request"
    assert flag.json()["error"]["details"]["errors"] == [{"pointer": "/background", "in": "query",
                                               "message": "Input should be a valid boolean, unable to interpret input"}]
    model = client.post("/v1/tools/echo/call?model=no-such-model", json={"name": "Ada"})
    assert model.status_code == 422 and model.json()["error"]["code"] == "unknown_model"
    not_utf8 = client.post("/v1/tools/echo/call", content=b'{"name": "\xff"}', headers={"Content-Type": "application/json"})
    assert not_utf8.status_code == 422 and "UTF-8" in not_utf8.json()["error"]["message"]
    # What the route does not take still goes through the router, with the usual error body.
    assert client.get("/v1/tools/echo/call").json()["error"]["code"] == "method_not_allowed"
    assert client.post("/v1/tools/echo/call/more", json={}).json()["error"]["code"] == "not_found"
    anonymous = httpx.post(f"{client.base_url}/v1/tools/echo/call", json={"name": "Ada"})
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "unauthorized"
    assert "post" in client.get("/openapi.json").json()["paths"]["/v1/tools/{name}/call"]


def test_a_json_answered_call_is_replayed_from_memory_as_sse_and_json(client: httpx.Client) -> None:
    answer = client.post("/v1/tools/echo/call", json={"name": "Grace"})
    run_id = answer.headers["x-run-id"]
    replay = client.get(f"/v1/runs/{run_id}/events", headers=SSE)
    frames = parse_sse(replay.text)
    dicts = client.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/json"}).json()
    assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1)) and len(frames) >= 3
    assert [f["data"] for f in frames] == dicts, "a frame is its event's dict, built from the same record"
    assert [f["event"] for f in frames] == [d["type"] for d in dicts] and dicts[-1]["type"] == "tool_call_result"
    assert dicts[-1]["data"]["data"] == answer.json()["data"] == {"name": "Grace", "count": 1}
    resumed = parse_sse(client.get(f"/v1/runs/{run_id}/events", headers={**SSE, "Last-Event-ID": "2"}).text)
    assert resumed == frames[2:]
    streamed = client.post("/v1/tools/echo/call", json={"name": "Grace"}, headers=SSE)
    assert [f["event"] for f in parse_sse(streamed.text)] == [f["event"] for f in frames]

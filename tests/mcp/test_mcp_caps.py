"""`/mcp` counts against the service's live-run caps (security review, issue 28 item 4).

A tools/call over `/mcp` and a `POST /v1/tools/{name}/call` of the same key share one count:
together they stop at `server.max_live_runs_per_key`, and all keys at `server.max_live_runs`.
A call over a cap over MCP is a JSON-RPC error carrying `too_many_runs` and the advice; once
the runs end, calls go through again. The app in process (httpx's ASGITransport), raw
JSON-RPC over the legacy streamable-HTTP handshake; the tool waits on an event the test
sets, so the runs stay live as long as the test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402

GATE_MODULE = "mcpcaps_gate"  # a name no other test project uses: the test reaches its event
KEY_A = "mcpcaps-alice-key-0123456789abcdef0"
KEY_B = "mcpcaps-bob-key-0123456789abcdef012"
KEYS = f"alice:caller:{KEY_A},bob:caller:{KEY_B}"
PROTOCOL = "2025-11-25"
PER_KEY, TOTAL = 2, 3
WAIT_S = 10.0  # a call that should be refused at once, but runs (waiting on the gate), fails the test here

FILES = {
    "tools.yaml": """
        tools:
          hold:
            description: Waits until the test opens the gate.
            type: python
            config: {function: "mcpcaps_gate:hold"}
    """,
    "config/engine.yaml": f"""
        server:
          max_live_runs: {TOTAL}
          max_live_runs_per_key: {PER_KEY}
    """,
    f"{GATE_MODULE}.py": """
        import asyncio

        GATE = asyncio.Event()


        async def hold() -> str:
            await GATE.wait()
            return "released"
    """,
}


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    for name, text in FILES.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"))
    sys.modules.pop(GATE_MODULE, None)  # this project's module, with a fresh (closed) gate
    engine = Engine.from_dir(tmp_path)
    yield engine
    engine.close()
    sys.modules.pop(GATE_MODULE, None)


def gate() -> asyncio.Event:
    return sys.modules[GATE_MODULE].GATE  # type: ignore[no-any-return]


class Door:
    """One caller key's two ways in: the HTTP call route and an MCP session at /mcp."""

    def __init__(self, client: httpx.AsyncClient, key: str):
        self.client = client
        self.auth = {"Authorization": f"Bearer {key}"}
        self.mcp_headers: dict[str, str] = {}
        self.next_id = 1

    async def http_call(self) -> httpx.Response:
        return await self.client.post("/v1/tools/hold/call", json={}, headers=self.auth)

    async def open_mcp(self) -> None:
        answer = await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "caps-test", "version": "0"}}})
        assert answer.status_code == 200, answer.text
        self.mcp_headers = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        initialized = await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202, initialized.text

    async def mcp_call(self) -> dict[str, Any]:
        """The JSON-RPC answer to one tools/call of `hold`."""
        self.next_id += 1
        answer = await self._post({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                                   "params": {"name": "hold", "arguments": {}}})
        assert answer.status_code == 200, answer.text
        return _json_rpc_answer(answer)

    async def _post(self, message: dict[str, Any]) -> httpx.Response:
        headers = {**self.auth, **self.mcp_headers, "Accept": "application/json, text/event-stream"}
        return await self.client.post("/mcp", json=message, headers=headers)


def _json_rpc_answer(response: httpx.Response) -> dict[str, Any]:
    """The response message of a POST (a JSON body, or the last `data:` of its event stream)."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads([d for d in data if d][-1])  # type: ignore[no-any-return]


def _refused(answer: dict[str, Any]) -> str:
    """The message of a JSON-RPC error that carries `too_many_runs` (fails on anything else)."""
    assert "error" in answer, f"the call was not refused: {answer}"
    error = answer["error"]
    assert error["code"] == -32000 and error["data"]["code"] == "too_many_runs", error
    assert error["message"].startswith("too_many_runs: ") and "retry when one has ended" in error["message"]
    return str(error["message"])


@pytest.fixture
def app(engine: Any) -> Any:
    from engine.server import create_app

    return create_app(engine, api_keys=KEYS)


@contextlib.asynccontextmanager
async def _served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as client:
            yield client


async def _until_live(hub: Any, count: int, *, counted: bool = False) -> None:
    """Until `count` runs are live (any door's: `live_count`), or hold a place under the caps."""
    def live() -> int:
        return hub.started_live if counted else hub.live_count()  # type: ignore[no-any-return]

    for _ in range(500):
        if live() == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{live()} runs live, not {count}")


def test_http_and_mcp_calls_of_one_key_share_the_caps(app: Any) -> None:
    hub = app.state.hub

    async def main() -> None:
        async with _served(app) as client:
            alice, bob = Door(client, KEY_A), Door(client, KEY_B)
            await alice.open_mcp()
            await bob.open_mcp()
            running = [asyncio.ensure_future(alice.http_call())]
            try:
                await _until_live(hub, 1)
                running.append(asyncio.ensure_future(alice.mcp_call()))
                await _until_live(hub, PER_KEY)
                # alice is at her cap: over MCP a JSON-RPC error, over HTTP a 429
                message = _refused(await asyncio.wait_for(alice.mcp_call(), WAIT_S))
                assert "server.max_live_runs_per_key" in message
                refused = await asyncio.wait_for(alice.http_call(), WAIT_S)
                assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_runs"
                # bob may start one: then the service is at its cap, for both doors
                running.append(asyncio.ensure_future(bob.mcp_call()))
                await _until_live(hub, TOTAL)
                message = _refused(await asyncio.wait_for(bob.mcp_call(), WAIT_S))
                assert "server.max_live_runs)" in message
                assert (await asyncio.wait_for(bob.http_call(), WAIT_S)).status_code == 429
                assert hub.started_live == hub.live_count() == TOTAL, "a refused call holds no place"
            finally:
                gate().set()
            http_answer, *mcp_answers = await asyncio.wait_for(asyncio.gather(*running), WAIT_S)
            assert http_answer.status_code == 200 and http_answer.json()["data"] == "released"
            for answer in mcp_answers:
                assert answer["result"]["isError"] is False and answer["result"]["content"][0]["text"] == "released"
            await _until_live(hub, 0, counted=True)
            # the runs have ended: every place is free again, through either door
            again = await asyncio.wait_for(asyncio.gather(*(alice.mcp_call() for _ in range(PER_KEY))), WAIT_S)
            assert all("result" in answer and answer["result"]["isError"] is False for answer in again), again
            assert (await alice.http_call()).status_code == 200

    asyncio.run(main())


def test_a_cancelled_mcp_call_gives_its_place_back(app: Any) -> None:
    """The place is released however the call ends: here, the client goes away mid-call."""
    hub = app.state.hub

    async def main() -> None:
        async with _served(app) as client:
            alice = Door(client, KEY_A)
            await alice.open_mcp()
            try:
                for _ in range(PER_KEY + 1):  # more than the cap, one after the other
                    call = asyncio.ensure_future(alice.mcp_call())
                    await _until_live(hub, 1, counted=True)
                    await alice._post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": alice.next_id, "reason": "test"}})
                    await _until_live(hub, 0, counted=True)
                    call.cancel()
            finally:
                gate().set()

    asyncio.run(main())


def test_the_sdk_client_at_2026_07_28_gets_the_error(app: Any) -> None:
    """Self-contained 2026-07-28 requests (no session) are counted too; the official client
    raises the error with its code and data."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    from mcp import Client

    hub = app.state.hub

    async def call() -> Any:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), headers={"Authorization": f"Bearer {KEY_A}"},
                                      timeout=30) as http:
            async with Client(streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http),
                              mode="2026-07-28") as client:
                try:
                    return await client.call_tool("hold", {})
                except MCPError as exc:  # (out of the client's task group it would be wrapped in a group)
                    return exc

    async def main() -> None:
        async with _served(app):
            running = [asyncio.ensure_future(call()) for _ in range(PER_KEY)]
            try:
                await _until_live(hub, PER_KEY)
                refused = await asyncio.wait_for(call(), WAIT_S)
                assert isinstance(refused, MCPError), f"the call was not refused: {refused}"
                assert refused.code == -32000 and refused.error.data["code"] == "too_many_runs"
            finally:
                gate().set()
            assert [r.is_error for r in await asyncio.wait_for(asyncio.gather(*running), WAIT_S)] == [False] * PER_KEY

    asyncio.run(main())

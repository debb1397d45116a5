"""The service's hardening (issue 10): bodies bounded before auth, live-run caps, caller
isolation by key name, loopback peers only without keys, run id prefixes for events.

One real `skillyard serve` process per module with three named keys and small caps.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
psutil = pytest.importorskip("psutil")
import httpx  # noqa: E402

from server_helpers import ServerProcess, free_port, parse_sse, running_server, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ADMIN_KEY = "ops-admin-key-0123456789abcdef01234"
ALICE_KEY = "alice-caller-key-0123456789abcdef012"
BOB_KEY = "bob-caller-key-0123456789abcdef01234"
KEYS = f"ops:admin:{ADMIN_KEY},alice:caller:{ALICE_KEY},bob:caller:{BOB_KEY}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"X-API-Key": BOB_KEY}
MAX_BODY = 64 * 1024
ENGINE_YAML = f"""
router:
  deny: [secretTool]
store:
  path: .skillyard/runs.db
server:
  max_body_bytes: {MAX_BODY}
  max_prompt_chars: 2000
  max_live_runs: 5
  max_live_runs_per_key: 3
"""

ODD_TOOL = """
  oddText:
    description: Returns text holding a lone surrogate, as a buggy tool might.
    type: python
    config: {function: "odd:odd_text"}
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(tmp_path_factory.mktemp("hardened"))
    (root / "config" / "engine.yaml").write_text(textwrap.dedent(ENGINE_YAML).lstrip())
    with (root / "tools.yaml").open("a") as tools:
        tools.write(ODD_TOOL)
    (root / "odd.py").write_text("def odd_text() -> str:\n    return 'half a pair: \\ud800'\n")
    return root


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[ServerProcess]:
    with running_server(root, keys=KEYS, extra=("--approval-timeout", "30")) as process:
        yield process


def start_guarded(server: ServerProcess, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Try to start a background call that waits for approval; (status, error body, headers).
    The stream is left at once: a background run stays live until it is answered."""
    with httpx.stream("POST", f"{server.url}/v1/tools/guarded/call", params={"background": "true"}, json={"name": "x"},
                      headers={**headers, "Accept": "text/event-stream"}, timeout=5) as response:
        body = response.read() if response.status_code != 200 else b"{}"
        return response.status_code, httpx.Response(200, content=body).json(), dict(response.headers)


def wait_pending(server: ServerProcess, run_id: str, headers: dict[str, str]) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pending = httpx.get(f"{server.url}/v1/runs/{run_id}", headers=headers).json().get("pending_approvals")
        if pending:
            return str(pending[0])
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never asked for approval")


def background_guarded(server: ServerProcess, headers: dict[str, str]) -> tuple[str, str]:
    """Start a guarded call in the background (no client attached); (run id, tool call id)."""
    with httpx.stream("POST", f"{server.url}/v1/tools/guarded/call", params={"background": "true"}, json={"name": "x"},
                      headers={**headers, "Accept": "text/event-stream"}, timeout=10) as response:
        assert response.status_code == 200, response.read()
        run_id = response.headers["x-run-id"]
        for line in response.iter_lines():
            if line.startswith("event: confirmation_required"):
                break
    return run_id, wait_pending(server, run_id, headers)


# ─── bodies: authenticated before read, capped while streamed ──────────────────────────


def _chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * size
        sent += size


@pytest.mark.parametrize("path", ["/v1/agent", "/v1/tools/echo/call", "/v1/runs/run_x/approvals/call_x"])
def test_an_unauthenticated_chunked_body_is_refused_before_it_is_read(server: ServerProcess, path: str) -> None:
    rss_before = psutil.Process(server.process.pid).memory_info().rss
    response = httpx.post(f"{server.url}{path}", content=_chunks(64 << 20), timeout=30)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    grown = psutil.Process(server.process.pid).memory_info().rss - rss_before
    assert grown < 20 << 20, f"the server grew by {grown >> 20} MiB for a refused body"


def _status_after_partial_chunked_body(server: ServerProcess, path: str, headers: dict[str, str], size: int) -> str:
    """Send `size` bytes of a chunked body that never ends; the status line the server answers with."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode())
        chunk = b"%x\r\n%s\r\n" % (8192, b" " * 8192)
        for _ in range(size // 8192):
            sock.sendall(chunk)
        return sock.recv(4096).split(b"\r\n", 1)[0].decode()  # the body's end never comes: only an early answer arrives


@pytest.mark.parametrize("path", ["/v1/agent", "/v1/tools/echo/call", "/v1/runs/run_x/approvals/call_x", "/v1/admin/tools"])
def test_every_body_is_capped_while_it_streams_in(server: ServerProcess, path: str) -> None:
    headers = ADMIN if "admin" in path else ALICE
    assert " 413 " in _status_after_partial_chunked_body(server, path, headers, 2 * MAX_BODY) + " "
    declared = httpx.post(f"{server.url}{path}", content=b"{" + b" " * MAX_BODY + b"}", headers=headers)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "payload_too_large"
    assert str(MAX_BODY) in declared.json()["error"]["message"]


def test_the_agent_prompt_has_its_own_cap(server: ServerProcess) -> None:
    too_long = httpx.post(f"{server.url}/v1/agent", json={"messages": "x" * 2001}, headers=ALICE)
    assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "prompt_too_large"
    assert "max_prompt_chars" in too_long.json()["error"]["message"]
    split = [{"role": "user", "content": "y" * 1500}, {"role": "assistant", "content": "z" * 600}]
    assert httpx.post(f"{server.url}/v1/agent", json={"messages": split}, headers=ALICE).status_code == 413
    fits = httpx.post(f"{server.url}/v1/agent", json={"messages": "hello", "enable_tools": False},
                      headers={**ALICE, "Accept": "application/json"})
    assert fits.status_code == 200


# ─── callers are isolated ─────────────────────────────────────────────────────────────


def test_a_caller_sees_follows_approves_and_cancels_only_its_own_runs(server: ServerProcess) -> None:
    run_id, call_id = background_guarded(server, ALICE)
    url = f"{server.url}/v1/runs/{run_id}"
    assert httpx.get(url, headers=BOB).status_code == 404
    assert httpx.get(f"{url}/events", headers={**BOB, "Accept": "application/json"}).status_code == 404
    assert httpx.post(f"{url}/approvals/{call_id}", json={"approve": True}, headers=BOB).status_code == 404
    assert httpx.post(f"{url}/cancel", headers=BOB).status_code == 404
    assert run_id not in [r["id"] for r in httpx.get(f"{server.url}/v1/runs", headers=BOB).json()]
    # the owner and the admin see it; the answer of the owner counts
    assert httpx.get(url, headers=ALICE).json()["principal"] == "alice"
    assert run_id in [r["id"] for r in httpx.get(f"{server.url}/v1/runs", headers=ADMIN).json()]
    assert httpx.post(f"{url}/approvals/{call_id}", json={"approve": True}, headers=ALICE).status_code == 200
    deadline = time.monotonic() + 10
    while httpx.get(url, headers=ALICE).json()["status"] != "ok":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    events = httpx.get(f"{url}/events", headers={**ADMIN, "Accept": "application/json"}).json()
    assert events[-1]["type"] == "tool_call_result"


def test_ownership_outlives_the_process(root: Path) -> None:
    """Who started a run is in the store: after a restart, a caller still sees only its own runs."""
    with running_server(root, keys=KEYS) as first:
        mine = httpx.post(f"{first.url}/v1/tools/echo/call", json={"name": "a"}, headers=ALICE).headers["x-run-id"]
        theirs = httpx.post(f"{first.url}/v1/tools/echo/call", json={"name": "b"}, headers=BOB).headers["x-run-id"]
    with running_server(root, keys=KEYS) as second:
        alice = {r["id"] for r in httpx.get(f"{second.url}/v1/runs", params={"limit": 500}, headers=ALICE).json()}
        assert mine in alice and theirs not in alice
        assert httpx.get(f"{second.url}/v1/runs/{theirs}", headers=ALICE).status_code == 404
        assert httpx.get(f"{second.url}/v1/runs/{theirs}/events", headers=ALICE).status_code == 404
        assert httpx.get(f"{second.url}/v1/runs/{theirs}", headers=BOB).json()["id"] == theirs
        assert httpx.get(f"{second.url}/v1/runs/{theirs}", headers=ADMIN).json()["principal"] == "bob"


def test_events_of_a_run_by_an_id_prefix(server: ServerProcess) -> None:
    run_id = httpx.post(f"{server.url}/v1/tools/echo/call", json={"name": "p"}, headers=ALICE).headers["x-run-id"]
    time.sleep(0.3)  # the run is over; let the hub's memory not be the only source: ask by prefix
    prefix = run_id[:20]
    listed = httpx.get(f"{server.url}/v1/runs/{prefix}/events", headers={**ALICE, "Accept": "application/json"})
    assert listed.status_code == 200 and [e["seq"] for e in listed.json()] == list(range(1, len(listed.json()) + 1))
    assert listed.json() and {e["run_id"] for e in listed.json()} == {run_id}
    streamed = httpx.get(f"{server.url}/v1/runs/{prefix}/events", headers=ALICE)
    assert streamed.headers["x-run-id"] == run_id and parse_sse(streamed.text)[-1]["event"] == "tool_call_result"


# ─── live runs are capped ──────────────────────────────────────────────────────────────


def test_live_runs_are_capped_per_key_and_per_service(server: ServerProcess) -> None:
    started: list[tuple[str, str, dict[str, str]]] = []
    try:
        for _ in range(3):
            started.append((*background_guarded(server, BOB), BOB))
        status, body, headers = start_guarded(server, BOB)
        assert status == 429 and body["error"]["code"] == "too_many_runs"
        assert "max_live_runs_per_key" in body["error"]["message"]
        assert int(headers["retry-after"]) >= 1
        for _ in range(2):  # the service cap is 5: alice may start two more
            started.append((*background_guarded(server, ALICE), ALICE))
        status, body, _ = start_guarded(server, ADMIN)
        assert status == 429 and "max_live_runs" in body["error"]["message"]
    finally:
        for run_id, call_id, headers in started:
            httpx.post(f"{server.url}/v1/runs/{run_id}/approvals/{call_id}", json={"approve": False}, headers=headers)
    deadline = time.monotonic() + 10
    while start_guarded(server, BOB)[0] == 429:  # a slot frees once a run has ended
        assert time.monotonic() < deadline
        time.sleep(0.1)


# ─── without keys: loopback peers only, whatever the Host header says ───────────────────


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_an_embedded_app_without_keys_refuses_non_loopback_peers(root: Path) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    port = free_port()
    script = textwrap.dedent(f"""
        import uvicorn
        from engine import Engine
        from engine.server import create_app
        app = create_app(Engine.from_dir({str(root)!r}), api_keys="", mcp=False)
        uvicorn.run(app, host="0.0.0.0", port={port}, log_level="warning")
    """)
    env = {k: v for k, v in os.environ.items() if k != "SKILLYARD_API_KEYS"}
    process = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                local = httpx.get(f"http://127.0.0.1:{port}/v1/tools", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        assert local.status_code == 200
        remote = httpx.get(f"http://{address}:{port}/v1/tools", headers={"Host": f"127.0.0.1:{port}"})
        assert remote.status_code == 403 and remote.json()["error"]["code"] == "peer_not_allowed"
        assert httpx.get(f"http://{address}:{port}/healthz", headers={"Host": "127.0.0.1"}).status_code == 403
    finally:
        process.terminate()
        process.wait(timeout=10)


# ─── a tool result no UTF-8 sink can carry ─────────────────────────────────────────────


def test_a_result_with_a_lone_surrogate_is_answered_recorded_and_counted(server: ServerProcess) -> None:
    answer = httpx.post(f"{server.url}/v1/tools/oddText/call", json={}, headers=ALICE)
    assert answer.status_code == 200 and answer.json()["data"] == "half a pair: \ufffd"
    run_id = answer.headers["x-run-id"]
    streamed = httpx.post(f"{server.url}/v1/tools/oddText/call", json={}, headers={**ALICE, "Accept": "text/event-stream"})
    assert parse_sse(streamed.text)[-1]["event"] == "tool_call_result"
    assert httpx.get(f"{server.url}/v1/runs/{run_id}", headers=ALICE).json()["status"] == "ok"
    ready = httpx.get(f"{server.url}/readyz", headers=ADMIN).json()
    assert ready["store_write_failures"].get("lone_surrogate", 0) >= 1
    assert "Traceback" not in server.log.read_text()

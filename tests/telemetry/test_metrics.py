"""Prometheus metrics scraped from a real `skillyard serve` and parsed with prometheus_client's
parser: GET /metrics for admin keys only, and --metrics-port on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

parser = pytest.importorskip("prometheus_client.parser")
import httpx  # noqa: E402

from server_helpers import free_port, running_server  # noqa: E402
from telemetry_support import PASSWORD, write_telemetry_project  # noqa: E402

ADMIN_KEY = "metrics-admin-key-0123456789abcdef0"
CALLER_KEY = "metrics-caller-key-0123456789abcdef"
KEYS = f"ops:admin:{ADMIN_KEY},app:caller:{CALLER_KEY}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CALLER = {"Authorization": f"Bearer {CALLER_KEY}"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


@pytest.mark.slow
def test_metrics_for_admins_count_calls_steps_models_and_sse_streams(tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p", "telemetry: {metrics: true}\n")
    with running_server(root, keys=KEYS, extra=("--no-store",)) as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert httpx.get(f"{server.url}/metrics", headers=CALLER).status_code == 403
        for text in ("one two", "three four five"):
            assert httpx.post(f"{server.url}/v1/tools/report3/call", json={"text": text}, headers=CALLER).status_code == 200
        httpx.post(f"{server.url}/v1/tools/login/call", json={"user": "bob", "password": PASSWORD}, headers=CALLER)
        for name in ("made-up-1", "made-up-2"):
            httpx.post(f"{server.url}/v1/tools/{name}/call", json={}, headers=CALLER)
        with httpx.stream("POST", f"{server.url}/v1/tools/nap/call", json={"seconds": 1.5},
                          headers={**CALLER, "Accept": "text/event-stream"}, timeout=30) as stream:
            during = samples(httpx.get(f"{server.url}/metrics", headers=ADMIN).text)
            stream.read()
        scraped = httpx.get(f"{server.url}/metrics", headers=ADMIN)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    assert PASSWORD not in scraped.text
    found = samples(scraped.text)
    assert value(during, "skillyard_sse_streams") == 1 and value(found, "skillyard_sse_streams") == 0
    assert value(during, "skillyard_live_runs") == 1
    assert value(found, "skillyard_tool_calls_total", tool="report3", code="ok") == 2
    assert value(found, "skillyard_tool_calls_total", tool="nap", code="ok") == 1
    assert value(found, "skillyard_tool_calls_total", tool="login", code="execution_error") == 1
    assert value(found, "skillyard_tool_calls_total", tool="(unknown)", code="unknown_tool") == 2  # no label per made-up name
    assert not any("made-up" in str(labels) for _, labels in found)
    assert value(found, "skillyard_tool_call_duration_seconds_count", tool="report3") == 2
    assert value(found, "skillyard_tool_call_duration_seconds_bucket", tool="report3", le="+Inf") == 2
    assert value(found, "skillyard_step_duration_seconds_count", skill="summarize", outcome="ok") == 2
    assert value(found, "skillyard_step_duration_seconds_count", skill="check", outcome="error") == 1
    assert value(found, "skillyard_model_requests_total", model="mock") == 2
    assert value(found, "skillyard_model_tokens_total", model="mock", type="output") > 0
    assert value(found, "skillyard_live_runs") == 0 and value(found, "skillyard_pending_approvals") == 0


@pytest.mark.slow
def test_metrics_port_serves_on_loopback_without_keys_and_the_store_failures_are_there(tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p")
    port = free_port()
    with running_server(root, keys=KEYS, extra=("--metrics-port", str(port))) as server:
        assert httpx.get(f"{server.url}/metrics", headers=ADMIN).status_code == 404  # telemetry.metrics is off: own port only
        assert httpx.post(f"{server.url}/v1/tools/report3/call", json={"text": "a b"}, headers=CALLER).status_code == 200
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics")
        log = server.log.read_text()
    assert f"Prometheus metrics on http://127.0.0.1:{port}/metrics" in log
    found = samples(scraped.text)
    assert value(found, "skillyard_tool_calls_total", tool="report3", code="ok") == 1
    assert "# TYPE skillyard_store_write_failures_total counter" in scraped.text  # with the store on (no failure yet)
    assert value(found, "skillyard_store_queue_depth") >= 0


def test_store_queue_depth_counts_the_events_the_writer_has_not_committed(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    from engine.runtime.events import Event
    from engine.store import open_store
    from engine.telemetry.metrics import Metrics, store_queue_depth

    store = open_store(str(tmp_path / "runs.db"))
    metrics = Metrics({}, queue_depth=store_queue_depth(store))
    try:
        store.flush()
        assert value(samples(generate_latest(metrics.registry).decode()), "skillyard_store_queue_depth") == 0
        with store.writer._lock:  # the writer cannot take a batch while this is held (nor can the listener spill)
            for seq in range(1, 8):
                store.listener(Event("progress", "run_depth", seq, 1000 + seq, "call_1", data={"message": "x"}))
            held = samples(generate_latest(metrics.registry).decode())
        store.flush()
        after = samples(generate_latest(metrics.registry).decode())
    finally:
        store.close()
    assert value(held, "skillyard_store_queue_depth") == 7
    assert value(after, "skillyard_store_queue_depth") == 0


@pytest.mark.slow
def test_a_taken_metrics_port_is_a_clear_error(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    root = write_telemetry_project(tmp_path / "p")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "engine.cli.main", "serve", "--dir", str(root), "--no-store",
                              "--port", str(free_port()), "--metrics-port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in out.stderr

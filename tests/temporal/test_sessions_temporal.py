"""A session's turns on the Temporal backend (issue 31 §1): the front door reads the history
from the store, the turn runs as the agent workflow on a worker, and the front door writes the
turn when the workflow ends; the next turn (another process) sends it to the model."""

from __future__ import annotations

from typing import Iterator

import pytest

from fake_llm_servers import FakeServer, call
from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import Setup
from test_temporal_agent import WIRE, chat, followed, guarded_setup

pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def setup(tmp_path, pg_url: str, temporal_address: str, server: FakeServer) -> Iterator[Setup]:  # noqa: F811
    made = guarded_setup(tmp_path, pg_url, temporal_address, server)
    try:
        yield made
    finally:
        made.stop()


def test_a_session_continues_across_turns_on_temporal(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[call("c1", "slowPipeline", {"text": "t1", "seconds": 0})]), WIRE.reply("First."),
                  WIRE.reply("Second."))
    setup.start_worker()
    for answer in ("First.", "Second."):
        front = chat(setup, "--yes", "--session", "on-temporal")
        stdout, stderr = front.communicate(timeout=180)
        assert front.returncode == 0, stderr
        assert followed(stdout)[-1]["data"]["answer"] == answer
    roles = [m["role"] for m in server.requests[2].body["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]

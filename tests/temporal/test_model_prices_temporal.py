"""Model prices on the Temporal backend: an agent run whose model turns run as activities on a
real `skillyard worker` (real dev server, real PostgreSQL, the real `openai` client against a
loopback server) costs the same as a local run: tokens × price, in `agent_done` and the
stored run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from fake_llm_servers import FakeServer, OpenAIWire, call, write_models
from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import Setup
from test_temporal_agent import guarded_setup

pytestmark = pytest.mark.slow  # every test here starts a process or a server

WIRE = OpenAIWire()
PRICES = {"input": 0.15, "output": 0.6}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def setup(tmp_path: Path, pg_url: str, temporal_address: str, server: FakeServer) -> Iterator[Setup]:  # noqa: F811
    made = guarded_setup(tmp_path, pg_url, temporal_address, server)
    write_models(made.root, {"fake": WIRE.model_entry(server.url, prices=PRICES)})
    try:
        yield made
    finally:
        made.stop()


EMBEDDED = textwrap.dedent("""
    import asyncio, json, sys
    from engine import Engine
    from engine.backends import attach_backend
    from engine.backends.temporal.agent_client import agent_for

    async def main():
        engine = Engine.from_dir(sys.argv[1], store=True)
        attach_backend(engine, "temporal")
        result = await agent_for(engine, engine.agent()).run("go")
        print(json.dumps({"usage": result.to_dict()["usage"], "cost_usd": result.usage.cost_usd}))

    asyncio.run(main())
""")


def test_an_agent_run_on_temporal_costs_its_tokens_times_the_prices(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[call("c1", "guarded", {"text": "a b c"})], usage=(900, 30)),
                  WIRE.reply("Three words.", usage=(1000, 12)))
    setup.start_worker()
    done = subprocess.run([*setup.command("chat", "count the words", "--yes"), "--backend", "temporal",
                           "--output", "events", "--quiet"], env=setup.env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    last = events[-1]
    expected = (1900 * 0.15 + 42 * 0.6) / 1_000_000
    assert last["type"] == "agent_done" and last["data"]["stop_reason"] == "answer"
    assert last["data"]["usage"] == {"input_tokens": 1900, "output_tokens": 42, "cost_usd": pytest.approx(expected)}
    from engine.store import open_store

    with open_store(setup.pg_url) as store:
        record = store.run(last["run_id"])
    assert record is not None and record.usage == {"input_tokens": 1900, "output_tokens": 42,
                                                    "cost_usd": pytest.approx(expected)}


def test_an_embedder_s_agent_result_on_temporal_carries_the_cost(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply("Hello.", usage=(400, 8)))
    setup.start_worker()
    done = subprocess.run([sys.executable, "-c", EMBEDDED, str(setup.root)], env=setup.env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    expected = (400 * 0.15 + 8 * 0.6) / 1_000_000
    assert got == {"usage": {"input_tokens": 400, "output_tokens": 8, "cost_usd": pytest.approx(expected)},
                   "cost_usd": pytest.approx(expected)}  # the workflow's result carries it back to the front door

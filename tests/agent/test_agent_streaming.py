"""The agent loop streams a model's answer only while someone watches the run; a model's
`stream:` in config/models.yaml forces either.

A watcher is a listener that shows events as they come: an `on_event` callback (the CLI
timeline, `Agent.stream`), an SSE follower. The store, metrics and traces are not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from fake_llm_servers import WIRES, FakeServer, write_project


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> Any:
    return WIRES[request.param]


def _ask(tmp_path: Path, fake: FakeServer, wire: Any, *, watched: bool, stream: bool | None = None,
         quiet_subscriber: bool = False) -> tuple[dict[str, Any], Any]:
    fake.requests.clear()
    fake.script(wire.reply("Hello there."))
    extra = {} if stream is None else {"stream": stream}
    engine = Engine.from_dir(write_project(tmp_path / "project", {"fake": wire.model_entry(fake.url, **extra)}))
    if quiet_subscriber:  # what metrics and traces are: they count events, nobody watches
        from engine.runtime.events import quiet

        engine.subscribe(quiet(lambda event: None))
    events: list[Any] = []
    result = asyncio.run(asyncio.wait_for(engine.agent("fake").run("hi", on_event=events.append if watched else None), 60))
    assert result.stop_reason == "answer" and result.answer == "Hello there.", result.error
    [request] = fake.requests
    return request.body, events


def test_nobody_watching_asks_for_one_plain_answer(tmp_path: Path, fake: FakeServer, wire: Any) -> None:
    body, _ = _ask(tmp_path, fake, wire, watched=False)
    assert not body.get("stream") and "stream_options" not in body


def test_a_quiet_subscriber_is_not_a_watcher(tmp_path: Path, fake: FakeServer, wire: Any) -> None:
    body, _ = _ask(tmp_path, fake, wire, watched=False, quiet_subscriber=True)
    assert not body.get("stream")


def test_a_watcher_gets_the_answer_streamed(tmp_path: Path, fake: FakeServer, wire: Any) -> None:
    body, events = _ask(tmp_path, fake, wire, watched=True)
    assert body["stream"] is True
    assert "".join(e.data["text"] for e in events if e.type == "model_text_delta") == "Hello there."


@pytest.mark.parametrize("stream, watched", [(True, False), (False, True)])
def test_the_models_stream_key_forces_either(tmp_path: Path, fake: FakeServer, wire: Any, stream: bool, watched: bool) -> None:
    body, events = _ask(tmp_path, fake, wire, watched=watched, stream=stream)
    assert bool(body.get("stream")) is stream
    if watched:  # a plain answer still reaches the watcher, whole
        assert [e.data["text"] for e in events if e.type == "model_text_delta"] == ["Hello there."]

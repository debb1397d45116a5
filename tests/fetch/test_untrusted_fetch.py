"""Fetched pages with lone surrogates or absurd nesting (issue 10 §5), against real loopback servers.

A JSON page may say `"\\ud800"`: valid JSON text, no valid Unicode. Its value reaches the
model, the events, SSE and the store with U+FFFD in place and a note; concurrent runs that
share the store with it are all recorded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterator

import orjson
import pytest

from engine import Engine
from engine.executors.fetch.parse import decode_text, parse_json, parse_json_noted
from fetch_support import LoopbackServer, fetch_project, send, serving
from store_support import assert_gap_free, query

LOOPBACK = ["127.0.0.0/8"]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def test_a_fetched_json_page_with_a_lone_surrogate_loses_no_run(server: LoopbackServer, tmp_path: Path) -> None:
    server.routes["/ok"] = lambda h: send(h, 200, b'{"title": "fine"}', "application/json")
    server.routes["/odd"] = lambda h: send(h, 200, b'{"title": "bad \\ud800 title", "items": ["\\udfff"]}', "application/json")
    fetch_project(tmp_path, {"parseMode": "json", "allowPrivateNetworks": LOOPBACK})
    db = tmp_path / "runs.db"
    engine = Engine.from_dir(tmp_path, store=db)

    async def main() -> list:
        calls = [engine.call_tool("readPage", {"url": server.url("/ok")}) for _ in range(20)]
        calls.insert(10, engine.call_tool("readPage", {"url": server.url("/odd")}))
        return await asyncio.gather(*calls)

    results = asyncio.run(main())
    engine.close()
    odd = results.pop(10)
    assert odd.ok and odd.data["content"] == {"title": "bad \ufffd title", "items": ["\ufffd"]}, odd
    orjson.dumps(odd.data)  # every listener can encode it
    assert "\ufffd" in odd.model_text()
    assert odd.data["notes"] and "U+FFFD" in odd.data["notes"][0], odd.data  # the replacement is said, not silent
    assert odd.data["notes"][0] in odd.model_text()
    for result in [*results, odd]:
        assert result.ok
        rows = assert_gap_free(db, result.run_id)
        assert rows[-1][1] == "tool_call_result"
    assert query(db, "SELECT COUNT(*) FROM runs WHERE status = 'ok'") == [(21,)]


def test_parse_json_replaces_surrogates_and_says_so() -> None:
    value, problem, note = parse_json_noted('{"a": "x\\ud800", "\\udc00k": [1], "ok": "\\ud83d\\ude00"}')
    assert value == {"a": "x\ufffd", "\ufffdk": [1], "ok": "😀"} and problem is None
    assert note is not None and "2 strings" in note and "U+FFFD" in note
    assert parse_json_noted('{"a": "\\ud83d\\ude00"}') == ({"a": "😀"}, None, None)


def test_json_nested_past_the_limit_is_given_as_text() -> None:
    text = "[" * 65 + "]" * 65
    value, problem = parse_json(text)
    assert value == text and problem is not None and "nested more than 64 levels deep" in problem
    value, problem = parse_json("[" * 50_000)
    assert value == "[" * 50_000 and problem is not None


def test_a_charset_that_turns_escapes_into_surrogates_is_not_used() -> None:
    text, charset = decode_text(b"caf\\xe9 \\ud800", "text/plain; charset=unicode_escape", complete=True)
    assert charset != "unicode-escape" and "\ud800" not in text
    text.encode("utf-8")
    text, charset = decode_text(b"616263", "text/plain; charset=hex", complete=True)  # bytes→bytes codec
    assert isinstance(text, str) and charset != "hex"

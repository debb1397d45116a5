"""Arguments that no JSON reader, UTF-8 encoder or recursive walker can take (issue 10 §5, §6).

Too deep nesting, huge numbers and lone surrogates reach the router as a dict (Python API,
HTTP, MCP) or as JSON text (a model): either way the call ends as `invalid_arguments` naming
the place, `call_tool` never raises, and every listener gets events it can encode.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import Engine, Event
from engine.safety.untrusted import (
    MAX_DEPTH,
    arguments_problem,
    find_problem,
    loads,
    nesting_problem,
    text_may_hide_problem,
)

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "router"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_dir(PROJECT)


def _nested(levels: int) -> dict[str, Any]:
    """An object `levels + 1` levels deep (the root and `levels` nested ones)."""
    root: dict[str, Any] = {"name": "x"}
    node = root
    for _ in range(levels):
        node["n"] = {}
        node = node["n"]
    return root


def _call(engine: Engine, args: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    result = asyncio.run(engine.call_tool("echo", args, on_event=events.append))
    return result, events


def _assert_refused(result: Any, events: list[Event], *fragments: str) -> None:
    assert not result.ok and result.error.code == "invalid_arguments", result.error
    for fragment in fragments:
        assert fragment in result.error.message, result.error.message
    for event in events:  # every listener can encode what it got (SSE and the store use orjson)
        orjson.dumps(event.data, default=str)
    assert [e.type for e in events] == ["tool_call_start", "tool_call_error"]


DEEP_TEXT = '{"name": "x", "n": ' + "[" * 1000 + "]" * 1000 + "}"
REFUSED: list[tuple[str, Any, tuple[str, ...]]] = [
    ("surrogate in a dict", {"name": "a\ud800b"}, ("/name", "lone UTF-16 surrogate")),
    ("surrogate in a key", {"name": "x", "k\udfff/": 1}, ("/k\ufffd~1", "lone UTF-16 surrogate")),
    ("surrogate escaped in text", '{"name": "\\ud800"}', ("/name", "lone UTF-16 surrogate")),
    ("low surrogate escaped in text", '{"name": ["ok", "\\uDC00x"]}', ("/name/1", "lone UTF-16 surrogate")),
    ("surrogate raw in text", '{"name": "\ud800"}', ("/name", "lone UTF-16 surrogate")),
    ("surrogate in UTF-8 bytes", '{"name": "\ud800"}'.encode("utf-8", "surrogatepass"), ("/name", "lone UTF-16 surrogate")),
    ("1,000 levels as a dict", _nested(1000), (f"nested more than {MAX_DEPTH} levels deep", "/n/n/n/n/…")),
    ("65 levels as a dict", _nested(MAX_DEPTH), (f"nested more than {MAX_DEPTH} levels deep",)),
    ("1,000 levels as text", DEEP_TEXT, (f"nested more than {MAX_DEPTH} levels deep",)),
    ("65 levels as text", json.dumps(_nested(MAX_DEPTH)), (f"nested more than {MAX_DEPTH} levels deep",)),
    ("10**5000 as an int", {"name": "x", "count": 10**5000}, ("/count", "more than 100 digits")),
    ("10**5000 as text", '{"name": "x", "count": 1' + "0" * 5000 + "}", ("5,001 digits",)),
    ("1e999 as text", '{"name": "x", "count": 1e999}', ("1e999",)),
    ("NaN as a float", {"name": "x", "count": float("nan")}, ("/count", "not a JSON number")),
]


@pytest.mark.parametrize("args, fragments", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_unfit_arguments_are_invalid_arguments_never_an_exception(engine: Engine, args: Any, fragments: tuple[str, ...]) -> None:
    result, events = _call(engine, args)
    _assert_refused(result, events, *fragments)


def test_the_pointer_to_a_deep_place_is_shortened_not_printed_whole(engine: Engine) -> None:
    root: dict[str, Any] = {"name": "x"}
    node = root
    for _ in range(1000):
        node["k" * 500] = {}
        node = node["k" * 500]
    result, _ = _call(engine, root)
    assert result.error.code == "invalid_arguments"
    assert len(result.error.message) < 600, len(result.error.message)
    assert result.error.details["errors"][0]["pointer"].count("/") < 12


def test_ordinary_arguments_still_pass(engine: Engine) -> None:
    for args in ({"name": "😀 ü", "count": 2}, '{"name": "\\ud83d\\ude00", "count": 2}', json.dumps(_nested(MAX_DEPTH - 2))):
        result, _ = _call(engine, args)
        # the nested one fails on the closed schema (additionalProperties), not on depth
        assert result.ok or "nested" not in result.error.message, result.error
    result, _ = _call(engine, '{"name": "\\ud83d\\ude00", "count": 12345678901234567890123}')
    assert result.ok and result.data["name"] == "😀", result


def test_the_helpers_report_what_and_where() -> None:
    assert find_problem({"a": [1, {"b": "\udc00"}]}).pointer == "/a/1/b"  # type: ignore[union-attr]
    assert nesting_problem(_nested(MAX_DEPTH - 1)) is None  # 64 levels
    assert "nested more than" in (nesting_problem(_nested(MAX_DEPTH)) or "")
    assert arguments_problem({"x": 1, "label": "bench"}) is None
    assert arguments_problem({"x": None}) is None  # a null makes it look closer, and it is fine
    assert arguments_problem({"x": 2**70}) is None  # beyond orjson's 64 bits, well within 100 digits
    assert arguments_problem({"x": -(10**100)}) is not None
    assert not text_may_hide_problem('{"a": [1, 2], "b": "plain ü"}')
    assert text_may_hide_problem('{"a": "\\uD800"}')
    with pytest.raises(ValueError, match="levels deep"):
        loads("[" * 100_000)

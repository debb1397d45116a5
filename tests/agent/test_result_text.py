"""A result's model text never raises, whatever data a tool returned."""

from __future__ import annotations

from engine import ToolResult


def test_data_no_json_writer_takes_becomes_a_note_not_a_traceback() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    for data in ({"n": 10**5000}, deep):
        result = ToolResult(True, "odd", "run_x", "call_x", data, None, {"duration_ms": 1})
        text = result.model_text()
        assert text.startswith("[odd succeeded") and "cannot be shown as JSON" in text

"""Skipping the redaction walk is only allowed when a schema proves no sensitive key can appear."""

from __future__ import annotations

import pytest

from engine.redaction import Redactor

CLOSED = {"type": "object", "properties": {"x": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": False}


@pytest.mark.parametrize(
    "schema, clean",
    [
        (CLOSED, True),
        ({"type": "string"}, True),
        ({"enum": ["a", "b"]}, True),
        ({**CLOSED, "additionalProperties": True}, False),  # open: anything may arrive
        ({"type": "object", "properties": {"x": {"type": "integer"}}}, False),  # open by default
        ({"type": "object", "properties": {"password": {"type": "string"}}, "additionalProperties": False}, False),
        ({"type": "object", "properties": {"inner": {"type": "object"}}, "additionalProperties": False}, False),
        ({"anyOf": [{"type": "string"}, {"type": "object"}]}, False),
        ({"$ref": "#/$defs/x"}, False),
        ({"type": "array", "items": {"type": "object"}}, False),
        ({}, False),
    ],
)
def test_schema_is_clean(schema: dict, clean: bool) -> None:
    assert Redactor().schema_is_clean(schema) is clean


def test_known_secrets_are_still_scrubbed_from_clean_data() -> None:
    scrubber = Redactor().for_run()
    scrubber({"password": "hunter2-secret"})  # seen once under a sensitive key
    assert scrubber.known_secrets({"note": "typed hunter2-secret twice"}) == {"note": "typed [REDACTED] twice"}

"""JSON Schema patterns with Unicode property escapes (issue 30 §5): valid ECMA-262, read by
jsonschema-rs, and now by the reference validator too (through `regress`, an ECMA-262 engine)
— the cases of the official JSON-Schema-Test-Suite (draft2020-12/optional/ecmascript-regex.json)
that use `\\p{…}` load, and both validators give the suite's verdict. What neither side reads
is still refused at load."""

from __future__ import annotations

from typing import Any

import pytest

from engine.lang.schema import CompiledSchema, schema_problems

ASCII = ("Les hivers de mon enfance etaient des saisons longues, longues. Nous vivions en trois lieux: "
         "l'ecole, l'eglise et la patinoire; mais la vraie vie etait sur la patinoire.")
LITERAL = ("Les hivers de mon enfance étaient des saisons longues, longues. Nous vivions en trois lieux: "
           "l'école, l'église et la patinoire; mais la vraie vie était sur la patinoire.")
UPPER = ("LES HIVERS DE MON ENFANCE ÉTAIENT DES SAISONS LONGUES, LONGUES. NOUS VIVIONS EN TROIS LIEUX: "
         "L'ÉCOLE, L'ÉGLISE ET LA PATINOIRE; MAIS LA VRAIE VIE ÉTAIT SUR LA PATINOIRE.")

LETTER = {"pattern": "\\p{Letter}cole"}
DIGIT = {"pattern": "^\\p{digit}+$"}
LETTER_KEYS = {"type": "object", "patternProperties": {"\\p{Letter}cole": True}, "additionalProperties": False}
DIGIT_KEYS = {"type": "object", "patternProperties": {"^\\p{digit}+$": True}, "additionalProperties": False}

# (schema, value, the suite's verdict)
SUITE: list[tuple[Any, Any, bool]] = [
    (LETTER, ASCII, True), (LETTER, LITERAL, True), (LETTER, UPPER, False),
    (DIGIT, "42", True), (DIGIT, "-%#", False), (DIGIT, "৪২", True),
    (LETTER_KEYS, {"l'ecole": "pas de vraie vie"}, True), (LETTER_KEYS, {"l'école": "pas de vraie vie"}, True),
    (LETTER_KEYS, {"L'ÉCOLE": "PAS DE VRAIE VIE"}, False),
    (DIGIT_KEYS, {"42": "life, the universe, and everything"}, True),
    (DIGIT_KEYS, {"-%#": "spending the year dead for tax reasons"}, False),
    (DIGIT_KEYS, {"৪২": "khajit has wares if you have coin"}, True),
]


@pytest.mark.parametrize("schema", [LETTER, DIGIT, LETTER_KEYS, DIGIT_KEYS], ids=str)
def test_the_suites_property_escapes_load(schema: Any) -> None:
    assert schema_problems(schema) == []


@pytest.mark.parametrize("schema, value, valid", SUITE, ids=lambda v: str(v)[:30])
def test_both_validators_give_the_suites_verdict(schema: Any, value: Any, valid: bool) -> None:
    compiled = CompiledSchema(schema)
    assert compiled.is_valid(value) is valid  # jsonschema-rs: the per-call verdict
    explained = compiled.violations(value)  # the reference: the messages of a failed call
    assert (explained == []) is valid, explained
    assert all(v.keyword in ("pattern", "additionalProperties", "false") for v in explained), explained


def test_a_failed_call_is_explained_by_the_pattern_not_by_a_regex_crash() -> None:
    (violation,) = CompiledSchema({"type": "string", "pattern": "^\\p{Lu}\\p{Ll}+$"}).check("émile")
    assert violation.keyword == "pattern" and "does not match" in violation.message


@pytest.mark.parametrize("pattern, why", [
    ("\\p{Nope}", "Invalid property name"),  # neither side reads it
    ("\\p{Greek}", "names a property ECMA-262 does not know"),  # jsonschema-rs only
    ("\\pL", "write \\p{L}"),  # jsonschema-rs only
    ("^\\1(a)$", "back-reference"),  # read differently by the two
])
def test_what_not_both_sides_read_alike_is_still_refused(pattern: str, why: str) -> None:
    (problem,) = schema_problems({"type": "string", "pattern": pattern})
    assert why in problem, problem

"""The `when:` language (engine/lang/conditions.py) and `??` fallbacks (engine/lang/mapping.py), unit level."""

from __future__ import annotations

from typing import Any

import pytest

from engine.lang.conditions import Condition, ConditionSyntaxError, check_types
from engine.lang.mapping import INDEX, ITEM, MISSING, MappingSyntaxError, compile_mapping, parse_value

ARGS = {"n": 3, "flag": True, "name": "ada", "tags": ["a", "b"], "obj": {"k": 1}, "zero": 0}
OUTPUTS = {"s": {"count": 2, "items": [{"kind": "bug"}, {"kind": "praise"}]}, ITEM: {"kind": "bug"}, INDEX: 4}


def holds(text: str, args: dict[str, Any] = ARGS, outputs: dict[str, Any] = OUTPUTS) -> bool:
    return Condition(text).holds(args, outputs)


@pytest.mark.parametrize("text, expected", [
    ("$toolArgs.n == 3", True),
    ("$toolArgs.n == 3.0", True),
    ("$toolArgs.flag == true", True),
    ("$toolArgs.flag == 1", False),  # JSON: true is not 1
    ("$toolArgs.zero == false", False),
    ("$toolArgs.n != 4 and $toolArgs.name == \"ada\"", True),
    ("$toolArgs.name == 'ada'", True),
    ("$toolArgs.n > 2 and $toolArgs.n <= 3 and not ($toolArgs.n < 3)", True),
    ("$toolArgs.name > \"b\"", False),
    ("$toolArgs.name > 1", False),  # incomparable at run time: false, never an exception
    ("\"a\" in $toolArgs.tags", True),
    ("\"c\" not in $toolArgs.tags", True),
    ("\"d\" in $toolArgs.name", True),
    ("\"k\" in $toolArgs.obj", True),
    ("$toolArgs.n in [1, 2, 3]", True),
    ("len($toolArgs.tags) == 2 and len($steps.s.output.items) > 1", True),
    ("len($toolArgs.missing) == 0", True),
    ("exists($toolArgs.missing)", False),
    ("exists($steps.s.output.count)", True),
    ("exists($steps.skipped.output)", False),
    ("$toolArgs.missing == null", True),
    ("$toolArgs.missing", False),
    ("$toolArgs.flag", True),
    ("$item.kind == \"bug\" and $index == 4", True),
    ("$steps.s.output.items[1].kind == \"praise\"", True),
    ("$steps.s.output.items[9].kind == \"praise\"", False),
    ("false or true and false", False),
    ("(false or true) and true", True),
])
def test_evaluation(text: str, expected: bool) -> None:
    assert holds(text) is expected


@pytest.mark.parametrize("text, where", [
    ("$toolArgs.n = 3", "use == to compare"),
    ("$toolArgs.n == ", "expected a value but found the end"),
    ("__import__('os').system('x')", "unknown word '__import__'"),
    ("$env.HOME == 1", "$env is not a reference"),
    ("$toolArgs.n == 3 $toolArgs.n", "join conditions with `and`"),
    ("exists(1)", "exists() takes a reference"),
    ("len($toolArgs.n", "expected ')'"),
    ("$toolArgs.n == True", "write true"),
    ("{{ 7 * 7 }}", "unexpected '{'"),
    ("$steps.a.out == 1", "must continue with .output"),
])
def test_syntax_errors_say_where(text: str, where: str) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        Condition(text)
    assert where in str(caught.value)


def test_text_is_never_evaluated_as_python_or_template() -> None:
    # a string that looks like code is only a string
    assert holds("$toolArgs.name != \"__import__('os')\"")
    assert holds("$toolArgs.name != \"{{ 7 * 7 }}\"")


TYPES = {"$toolArgs.n": frozenset({"integer"}), "$toolArgs.name": frozenset({"string"}),
         "$toolArgs.tags": frozenset({"array"}), "$toolArgs.flag": frozenset({"boolean"})}


def problems(text: str) -> list[str]:
    return [p.message for p in check_types(Condition(text), lambda ref: TYPES.get(ref.text))]


def test_type_check_at_load() -> None:
    assert problems('$toolArgs.n == "3"') == ['$toolArgs.n == "3" compares a number with a string: they are never equal']
    assert problems('$toolArgs.n > "3"') == ['$toolArgs.n > "3" orders a number against a string']
    assert problems("$toolArgs.name < 3") == ["$toolArgs.name < 3 orders a string against a number"]
    assert problems("$toolArgs.tags > 1") == ["$toolArgs.tags > 1 orders an array, which has no order"]
    assert problems("len($toolArgs.n) > 0") == ["len() of a number ($toolArgs.n)"]
    assert problems("$toolArgs.n in $toolArgs.name") == ["$toolArgs.n in $toolArgs.name looks for a number inside a string"]
    assert problems("$toolArgs.flag == 1") == ["$toolArgs.flag == 1 compares a boolean with a number: they are never equal"]
    # what makes sense passes
    assert problems('$toolArgs.n == 3.5 and $toolArgs.name >= "a" and "a" in $toolArgs.tags and $toolArgs.x == 1') == []
    assert problems("$toolArgs.n == null and len($toolArgs.tags) > 0") == []


def test_uses_item() -> None:
    assert Condition("$item.kind == \"bug\"").uses_item
    assert Condition("$index > 0").uses_item
    assert not Condition("$toolArgs.n > 0").uses_item


# ─── ?? ───────────────────────────────────────────────────────────────────────────────


def test_fallback_takes_the_first_present_value() -> None:
    resolve = compile_mapping({
        "a": "$toolArgs.missing ?? $toolArgs.n",
        "b": "$steps.skipped.output ?? []",
        "c": '$steps.s.output.nope ?? $toolArgs.missing ?? "none"',
        "d": "$toolArgs.missing ?? $steps.skipped.output",
        "e": '$toolArgs.name ?? "x"',
        "f": '$toolArgs.missing ?? {"k": [1, "a ?? b"]}',
    })
    assert resolve(ARGS, OUTPUTS) == {"a": 3, "b": [], "c": "none", "e": "ada", "f": {"k": [1, "a ?? b"]}}


def test_fallback_syntax_errors() -> None:
    with pytest.raises(MappingSyntaxError, match="only the last value"):
        parse_value('$toolArgs.a ?? "x" ?? $toolArgs.b')
    with pytest.raises(MappingSyntaxError, match="neither a reference nor a JSON literal"):
        parse_value("$toolArgs.a ?? none")
    with pytest.raises(MappingSyntaxError, match="on both sides"):
        parse_value("$toolArgs.a ??")


def test_a_skippable_step_reference_is_absent_not_an_error() -> None:
    resolve = compile_mapping({"x": "$steps.maybe.output.k", "y": 1}, skippable=frozenset({"maybe"}))
    assert resolve({}, {}) == {"y": 1}
    assert compile_mapping("$item.k")({}, {ITEM: {}}) is MISSING

"""Expectations a case's result must meet: compiled once per batch, checked per case.

A check is a mapping with one operator — equals, contains, matches, approx, schema, error,
judge — and an optional `path` (a JSON Pointer into the output). `judge` is checked by a
skill (judge.py); every other operator is checked here without running anything.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..errors import JudgeError, UsageError
from ..lang.schema import CompiledSchema, schema_problem_details
from ..runtime.result import ToolResult

OPERATORS = ("equals", "contains", "matches", "approx", "schema", "error", "judge")
_OPTIONS = {"path", "tolerance"}
_MISSING = object()

Verdict = dict[str, Any]  # {check, path?, ok, message, score?}
Judge = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]  # (skill, {case, output}) → {pass, score?, reason}


@dataclass(frozen=True, slots=True)
class Check:
    operator: str
    operand: Any
    path: str
    tolerance: float
    compiled: Any  # a re.Pattern for matches, a CompiledSchema for schema, else None


class ExpectationError(UsageError):
    """An expectation that cannot be checked; `index`: its position when `expect` is a list."""

    def __init__(self, reason: str, where: str = "", index: int | None = None):
        self.reason, self.index = reason, index
        label = "expect" if index is None else f"expect[{index}]"
        super().__init__(f"{where}: {label}: {reason}" if where else reason)


def compile_checks(expect: Any, where: str, known_skills: frozenset[str] = frozenset()) -> tuple[Check, ...]:
    """`expect` as written (None, a mapping, or a list of mappings) → checks; ExpectationError naming `where`."""
    if expect is None:
        return ()
    items = expect if isinstance(expect, list) else [expect]
    checks = []
    for index, item in enumerate(items):
        try:
            checks.append(_compile_one(item, known_skills))
        except ExpectationError as exc:
            raise ExpectationError(exc.reason, where, index if isinstance(expect, list) else None) from None
    return tuple(checks)


def _compile_one(item: Any, known_skills: frozenset[str]) -> Check:
    if not isinstance(item, dict):
        raise ExpectationError("an expectation is a mapping such as {path: /stats/words, equals: 15}")
    operators = [key for key in item if key in OPERATORS]
    unknown = sorted(set(item) - set(OPERATORS) - _OPTIONS)
    if unknown or len(operators) != 1:
        found = f"unknown key(s) {', '.join(unknown)}" if unknown else f"{len(operators)} operators"
        raise ExpectationError(f"{found}; use exactly one of {', '.join(OPERATORS)} (plus path, tolerance)")
    operator, operand = operators[0], item[operators[0]]
    path = item.get("path", "")
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise ExpectationError("path must be a JSON Pointer such as /stats/words (or left out for the whole output)")
    tolerance = item.get("tolerance", 0.0)
    if operator != "approx" and "tolerance" in item:
        raise ExpectationError("tolerance only goes with approx")
    return Check(operator, operand, path, _tolerance(tolerance), _compile_operand(operator, operand, known_skills))


def _tolerance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ExpectationError("tolerance must be a number ≥ 0 (the largest allowed difference)")
    return float(value)


def _compile_operand(operator: str, operand: Any, known_skills: frozenset[str]) -> Any:
    if operator == "matches":
        if not isinstance(operand, str):
            raise ExpectationError("matches takes a regular expression (a string)")
        try:
            return re.compile(operand)
        except re.error as exc:
            raise ExpectationError(f"matches: not a regular expression ({exc})") from None
    if operator == "schema":
        problems = schema_problem_details(operand) if isinstance(operand, (dict, bool)) else ["not an object"]
        if problems:
            raise ExpectationError(f"schema is not a valid JSON Schema ({_first(problems)})")
        return CompiledSchema(operand)
    if operator == "approx" and (isinstance(operand, bool) or not isinstance(operand, (int, float))):
        raise ExpectationError("approx takes a number")
    if operator == "contains" and not isinstance(operand, (str, int, float, bool, dict, list)):
        raise ExpectationError("contains takes a string (or an item of a list)")
    if operator in ("error", "judge") and (not isinstance(operand, str) or not operand):
        raise ExpectationError(f"{operator} takes a name ({'an error code' if operator == 'error' else 'a skill'})")
    if operator == "judge" and known_skills and operand not in known_skills:
        raise ExpectationError(f"judge: no skill {operand!r} in this project; declare it in skills.yaml")
    return None


def _first(problems: list[Any]) -> str:
    problem = problems[0]
    return str(getattr(problem, "message", problem))


async def check_result(checks: tuple[Check, ...], result: ToolResult, case: dict[str, Any], judge: Judge | None) -> list[Verdict]:
    """One verdict per check, in order; a failed call fails every check except `error`."""
    verdicts = []
    for check in checks:
        if check.operator == "error":
            verdicts.append(_error_verdict(check, result))
        elif not result.ok:
            code = result.error.code if result.error else "error"
            verdicts.append(_verdict(check, False, f"the call failed ({code}), so there is no output to check"))
        elif check.operator == "judge":
            verdicts.append(await _judge_verdict(check, result.data, case, judge))
        else:
            verdicts.append(_value_verdict(check, result.data))
    return verdicts


def _verdict(check: Check, ok: bool, message: str, **extra: Any) -> Verdict:
    verdict: Verdict = {"check": check.operator, "ok": ok, "message": message, **extra}
    if check.path:
        verdict["path"] = check.path
    return verdict


def _error_verdict(check: Check, result: ToolResult) -> Verdict:
    if result.ok:
        return _verdict(check, False, f"expected the call to fail with {check.operand}, but it succeeded")
    code = result.error.code if result.error else ""
    return _verdict(check, code == check.operand, f"failed with {code}" + ("" if code == check.operand else f", expected {check.operand}"))


def _value_verdict(check: Check, output: Any) -> Verdict:
    value = resolve_pointer(output, check.path)
    if value is _MISSING:
        return _verdict(check, False, f"the output has nothing at {check.path}")
    operator, operand = check.operator, check.operand
    if operator == "equals":
        ok = _same(value, operand)
        return _verdict(check, ok, "equal" if ok else f"got {_short(value)}, expected {_short(operand)}")
    if operator == "contains":
        ok = isinstance(value, str) and isinstance(operand, str) and operand in value or isinstance(value, list) and any(_same(v, operand) for v in value)
        return _verdict(check, ok, "contains it" if ok else f"{_short(value)} does not contain {_short(operand)}")
    if operator == "matches":
        ok = isinstance(value, str) and check.compiled.search(value) is not None
        return _verdict(check, ok, "matches" if ok else f"{_short(value)} does not match /{operand}/")
    if operator == "approx":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value - operand) <= check.tolerance
        return _verdict(check, ok, f"{value} within {check.tolerance:g} of {operand}" if ok else f"got {_short(value)}, expected {operand} ± {check.tolerance:g}")
    violations = check.compiled.check(value)  # schema
    message = "valid" if not violations else "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:3])
    return _verdict(check, not violations, message)


async def _judge_verdict(check: Check, output: Any, case: dict[str, Any], judge: Judge | None) -> Verdict:
    if judge is None:  # pragma: no cover - the runner always passes one
        return _verdict(check, False, "no judge available")
    try:
        answer = await judge(check.operand, {"case": case, "output": output})
    except JudgeError as exc:
        return _verdict(check, False, f"judge {check.operand} failed: {exc}")
    extra = {"score": answer["score"]} if isinstance(answer.get("score"), (int, float)) else {}
    return _verdict(check, answer.get("pass") is True, str(answer.get("reason", "")), judge=check.operand, **extra)


def resolve_pointer(value: Any, pointer: str) -> Any:
    """The value at a JSON Pointer (RFC 6901), or _MISSING."""
    if not pointer:
        return value
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _MISSING
    return value


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _short(value: Any, width: int = 80) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= width else text[: width - 1] + "…"

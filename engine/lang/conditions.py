"""The condition language of `when:`: parsed at load into a small AST, compiled into a closure.

    $toolArgs.includeBugs == true and len($steps.classify.output) > 0
    not exists($steps.bugs.output) or $item.kind in ["bug", "question"]

References (`$toolArgs…`, `$steps.<id>.output…`, `$item…`, `$index`), JSON literals (plus
'single-quoted' strings), `== != < <= > >=`, `in`, `not in`, `and`, `or`, `not`, parentheses,
`len(x)` and `exists(ref)`. A hand-written tokenizer and recursive-descent parser: the text is
never handed to Python's `eval` nor to a template engine, so a condition can only read values.

At run time an absent value (an optional argument not given, a skipped step, a missing path)
reads as null; comparisons of values of different JSON types are false, never an exception.
At load, `check_types` reports comparisons that can never make sense (a string with a number).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConditionSyntaxError
from .mapping import MISSING, MappingError, MappingSyntaxError, Reference, Resolver, compile_reference, parse_reference

Types = frozenset[str] | None  # JSON types a value may have; None: unknown (anything)


# ─── AST ────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Ref:
    ref: Reference
    pos: int


@dataclass(frozen=True, slots=True)
class Lit:
    value: Any
    pos: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # == != < <= > >= in "not in"
    left: Any
    right: Any
    pos: int


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # and / or
    operands: tuple[Any, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Any
    pos: int


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # len / exists
    arg: Any
    pos: int


Node = Ref | Lit | Compare | BoolOp | Not | Call


# ─── tokenizer ──────────────────────────────────────────────────────────────────────────

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<ref>\$(?:toolArgs|steps|item|index)(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*)
  | (?P<badref>\$[A-Za-z_]\w*)
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'[^']*')
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
  | (?P<word>[A-Za-z_]\w*)
    """,
    re.VERBOSE,
)
_WORDS = {"and", "or", "not", "in", "true", "false", "null", "len", "exists"}


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos] == "=":
                raise ConditionSyntaxError("a single = is not an operator: use == to compare", pos)
            raise ConditionSyntaxError(f"unexpected {text[pos]!r}", pos)
        kind = match.lastgroup
        value = match.group()
        if kind == "badref":
            raise ConditionSyntaxError(f"{value} is not a reference: use $toolArgs…, $steps.<id>.output…, $item… or $index", pos)
        if kind == "word" and value not in _WORDS:
            hint = " (write strings in quotes)" if value not in ("True", "False", "None") else f" (write {value.lower() if value != 'None' else 'null'})"
            raise ConditionSyntaxError(f"unknown word {value!r}{hint}", pos)
        if kind == "string":
            value = json.loads(value) if value.startswith('"') else value[1:-1]
        elif kind == "number":
            try:
                value = json.loads(value)
            except ValueError:  # more digits than Python converts (4,300)
                raise ConditionSyntaxError(f"a number of {len(value):,} characters is too long to read", pos) from None
        if kind != "space":
            out.append((kind or "", value, pos))
        pos = match.end()
    out.append(("end", None, len(text)))
    return out


# ─── parser ─────────────────────────────────────────────────────────────────────────────


MAX_NESTING = 64  # levels of ( ), not, len( ) / exists( ) and [ ]: as deep as JSON data may nest (untrusted.MAX_DEPTH)


class _Parser:
    """Recursive descent, with the nesting bounded: a condition 3,000 levels deep is a load error
    at its line, not a RecursionError (here, or in the tree walks that follow at load)."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0

    def nest(self, pos: int) -> None:
        """One level deeper (call `self.depth -= 1` on the way out); refused past MAX_NESTING."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ConditionSyntaxError(
                f"nested more than {MAX_NESTING} levels deep (parentheses, not, len()/exists(), lists); "
                "write it flatter, e.g. as a chain of and / or", pos)

    def peek(self, value: Any = None, kind: str | None = None) -> bool:
        tkind, tvalue, _ = self.tokens[self.at]
        return (kind is None or tkind == kind) and (value is None or (tvalue == value and tkind in ("op", "word")))

    def take(self) -> tuple[str, Any, int]:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def expect(self, value: str) -> None:
        kind, got, pos = self.take()
        if got != value or kind not in ("op", "word"):
            shown = "the end" if kind == "end" else repr(got)
            raise ConditionSyntaxError(f"expected {value!r} but found {shown}", pos)

    def parse(self) -> Node:
        node = self.or_expr()
        kind, value, pos = self.tokens[self.at]
        if kind != "end":
            raise ConditionSyntaxError(f"unexpected {value!r}; join conditions with `and` / `or`", pos)
        return node

    def or_expr(self) -> Node:
        pos = self.tokens[self.at][2]
        operands = [self.and_expr()]
        while self.peek("or"):
            self.take()
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else BoolOp("or", tuple(operands), pos)

    def and_expr(self) -> Node:
        pos = self.tokens[self.at][2]
        operands = [self.not_expr()]
        while self.peek("and"):
            self.take()
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else BoolOp("and", tuple(operands), pos)

    def not_expr(self) -> Node:
        if self.peek("not"):
            _, _, pos = self.take()
            self.nest(pos)
            node = Not(self.not_expr(), pos)
            self.depth -= 1
            return node
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        kind, value, pos = self.tokens[self.at]
        if kind == "op" and value in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return Compare(value, left, self.operand(), pos)
        if self.peek("in"):
            self.take()
            return Compare("in", left, self.operand(), pos)
        if self.peek("not") and self.tokens[self.at + 1][1] == "in":
            self.at += 2
            return Compare("not in", left, self.operand(), pos)
        return left

    def operand(self) -> Node:
        kind, value, pos = self.take()
        if kind == "ref":
            try:
                return Ref(parse_reference(value), pos)
            except MappingSyntaxError as exc:
                raise ConditionSyntaxError(str(exc), pos) from None
        if kind in ("number", "string"):
            return Lit(value, pos)
        if kind == "word" and value in ("true", "false", "null"):
            return Lit({"true": True, "false": False, "null": None}[value], pos)
        if kind == "word" and value in ("len", "exists"):
            self.expect("(")
            self.nest(pos)
            arg = self.or_expr()
            self.expect(")")
            self.depth -= 1
            if value == "exists" and not isinstance(arg, Ref):
                raise ConditionSyntaxError("exists() takes a reference, as in exists($steps.x.output)", pos)
            return Call(value, arg, pos)
        if kind == "op" and value == "(":
            self.nest(pos)
            node = self.or_expr()
            self.expect(")")
            self.depth -= 1
            return node
        if kind == "op" and value == "[":
            self.nest(pos)
            items = self.array_literal()
            self.depth -= 1
            return Lit(items, pos)
        shown = "the end of the condition" if kind == "end" else repr(value)
        raise ConditionSyntaxError(f"expected a value but found {shown}", pos)

    def array_literal(self) -> list[Any]:
        items: list[Any] = []
        while not self.peek("]"):
            node = self.operand()
            if not isinstance(node, Lit):
                raise ConditionSyntaxError("a list literal holds only literals", node.pos)
            items.append(node.value)
            if not self.peek("]"):
                self.expect(",")
        self.take()
        return items


# ─── the compiled condition ─────────────────────────────────────────────────────────────


class Condition:
    """A parsed `when:`: `holds(args, outputs)` decides it at run time."""

    def __init__(self, text: str):
        self.text = text
        self.tree = _Parser(text).parse()
        self.references = [node.ref for node in walk(self.tree) if isinstance(node, Ref)]
        self.uses_item = any(ref.source in ("item", "index") for ref in self.references)
        self._evaluate = _compile(self.tree)

    def holds(self, args: dict[str, Any], outputs: dict[str, Any]) -> bool:
        return _truthy(self._evaluate(args, outputs))


def walk(node: Node) -> list[Node]:
    """Every node of the tree, parents first."""
    out = [node]
    if isinstance(node, Compare):
        out += walk(node.left) + walk(node.right)
    elif isinstance(node, BoolOp):
        for operand in node.operands:
            out += walk(operand)
    elif isinstance(node, (Not, Call)):
        out += walk(node.operand if isinstance(node, Not) else node.arg)
    return out


Evaluator = Callable[[dict[str, Any], dict[str, Any]], Any]


def _compile(node: Node) -> Evaluator:
    if isinstance(node, Lit):
        value = node.value
        return lambda args, outputs: value
    if isinstance(node, Ref):
        return _reader(compile_reference(node.ref, absent_ok=True))
    if isinstance(node, Not):
        inner = _compile(node.operand)
        return lambda args, outputs: not _truthy(inner(args, outputs))
    if isinstance(node, BoolOp):
        parts = [_compile(operand) for operand in node.operands]
        if node.op == "and":
            return lambda args, outputs: all(_truthy(part(args, outputs)) for part in parts)
        return lambda args, outputs: any(_truthy(part(args, outputs)) for part in parts)
    if isinstance(node, Call):
        arg = _compile(node.arg)
        if node.name == "exists":
            return lambda args, outputs: arg(args, outputs) is not MISSING
        return lambda args, outputs: _length(arg(args, outputs))
    assert isinstance(node, Compare)
    left, right, test = _compile(node.left), _compile(node.right), _COMPARE[node.op]
    return lambda args, outputs: test(_value(left(args, outputs)), _value(right(args, outputs)))


def _reader(resolve: Resolver) -> Evaluator:
    def read(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        try:
            return resolve(args, outputs)
        except MappingError:
            return MISSING  # a missing path reads as absent
    return read


def _value(value: Any) -> Any:
    return None if value is MISSING else value


def _truthy(value: Any) -> bool:
    return value is not MISSING and bool(value)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, dict)) else 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _ordered(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        if (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str)):
            return test(a, b)
        return False
    return compare


def _contains(a: Any, b: Any) -> bool:
    if isinstance(b, list):
        return any(_equal(a, x) for x in b)
    if isinstance(b, str):
        return isinstance(a, str) and a in b
    if isinstance(b, dict):
        return isinstance(a, str) and a in b
    return False


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": _ordered(lambda a, b: a < b),
    "<=": _ordered(lambda a, b: a <= b),
    ">": _ordered(lambda a, b: a > b),
    ">=": _ordered(lambda a, b: a >= b),
    "in": _contains,
    "not in": lambda a, b: not _contains(a, b),
}


# ─── load-time type check ───────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class TypeProblem:
    message: str
    hint: str
    pos: int


_NUMBERS = frozenset({"integer", "number"})


def check_types(condition: Condition, types_of: Callable[[Reference], Types]) -> list[TypeProblem]:
    """Comparisons that can never make sense, from the JSON types of their operands.

    `types_of(reference)` gives what a reference can be (and reports a bad reference itself).
    """
    problems: list[TypeProblem] = []
    _infer(condition.tree, types_of, problems)
    return problems


def _infer(node: Node, types_of: Callable[[Reference], Types], problems: list[TypeProblem]) -> Types:
    if isinstance(node, Lit):
        return frozenset({_json_type(node.value)})
    if isinstance(node, Ref):
        return types_of(node.ref)
    if isinstance(node, (Not, BoolOp)):
        for operand in (node.operands if isinstance(node, BoolOp) else (node.operand,)):
            _infer(operand, types_of, problems)
        return frozenset({"boolean"})
    if isinstance(node, Call):
        arg = _infer(node.arg, types_of, problems)
        if node.name == "len":
            if arg is not None and not arg & {"string", "array", "object"}:
                problems.append(TypeProblem(f"len() of {_describe(arg)} ({_source(node.arg)})", "len() counts the items of an array, the keys of an object or the characters of a string", node.pos))
            return frozenset({"integer"})
        return frozenset({"boolean"})
    assert isinstance(node, Compare)
    left = _infer(node.left, types_of, problems)
    right = _infer(node.right, types_of, problems)
    problem = _compare_problem(node.op, left, right)
    if problem:
        problems.append(TypeProblem(f"{_source(node.left)} {node.op} {_source(node.right)} {problem}", _COMPARE_HINT[node.op], node.pos))
    return frozenset({"boolean"})


_COMPARE_HINT = {
    **{op: "compare values of the same type (quote a string, leave a number bare), or fix the reference" for op in ("==", "!=")},
    **{op: "order numbers with numbers and strings with strings" for op in ("<", "<=", ">", ">=")},
    "in": "the right side of `in` must be an array, an object or a string (with a string on the left)",
    "not in": "the right side of `not in` must be an array, an object or a string (with a string on the left)",
}


def _compare_problem(op: str, left: Types, right: Types) -> str | None:
    if op in ("==", "!="):
        if left is None or right is None or "null" in left or "null" in right:
            return None
        if _widen(left) & _widen(right):
            return None
        return f"compares {_describe(left)} with {_describe(right)}: they are never equal"
    if op in ("in", "not in"):
        if right is None:
            return None
        if not right & {"array", "object", "string"}:
            return f"looks inside {_describe(right)}"
        if right <= {"string", "object"} and left is not None and "string" not in left:
            return f"looks for {_describe(left)} inside {_describe(right)}"
        return None
    families = [_family(side) for side in (left, right) if side is not None]
    if any(family is None for family in families):
        side = left if _family(left) is None and left is not None else right
        return f"orders {_describe(side)}, which has no order"
    if len(set(families)) > 1:
        return f"orders {_describe(left)} against {_describe(right)}"
    return None


def _family(types: Types) -> str | None:
    if types is None:
        return "any"
    known = types - {"null"}
    if known and known <= _NUMBERS:
        return "number"
    if known == {"string"}:
        return "string"
    return None


def _widen(types: frozenset[str]) -> frozenset[str]:
    return types | _NUMBERS if types & _NUMBERS else types


def _describe(types: Types) -> str:
    if types is None:
        return "any value"
    names = {"integer": "a number", "number": "a number", "array": "an array", "object": "an object", "null": "null"}
    return " or ".join(sorted({names.get(t, f"a {t}") for t in types}))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _source(node: Node) -> str:
    if isinstance(node, Ref):
        return node.ref.text
    if isinstance(node, Lit):
        return json.dumps(node.value)
    if isinstance(node, Call):
        return f"{node.name}({_source(node.arg)})"
    return "(…)"

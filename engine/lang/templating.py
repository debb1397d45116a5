"""Jinja2 templates for prompt and template skills.

One sandboxed environment with StrictUndefined: templates come from the project's YAML, and
the values rendered into them are *data*. A tool argument such as `{{7*7}}` is inserted as
those seven characters; it is never parsed as template code.

Templates are parsed at link time (syntax errors, unknown filters and tests, and undeclared
variables are config errors)
and compiled on first use, then cached, so linking a large project stays fast.
"""

from __future__ import annotations

import difflib
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

import jinja2
from jinja2 import nodes
from jinja2.parser import Parser
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment

# What a dotted name can mean on the two objects nearly every lookup in a template meets: a
# JSON object (a dict: `stats.words`) and a for loop's `loop` (`loop.index`).
_DICT_ATTRIBUTES = frozenset(dir(dict))
_LOOP_ATTRIBUTES = frozenset(name for name in dir(LoopContext) if not name.startswith("_"))


class DataSandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with the same answers for `data.key` and `loop.index` reached without
    its detour: the sandbox first asks the dict for an attribute named like the key, which
    raises AttributeError (an exception per lookup), then checks the loop's public
    attributes one by one. Anything else goes through the sandbox's own checks."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        kind = type(obj)
        if kind is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if kind is LoopContext and attribute in _LOOP_ATTRIBUTES:
            return getattr(obj, attribute)
        return super().getattr(obj, attribute)


ENV = DataSandbox(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
)
# Names every template may use without declaring them.
BUILTIN_NAMES = frozenset(ENV.globals) | {"loop", "self", "varargs", "kwargs"}


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    line: int  # 1-based line inside the template
    message: str


# What makes text more than literal data for this environment: without any of these, a
# template parses to its text and reads no variable (no need to run the parser).
_MARKERS = tuple(
    marker
    for marker in (
        ENV.block_start_string,
        ENV.variable_start_string,
        ENV.comment_start_string,
        ENV.line_statement_prefix,
        ENV.line_comment_prefix,
    )
    if marker
)
# check_template's answers by source text: a project repeats templates (system prompts),
# and a reload re-checks the same ones. The environment is fixed, so the answer is too.
_CHECKED: dict[str, tuple[tuple[TemplateProblem, ...], frozenset[str]]] = {}
_CHECKED_MAX = 8192


def check_template(source: str) -> tuple[list[TemplateProblem], frozenset[str]]:
    """Parse without compiling: syntax problems, and the variables the template reads."""
    if not any(marker in source for marker in _MARKERS):
        return [], frozenset()
    found = _CHECKED.get(source)
    if found is None:
        found = _check(source)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[source] = found
    return list(found[0]), found[1]


def _check(source: str) -> tuple[tuple[TemplateProblem, ...], frozenset[str]]:
    try:
        # What ENV.parse does, less two things a check does not need: rewriting the
        # traceback of a syntax error, and tagging every node with the environment.
        body = Parser(ENV, source).subparse()
    except jinja2.TemplateSyntaxError as exc:
        return (TemplateProblem(exc.lineno or 1, exc.message or "syntax error"),), frozenset()
    return tuple(_unknown_filters_and_tests(body)), _read_names(body) - BUILTIN_NAMES


def _unknown_filters_and_tests(body: list[nodes.Node]) -> list[TemplateProblem]:
    """`{{ x | uper }}`, `{% if x is odd_number %}`: Jinja would only say so when rendering."""
    problems = []
    for node in _walk(body):
        if isinstance(node, nodes.Filter) and node.name not in ENV.filters:  # `{{ x | f }}` and `{% filter f %}`
            problems.append(TemplateProblem(node.lineno, f"unknown filter {node.name!r}{_did_you_mean(node.name, ENV.filters)}"))
        elif isinstance(node, nodes.Test) and node.name not in ENV.tests:
            problems.append(TemplateProblem(node.lineno, f"unknown test {node.name!r}{_did_you_mean(node.name, ENV.tests)}"))
    return sorted(problems, key=lambda p: p.line)


def _did_you_mean(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; use one of Jinja2's built-in ones ({', '.join(sorted(known)[:8])}, …)"


def _walk(body: list[nodes.Node]) -> Any:
    stack: list[Any] = list(body)
    while stack:
        node = stack.pop()
        yield node
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, nodes.Node):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, nodes.Node))


def read_variables(ast: nodes.Template) -> frozenset[str]:
    """Names the template reads and never assigns (`set`, `for`, macro parameters…).

    A plain walk of the parsed tree, ~20× cheaper than jinja2.meta (which runs the code
    generator). A name assigned anywhere counts as defined everywhere: it can miss an
    undeclared variable read before its `set`, never report a declared one.
    """
    return _read_names(ast.body)


def _read_names(body: list[nodes.Node]) -> frozenset[str]:
    loads: set[str] = set()
    stores: set[str] = set()
    name_type, node_type = nodes.Name, nodes.Node
    stack: list[Any] = list(body)
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        if isinstance(node, name_type):
            (loads if node.ctx == "load" else stores).add(node.name)
            continue
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, node_type):
                push(value)
            elif isinstance(value, list):
                extend(item for item in value if isinstance(item, node_type))
    return frozenset(loads - stores)


# The name a StrictUndefined error is about: `'x' is undefined`, `… has no attribute 'x'`,
# `… has no element 'x'`.
_MISSING_NAME = re.compile(r"^'([^']+)' is undefined$|has no (?:attribute|element) '?([^']+?)'?$")


class LazyTemplate:
    """A template compiled the first time it renders.

    `where(line)` says where a line of the template sits in the project's files
    (`skills.yaml:12:9`), and `schema` is the input schema its variables come from: both
    serve `explain`, the message of a render error, and cost nothing until one happens.
    """

    __slots__ = ("source", "_compiled", "_lock", "where", "schema")

    def __init__(self, source: str, where: Callable[[int], Any] | None = None, schema: Any = None):
        self.source = source
        self._compiled: jinja2.Template | None = None
        self._lock = threading.Lock()
        self.where = where
        self.schema = schema

    def explain(self, exc: jinja2.TemplateError) -> str:
        """The render error with its place (file:line:col, template line) and, for a name the
        input does not have, the closest name the input schema declares."""
        line = _template_line(exc)
        text = str(exc.message or exc)
        if line is not None:
            place = f"template line {line}"
            if self.where is not None:
                place = f"{self.where(line)}, {place}"
            text += f" ({place})"
        found = _MISSING_NAME.search(str(exc.message or ""))
        if isinstance(exc, jinja2.UndefinedError) and found:
            name = found.group(1) or found.group(2)
            close = difflib.get_close_matches(name, sorted(_schema_names(self.schema)), n=1, cutoff=0.6)
            if close:
                text += f"; did you mean `{close[0]}`?"
        return text

    def render(self, context: dict[str, Any]) -> str:
        compiled = self._compiled
        if compiled is None:
            with self._lock:
                if self._compiled is None:
                    template = ENV.from_string(self.source)
                    # Jinja keeps a template's globals as a ChainMap over the environment's,
                    # which every render copies key by key, twice; ENV.globals never change.
                    template.globals = dict(template.globals)
                    self._compiled = template
                compiled = self._compiled
        return compiled.render(context)


def _template_line(exc: BaseException) -> int | None:
    """The template line a render error happened on (Jinja puts it in a `<template>` frame)."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _schema_names(schema: Any) -> set[str]:
    """Every property name a schema declares, at any depth (what a template may read)."""
    names: set[str] = set()
    stack = [schema]
    while stack and len(names) < 10_000:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(key for key in properties if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names

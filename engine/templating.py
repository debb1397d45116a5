"""Jinja2 templates for prompt and template skills.

One sandboxed environment with StrictUndefined: templates come from the project's YAML, and
the values rendered into them are *data*. A tool argument such as `{{7*7}}` is inserted as
those seven characters; it is never parsed as template code.

Templates are parsed at link time (syntax errors and undeclared variables are config errors)
and compiled on first use, then cached, so linking a large project stays fast.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ENV = ImmutableSandboxedEnvironment(
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


def check_template(source: str) -> tuple[list[TemplateProblem], frozenset[str]]:
    """Parse without compiling: syntax problems, and the variables the template reads."""
    try:
        ast = ENV.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return [TemplateProblem(exc.lineno or 1, exc.message or "syntax error")], frozenset()
    return [], read_variables(ast) - BUILTIN_NAMES


def read_variables(ast: nodes.Template) -> frozenset[str]:
    """Names the template reads and never assigns (`set`, `for`, macro parameters…).

    A plain walk of the parsed tree, ~20× cheaper than jinja2.meta (which runs the code
    generator). A name assigned anywhere counts as defined everywhere: it can miss an
    undeclared variable read before its `set`, never report a declared one.
    """
    loads: set[str] = set()
    stores: set[str] = set()
    for node in ast.find_all(nodes.Name):
        (loads if node.ctx == "load" else stores).add(node.name)
    return frozenset(loads - stores)


class LazyTemplate:
    """A template compiled the first time it renders."""

    __slots__ = ("source", "_compiled", "_lock")

    def __init__(self, source: str):
        self.source = source
        self._compiled: jinja2.Template | None = None
        self._lock = threading.Lock()

    def render(self, context: dict[str, Any]) -> str:
        compiled = self._compiled
        if compiled is None:
            with self._lock:
                if self._compiled is None:
                    self._compiled = ENV.from_string(self.source)
                compiled = self._compiled
        return compiled.render(context)

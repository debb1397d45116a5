"""The templates' sandbox: its fast path for `data.key` and `loop.index` answers exactly what
Jinja's ImmutableSandboxedEnvironment answers, unsafe attributes included."""

from __future__ import annotations

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.lang.templating import ENV

REFERENCE = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
CONTEXT = {"d": {"a": 1, "items": "shadowed", "b": {"c": 3}, "": 0}, "rows": [{"w": "x"}, {"w": "y"}],
           "s": "{0.__class__}"}
SOURCES = [
    "{{ d.a }} {{ d.b.c }}",  # keys
    "{{ d.items }}",  # a dict method wins over a key of the same name, as in Jinja
    "{{ d.keys() | list }} {{ d.get('a') }}",
    "{{ d.missing }}",  # undefined: StrictUndefined raises
    "{{ d.missing is defined }} {{ d.missing | default(5) }}",
    "{{ d.pop }}", "{{ d.update }}", "{{ d.setdefault }}",  # mutating methods: unsafe
    "{{ d.__class__ }}", "{{ d.__init__ }}", "{{ d._private }}",  # internals: unsafe
    "{% for r in rows %}{{ loop.index }}/{{ loop.length }} {{ loop.first }} {{ r.w }} {{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for r in rows %}{{ loop.__class__ }}{% endfor %}",
    "{% for r in rows %}{{ loop._iterator }}{% endfor %}",
    "{{ s.format(d) }}",  # str.format stays sandboxed
]


def _render(env: jinja2.Environment, source: str) -> str:
    try:
        return "ok: " + env.from_string(source).render(CONTEXT)
    except Exception as exc:  # the kind and message are what a user sees
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("source", SOURCES)
def test_same_answer_as_jinja_sandbox(source: str) -> None:
    assert _render(ENV, source) == _render(REFERENCE, source)


def test_unsafe_stays_unsafe() -> None:
    assert _render(ENV, "{{ d.pop }}").startswith("SecurityError")
    assert _render(ENV, "{{ d.__class__ }}").startswith("SecurityError")
    assert _render(ENV, "{{ s.format(d) }}").startswith("SecurityError")

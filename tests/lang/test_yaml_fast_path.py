"""The fast load path (plain data, positions built on demand) against the full builder.

`load_yaml_text` first builds plain documents without positions and falls back to the full
builder for anything else. Both must give the same data, type for type, and the positions
built later from the text must be exactly the ones the full builder records.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from engine.lang.templating import BUILTIN_NAMES, ENV, TemplateProblem, check_template
from engine.spec import yaml_source
from engine.spec.yaml_builder import Builder, events
from engine.spec.yaml_source import _SLOW, SourceMap, YamlLoadError, _fast_build, load_yaml_text

PLAIN_DOCUMENTS = [
    "",
    "# only a comment\n",
    "42\n",
    "just text\n",
    "[1, 2, 3]\n",
    "- a\n- b\n-\n- ~\n",
    """
    ints: [0, -7, +12, 0x1F, 0o17, 017, 1_000, 0b101, 190:20:30]
    floats: [1.5, -0.0, 6.02e+23, .inf, -.Inf, .NaN, 1_0.5, 190:20:30.15]
    bools: [yes, No, on, OFF, true, False, y, n]
    nulls: [null, Null, ~, ]
    dates: [2001-12-14, 2001-12-14t21:59:43.10-05:00]
    strings: ['1', "true", 'null', "a\\nb", plain words, 1.2.3, "=", '<<']
    """,
    """
    off: a
    on: b
    yes: c
    null: d
    1: e
    2.5: f
    ~: g
    "quoted key": h
    ? explicit
    : i
    """,
    """
    skills:
      one:
        kind: template
        template: |
          line one {{ x }}
          line two
        folded: >
          folded
          text

          more
        flow: {a: 1, b: [x, y, {c: d}], e: }
      two:
        description: 'it''s'
        empty: {}
        none: []
    """,
    "a:\n  b:\n    c:\n      d: [[[[1]]]]\n",
    "---\nx: 1\n...\n",
    "key: 'value with: colon'\nurl: http://example.com/a#b\ntime: 12:30\n",
]

SLOW_DOCUMENTS = [
    "a: &x 1\nb: *x\n",
    "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
    "a: !!str 1\n",
    "a: ! 1\n",
    "a: !!python/object/apply:os.system [ls]\n",
    "a: 1\na: 2\n",
    "a: 1\n---\nb: 2\n",
    "? [a, b]\n: c\n",
    "? {a: b}\n: c\n",
    "a: =\n",
    "<<: {a: 1}\n",
    "x: " + "[" * 70 + "]" * 70 + "\n",
    "a: [1, 2\n",
    "a: b: c\n",
    "\ta: 1\n",
]


def _strict(value: Any) -> Any:
    """A comparable form that tells True from 1 and 1.0 from 1, and nan from nan."""
    if isinstance(value, dict):
        return ("dict", [(key, _strict(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [_strict(item) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def _full(text: str) -> tuple[Any, SourceMap]:
    source = SourceMap("f.yaml", lines=text.splitlines())

    def fail(message: str, hint: str = "", line: int = 0, col: int = 0) -> Exception:
        return AssertionError(f"{line}:{col}: {message}")

    return Builder(source, fail).build(events(text)), source


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


@pytest.mark.parametrize("text", [_dedent(t) for t in PLAIN_DOCUMENTS])
def test_fast_path_builds_what_the_full_builder_builds(text: str) -> None:
    eager: dict[Any, Any] = {}
    fast = _fast_build(text, eager)
    assert fast is not _SLOW
    full, source = _full(text)
    assert _strict(fast) == _strict(full)
    for path, mark in eager.items():  # the entry names' positions, kept while loading
        assert source.keys[path] == mark


@pytest.mark.parametrize("text", SLOW_DOCUMENTS)
def test_anything_beyond_plain_data_takes_the_full_builder(text: str) -> None:
    assert _fast_build(text, {}) is _SLOW


@pytest.mark.parametrize("text", [_dedent(t) for t in PLAIN_DOCUMENTS[5:]])
def test_positions_built_on_demand_are_the_full_builders(text: str) -> None:
    data, lazy = load_yaml_text(text, "f.yaml")
    full, eager = _full(text)
    assert _strict(data) == _strict(full)
    assert lazy._positions is None  # nothing built until asked
    assert lazy.values == eager.values
    assert lazy.keys == eager.keys
    assert lazy.aliases == eager.aliases
    assert lazy.lines == text.splitlines()


def test_lazy_positions_locate_like_eager_ones() -> None:
    text = _dedent(PLAIN_DOCUMENTS[8])
    _, lazy = load_yaml_text(text, "f.yaml")
    _, eager = _full(text)
    for path in list(eager.values) + list(eager.keys):
        for key in (False, True):
            assert lazy.locate(path, key=key) == eager.locate(path, key=key)
    assert lazy.block_location(("skills", "one", "template"), 2) == eager.block_location(("skills", "one", "template"), 2)


def test_entry_name_positions_need_no_full_build() -> None:
    text = "tools:\n  a:\n    description: x\n  b:\n    description: y\n"
    _, source = load_yaml_text(text, "tools.yaml")
    assert str(source.locate(("tools", "b"), key=True)) == "tools.yaml:4:3"
    assert source._positions is None
    assert str(source.locate(("tools", "b", "description"))) == "tools.yaml:5:18"
    assert source._positions is not None


def test_errors_are_the_full_builders() -> None:
    with pytest.raises(YamlLoadError) as caught:
        load_yaml_text("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert str(caught.value.issue.location) == "f.yaml:3:1"
    assert "duplicate key 'a'" in caught.value.issue.message


def test_the_large_benchmark_project_takes_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))  # bench/ sits beside tests/
    from bench.projects import write_large_project

    write_large_project(tmp_path, 40, module_prefix="bench_fast_path_40")
    files = sorted(tmp_path.glob("*/*.yaml"))
    assert files
    for file in files:
        text = file.read_text(encoding="utf-8")
        fast = _fast_build(text, {})
        assert fast is not _SLOW, file
        assert _strict(fast) == _strict(_full(text)[0])


def test_the_plain_scalar_cache_is_bounded() -> None:
    assert len(yaml_source._PLAIN) <= 100_000


# ─── template checks ────────────────────────────────────────────────────────────────────


def _reference_check(source: str) -> tuple[list[TemplateProblem], frozenset[str]]:
    """What check_template answered before its shortcuts: ENV.parse and a find_all walk."""
    import jinja2
    from jinja2 import nodes

    try:
        ast = ENV.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return [TemplateProblem(exc.lineno or 1, exc.message or "syntax error")], frozenset()
    loads: set[str] = set()
    stores: set[str] = set()
    for node in ast.find_all(nodes.Name):
        (loads if node.ctx == "load" else stores).add(node.name)
    return [], frozenset(loads - stores) - BUILTIN_NAMES


TEMPLATES = [
    "",
    "no markers at all } {x} %}",
    "{{ x",
    "{% if a %}",
    "{% endif %}",
    "{{ 1 +* 2 }}",
    "line\n{{ a }\n",
    "one\ntwo\n{% for %}\n",
    "{# comment {{ hidden }} #}{{ shown }}",
    "{% raw %}{{ y }}{% endraw %}",
    "{% for a in b %}{{ a.c }}{{ d|e(f=g) }}{{ loop.index }}{% endfor %}",
    "{% set q = 1 %}{{ q }}{{ r }}",
    "{{ {'a': b, 'c': [d, e]} }}",
    "{% macro m(x, y=z) %}{{ x }}{{ w }}{% endmacro %}{{ m(1) }}",
    "{{ a if b else c }}{{ ns.x }}",
    "{% set ns = namespace(a=1) %}{% set ns.a = v %}",
    "{% call m() %}{{ caller_x }}{% endcall %}",
    "{% filter upper %}{{ t }}{% endfilter %}",
    "{% with p = q %}{{ p }}{% endwith %}",
    "{{ a[b] }}{{ c.d(e, *f, **g) }}{{ range(3) | list }}",
    "{% if confidence is defined %}{{ confidence }}{% if confidence > 10 %} (large){% endif %}{% endif %}",
]


@pytest.mark.parametrize("source", TEMPLATES)
def test_template_check_answers_like_a_full_parse(source: str) -> None:
    assert check_template(source) == _reference_check(source)
    assert check_template(source) == _reference_check(source)  # again, from the cache


def test_template_check_answers_are_not_shared_mutable_lists() -> None:
    problems, _ = check_template("{{ broken")
    problems.clear()
    assert check_template("{{ broken")[0]


# ─── link: `$toolArgs` checks replayed from the workflow's own walk ────────────────────

_FLOW_PROJECT = {
    "skills.yaml": """
skills:
  pair:
    kind: template
    input:
      type: object
      properties:
        a: {type: integer}
        b: {type: object, properties: {c: {type: string}}, required: [c]}
        items: {type: array, items: {type: string}}
      required: [a, b]
    output: {type: object}
    template: '{"a": {{ a }}}'
""",
    "workflows.yaml": """
workflows:
  flow:
    steps:
      - id: one
        skill: pair
        input:
          a: $toolArgs.a
          b: {c: $toolArgs.name.first}
          items: [$toolArgs.tag, literal, '$toolArgs.tags[0]']
      - id: two
        skill: pair
        input: {a: $steps.one.output.a, b: $toolArgs.b}
    output: {x: $toolArgs.a, y: $steps.two.output}
  broken:
    steps:
      - id: one
        skill: nowhere
        input: {a: $toolArgs.a}
""",
    "tools.yaml": """
tools:
  good:
    description: fits
    workflow: flow
    parameters:
      type: object
      properties:
        a: {type: integer}
        name: {type: object, properties: {first: {type: string}}, required: [first]}
        tag: {type: string}
        tags: {type: array, items: {type: string}}
        b: {type: object, properties: {c: {type: string}}, required: [c]}
      required: [a, name, b]
  loose:
    description: optional and mistyped arguments
    workflow: flow
    parameters:
      type: object
      properties:
        a: {type: string}
        name: {type: string}
        tags: {type: object}
  other:
    description: runs the broken workflow
    workflow: broken
    parameters: {type: object, properties: {}}
""",
}


def test_tool_argument_checks_replayed_from_the_workflow_walk_match_a_fresh_walk(tmp_path: Path) -> None:
    from engine.errors import IssueCollector
    from engine.link import linker as link
    from engine.spec.loader import load_specs

    for name, text in _FLOW_PROJECT.items():
        (tmp_path / name).write_text(text, encoding="utf-8")

    def issues(replay: bool) -> list[str]:
        collector = IssueCollector()
        linker = link._Linker(load_specs(tmp_path, collector), collector)
        if not replay:
            linker.tool_arg_sites = _NeverStored()
        linker.link()
        return [str(issue) for issue in collector.issues]

    replayed, walked = issues(True), issues(False)
    assert replayed == walked
    assert any("tool 'loose'" in text for text in replayed)
    assert any("declares no parameter 'tag'" in text for text in replayed)
    assert any("uses unknown skill 'nowhere'" in text for text in replayed)


class _NeverStored(dict):  # type: ignore[type-arg]
    def __setitem__(self, key: Any, value: Any) -> None:
        pass

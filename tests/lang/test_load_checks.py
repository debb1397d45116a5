"""Issue 16 §5 (part): more mistakes caught at load, at their line, with a fix.

- unknown JSON Schema keywords (`minLenght` → "did you mean minLength?"): a warning;
- unknown Jinja filters and tests: a load error at the template's line;
- a YAML plain value holding `: ` that broke the mapping: "quote the value";
- at call time, a fetch refused for a private address names `allowPrivateNetworks`.
"""

from __future__ import annotations

import socket

import pytest

from conftest import WriteProject
from engine import ConfigError, Engine
from engine.errors import IssueCollector, Location
from engine.lang.schema_keywords import unknown_keywords, warn_unknown_keywords
from engine.link.linker import load_project
from engine.spec.loader import load_specs
from secrets_support import skillyard

# ─── unknown JSON Schema keywords ───────────────────────────────────────────────────────


def test_unknown_keywords_are_found_where_schemas_are_with_a_suggestion() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLenght": 1},  # a typo
            "minLenght": {"type": "integer"},  # a property *named* like the typo: a name, not a keyword
            "tags": {"type": "array", "items": {"type": "string", "maxlength": 5}},
            "kind": {"enum": [{"minLenght": 1}], "default": {"requried": 1}, "examples": [{"typ": 1}]},  # data
            "when": {"anyOf": [{"type": "string", "fromat": "date"}, {"type": "null"}]},
        },
        "$defs": {"point": {"type": "object", "additionalproperties": False}},
        "requried": ["name"],
        "nullable": True,
        "x-vendor": {"anything": 1},
    }
    found = {(u.path, u.hint) for u in unknown_keywords(schema)}
    assert found == {
        (("properties", "name", "minLenght"), "did you mean minLength?"),
        (("properties", "tags", "items", "maxlength"), "did you mean maxLength?"),
        (("properties", "when", "anyOf", 0, "fromat"), "did you mean format?"),
        (("$defs", "point", "additionalproperties"), "did you mean additionalProperties?"),
        (("requried",), "did you mean required?"),
        (("nullable",), 'allow null in the type instead: type: [string, "null"]'),
    }
    assert unknown_keywords({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}) == []
    assert unknown_keywords(True) == [] and unknown_keywords({"$comment": "x", "definitions": {}}) == []


def test_a_comma_that_cut_a_flow_value_is_named() -> None:
    """`{type: string, description: The role, in a few words}` makes a key `in a few words`."""
    (unknown,) = unknown_keywords({"type": "string", "description": "The role", "in a few words": None})
    assert unknown.keyword == "in a few words" and "quote that value" in unknown.hint


SKILLS_WITH_TYPOS = """
    skills:
      greet:
        kind: template
        input:
          type: object
          properties:
            name: {type: string, minLenght: 1}
            tags:
              type: array
              items: {type: string, maxlength: 5}
          requried: [name]
        template: Hello {{ name }}
"""


@pytest.mark.slow
def test_each_unknown_keyword_is_warned_at_its_own_line(write_yaml_project: WriteProject) -> None:
    root = write_yaml_project({"skills.yaml": SKILLS_WITH_TYPOS})
    issues = IssueCollector()
    specs = load_specs(root, issues)
    assert issues.issues == []
    entry = specs.skills["greet"]
    warned: list[tuple[Location, str, str]] = []
    warn_unknown_keywords(entry, "input", entry.spec.input, lambda *w: warned.append(w))
    assert [(str(w[0]), w[2]) for w in warned] == [
        ("skills.yaml:7:30", "did you mean minLength?"),
        ("skills.yaml:10:33", "did you mean maxLength?"),
        ("skills.yaml:11:7", "did you mean required?"),
    ]
    assert warned[0][1] == "unknown JSON Schema keyword 'minLenght': it is ignored, so it checks nothing (in 'input' of skill 'greet')"
    # a warning, not an error: the project loads and runs, and link reports the same warnings
    project = load_project(root)
    assert project.skills["greet"] is not None
    assert [(str(w.location), w.hint) for w in project.warnings] == [(str(w[0]), w[2]) for w in warned]  # type: ignore[attr-defined]
    done = skillyard("validate", str(root), cwd=root)
    assert done.returncode == 0 and "skills.yaml:7:30" in done.stdout + done.stderr and "did you mean minLength?" in done.stdout + done.stderr


# ─── unknown Jinja filters and tests ────────────────────────────────────────────────────


TEMPLATES = """
    skills:
      greet:
        kind: template
        input: {type: object, properties: {name: {type: string}, n: {type: integer}}}
        template: |
          Hello {{ name | uper }}!
          {% if n is odd_number %}odd{% endif %}
          {% filter wordcount2 %}x{% endfilter %}
          {{ name | upper | trim }} {% if n is odd %}fine{% endif %}
      ask:
        kind: prompt
        input: {type: object, properties: {name: {type: string}}}
        system: "You greet {{ name | capitalise }}."
        user: Say hello.
"""


@pytest.mark.slow
def test_unknown_filters_and_tests_are_load_errors_at_their_line(write_yaml_project: WriteProject) -> None:
    root = write_yaml_project({"skills.yaml": TEMPLATES})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    found = [(str(i.location), i.message.split(": ", 1)[1]) for i in caught.value.issues]
    assert found == [
        ("skills.yaml:6:7", "unknown filter 'uper'; did you mean 'upper'?"),
        ("skills.yaml:7:7", "unknown test 'odd_number'; did you mean 'number'?"),
        ("skills.yaml:8:7", "unknown filter 'wordcount2'; did you mean 'wordcount'?"),
        ("skills.yaml:13:13", "unknown filter 'capitalise'; did you mean 'capitalize'?"),
    ]
    done = skillyard("validate", str(root), cwd=root)
    assert done.returncode == 2 and "did you mean 'upper'?" in done.stderr and "Traceback" not in done.stderr


def test_a_filter_nobody_resembles_lists_some_that_exist(write_yaml_project: WriteProject) -> None:
    root = write_yaml_project({"skills.yaml": """
        skills:
          t:
            kind: template
            input: {type: object, properties: {x: {type: string}}}
            template: "{{ x | zzzqqq }}"
    """})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    (issue,) = caught.value.issues
    assert "unknown filter 'zzzqqq'; use one of Jinja2's built-in ones (abs, attr," in issue.message


# ─── a YAML value holding ': ' ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("tools_yaml", "where", "hint"),
    [
        ("tools:\n  x:\n    description: Fetch a page: returns text  # why\n    workflow: w\n",
         "tools.yaml:3:30", 'quote the value: write description: "Fetch a page: returns text" (an unquoted \': \' starts a new key)'),
        ("tools:\n  x:\n    - note: say \"hi\": now\n",
         "tools.yaml:3:21", 'quote the value: write note: "say \\"hi\\": now" (an unquoted \': \' starts a new key)'),
        ("tools:\n  x:\n    parameters: {type: object, properties: {a: {description: a: b}}}\n",
         "tools.yaml:3:63", 'quote the value: write description: "a: b" (an unquoted \': \' starts a new key)'),
    ],
)
def test_a_value_with_colon_space_gets_quote_the_value(write_yaml_project: WriteProject, tools_yaml: str, where: str,
                                                       hint: str) -> None:
    root = write_yaml_project({"tools.yaml": tools_yaml})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    (issue,) = caught.value.issues
    assert (str(issue.location), issue.hint) == (where, hint)


def test_other_yaml_errors_keep_their_hint(write_yaml_project: WriteProject) -> None:
    root = write_yaml_project({"tools.yaml": "tools:\n  x: {a: [1, 2}\n"})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    assert caught.value.issues[0].hint == "the list opened with `[` at line 2:10 is not closed: add the missing `]` before line 2, column 15 (or a `,` between items)"


# ─── fetch: a refused private address names the setting ───────────────────────────────


def test_a_refused_private_address_names_allow_private_networks(write_yaml_project: WriteProject) -> None:
    with socket.socket() as listener:  # a real server on 127.0.0.1 that must never be reached
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0)
        port = listener.getsockname()[1]
        root = write_yaml_project({"tools.yaml": """
            tools:
              readPage:
                type: fetch
                description: Read a web page.
        """})
        engine = Engine.from_dir(root, store=False)
        try:
            result = engine.call_tool_sync("readPage", {"url": f"http://127.0.0.1:{port}/admin"})
        finally:
            engine.close()
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert result.error is not None and result.error.code == "blocked"
    assert result.error.message.endswith(
        "127.0.0.1 is loopback (127.0.0.0/8); only public addresses may be fetched "
        "(to reach it on purpose, list its network under the tool's config, e.g. allowPrivateNetworks: [\"127.0.0.1/32\"])"
    )

"""Safe YAML: no code from tags, no silent overwrites, bounded work and memory, clean errors.

Every hostile or broken file must end in a ConfigError naming `file:line:col` — never a
Python object, a RecursionError, a MemoryError or a hang.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

import engine
from engine import ConfigError, ConfigIssue
from engine.spec.yaml_source import MAX_FILE_BYTES

SKILL = """
skills:
  shout:
    kind: template
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    template: "{{ text }}!"
"""


def load_issue(write_yaml_project, content: str | bytes, name: str = "skills.yaml") -> ConfigIssue:
    root = write_yaml_project({name: content})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    issues = caught.value.issues
    assert len(issues) == 1, "\n".join(map(str, issues))
    assert issues[0].location.file == name
    assert issues[0].hint
    return issues[0]


def at(issue: ConfigIssue) -> str:
    return str(issue.location)


# ─── tags ───────────────────────────────────────────────────────────────────────────────


def test_python_object_apply_is_refused_and_never_run(write_yaml_project, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    issue = load_issue(write_yaml_project, f"""
        skills:
          shout:
            kind: template
            template: !!python/object/apply:os.system ["touch {marker}"]
        """)
    assert at(issue) == "skills.yaml:4:15"
    assert "!!python/object/apply:os.system is not allowed" in issue.message
    assert "Python tags" in issue.hint
    assert not marker.exists()


@pytest.mark.parametrize(
    "value",
    [
        "!!python/name:os.system",
        "!!python/object:collections.OrderedDict {}",
        "!!python/module:os",
        "!!python/tuple [1, 2]",
        "!!binary aGVsbG8=",
        "!!set {a, b}",
    ],
)
def test_other_non_data_tags_are_refused(write_yaml_project, value: str) -> None:
    issue = load_issue(write_yaml_project, f"skills:\n  shout:\n    template: {value}\n")
    assert at(issue) == "skills.yaml:3:15"
    assert "is not allowed" in issue.message


def test_custom_tag_is_refused(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, """
        skills:
          shout: !foo
            kind: template
            template: x
        """)
    assert at(issue) == "skills.yaml:2:10"
    assert "YAML tag !foo is not allowed" in issue.message


def test_core_tags_are_data(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": SKILL.replace('template: "{{ text }}!"', "template: !!str '{{ text }}'")})
    assert engine.load_project(root).skills["shout"].kind == "template"


# ─── keys ───────────────────────────────────────────────────────────────────────────────


def test_duplicate_keys_name_both_lines(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, """
        skills:
          shout:
            kind: template
            template: first
            input: {type: object}
            template: second
        """)
    assert at(issue) == "skills.yaml:6:5"
    assert "duplicate key 'template' (first defined at line 4)" in issue.message


def test_duplicate_top_level_names_are_caught_in_one_file(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, SKILL + SKILL.replace("skills:\n", ""))
    assert at(issue) == "skills.yaml:7:3"
    assert "duplicate key 'shout' (first defined at line 2)" in issue.message


def test_merge_keys_work(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": """
        skills:
          shout: &base
            kind: template
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            template: "{{ text }}!"
          whisper:
            <<: *base
            template: "{{ text }}..."
          both:
            <<: [*base, {description: merged from a list}]
        """})
    project = engine.load_project(root)
    assert set(project.skills) == {"shout", "whisper", "both"}
    assert project.skills["whisper"].input_schema_raw["required"] == ["text"]


def test_merge_of_a_scalar_is_refused(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, "skills:\n  shout:\n    <<: 5\n")
    assert at(issue) == "skills.yaml:3:9"
    assert "`<<` merge needs a mapping" in issue.message


# ─── bounded work ───────────────────────────────────────────────────────────────────────


def _billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_fast_with_little_memory(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": _billion_laughs()})
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as caught:
            engine.load_project(root)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 2.0
    assert peak < 200 * 1024 * 1024
    [issue] = caught.value.issues
    # a..e expand to 74,718 copies; the first *e on line 6 would pass the 100,000 budget
    assert at(issue) == "skills.yaml:6:8"
    assert "aliases add more than 100,000 values" in issue.message
    assert "*e here copies 66,430 values (anchored at line 5)" in issue.message
    assert "billion laughs" in issue.hint


def test_alias_expansion_below_the_bomb_is_still_bounded(write_yaml_project) -> None:
    # 20 × 20 × 20 × 20 = 160,000 copies: small file, too much expansion
    lines = ["a: &a [" + ",".join(["x"] * 20) + "]"]
    for previous, name in zip("abc", "bcd", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 20) + "]")
    issue = load_issue(write_yaml_project, "\n".join(lines) + "\n")
    assert issue.location.line == 4
    assert "aliases add more than 100,000 values" in issue.message


def test_aliases_share_no_containers_and_keep_positions(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": """
        skills:
          shout:
            kind: template
            input: &schema
              type: object
              properties:
                text: {type: string}
              required: [text]
            template: "{{ text }}!"
          whisper:
            kind: template
            input: *schema
            template: "{{ txt }}..."
        """})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    [issue] = caught.value.issues
    assert at(issue) == "skills.yaml:13:19"  # the alias copy is checked like the original
    root = write_yaml_project({"skills.yaml": (root / "skills.yaml").read_text().replace("txt", "text")})
    skills = engine.load_project(root).skills
    assert skills["shout"].input_schema_raw == skills["whisper"].input_schema_raw
    assert skills["shout"].input_schema_raw is not skills["whisper"].input_schema_raw


def test_recursive_alias_is_a_clean_error(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, "skills:\n  shout: &loop\n    - *loop\n")
    assert at(issue) == "skills.yaml:3:7"  # the alias inside its own anchor
    assert "alias *loop is used inside the collection it names (recursive alias)" in issue.message


def test_ten_thousand_levels_of_flow_nesting(write_yaml_project) -> None:
    deep = "skills: " + "[" * 10_000 + "]" * 10_000 + "\n"
    started = time.perf_counter()
    issue = load_issue(write_yaml_project, deep)
    assert time.perf_counter() - started < 2.0
    # Level 1 is the mapping, so our own check stops at the 64th "[" (column 72); a libyaml
    # build with its own nesting limit (≥ 0.2.5) may stop first, further on the same line.
    assert at(issue) in ("skills.yaml:1:72", "skills.yaml:1:1008")
    assert "nesting is deeper than 64 levels" in issue.message


def test_ten_thousand_levels_of_block_nesting(write_yaml_project) -> None:
    # block sequences nest on one line: "- - - - x"
    deep = "skills:\n  shout:\n    " + "- " * 10_000 + "x\n"
    issue = load_issue(write_yaml_project, deep)
    # levels 1-2 are the two mappings; the 65th level is the 63rd "- ", at column 5 + 62 * 2
    assert at(issue) == "skills.yaml:3:129"
    assert "nesting is deeper than 64 levels" in issue.message


def test_ten_thousand_levels_of_indented_mappings(write_yaml_project) -> None:
    # Indented block mappings grow quadratically; 10,000 levels would pass the size limit
    # first, so go as deep as fits and check the depth error, not a RecursionError.
    deep = "".join(" " * level + f"k{level}:\n" for level in range(2_000))
    issue = load_issue(write_yaml_project, deep)
    assert at(issue) == "skills.yaml:65:65"
    assert "nesting is deeper than 64 levels" in issue.message


# ─── encodings and size ─────────────────────────────────────────────────────────────────


def test_latin1_file_names_the_encoding_problem_and_line(write_yaml_project) -> None:
    content = "skills:\n  shout:\n    kind: template\n    template: café\n".encode("latin-1")
    issue = load_issue(write_yaml_project, content)
    assert at(issue) == "skills.yaml:4:18"
    assert "not valid UTF-8" in issue.message and "0xe9" in issue.message
    assert "UTF-8" in issue.hint


def test_utf16_file_is_named_as_such(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, SKILL.lstrip().encode("utf-16"))
    assert at(issue) == "skills.yaml:1:1"
    assert "UTF-16" in issue.message


def test_utf8_bom_is_accepted(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": b"\xef\xbb\xbf" + SKILL.lstrip().encode()})
    assert set(engine.load_project(root).skills) == {"shout"}


def test_control_character_is_refused_with_its_position(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, b"skills:\n  shout: a\x00b\n")
    assert at(issue) == "skills.yaml:2:11"
    assert "0x0000 is not allowed" in issue.message


def test_oversize_file_is_refused_before_parsing(write_yaml_project) -> None:
    content = b"skills:\n  shout:\n    template: '" + b"x" * MAX_FILE_BYTES + b"'\n"
    started = time.perf_counter()
    issue = load_issue(write_yaml_project, content)
    assert time.perf_counter() - started < 2.0
    assert "above the 4,194,304-byte limit" in issue.message
    assert "split it" in issue.hint


# ─── syntax ─────────────────────────────────────────────────────────────────────────────


def test_syntax_error_names_line_and_column(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, """
        skills:
          shout:
            kind: template
            template: [unclosed, list
            input: {}
        """)
    assert at(issue) == "skills.yaml:5:10"
    assert issue.message.startswith("YAML syntax error: ")
    assert "flow sequence at line 4:15" in issue.message


def test_mapping_value_where_none_is_allowed(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, "skills:\n  shout: kind: template\n")
    assert at(issue) == "skills.yaml:2:14"
    assert "mapping values are not allowed here" in issue.message or "not allowed in this context" in issue.message


def test_tab_indentation_says_so(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, "skills:\n\tshout: {}\n")
    assert at(issue) == "skills.yaml:2:1"
    assert "tabs" in issue.hint


def test_second_document_is_refused(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, SKILL.lstrip() + "---\nskills: {}\n")
    assert at(issue) == "skills.yaml:6:1"
    assert "`---`" in issue.hint


def test_undefined_alias(write_yaml_project) -> None:
    issue = load_issue(write_yaml_project, "skills:\n  shout: *nowhere\n")
    assert at(issue) == "skills.yaml:2:10"
    assert "undefined alias" in issue.message


# ─── harmless files ─────────────────────────────────────────────────────────────────────


def test_empty_and_comment_only_files_are_fine(write_yaml_project) -> None:
    root = write_yaml_project({
        "tools.yaml": "",
        "skills.yaml": SKILL,
        "workflows.yaml": "# nothing here yet\n",
        "config/engine.yaml": "",
        "config/models.yaml": "\n",
    })
    project = engine.load_project(root)
    assert project.tools == {} and set(project.skills) == {"shout"}


def test_json_like_scalars_keep_their_types(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": SKILL.replace(
        "input: {type: object, properties: {text: {type: string}}, required: [text]}",
        "input: {type: object, properties: {text: {type: string, maxLength: 10, default: 'on'}, "
        "n: {type: [integer, 'null'], default: null}}, required: [text]}",
    )})
    schema = engine.load_project(root).skills["shout"].input_schema_raw
    assert schema["properties"]["text"] == {"type": "string", "maxLength": 10, "default": "on"}
    assert schema["properties"]["n"]["default"] is None


def test_errors_inside_anchors_point_at_the_anchored_text(write_yaml_project) -> None:
    root = write_yaml_project({"skills.yaml": """
        skills:
          base: &base
            kind: template
            input: &schema
              type: object
              properties:
                text: {type: strng}
            template: |
              Shout:
              {% if %}
          merged:
            <<: *base
            description: merged from base
          aliased:
            kind: template
            input: *schema
            template: "{{ text }}"
        """})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    found = {(at(i), i.message.split(":")[0]) for i in caught.value.issues}
    assert found == {
        ("skills.yaml:7:22", "invalid JSON Schema in 'input' of skill 'base'"),
        ("skills.yaml:7:22", "invalid JSON Schema in 'input' of skill 'merged'"),
        ("skills.yaml:7:22", "invalid JSON Schema in 'input' of skill 'aliased'"),
        ("skills.yaml:10:7", "template syntax error in skill 'base' (template, template line 2)"),
        ("skills.yaml:10:7", "template syntax error in skill 'merged' (template, template line 2)"),
    }


def test_keys_are_names_not_yaml_1_1_booleans(write_yaml_project) -> None:
    # `off:` as a tool name stays "off" (YAML 1.1 would make it the boolean false)
    root = write_yaml_project({"tools.yaml": "tools:\n  off: {description: x, workflow: w}\n"})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    assert any("'off'" in issue.message for issue in caught.value.issues)

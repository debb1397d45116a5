"""Golden tests: every config-error class names the exact `file:line:col` and says what to do.

Each test writes a tiny project whose files are shown inline, so the asserted positions are
the ones you can count in the test. The base project (one tool → one workflow → one skill)
is valid; each test overrides one file with one mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import engine
from engine import ConfigError, ConfigIssue, Location

TOOLS = """
tools:
  echo:
    description: Echo a text back, shouted.
    parameters:
      type: object
      properties:
        text: {type: string}
        note: {type: string}
      required: [text]
    workflow: echoFlow
"""

SKILLS = """
skills:
  shout:
    kind: template
    input:
      type: object
      properties:
        text: {type: string}
      required: [text]
    template: "{{ text }}!"
  listWords:
    kind: template
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output:
      type: object
      properties:
        words: {type: array, items: {type: string}}
        count: {type: integer}
      required: [words, count]
    template: '{"words": {{ text.split() | tojson }}, "count": {{ text.split() | length }}}'
"""

WORKFLOWS = """
workflows:
  echoFlow:
    steps:
      - id: shout
        skill: shout
        input: {text: $toolArgs.text}
"""

BASE = {"tools.yaml": TOOLS, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS}


def config_issues(root: Path) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    issues = caught.value.issues
    assert issues, "a ConfigError must carry at least one issue"
    for issue in issues:
        assert issue.hint, f"every issue says what to do: {issue}"
    return issues


def only_issue(root: Path) -> ConfigIssue:
    issues = config_issues(root)
    assert len(issues) == 1, "\n".join(map(str, issues))
    return issues[0]


def at(issue: ConfigIssue) -> str:
    return str(issue.location)


# ─── the base project is valid ──────────────────────────────────────────────────────────


def test_base_project_loads(write_yaml_project) -> None:
    project = engine.load_project(write_yaml_project(BASE))
    assert set(project.tools) == {"echo"}


def test_issue_renders_as_file_line_col_message_hint() -> None:
    issue = ConfigIssue(Location("workflows.yaml", 14, 9), "step 'plan' reads $steps.x.output", "reorder the steps")
    assert str(issue) == "workflows.yaml:14:9: step 'plan' reads $steps.x.output — reorder the steps"
    assert str(ConfigIssue(Location("tools.yaml", 3, 5), "bad")) == "tools.yaml:3:5: bad"


# ─── references ─────────────────────────────────────────────────────────────────────────


def test_unknown_skill(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shuot
                input: {text: $toolArgs.text}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:5:16"
    assert "unknown skill 'shuot'" in issue.message
    assert "did you mean 'shout'" in issue.hint


def test_unknown_workflow(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS.replace("workflow: echoFlow", "workflow: echoFlo")})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:10:15"
    assert "unknown workflow 'echoFlo'" in issue.message
    assert "echoFlow" in issue.hint


def test_unknown_model(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: prompt
            model: gpt-nine
            user: "Shout {{ text }}"
            input:
              type: object
              properties:
                text: {type: string}
              required: [text]
        """})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:12"
    assert "unknown model 'gpt-nine'" in issue.message
    assert "config/models.yaml" in issue.hint


def test_unknown_default_model(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"config/models.yaml": """
        default: local
        models:
          mock: {provider: mock}
        """})
    issue = only_issue(root)
    assert at(issue) == "config/models.yaml:1:10"
    assert "default model 'local' is not defined" in issue.message


def test_duplicate_tool_across_tools_yaml_and_tools_dir(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools/extra.yaml": """
        tools:
          other:
            description: Another tool.
            parameters: {type: object, properties: {text: {type: string}}, required: [text]}
            workflow: echoFlow
          echo:
            description: The same name again.
            parameters: {type: object, properties: {text: {type: string}}, required: [text]}
            workflow: echoFlow
        """})
    issue = only_issue(root)
    assert at(issue) == "tools/extra.yaml:6:3"
    assert "duplicate tool 'echo'" in issue.message
    assert "tools.yaml:2:3" in issue.message  # where the first one is


def test_directory_layout_is_merged(write_yaml_project) -> None:
    root = write_yaml_project({
        "tools/a.yaml": TOOLS,
        "tools/b.yaml": """
            tools:
              words:
                description: List the words of a text.
                parameters: {type: object, properties: {text: {type: string}}, required: [text]}
                workflow: wordsFlow
            """,
        "skills/shout.yaml": SKILLS,
        "workflows.yaml": WORKFLOWS,
        "workflows/words.yaml": """
            workflows:
              wordsFlow:
                steps:
                  - id: list
                    skill: listWords
                    input: {text: $toolArgs.text}
            """,
    })
    project = engine.load_project(root)
    assert set(project.tools) == {"echo", "words"}
    assert set(project.skills) == {"shout", "listWords"}


def test_duplicate_skill_in_skills_dir(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills/more.yaml": """
        skills:
          shout:
            kind: template
            template: again
        """})
    issue = only_issue(root)
    assert at(issue) == "skills/more.yaml:2:3"
    assert "duplicate skill 'shout'" in issue.message and "skills.yaml:2:3" in issue.message


def test_duplicate_step_ids(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: $toolArgs.text}
              - id: shout
                skill: shout
                input: {text: $toolArgs.text}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:7:13"
    assert "duplicate step id 'shout'" in issue.message


def test_steps_reference_to_unknown_step(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: list
                skill: listWords
                input: {text: $toolArgs.text}
              - id: shout
                skill: shout
                input:
                  text: $steps.lst.output.words[0]
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:10:17"
    assert "$steps.lst.output.words[0] reads step 'lst'" in issue.message
    assert "no step with that id" in issue.message
    assert "did you mean 'list'" in issue.hint


def test_steps_reference_to_the_same_step(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: $steps.shout.output}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "which is this step" in issue.message
    assert "reorder" in issue.hint


def test_steps_reference_to_a_later_step(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input:
                  text: $steps.list.output.words[0]
              - id: list
                skill: listWords
                input: {text: $toolArgs.text}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:7:17"
    assert "reads step 'list', which runs later (step 2)" in issue.message


def test_tool_args_parameter_not_declared(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: $toolArgs.txt}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "$toolArgs.txt: tool 'echo' declares no parameter 'txt'" in issue.message
    assert "parameters.properties" in issue.hint


def test_mapped_path_missing_from_source_schema(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: a
                skill: listWords
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                input:
                  text: $steps.a.output.nope
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:10:17"
    assert "$steps.a.output.nope" in issue.message
    assert "output of step 'a' (skill 'listWords') has no 'nope'" in issue.message


def test_index_into_a_string_argument(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: "$toolArgs.text[0]"}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "'text' in the parameters of tool 'echo' is a string, so it has no [0]" in issue.message


def test_array_mapped_into_string(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: a
                skill: listWords
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                input:
                  text: $steps.a.output.words
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:10:17"
    assert "$steps.a.output.words is an array, but input 'text' expects a string" in issue.message


def test_literal_of_the_wrong_type(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: 42}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "literal 42 does not fit input 'text', which expects a string" in issue.message


def test_required_skill_input_not_mapped(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:16"
    assert "required input 'text' of skill 'shout' is not mapped" in issue.message


def test_input_the_skill_does_not_have(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input:
                  text: $toolArgs.text
                  volume: 11
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:8:19"
    assert "skill 'shout' has no input 'volume'" in issue.message


def test_optional_tool_arg_into_required_input(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: $toolArgs.note}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "$toolArgs.note is optional in the parameters of tool 'echo' but input 'text' is required" in issue.message
    assert "default" in issue.hint


def test_malformed_reference(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: shout
                skill: shout
                input: {text: "$toolArgs..text"}
        """})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:6:23"
    assert "cannot read '$toolArgs..text'" in issue.message


def test_workflow_output_reads_unknown_step(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": WORKFLOWS + "    output: $steps.shuot.output\n"})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:7:13"
    assert "reads step 'shuot'" in issue.message


# ─── templates ──────────────────────────────────────────────────────────────────────────


PROMPT_WITH_BAD_THIRD_LINE = """
skills:
  shout:
    kind: prompt
    description: Shout.
    user: |
      Shout this text:
      {{ text }}
      and then {% if %} stop.
    input:
      type: object
      properties:
        text: {type: string}
      required: [text]
"""


def test_template_syntax_error_in_block_scalar_names_its_file_line(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": PROMPT_WITH_BAD_THIRD_LINE})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:8:7"  # the 3rd template line, not line 3 of the template
    assert "template syntax error in skill 'shout' (user, template line 3)" in issue.message
    assert "Jinja2" in issue.hint


def test_template_syntax_error_in_single_line_template(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": SKILLS.replace('template: "{{ text }}!"', 'template: "{{ text !"')})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:9:15"
    assert "template syntax error in skill 'shout' (template, template line 1)" in issue.message


def test_template_syntax_error_in_folded_block(write_yaml_project) -> None:
    # `>` joins lines 5 and 6 into template line 1; template line 2 starts after the blank line.
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: template
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            template: >
              Shout {{ text }}
              loudly.

              Then {% endif %} stop.
        """})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:9:7"
    assert "template line 2" in issue.message


def test_template_syntax_error_after_escaped_newlines(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: template
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            template: "Shout\\n{{ text }}\\n{% endif %}"
        """})
    issue = only_issue(root)
    # line 5; the 3rd template line starts after the second `\\n`, at column 35
    assert at(issue) == "skills.yaml:5:35"


def test_template_variable_not_declared(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: prompt
            system: You shout.
            user: |
              Shout this text:
              {{ txet | upper }}
            input:
              type: object
              properties:
                text: {type: string}
              required: [text]
        """})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:7:10"  # where `txet` is read
    assert "uses {{ txet }}, which the skill's input schema does not declare" in issue.message
    assert "input.properties" in issue.hint


def test_loop_variables_and_declared_inputs_are_not_flagged(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": SKILLS.replace(
        'template: "{{ text }}!"',
        'template: "{% for w in text.split() %}{{ loop.index }}{{ w }}{% endfor %}{% set x = 1 %}{{ x }}"',
    )})
    engine.load_project(root)


# ─── schemas and shapes ─────────────────────────────────────────────────────────────────


def test_invalid_json_schema_names_each_bad_keyword(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": """
        tools:
          echo:
            description: Echo.
            parameters:
              type: object
              properties:
                text:
                  type: strng
                  minLength: -1
              required: [text]
            workflow: echoFlow
        """})
    issues = config_issues(root)
    assert [at(i) for i in issues] == ["tools.yaml:8:17", "tools.yaml:9:22"]
    assert "'strng' is not a JSON Schema type" in issues[0].message
    assert "/properties/text/minLength" in issues[1].message and "-1" in issues[1].message
    assert all("JSON Schema" in i.hint for i in issues)


def test_invalid_json_schema_in_skill_output(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": SKILLS.replace("required: [words, count]", "required: words")})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:18:17"
    assert "invalid JSON Schema in 'output'" in issue.message and "/required" in issue.message


def test_unresolvable_ref_and_bad_pattern(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": """
        tools:
          echo:
            description: Echo.
            parameters:
              type: object
              properties:
                text: {type: string, pattern: "(unclosed"}
                note: {$ref: "#/$defs/missing"}
              required: [text]
            workflow: echoFlow
          echo2:
            description: Echo.
            parameters:
              type: object
              properties:
                text: {$ref: "#/$defs/missing"}
              required: [text]
            workflow: echoFlow
        """})
    issues = config_issues(root)
    assert [at(i) for i in issues] == ["tools.yaml:7:39", "tools.yaml:8:22", "tools.yaml:16:22"]
    assert "'(unclosed' is not a valid regular expression" in issues[0].message
    assert "$ref '#/$defs/missing' points to nothing" in issues[1].message
    assert "$ref '#/$defs/missing' points to nothing" in issues[2].message


def test_remote_ref_is_refused_without_fetching_it(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS.replace("note: {type: string}", "note: {$ref: 'http://127.0.0.1:9/note.json'}")})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:8:22"
    assert "points outside this schema" in issue.message


def test_invalid_tool_name(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS.replace("  echo:", "  'echo it!':")})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:2:3"
    assert "invalid tool name 'echo it!'" in issue.message
    assert "1-64 letters" in issue.hint


def test_tool_name_longer_than_64(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS.replace("  echo:", "  " + "e" * 65 + ":")})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:2:3"
    assert "invalid tool name" in issue.message


def test_unknown_field_typo(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS.replace("description:", "desciption:")})
    issue = only_issue(root)  # one issue, not also "missing description"
    assert at(issue) == "tools.yaml:3:5"
    assert "unknown field 'desciption'" in issue.message
    assert "did you mean 'description'" in issue.hint


def test_unknown_field_in_a_step(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": WORKFLOWS + "        timout: 5s\n"})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:7:9"
    assert "unknown field 'steps[0].timout'" in issue.message
    assert "did you mean 'timeout'" in issue.hint


def test_missing_required_field(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: template
            input: {type: object, properties: {text: {type: string}}, required: [text]}
        """})
    issue = only_issue(root)  # and no "unknown skill" from the workflow that uses it
    assert at(issue) == "skills.yaml:2:3"
    assert "missing required field 'template'" in issue.message
    assert "add `template:`" in issue.hint


def test_unknown_skill_kind(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": SKILLS.replace("kind: template", "kind: templat", 1)})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:3:11"
    assert "unknown skill kind 'templat'" in issue.message


def test_definition_that_is_not_a_mapping(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": "tools:\n  echo: just a string\n"})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:2:9"
    assert "expected a mapping" in issue.message and "a string" in issue.message


def test_tool_parameters_must_be_an_object_schema(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": """
        tools:
          echo:
            description: Echo.
            parameters:
              type: string
            workflow: echoFlow
        """})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:5:7"
    assert "`type: object`" in issue.message


def test_skill_input_must_be_an_object_schema(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": """
        skills:
          shout:
            kind: template
            input: {type: string}
            template: "{{ text }}"
        """})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:12"
    assert "must describe an object" in issue.message


def test_bad_duration(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"tools.yaml": TOOLS + "    timeout: soon\n"})
    issue = only_issue(root)
    assert at(issue) == "tools.yaml:11:14"
    assert "'soon' is not a duration" in issue.message


@pytest.mark.parametrize("retry", ["-1", "11"])
def test_retry_count_out_of_range(write_yaml_project, retry: str) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": WORKFLOWS + f"        retry: {retry}\n"})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:7:16"
    assert f"retry: {retry} is not a number of retries" in issue.message


# ─── python skills ──────────────────────────────────────────────────────────────────────


def _python_skill(function: str) -> str:
    return f"""
        skills:
          shout:
            kind: python
            function: {function}
            input: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
        """


def test_python_skill_module_cannot_be_imported(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": _python_skill("no_such_module_cfgerr:shout")})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:15"
    assert "cannot import module 'no_such_module_cfgerr'" in issue.message


def test_python_skill_module_fails_while_importing(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {
        "skills.yaml": _python_skill("broken_module_cfgerr:shout"),
        "broken_module_cfgerr.py": "raise RuntimeError('boom at import')\n",
    })
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:15"
    assert "RuntimeError: boom at import" in issue.message


def test_python_skill_has_no_such_function(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {
        "skills.yaml": _python_skill("skill_module_cfgerr:shuot"),
        "skill_module_cfgerr.py": "def shout(input):\n    return input['text'].upper()\n",
    })
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:15"
    assert "module 'skill_module_cfgerr' has no function 'shuot'" in issue.message


def test_python_skill_function_badly_written(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": _python_skill("skill_module.shout")})
    issue = only_issue(root)
    assert at(issue) == "skills.yaml:4:15"
    assert "package.module:function" in issue.hint


def test_python_skill_from_project_directory_loads(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {
        "skills.yaml": _python_skill("skill_module_ok_cfgerr:shout"),
        "skill_module_ok_cfgerr.py": "def shout(input):\n    return input['text'].upper()\n",
    })
    project = engine.load_project(root)
    assert project.skills["shout"].kind == "python"


# ─── no cascades ────────────────────────────────────────────────────────────────────────


def test_unparsable_file_does_not_cascade_into_unknown_references(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"skills.yaml": "skills:\n  shout: [unclosed\n"})
    issue = only_issue(root)  # not also "unknown skill 'shout'" from workflows.yaml
    assert issue.location.file == "skills.yaml"
    assert "YAML syntax error" in issue.message


def test_invalid_workflow_does_not_cascade_into_unknown_workflow(write_yaml_project) -> None:
    root = write_yaml_project(BASE | {"workflows.yaml": "workflows:\n  echoFlow:\n    steps: []\n"})
    issue = only_issue(root)
    assert at(issue) == "workflows.yaml:3:12"
    assert "at least 1 item" in issue.message


# ─── all at once ────────────────────────────────────────────────────────────────────────


def test_every_mistake_is_reported_at_once(write_yaml_project) -> None:
    root = write_yaml_project({
        "tools.yaml": """
            tools:
              echo:
                desciption: Echo.
                parameters:
                  type: object
                  properties:
                    text: {type: strng}
                workflow: echoFlow
              'bad name!':
                description: x
                workflow: echoFlow
            """,
        "skills.yaml": """
            skills:
              shout:
                kind: prompt
                model: nowhere
                user: "{{ text }} {{ volume }}"
                input: {type: object, properties: {text: {type: string}}, required: [text]}
              broken:
                kind: template
                template: "{% for %}"
            """,
        "workflows/echo.yaml": """
            workflows:
              echoFlow:
                steps:
                  - id: one
                    skill: shout
                    input: {text: $steps.two.output}
                  - id: two
                    skill: shuot
                    input: {}
            """,
        "config/models.yaml": """
            models:
              mock: {provider: mock}
              remote: {provider: carrier-pigeon}
            """,
    })
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    error = caught.value
    found = {(i.location.file, i.location.line, i.location.col): i.message for i in error.issues}
    expected = {
        ("config/models.yaml", 3, 22): "unknown provider 'carrier-pigeon'",
        ("skills.yaml", 4, 12): "unknown model 'nowhere'",
        ("skills.yaml", 5, 26): "{{ volume }}",
        ("skills.yaml", 9, 15): "template syntax error",
        ("tools.yaml", 3, 5): "unknown field 'desciption'",
        ("tools.yaml", 9, 3): "invalid tool name 'bad name!'",
        ("workflows/echo.yaml", 8, 16): "unknown skill 'shuot'",
    }
    for where, phrase in expected.items():
        assert where in found, f"no issue at {where}; got:\n{error}"
        assert phrase in found[where], found[where]
    assert len({file for file, _, _ in found}) == 4  # issues from four files in one error
    # sorted by file, line and column, and the exception text lists them all
    keys = [(i.location.file, i.location.line, i.location.col) for i in error.issues]
    assert keys == sorted(keys)
    assert str(error).splitlines() == [str(i) for i in error.issues]

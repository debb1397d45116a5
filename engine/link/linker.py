"""Link: resolve every reference once, check the data flow, compile everything → Project.

Everything that can be decided before a call is decided here: schemas are checked against
the meta-schema and compiled, templates parsed, mappings compiled into resolvers, python
functions imported. Every problem found is collected and raised at once as a ConfigError.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import ValidationError

from ..errors import ConfigError, ConfigIssue, IssueCollector, Location
from ..executors.workflow import WorkflowExecutor
from ..lang.schema import CompiledSchema, SchemaReader, schema_problem_details
from ..lang.schema_keywords import warn_unknown_keywords
from ..lang.strict_schema import NotStrict, to_strict
from ..lang.templating import ENV as TEMPLATE_ENV
from ..lang.templating import check_template
from ..providers.registry import known_providers, provider_factory
from ..runtime.contracts import Skill, ToolType, known_tool_types, tool_type
from ..runtime.project import LinkedTool, Project, ToolPolicy
from ..safety.redaction import secret_hider
from ..skills.prompt import PromptSkill
from ..skills.python import PythonSkill, signature_problem
from ..skills.template import TemplateSkill
from ..skills.tool import ToolSkill
from ..spec.loader import Entry, LoadedSpecs, load_specs, report_pydantic_error
from ..spec.mcp_config import check_sampling_models
from ..spec.models import (
    AgentSkillSpec,
    ModelSpec,
    PromptSkillSpec,
    PythonSkillSpec,
    TemplateSkillSpec,
    ToolSkillSpec,
    ToolSpec,
)
from .agent_link import agent_skill, check_agent_cycles
from .closure import problems_by_tool, project_wide
from .data_flow import DataFlow, Site, leaves, suggest
from .expect import ExpectationError, compile_checks
from .workflow_link import WorkflowLink, workflow_order

if TYPE_CHECKING:
    from ..store.tool_settings import ToolSetting

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_PYTHON_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def load_project(root: str | Path = ".", *, tool_settings: "dict[str, ToolSetting] | None" = None,
                 isolate_broken_tools: bool = False) -> Project:
    """Load and link the project in `root`; raises ConfigError listing every problem.

    `tool_settings` (from the run store) are layered over the YAML tools before linking.
    `isolate_broken_tools` (the front doors that serve tools): a problem inside some tools'
    own parts leaves the other tools callable; `project.broken` names the broken ones with
    their problems (a call to one answers config_error). Project-wide problems still raise.
    """
    issues = IssueCollector()
    specs = load_specs(Path(root), issues)
    linker = _Linker(specs, issues, connect_tool_sources=True)
    if tool_settings:
        from .overlay import apply_tool_settings

        linker.source_tool_settings = apply_tool_settings(specs, tool_settings, issues)
    project = linker.link()
    project.isolates_broken_tools = isolate_broken_tools
    hide = _hide_read_values(linker)
    if issues.issues and (not isolate_broken_tools or project_wide(issues.issues)):
        issues.raise_if_any()
    if issues.issues:
        project.problems = ConfigError(issues.issues).issues
        declared = [*specs.tools, *sorted(specs.invalid["tools"] - set(specs.tools))]
        project.broken = problems_by_tool(specs, project.problems, declared, set(project.tools))
        for name in project.broken:  # linked, but with a problem in its parts: it does not run either
            project.tools.pop(name, None)
    if linker.mcp is not None:  # a server that cannot run breaks only its own tools
        project.problems = [*project.problems, *(_hidden(issue, hide) for issue in linker.mcp.problems)]
        project.broken.update({name: [_hidden(issue, hide) for issue in found] for name, found in linker.mcp.broken.items()})
    _publish_warnings(project, linker.warnings)
    return project


def _hide_read_values(linker: "_Linker") -> Callable[[str], str]:
    """What a load says of itself (problems, warnings) never holds a value it read by reference:
    every door (an admin's 422, /v1/tools/broken, stderr, a log line) shows these issues."""
    hide = secret_hider(linker.specs.resolver.secrets)
    linker.issues.issues = [_hidden(issue, hide) for issue in linker.issues.issues]
    linker.warnings = [_hidden(issue, hide) for issue in linker.warnings]
    return hide


def _hidden(issue: ConfigIssue, hide: Callable[[str], str]) -> ConfigIssue:
    message, hint = hide(issue.message), hide(issue.hint)
    return issue if message is issue.message and hint is issue.hint else ConfigIssue(issue.location, message, hint)


def _publish_warnings(project: Project, warnings: list[ConfigIssue]) -> None:
    """Load warnings (the project still runs): logged once each, and kept as `project.warnings`."""
    project.warnings = list(dict.fromkeys(warnings))
    if project.warnings:
        from ..logging import logger

        for warning in project.warnings:
            logger.warning(f"config warning: {warning}")


def check_project(root: str | Path = ".", *, import_python: bool = True) -> tuple[Project, list[str]]:
    """`load_project` for `skillyard validate`: with `import_python=False` no module of the
    project is imported (importing runs its code); everything else is checked.

    Returns the project (not runnable when something was skipped) and what was not imported,
    one line each (`skills.yaml:7:15: skill 'count': store_skills:count`).
    """
    issues = IssueCollector()
    linker = _Linker(load_specs(Path(root), issues), issues, import_python=import_python)
    project = linker.link()
    _hide_read_values(linker)
    issues.raise_if_any()
    project.warnings = list(dict.fromkeys(linker.warnings))
    return project, linker.not_imported


def _not_imported(target: str) -> Callable[..., Any]:
    def not_imported(input: Any) -> Any:
        raise RuntimeError(f"{target} was not imported (the project was checked with --no-import)")

    return not_imported


class _Linker:
    def __init__(self, specs: LoadedSpecs, issues: IssueCollector, *, import_python: bool = True,
                 connect_tool_sources: bool = False):
        self.specs = specs
        self.connect_tool_sources = connect_tool_sources  # start/connect config/mcp.yaml's servers (not for validate)
        self.mcp: Any = None  # what they added (executors/mcp_client/link.py McpLink)
        self.source_tool_settings: dict[str, Any] = {}  # stored overrides of their tools (overlay.py)
        self.issues = issues
        self.import_python = import_python
        self.not_imported: list[str] = []  # with import_python=False: what was skipped, and where
        self.skills: dict[str, Skill] = {}
        self.workflows: dict[str, WorkflowExecutor] = {}
        self.workflow_links: dict[str, WorkflowLink] = {}  # the workflows that passed their check
        # Per workflow: its `$toolArgs` references with what they map into, in walk order,
        # recorded by the workflow's own check so a tool's check does not walk it again.
        self.tool_arg_sites: dict[str, list[Site]] = {}
        self.warnings: list[ConfigIssue] = []
        self.arg_conditions: dict[str, list[Any]] = {}  # per workflow: `when`s reading $toolArgs (checked per caller)

    def warn(self, location: Location, message: str, hint: str = "") -> None:
        """Something that loads and runs, but is probably not what was meant."""
        self.warnings.append(ConfigIssue(location, message, hint))

    def link(self) -> Project:
        """The project with every tool that linked cleanly (the others are left out; their
        problems are in `issues`)."""
        models = self._models()
        for entry in self.specs.skills.values():
            skill = self._skill(entry, models)
            if skill is not None:
                self.skills[entry.name] = skill
        check_agent_cycles(self.specs, self.issues)
        ordered = workflow_order(self)  # called workflows first; those in a call cycle are left out
        for name in ordered + [name for name in self.specs.workflows if name not in ordered]:
            link = WorkflowLink(self, self.specs.workflows[name])
            if link.check() and name in ordered:
                self.workflow_links[name] = link
                self.workflows[name] = link.build()
        tools = {}
        for entry in self.specs.tools.values():
            tool = self._tool(entry)
            if tool is not None and entry.spec.strict is not False:
                tool = self._strict(entry, tool)
            if tool is not None and entry.spec.batch is not None and entry.spec.batch.expect is not None:
                tool = self._batch_defaults(entry, tool)
            if tool is not None:
                tools[entry.name] = dataclasses.replace(tool, title=entry.spec.title, order=entry.spec.order,
                                                        declared_description=entry.spec.description,
                                                        declared_parameters=entry.spec.parameters)
        check_sampling_models(self.specs.mcp_servers, models, self.issues)
        if self.connect_tool_sources:
            tools.update(self._tool_sources(set(tools) | set(self.specs.tools)))
        tools = dict(sorted(tools.items(), key=lambda item: (item[1].order, item[0])))  # every list follows it
        settings = self.specs.settings
        return Project(
            root=self.specs.root,
            tools=tools,
            skills=self.skills,
            models=models,
            default_model=self.specs.default_model,
            settings=settings,
            policy=ToolPolicy(settings.router.allow, settings.router.deny),
            files=self.specs.files,
            workflows=len(self.workflows),
            reference_secrets=frozenset(self.specs.resolver.secrets),
        )

    # ─── models ───────────────────────────────────────────────────────────────────────

    def _models(self) -> dict[str, ModelSpec]:
        models = {name: entry.spec for name, entry in self.specs.models.items()}
        models.setdefault("mock", ModelSpec(provider="mock"))
        for name, entry in self.specs.models.items():
            if provider_factory(entry.spec.provider) is None:
                self.issues.add(
                    entry.loc("provider"),
                    f"model {name!r} uses unknown provider {entry.spec.provider!r}",
                    f"use one of: {', '.join(known_providers())}",
                )
        self._fallbacks(models)
        if self.specs.default_model not in models and not self.specs.reported("models", self.specs.default_model):
            where = self.specs.default_model_loc or Location("config/models.yaml")
            self.issues.add(where, f"default model {self.specs.default_model!r} is not defined", f"define it under models: or use one of {', '.join(sorted(models))}")
        return models

    def _fallbacks(self, models: dict[str, ModelSpec]) -> None:
        """`fallback:` names models of this file, and no chain of them comes back to where it began."""
        for name, entry in self.specs.models.items():
            for index, other in enumerate(entry.spec.fallback):
                if other not in models:
                    self.issues.add(entry.loc("fallback", index), f"model {name!r} falls back to unknown model {other!r}",
                                    suggest(other, models))
                elif other == name or name in _reachable(models, other):
                    self.issues.add(entry.loc("fallback", index), f"model {name!r} falls back to {other!r}, whose "
                                    f"fallbacks lead back to {name!r} (a cycle)", "remove one model from one of the lists")

    # ─── skills ───────────────────────────────────────────────────────────────────────

    def _schema(self, entry: Entry[Any], field: str, schema: Any) -> bool:
        problems = schema_problem_details(schema)
        for problem in problems[:5]:
            self.issues.add(entry.loc(field, *problem.path), f"invalid JSON Schema in {field!r} of {str(entry.path[0])[:-1]} {entry.name!r}: {problem}", "fix it to follow JSON Schema Draft 2020-12")
        if not problems:
            warn_unknown_keywords(entry, field, schema, self.warn)  # `minLenght`: valid, and checks nothing
        return not problems

    def _template(self, entry: Entry[Any], field: str, source: str, declared: set[str] | None) -> bool:
        problems, variables = check_template(source)
        for problem in problems:
            self.issues.add(
                entry.source.block_location(entry.path + (field,), problem.line),
                f"template syntax error in skill {entry.name!r} ({field}, template line {problem.line}): {problem.message}",
                "fix the Jinja2 syntax",
            )
        if declared is not None:
            for name in sorted(variables - declared):
                self.issues.add(
                    _variable_location(entry, field, source, name),
                    f"template {field!r} of skill {entry.name!r} uses {{{{ {name} }}}}, which the skill's input schema does not declare",
                    _variable_hint(name, declared),
                )
        return not problems

    def _skill(self, entry: Entry[Any], models: dict[str, ModelSpec]) -> Skill | None:
        spec = entry.spec
        if isinstance(spec, ToolSkillSpec):
            return self._tool_skill(entry)
        input_ok = self._schema(entry, "input", spec.input)
        if input_ok and SchemaReader(spec.input).types(spec.input) not in (None, frozenset({"object"})):
            self.issues.add(entry.loc("input"), f"the input schema of skill {entry.name!r} must describe an object (`type: object`)", "a skill receives its input as named values; list them under properties:")
            input_ok = False
        ok = input_ok
        if spec.output is not None:
            ok = self._schema(entry, "output", spec.output) and ok
        declared = _declared_properties(spec.input) if input_ok else None
        if isinstance(spec, (PromptSkillSpec, AgentSkillSpec)):
            if spec.model is not None and spec.model not in models and not self.specs.reported("models", spec.model):
                self.issues.add(entry.loc("model"), f"skill {entry.name!r} uses unknown model {spec.model!r}", f"define it in config/models.yaml or use one of: {', '.join(sorted(models))}")
                ok = False
            if spec.system is not None:
                ok = self._template(entry, "system", spec.system, declared) and ok
            ok = self._template(entry, "user", spec.user, declared) and ok
            if isinstance(spec, AgentSkillSpec):
                return agent_skill(entry, self.specs, self.issues, ok, partial(_template_place, entry))
            if not ok:
                return None
            return PromptSkill(
                entry.name,
                model=spec.model,
                system=spec.system,
                user=spec.user,
                input_schema=spec.input,
                output_schema=spec.output,
                temperature=spec.temperature,
                max_tokens=spec.max_tokens,
                repairs=spec.repairs,
                where=partial(_template_place, entry),
            )
        if isinstance(spec, TemplateSkillSpec):
            ok = self._template(entry, "template", spec.template, declared) and ok
            return TemplateSkill(entry.name, spec.template, spec.input, spec.output, partial(_template_place, entry)) if ok else None
        if isinstance(spec, PythonSkillSpec):
            function = self._import(entry, spec.function)
            if function is None or not ok:
                return None
            return PythonSkill(entry.name, function, spec.input, spec.output, spec.threaded,
                               self.specs.settings.limits.python_thread_after)
        raise AssertionError(f"unhandled skill kind {type(spec).__name__}")  # pragma: no cover

    def _tool_skill(self, entry: Entry[Any]) -> Skill | None:
        """`kind: tool`: a registered tool type as a step; its schemas come from the type."""
        typed = self._tool_type_config(entry, entry.spec.type, entry.spec.config, in_step=True)
        if typed is None:
            return None
        registered, config = typed
        output = registered.output_schema(config) if registered.output_schema is not None else None
        return ToolSkill(entry.name, registered.create(config), registered.input_schema(config), output)

    def _import(self, entry: Entry[Any], target: str) -> Callable[..., Any] | None:
        if not self.import_python:
            if not _PYTHON_TARGET.match(target):
                self.issues.add(entry.loc("function"), f"{target!r} is not of the form package.module:function", "")
                return None
            self.not_imported.append(f"{entry.loc('function')}: skill {entry.name!r}: {target}")
            return _not_imported(target)
        module_name, _, attribute = target.partition(":")
        root = str(self.specs.root)
        if root not in sys.path:
            sys.path.insert(0, root)  # python skills live beside the YAML or in installed packages
        try:
            module = importlib.import_module(module_name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is a config problem to report
            self.issues.add(entry.loc("function"), f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}", "check the module path and that it imports cleanly")
            return None
        function = getattr(module, attribute, None)
        if not callable(function):
            self.issues.add(entry.loc("function"), f"module {module_name!r} has no function {attribute!r}", "check the name after the colon")
            return None
        problem = signature_problem(function)
        if problem:
            self.issues.add(entry.loc("function"), f"{target} {problem}", "")
            return None
        return function

    # ─── tools ────────────────────────────────────────────────────────────────────────

    def _tool(self, entry: Entry[ToolSpec]) -> LinkedTool | None:
        spec = entry.spec
        kind = spec.type or "workflow"
        timeout = spec.timeout or self.specs.settings.limits.tool_timeout
        where = str(entry.loc(key=True))
        if kind == "workflow":
            if spec.workflow is None:
                self.issues.add(entry.loc(key=True), f"tool {entry.name!r} says neither which workflow it runs nor its type", "add `workflow: <name>` (or `type:` for a built-in tool type)")
                return None
            if spec.config:
                self.issues.add(entry.loc("config", key=True), "`config` is for tool types; a workflow tool takes none", "remove `config:`")
            parameters = spec.parameters if spec.parameters is not None else EMPTY_PARAMETERS
            if not self._tool_parameters(entry, parameters):
                return None
            if spec.workflow not in self.specs.workflows and self.specs.reported("workflows", spec.workflow):
                return None  # the workflow's own definition is already reported
            if spec.workflow not in self.specs.workflows:
                self.issues.add(entry.loc("workflow"), f"tool {entry.name!r} runs unknown workflow {spec.workflow!r}", suggest(spec.workflow, self.specs.workflows))
                return None
            workflow_entry = self.specs.workflows[spec.workflow]
            if not DataFlow(self, workflow_entry, leaves(workflow_entry.spec), tool_parameters=parameters, tool_name=entry.name).check_tool_args():
                return None
            executor = self.workflows.get(spec.workflow)
            if executor is None:
                return None
            return LinkedTool(entry.name, spec.description, parameters, CompiledSchema(parameters), spec.enabled, timeout, spec.confirm, executor, where)
        if spec.workflow is not None:
            self.issues.add(entry.loc("workflow", key=True), f"tool {entry.name!r} has type {kind!r} and a workflow", "use one of them")
            return None
        typed = self._tool_type_config(entry, kind, spec.config)
        if typed is None:
            return None
        registered, config = typed
        parameters = spec.parameters if spec.parameters is not None else registered.input_schema(config)
        if not self._tool_parameters(entry, parameters):
            return None
        description = registered.description(config, spec.description)
        return LinkedTool(entry.name, description, parameters, CompiledSchema(parameters), spec.enabled, timeout,
                          spec.confirm, registered.create(config), where,
                          self.specs.resolver.as_written(config.model_dump(mode="json")))  # references, never their values

    def _tool_sources(self, taken: set[str]) -> dict[str, LinkedTool]:
        """The tools of config/mcp.yaml's servers (connected once per process, kept across reloads)."""
        from ..executors.mcp_client import registry

        if not self.specs.mcp_servers and not registry.connections(self.specs.root):
            return {}
        from ..executors.mcp_client.link import link_mcp_servers
        from .overlay import apply_to_source_tools

        self.mcp = link_mcp_servers(self.specs.root, self.specs.mcp_servers, taken, self.specs.settings.limits.tool_timeout)
        return apply_to_source_tools(self.mcp.tools, self.source_tool_settings)

    def _strict(self, entry: Entry[ToolSpec], tool: LinkedTool) -> LinkedTool | None:
        """The tool with its OpenAI strict form (engine.lang.strict_schema) when its parameters
        qualify; `strict: true` makes one that does not a load error at the keyword."""
        form = to_strict(tool.parameters)
        if isinstance(form, NotStrict):
            if entry.spec.strict is not True:
                return tool
            where = entry.loc("parameters", *form.path, key=True) if entry.spec.parameters is not None else entry.loc("strict")
            self.issues.add(where, f"tool {entry.name!r} has strict: true, but its parameters cannot be sent in OpenAI "
                            f"strict mode: {form}", "remove that keyword (check it in the tool instead), or set strict: false")
            return None
        return dataclasses.replace(tool, strict=form)

    def _batch_defaults(self, entry: Entry[ToolSpec], tool: LinkedTool) -> LinkedTool | None:
        """`batch.expect`, compiled now so a bad expectation is a load error at its line."""
        expect = entry.spec.batch.expect  # type: ignore[union-attr]  # called only for a tool with `batch:`
        try:
            checks = compile_checks(expect, "", frozenset(self.specs.skills))
        except ExpectationError as exc:
            where = ("batch", "expect") if exc.index is None else ("batch", "expect", exc.index)
            self.issues.add(entry.loc(*where), f"tool {entry.name!r}: batch expectation: {exc.reason}",
                            "see docs/batch.md for the expectation operators")
            return None
        return dataclasses.replace(tool, batch_expect=checks)

    def _tool_type_config(
        self, entry: Entry[Any], kind: str, raw: dict[str, Any], *, in_step: bool = False
    ) -> "tuple[ToolType, Any] | None":
        """The registered type and its validated config (errors at their file:line), or None."""
        registered = tool_type(kind)
        if registered is not None and kind == "python" and not self.import_python:
            target = raw.get("function") if isinstance(raw, dict) else None
            self.not_imported.append(f"{entry.loc('config', key=True)}: {str(entry.path[0])[:-1]} {entry.name!r}: "
                                     f"type python, {target or '(no function)'}; its config is not checked")
            return None
        if registered is None:
            usable = [t for t in known_tool_types() if not (in_step and t == "workflow")]
            self.issues.add(entry.loc("type"), f"unknown tool type {kind!r}", f"use one of: {', '.join(usable)}")
            return None
        raw, readable = self.specs.resolver.resolve(raw, lambda sub: entry.loc("config", *sub), self.issues, short_form=True)
        if not readable:
            return None
        try:
            # `root` lets a type resolve project-relative things (e.g. python tools beside the YAML)
            config = registered.config_model.model_validate(raw, context={
                "root": self.specs.root, "read_by_reference": lambda text: self.specs.resolver.written(text) is not None})
        except ValidationError as exc:
            for error in exc.errors():
                report_pydantic_error(error, entry.source, entry.path + ("config",), raw, self.issues, self.specs.resolver.written)
            return None
        return registered, config

    def _tool_parameters(self, entry: Entry[ToolSpec], parameters: Any) -> bool:
        if not self._schema(entry, "parameters", parameters):
            return False
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            self.issues.add(entry.loc("parameters"), "tool parameters must be a JSON Schema with `type: object`", "model APIs pass arguments as one object; wrap them under properties:")
            return False
        return True


def _reachable(models: dict[str, ModelSpec], start: str) -> set[str]:
    """Every model a request to `start` may fall back to, through the others' `fallback:` too."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        spec = models.get(todo.pop())
        for other in spec.fallback if spec is not None else ():
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def _template_place(entry: Entry[Any], field: str, line: int) -> str:
    """`skills.yaml:12:9`: where line `line` of the skill's template `field` sits (asked on a render error)."""
    where = entry.source.block_location(entry.path + (field,), line)
    return f"{where.file}:{where.line}:{where.col}"


def _variable_hint(name: str, declared: set[str]) -> str:
    """`titel` with `title` declared is a typo, said first; else declare it or fix it."""
    close = difflib.get_close_matches(name, sorted(declared), n=1)
    if close:
        return f"did you mean {{{{ {close[0]} }}}}? (or add {name!r} under input.properties)"
    return f"add {name!r} under input.properties, or fix the variable name"


def _variable_location(entry: Entry[Any], field: str, source: str, name: str) -> Location:
    """Where a template first reads `name`: its line in the YAML file, and its column there."""
    import re

    import jinja2.nodes

    try:
        ast = TEMPLATE_ENV.parse(source)
    except Exception:  # noqa: BLE001 - syntax errors are reported on their own
        return entry.loc(field)
    lines = [node.lineno for node in ast.find_all(jinja2.nodes.Name) if node.name == name and node.ctx == "load"]
    if not lines:
        return entry.loc(field)
    where = entry.source.block_location(entry.path + (field,), min(lines))
    if 0 < where.line <= len(entry.source.lines):
        text = entry.source.lines[where.line - 1]
        found = re.search(rf"(?<![\w.]){re.escape(name)}\b", text[max(where.col - 1, 0) :])
        if found:
            return Location(where.file, where.line, where.col + found.start(), where.path)
    return where


def _declared_properties(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict):
        return None
    if schema.get("additionalProperties") not in (None, False) and not schema.get("properties"):
        return None  # an open object: any name may arrive
    return set((schema.get("properties") or {}).keys())

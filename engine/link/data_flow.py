"""The data flow of a workflow, checked at load: every mapping against the schemas it reads
from and writes into (`DataFlow`), and the pieces a workflow's link and the linker share.

Step references are checked once per workflow; `$toolArgs` references once per caller (a tool,
or a step running the workflow as a sub-workflow) against what that caller passes.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import IssueCollector, Location
from ..lang.conditions import Condition, ConditionSyntaxError, check_types
from ..lang.mapping import (
    Fallback,
    MappingSyntaxError,
    Reference,
    compile_mapping,
    format_path,
    is_reference,
    iter_references,
    parse_value,
)
from ..lang.schema import SchemaReader, describe_types_article, literal_types, types_fit
from ..runtime.contracts import Skill
from ..spec.loader import Entry, LoadedSpecs
from ..spec.models import ParallelSpec, StepSpec, WorkflowSpec
from ..spec.yaml_source import YamlPath

Site = tuple[Reference, Any, YamlPath, int, bool]  # a `$toolArgs` reference: (ref, target, path, position, required)


class Linking(Protocol):
    """What checking a workflow reads and records of the whole link: the linker's state
    (linker.py's `_Linker`). A Protocol, because the linker drives the workflows' links: it
    sits above them."""

    specs: LoadedSpecs
    issues: IssueCollector
    skills: dict[str, Skill]
    workflow_links: dict[str, Any]  # name → the WorkflowLink of each workflow that passed its check
    # Per workflow: its `$toolArgs` references with what they map into, in walk order.
    tool_arg_sites: dict[str, list[Site]]
    arg_conditions: dict[str, list[Any]]  # per workflow: `when`s reading $toolArgs (checked per caller)

    def warn(self, location: Location, message: str, hint: str = "") -> None: ...


@dataclass(frozen=True)
class Leaf:
    """One step as written, wherever it sits: at the top level or inside a parallel group."""

    spec: StepSpec
    path: YamlPath  # ("steps", i) or ("steps", i, "parallel", j)
    position: int  # index of its top-level entry: members of a group share their group's
    in_group: bool

    @property
    def plain(self) -> bool:
        s = self.spec
        return s.skill is not None and s.workflow is None and s.when is None and s.forEach is None and not self.in_group


def leaves(spec: WorkflowSpec) -> list[Leaf]:
    out: list[Leaf] = []
    for index, item in enumerate(spec.steps):
        if isinstance(item, ParallelSpec):
            out += [Leaf(member, ("steps", index, "parallel", j), index, True) for j, member in enumerate(item.parallel)]
        else:
            out.append(Leaf(item, ("steps", index), index, False))
    return out


def may_skip(step: StepSpec) -> bool:
    """Whether the step's output may be absent: it has a `when` that decides for the whole step
    (a forEach step's `when` that reads `$item` / `$index` filters items instead)."""
    if step.when is None:
        return False
    if step.forEach is None:
        return True
    try:
        return not Condition(step.when).uses_item
    except ConditionSyntaxError:
        return True  # reported where the condition is checked


def compile_or_report(issues: IssueCollector, entry: Entry[Any], path: YamlPath, mapping: Any) -> Any:
    """The compiled mapping, or None with each malformed reference reported at its own position."""
    try:
        return compile_mapping(mapping)
    except MappingSyntaxError:
        pass
    for sub, text in iter_references(mapping):
        try:
            parse_value(text)
        except MappingSyntaxError as exc:
            issues.add(entry.loc(*path, *sub), str(exc), "see the mapping language in docs/mapping.md")
    return None


LOOKS_LIKE_REFERENCE = re.compile(r"^(toolArgs(\.|\[|$)|steps\.[A-Za-z0-9_][A-Za-z0-9_-]*\.output\b|item(\.|\[)|index$)")



class DataFlow:
    """Checks a workflow's mappings against the schemas they read from and write into.

    Step references are checked once per workflow (tool_parameters=None); `$toolArgs`
    references are checked once per caller (a tool, or a step running it as a sub-workflow)
    against what that caller passes.
    """

    def __init__(self, linker: Linking, entry: Entry[WorkflowSpec], leaves: list[Leaf], *,
                 tool_parameters: dict[str, Any] | None, tool_name: str | None = None, caller: str | None = None):
        self.linker = linker
        self.entry = entry
        self.leaves = leaves
        self.tool_parameters = tool_parameters
        self.tool_name = tool_name
        self.caller = caller  # a step that runs this workflow (instead of a tool)
        self.order: dict[str, int] = {}
        self.in_group: set[str] = set()
        self.conditional: dict[str, str] = {}
        for leaf in leaves:
            self.order.setdefault(leaf.spec.id, leaf.position)
            if leaf.in_group:
                self.in_group.add(leaf.spec.id)
            if may_skip(leaf.spec):
                self.conditional[leaf.spec.id] = leaf.spec.when or ""
        self.produces: dict[str, Any] = {}  # step id → the schema of its output (None: anything)
        self.producer: dict[str, str] = {}  # step id → "skill 'x'" / "workflow 'y'", for messages
        self.current: Leaf | None = None
        self.item: tuple[SchemaReader, Any] | None = None  # inside a forEach step: the item's schema
        self.ok = True
        # When a list: the workflow's check records its `$toolArgs` references here.
        self.sites: list[Site] | None = None

    def enter(self, leaf: Leaf | None) -> None:
        self.current = leaf
        self.item = None

    def error(self, path: YamlPath, message: str, hint: str = "") -> None:
        self.linker.issues.add(self.entry.loc(*path), message, hint)
        self.ok = False

    def check_tool_args(self) -> bool:
        """Only `$toolArgs` references, against the caller's parameters."""
        sites = self.linker.tool_arg_sites.get(self.entry.name)
        if sites is not None:  # found by the workflow's check, which walked the same way
            for ref, target, path, index, target_required in sites:
                self._check_reference(ref, target, SchemaReader(target), path, index, target_required)
            self._check_conditions()
            return self.ok
        for leaf in self.leaves:
            skill = self.linker.skills.get(leaf.spec.skill or "")
            target = skill.input_schema_raw if skill else None
            self.check_value(leaf.spec.input, target, leaf.path + ("input",), leaf.position, target_required=True, only_args=True)
        if self.entry.spec.output is not None:
            self.check_value(self.entry.spec.output, None, ("output",), len(self.entry.spec.steps), target_required=False, only_args=True)
        return self.ok

    def _check_conditions(self) -> None:
        """The operand types of `when` conditions that read `$toolArgs`, against this caller."""
        def types_of(ref: Reference) -> Any:
            if ref.source != "toolArgs":
                return None  # checked with the workflow
            found = self.resolve(ref, (), 0, quiet=True)
            return found[0].types(found[1]) if found is not None and found[1] is not None else None

        for condition, step_id, path in self.linker.arg_conditions.get(self.entry.name, []):
            for problem in check_types(condition, types_of):
                self.error(path, f"when of step {step_id!r}: {problem.message}", problem.hint)

    def check_step_input(self, index: int, skill: Any, mapping: Any, path: YamlPath) -> bool:
        before = self.ok
        self.ok = True
        self.check_value(mapping, skill.input_schema_raw, path, index, target_required=True, skill=skill)
        result = self.ok
        self.ok = before and result
        return result

    def check_value(self, value: Any, target: Any, path: YamlPath, index: int, *, target_required: bool,
                    only_args: bool = False, skill: Any = None) -> None:
        reader = SchemaReader(target)
        if isinstance(value, str) and is_reference(value):
            try:
                parsed = parse_value(value)
            except MappingSyntaxError:
                return  # reported by the compiler
            if isinstance(parsed, Fallback):
                self._check_fallback(parsed, target, reader, path, index, target_required, only_args)
                return
            if only_args != (parsed.source == "toolArgs"):
                if self.sites is not None and not only_args:
                    self.sites.append((parsed, target, path, index, target_required))
                return
            self._check_reference(parsed, target, reader, path, index, target_required)
            return
        if not only_args and isinstance(value, str) and LOOKS_LIKE_REFERENCE.match(value):
            self.linker.warn(self.entry.loc(*path), f"{value!r} is a literal string that looks like a reference", f"write ${value} to read the value")
        if only_args is False and not isinstance(value, (dict, list)) and target is not None:
            literal = value[1:] if isinstance(value, str) and value.startswith("$$") else value
            if not types_fit(literal_types(literal), reader.types(target)):
                self.error(path, f"literal {literal!r} does not fit {_where_into(path)}, which expects {describe_types_article(reader.types(target))}", "change the value or the skill's input schema")
            return
        if isinstance(value, dict):
            self._check_object(value, target, reader, path, index, only_args, skill)
        elif isinstance(value, list):
            for position, sub in enumerate(value):
                exists, child = reader.child(target, position) if target is not None else (True, None)
                self.check_value(sub, child if exists else None, path + (position,), index, target_required=False, only_args=only_args)

    def _check_object(self, value: dict[str, Any], target: Any, reader: SchemaReader, path: YamlPath, index: int, only_args: bool, skill: Any) -> None:
        target_types = reader.types(target)
        if target is not None and target_types is not None and "object" not in target_types:
            if not only_args:
                self.error(path, f"an object is mapped into {_where_into(path)}, which expects {describe_types_article(target_types)}", "map an object only into an object input")
            return
        for key, sub in value.items():
            exists, child = reader.child(target, key) if target is not None else (True, None)
            if not exists:
                if not only_args:
                    owner = f"skill {skill.name!r}" if skill and path[-1] == "input" else "the target schema"
                    self.error(path + (key,), f"{owner} has no input {key!r}", "remove it, or declare it in the skill's input.properties")
                continue
            self.check_value(sub, child, path + (key,), index, target_required=reader.is_required(target, key), only_args=only_args)
        if not only_args and target is not None:
            resolved = reader.resolve(target)
            for key in (resolved.get("required") or []) if isinstance(resolved, dict) else []:
                if key not in value and not reader.has_default(target, key):
                    who = f"skill {skill.name!r}" if skill and path[-1] == "input" else "the target"
                    self.error(path, f"required input {key!r} of {who} is not mapped", f"add `{key}: $toolArgs.…` or `$steps.<id>.output…`")

    def _check_fallback(self, chain: Fallback, target: Any, reader: SchemaReader, path: YamlPath, index: int, target_required: bool, only_args: bool) -> None:
        """Each operand must fit the target; the chain may be absent only if every operand may."""
        always = False
        for operand in chain.operands:
            if not isinstance(operand, Reference):
                always = True
                if not only_args and target is not None and not types_fit(literal_types(operand), reader.types(target)):
                    self.error(path, f"the fallback {operand!r} in {chain.text!r} does not fit {_where_into(path)}, which expects {describe_types_article(reader.types(target))}", "change the fallback value")
                continue
            if only_args != (operand.source == "toolArgs"):
                if self.sites is not None and not only_args:
                    self.sites.append((operand, target, path, index, False))
                always = always or operand.source == "toolArgs"  # judged per tool, not here
                continue
            absent = self._check_reference(operand, target, reader, path, index, False)
            always = always or absent is False
        if not only_args and target_required and target is not None and not always:
            self.error(path, f"{chain.text} may be absent (every value in the chain may be), but {_where_into(path)} is required", "end the chain with a literal fallback, as in `?? []`")

    def resolve(self, ref: Reference, path: YamlPath, index: int, quiet: bool = False) -> tuple[SchemaReader, Any, bool] | None:
        """(reader, schema node, maybe absent) of what a reference reads; None when it cannot be read (reported)."""
        error = (lambda *a: None) if quiet else self.error
        if ref.source == "index":
            if self.item is None:
                error(path, f"{ref.text} is used outside a forEach step", "add `forEach:` to this step, or remove $index")
                return None
            return SchemaReader(None), {"type": "integer", "minimum": 0}, False
        if ref.source == "item":
            if self.item is None:
                error(path, f"{ref.text} is used outside a forEach step", "add `forEach: <array reference>` to this step, or read a $steps / $toolArgs value")
                return None
            reader, root, origin, optional = self.item[0], self.item[1], "the forEach item", False
        elif ref.source == "toolArgs":
            root, origin = self.tool_parameters, self._args_origin()
            reader, optional = SchemaReader(root), False
        else:
            step_id = ref.step_id or ""
            position = self.order.get(step_id)
            if position is None:
                error(path, f"{ref.text} reads step {step_id!r}, but workflow {self.entry.name!r} has no step with that id", suggest(step_id, self.order))
                return None
            current = self.current
            if current is not None and current.spec.id == step_id:
                error(path, f"{ref.text} reads step {step_id!r}, which is this step; only earlier steps have outputs", "reorder the steps or read an earlier step")
                return None
            if current is not None and position == index and step_id in self.in_group and current.in_group:
                error(path, f"{ref.text} reads step {step_id!r}, which runs at the same time as step {current.spec.id!r} (same parallel group)", f"move step {current.spec.id!r} after the group, or {step_id!r} before it")
                return None
            if position >= index:
                error(path, f"{ref.text} reads step {step_id!r}, which runs later (step {position + 1}); only earlier steps have outputs", "reorder the steps or read an earlier step")
                return None
            if step_id not in self.produces and self.tool_parameters is None:
                return None  # its own problems are already reported
            root = self.produces.get(step_id)
            reader, optional = SchemaReader(root), step_id in self.conditional
            origin = f"the output of step {step_id!r} ({self.producer.get(step_id, 'unknown')})"
        node, part_optional = self._walk(ref, reader, root, origin, path, error)
        if node is _NOWHERE:
            return None
        return reader, node, optional or (ref.source in ("toolArgs", "item") and part_optional)

    def _walk(self, ref: Reference, reader: SchemaReader, node: Any, origin: str, path: YamlPath, error: Any) -> tuple[Any, bool]:
        optional = False
        for depth, part in enumerate(ref.path):
            if node is None:
                break
            if isinstance(part, str) and not reader.is_required(node, part) and not reader.has_default(node, part):
                optional = True
            parent = node
            exists, node = reader.child(node, part)
            if exists:
                continue
            shown = format_path(ref.path[: depth + 1]).lstrip(".")
            parent_types = reader.types(parent)
            wanted = "array" if isinstance(part, int) else "object"
            if depth > 0 and parent_types is not None and wanted not in parent_types:
                above = format_path(ref.path[:depth]).lstrip(".")
                error(path, f"{ref.text}: {above!r} in {origin} is {describe_types_article(parent_types)}, so it has no {format_path((part,))}", "fix the path, or change the source schema")
            elif ref.source == "toolArgs" and depth == 0:
                if self.caller:
                    error(path, f"{ref.text}: {self.caller} maps no input {shown!r} into this workflow", f"map {shown!r} in that step's `input:`, or fix the name")
                else:
                    error(path, f"{ref.text}: tool {self.tool_name!r} declares no parameter {shown!r}", f"declare {shown!r} under the tool's parameters.properties, or fix the name")
            else:
                error(path, f"{ref.text}: {origin} has no {shown!r}", "fix the path, or declare it in the source schema")
            return _NOWHERE, optional
        return node, optional

    def _args_origin(self) -> str:
        return f"the input {self.caller} maps" if self.caller else f"the parameters of tool {self.tool_name!r}"

    def _check_reference(self, ref: Reference, target: Any, reader: SchemaReader, path: YamlPath, index: int, target_required: bool) -> bool | None:
        """Check one reference into `target`; returns whether it may be absent (None: not readable)."""
        if ref.source == "toolArgs" and self.tool_parameters is None:
            return None
        found = self.resolve(ref, path, index)
        if found is None:
            return None
        source_reader, node, maybe_absent = found
        source_types = source_reader.types(node) if node is not None else None
        target_types = reader.types(target) if target is not None else None
        if not types_fit(source_types, target_types) and path[-1] == "forEach":
            self.error(path, f"forEach reads {ref.text}, which is {describe_types_article(source_types)}, not an array", "point forEach at an array")
        elif not types_fit(source_types, target_types):
            self.error(path, f"{ref.text} is {describe_types_article(source_types)}, but {_where_into(path)} expects {describe_types_article(target_types)}", "map a value of the right type, or change one of the schemas")
        if maybe_absent and target_required and target is not None:
            if ref.source == "toolArgs":
                self.error(path, f"{ref.text} is optional in {self._args_origin()} but {_where_into(path)} is required", "make the argument required, give it a default, or make the input optional")
            elif ref.source == "item":
                self.error(path, f"{ref.text} is optional in the forEach item but {_where_into(path)} is required", f"make it required in the items schema, or add a fallback: `{ref.text} ?? <value>`")
            else:
                when = self.conditional.get(ref.step_id or "", "")
                self.error(path, f"{ref.text} may be absent (step {ref.step_id!r} runs only when {when}) but {_where_into(path)} is required", f"add a fallback, as in `{ref.text} ?? <value>`, or make the input optional")
        return maybe_absent

    def value_schema(self, value: Any) -> tuple[Any, bool]:
        """(schema, always present) of what a mapping builds, for what a sub-workflow sees and returns."""
        if isinstance(value, str) and is_reference(value):
            try:
                parsed = parse_value(value)
            except MappingSyntaxError:
                return {}, True
            if isinstance(parsed, Fallback):
                return {}, any(not isinstance(op, Reference) for op in parsed.operands)
            found = self.resolve(parsed, (), self.current.position if self.current else len(self.entry.spec.steps), quiet=True)
            if found is None:
                return {}, parsed.source != "steps" or parsed.step_id not in self.conditional
            reader, node, absent = found
            node = reader.resolve(node)
            return (node if isinstance(node, dict) and "$ref" not in str(node) else {}), not absent
        if isinstance(value, dict):
            parts = {key: self.value_schema(sub) for key, sub in value.items()}
            return ({"type": "object", "properties": {k: s for k, (s, _) in parts.items()},
                     "required": [k for k, (_, present) in parts.items() if present], "additionalProperties": False}, True)
        if isinstance(value, list):
            return {"type": "array"}, True
        literal = value[1:] if isinstance(value, str) and value.startswith("$$") else value
        return {"type": sorted(literal_types(literal))[0]}, True


_NOWHERE: Any = object()


def _where_into(path: YamlPath) -> str:
    keys = [str(p) for p in path if p not in ("steps", "input", "parallel") and not isinstance(p, int)]
    return f"input {'.'.join(keys)!r}" if keys else "the input"


def suggest(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    names = sorted(known)
    return f"known: {', '.join(names[:10])}" if names else "none are defined"

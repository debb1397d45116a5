"""Link one workflow: check its steps, conditions and data flow at load, then build its executor.

Every construct is checked before anything runs, each problem at its `file:line:col` with a
fix: unknown skills and workflows, recursion through sub-workflows, `forEach` over something
that is not an array, `$item` outside a `forEach`, a `parallel` member reading a sibling, a
maybe-absent output (of a step with `when`) fed into a required input without `??`, the
references and operand types of `when`, and a sub-workflow's `$toolArgs` against the calling
step's mapping (the walks of mappings against schemas are data_flow.py's `DataFlow`).
"""

from __future__ import annotations

from typing import Any

from ..executors.workflow import LinkedStep, RetryPolicy, WorkflowExecutor
from ..executors.workflow_nodes import ForEach, Parallel, Step, SubWorkflow
from ..lang.conditions import Condition, ConditionSyntaxError, check_types
from ..lang.mapping import (
    Fallback,
    MappingSyntaxError,
    Reference,
    compile_mapping,
    compile_reference,
    is_reference,
    parse_value,
)
from ..lang.schema import SchemaReader, describe_types_article
from ..spec.loader import Entry
from ..spec.models import ParallelSpec, StepSpec, WorkflowSpec
from ..spec.yaml_source import YamlPath
from .data_flow import LOOKS_LIKE_REFERENCE, DataFlow, Leaf, Linking, compile_or_report, leaves, may_skip, suggest

_MAX_RETRIES = 10  # RetrySpec.times allows 0..10; `retry: N` is its short form


def workflow_order(linker: Linking) -> list[str]:
    """Workflows with the ones they call first; a call cycle is reported (and its members left out)."""
    specs = linker.specs.workflows
    calls = {name: [(leaf, leaf.spec.workflow) for leaf in leaves(entry.spec) if leaf.spec.workflow in specs]
             for name, entry in specs.items()}
    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cyclic: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        for leaf, callee in calls[name]:
            assert callee is not None
            if state.get(callee) == 1:
                loop = stack[stack.index(callee):] + [name, callee] if callee != name else [name, name]
                chain = " → ".join(dict.fromkeys(loop[:-1])) + f" → {callee}"
                linker.issues.add(specs[name].loc(*leaf.path, "workflow"),
                                  f"step {leaf.spec.id!r} makes workflow {name!r} run itself ({chain})",
                                  "a workflow may not call itself, directly or through others; move the shared steps into a third workflow")
                cyclic.update(loop)
            elif state.get(callee) is None:
                visit(callee, stack + [name])
        state[name] = 2
        order.append(name)

    for name in specs:
        if name not in state:
            visit(name, [])
    return [name for name in order if name not in cyclic]


class WorkflowLink:
    """The load-time check of one workflow and, once it passed, the builder of its executors."""

    def __init__(self, linker: Linking, entry: Entry[WorkflowSpec]):
        self.linker = linker
        self.entry = entry
        self.leaves = leaves(entry.spec)
        self.flow = DataFlow(linker, entry, self.leaves, tool_parameters=None)
        self.output_schema: Any = None  # what the workflow returns, for the steps that call it

    # ─── checks ───────────────────────────────────────────────────────────────────────

    def check(self) -> bool:
        ok = self._check_shapes()
        flow = self.flow
        flow.sites = []
        for leaf in self.leaves:
            flow.enter(leaf)
            ok = self._check_leaf(leaf) and ok
        spec = self.entry.spec
        if spec.output is not None:
            flow.enter(None)
            if compile_or_report(self.linker.issues, self.entry, ("output",), spec.output) is None:
                ok = False
            else:
                flow.check_value(spec.output, None, ("output",), len(spec.steps), target_required=False)
            self.output_schema = flow.value_schema(spec.output)[0]
        elif self.leaves:
            self.output_schema = flow.produces.get(self.leaves[-1].spec.id)
        if flow.sites is not None:
            self.linker.tool_arg_sites[self.entry.name] = flow.sites
        return ok and flow.ok

    def _error(self, path: YamlPath, message: str, hint: str = "") -> None:
        self.linker.issues.add(self.entry.loc(*path), message, hint)

    def _check_shapes(self) -> bool:
        """Ids, retries, what each step runs, and options that need another option."""
        ok, name = True, self.entry.name
        seen: dict[str, int] = {}  # step id → the number of the step that took it
        specs = self.linker.specs
        for number, leaf in enumerate(self.leaves, 1):
            step, path = leaf.spec, leaf.path
            if step.id in seen:
                self._error(path + ("id",), f"duplicate step id {step.id!r} in workflow {name!r} (first used by step {seen[step.id]})", "give every step its own id")
                ok = False
            else:
                seen[step.id] = number
            if isinstance(step.retry, int) and not isinstance(step.retry, bool) and not 0 <= step.retry <= _MAX_RETRIES:
                self._error(path + ("retry",), f"retry: {step.retry} is not a number of retries", f"use 0 to {_MAX_RETRIES}, or `retry: {{times: N, delay: 1s}}`")
                ok = False
            if step.skill is not None and step.workflow is not None:
                self._error(path + ("workflow",), f"step {step.id!r} has both `skill:` and `workflow:`", "a step runs one skill or one workflow; keep one of them")
                ok = False
            elif step.skill is None and step.workflow is None:
                self._error(path + ("id",), f"step {step.id!r} says neither which skill nor which workflow it runs", "add `skill: <name>` or `workflow: <name>`")
                ok = False
            elif step.skill is not None and step.skill not in specs.skills:
                if not specs.reported("skills", step.skill):
                    self._error(path + ("skill",), f"step {step.id!r} uses unknown skill {step.skill!r}", suggest(step.skill, specs.skills))
                ok = False
            elif step.workflow is not None and step.workflow not in specs.workflows:
                if not specs.reported("workflows", step.workflow):
                    self._error(path + ("workflow",), f"step {step.id!r} runs unknown workflow {step.workflow!r}", suggest(step.workflow, specs.workflows))
                ok = False
            if step.workflow is not None and step.retry is not None:
                self._error(path + ("retry",), f"step {step.id!r} runs a workflow, which has no retry of its own", "set `retry:` on the sub-workflow's steps")
                ok = False
            for option in ("concurrency", "onItemError", "max_items"):
                if option in step.model_fields_set and step.forEach is None:
                    self._error(path + (option,), f"step {step.id!r}: {option} applies to forEach steps only", f"remove `{option}:`, or add `forEach: <array reference>`")
                    ok = False
            ceiling = self.linker.specs.settings.limits.max_items
            if step.max_items is not None and step.max_items > ceiling:
                self._error(path + ("max_items",), f"step {step.id!r}: max_items {step.max_items} is above the engine's limit of {ceiling} items (limits.max_items)",
                            f"lower it to {ceiling} or less, or raise limits.max_items in config/engine.yaml")
                ok = False
        last = self.entry.spec.steps[-1]
        if isinstance(last, ParallelSpec) and self.entry.spec.output is None:
            self._error(("steps", len(self.entry.spec.steps) - 1, "parallel"), f"workflow {name!r} ends with a parallel group, so it has no last step to return", "add `output:` saying what the workflow returns (e.g. a mapping of the members' outputs)")
            ok = False
        return ok

    def _check_leaf(self, leaf: Leaf) -> bool:
        step, flow = leaf.spec, self.flow
        ok = True
        if step.forEach is not None:
            ok = self._check_for_each(leaf) and ok
            if flow.item is None:  # its forEach is reported (or reads a broken step): $item reads stay unchecked
                flow.item = (SchemaReader(None), None)
        if step.when is not None:
            ok = self._check_when(leaf) and ok
        path = leaf.path + ("input",)
        if compile_or_report(self.linker.issues, self.entry, path, step.input) is None:
            flow.sites = None
            return False
        if step.skill is not None:
            skill = self.linker.skills.get(step.skill)
            if skill is None:
                flow.sites = None  # this walk differs from a tool's: tools walk on their own
                flow.check_value(step.input, None, path, leaf.position, target_required=False)
                return False
            ok = flow.check_step_input(leaf.position, skill, step.input, path) and ok
            produced = skill.produces
        else:
            flow.check_value(step.input, None, path, leaf.position, target_required=False)
            ok = self._check_sub_workflow(leaf) and ok
            sub = self.linker.workflow_links.get(step.workflow or "")
            produced = sub.output_schema if sub is not None else None
        if step.forEach is not None:
            produced = _items_schema(produced, step.onItemError)
        flow.produces[step.id] = produced
        flow.producer[step.id] = f"skill {step.skill!r}" if step.skill is not None else f"workflow {step.workflow!r}"
        if step.forEach is not None:
            flow.producer[step.id] += ", for each item"
        return ok

    def _check_for_each(self, leaf: Leaf) -> bool:
        step, flow = leaf.spec, self.flow
        path = leaf.path + ("forEach",)
        text = step.forEach or ""
        if not is_reference(text):
            fix = f"write ${text}" if LOOKS_LIKE_REFERENCE.match(text) else "write a reference such as $steps.<id>.output.items or $toolArgs.items"
            self._error(path, f"forEach of step {step.id!r} is {text!r}, not a reference to an array", fix)
            return False
        try:
            parsed = parse_value(text)
        except MappingSyntaxError as exc:
            self._error(path, str(exc), "see docs/workflows.md")
            return False
        if isinstance(parsed, Fallback) or parsed.source in ("item", "index"):
            self._error(path, f"forEach of step {step.id!r} must be one $toolArgs or $steps reference", "write e.g. forEach: $steps.split.output.items")
            return False
        if parsed.source == "toolArgs":
            if flow.sites is not None:
                flow.sites.append((parsed, {"type": "array"}, path, leaf.position, False))
            flow.item = (SchemaReader(None), None)  # known per tool: $item paths are checked at run time
            return True  # its type is checked against each tool's parameters
        found = flow.resolve(parsed, path, leaf.position)
        if found is None:
            return False
        reader, node, _ = found
        types = reader.types(node) if node is not None else None
        if types is not None and "array" not in types:
            self._error(path, f"forEach of step {step.id!r} reads {parsed.text}, which is {describe_types_article(types)}, not an array", "point forEach at an array")
            return False
        exists, item = reader.child(node, 0) if node is not None else (True, None)
        flow.item = (reader, item if exists else None)
        return True

    def _check_when(self, leaf: Leaf) -> bool:
        step, flow = leaf.spec, self.flow
        path = leaf.path + ("when",)
        try:
            condition = Condition(step.when or "")
        except ConditionSyntaxError as exc:
            self._error(path, f"cannot read the condition of step {step.id!r} at {(step.when or '')[exc.pos:][:20]!r}: {exc}", "see the condition language in docs/workflows.md")
            return False
        before = flow.ok
        flow.ok = True

        def types_of(ref: Reference) -> Any:
            if ref.source == "toolArgs":
                if flow.sites is not None:
                    flow.sites.append((ref, None, path, leaf.position, False))
                return None
            found = flow.resolve(ref, path, leaf.position)
            if found is None:
                return None
            reader, node, _ = found
            return reader.types(node) if node is not None else None

        for problem in check_types(condition, types_of):
            self._error(path, f"when of step {step.id!r}: {problem.message}", problem.hint)
            flow.ok = False
        if any(ref.source == "toolArgs" for ref in condition.references):  # its types are known per caller
            self.linker.arg_conditions.setdefault(self.entry.name, []).append((condition, step.id, path))
        result = flow.ok
        flow.ok = before and result
        return result

    def _check_sub_workflow(self, leaf: Leaf) -> bool:
        """The sub-workflow's `$toolArgs` against what this step maps into it."""
        step = leaf.spec
        sub_entry = self.linker.specs.workflows.get(step.workflow or "")
        if sub_entry is None or step.workflow not in self.linker.workflow_links:
            return False  # unknown, broken or recursive: reported on its own
        parameters = self.flow.value_schema(step.input)[0]
        if not isinstance(parameters, dict) or "object" not in (SchemaReader(parameters).types(parameters) or {"object"}):
            self._error(leaf.path + ("input",), f"step {step.id!r} runs workflow {step.workflow!r}, whose input must be an object", "map `input:` as `name: value` pairs")
            return False
        caller = f"step {step.id!r} of workflow {self.entry.name!r}"
        return DataFlow(self.linker, sub_entry, leaves(sub_entry.spec), tool_parameters=parameters, caller=caller).check_tool_args()

    # ─── building ─────────────────────────────────────────────────────────────────────

    def build(self, prefix: str = "") -> WorkflowExecutor:
        """The executor (after a clean check). `prefix`: `step/` for a sub-workflow's events."""
        spec = self.entry.spec
        skippable = frozenset(leaf.spec.id for leaf in self.leaves if may_skip(leaf.spec))
        total = len(self.leaves)
        numbers = {leaf.spec.id: number for number, leaf in enumerate(self.leaves, 1)}
        entries: list[Any] = []
        for leaf in self.leaves:
            node = self._node(leaf, prefix, skippable, numbers[leaf.spec.id], total)
            if leaf.in_group:
                if entries and isinstance(entries[-1], list) and entries[-1][0][0] == leaf.position:
                    entries[-1].append((leaf.position, node))
                else:
                    entries.append([(leaf.position, node)])
            else:
                entries.append(node)
        steps = [Parallel([node for _, node in item]) if isinstance(item, list) else item for item in entries]
        output = compile_mapping(spec.output, skippable) if spec.output is not None else None
        executor = WorkflowExecutor(self.entry.name, steps, output, spec.output, caller=prefix[:-1] or None)
        assert executor.total == total  # "step k of N": the executor counts as the nodes were numbered
        return executor

    def _node(self, leaf: Leaf, prefix: str, skippable: frozenset[str], number: int, total: int) -> Any:
        step = leaf.spec
        event_id = prefix + step.id
        resolver = compile_mapping(step.input, skippable)
        unit: Any
        if step.skill is not None:
            retry = step.retry_spec
            unit = LinkedStep(step.id, self.linker.skills[step.skill], resolver, step.timeout, RetryPolicy(retry.times, retry.delay),
                              event_id)
            if leaf.plain:
                return unit
        else:
            sub = self.linker.workflow_links[step.workflow or ""].build(event_id + "/")
            unit = SubWorkflow(step.id, event_id, resolver, sub)
        for_each = None
        if step.forEach is not None:
            ref = parse_value(step.forEach)
            assert isinstance(ref, Reference)
            for_each = ForEach(compile_reference(ref, ref.step_id in skippable), step.concurrency, step.onItemError,
                               *_max_items(step, self.linker.specs.settings.limits.max_items))
        condition = Condition(step.when) if step.when is not None else None
        return Step(step.id, event_id, unit, number, total, condition, for_each)


def _max_items(step: StepSpec, ceiling: int) -> tuple[int, str]:
    """The most items a forEach step takes, and the setting that says so (the step's own is lower)."""
    if step.max_items is None:
        return ceiling, "limits.max_items"
    return step.max_items, "max_items"


def _items_schema(produced: Any, mode: str) -> Any:
    """What a forEach step outputs: the array of its items' outputs (wrapped with `collect`)."""
    item = produced if produced is not None else {}
    if mode == "collect":
        error = {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}, "required": ["code", "message"]}
        item = {"type": "object", "properties": {"ok": {"type": "boolean"}, "output": item, "error": error}, "required": ["ok"]}
    return {"type": "array", "items": item}

"""Find a project's YAML files, load them safely and validate their shapes.

Each tool, skill and workflow is validated on its own so that one bad entry does not hide
the problems of the others: every issue is collected, with its `file:line:col`.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from ..errors import IssueCollector, Location
from .mcp_config import McpServerSpec, load_mcp_servers, mcp_files
from .models import (
    IDENT_RE,
    TOOL_NAME_RE,
    EngineSettings,
    LimitSettings,
    LoggingSettings,
    ModelSpec,
    ParallelSpec,
    PromptSkillSpec,
    PythonSkillSpec,
    RetrySpec,
    RouterSettings,
    SkillSpec,
    StepSpec,
    TemplateSkillSpec,
    ToolSpec,
    WorkflowSpec,
)
from .references import Resolver, literal
from .yaml_source import SourceMap, YamlLoadError, YamlPath, format_path, load_yaml_file

S = TypeVar("S")


@dataclass(frozen=True)
class Entry(Generic[S]):
    """One named spec and where it was written."""

    name: str
    spec: S
    source: SourceMap
    path: YamlPath

    def loc(self, *sub: str | int, key: bool = False) -> Location:
        return self.source.locate(self.path + sub, key=key)


@dataclass
class LoadedSpecs:
    root: Path
    tools: dict[str, Entry[ToolSpec]] = field(default_factory=dict)
    skills: dict[str, Entry[Any]] = field(default_factory=dict)
    workflows: dict[str, Entry[WorkflowSpec]] = field(default_factory=dict)
    models: dict[str, Entry[ModelSpec]] = field(default_factory=dict)
    default_model: str = "mock"
    default_model_loc: Location | None = None
    settings: EngineSettings = field(default_factory=EngineSettings)
    settings_source: SourceMap | None = None
    files: list[str] = field(default_factory=list)
    # Names that are defined but whose definition is invalid (already reported): references
    # to them are not reported again as "unknown".
    invalid: dict[str, set[str]] = field(default_factory=lambda: {"tools": set(), "skills": set(), "workflows": set(), "models": set()})
    # Kinds with a file that could not be read or parsed: any name may be defined there.
    unreadable: set[str] = field(default_factory=set)
    # `${env:…}` / `${file:…}` references of this load, and the secrets they read (references.py).
    resolver: Resolver = field(init=False)
    mcp_servers: list[tuple[str, McpServerSpec, SourceMap]] = field(default_factory=list)  # config/mcp.yaml

    def __post_init__(self) -> None:
        self.resolver = Resolver(self.root)

    def reported(self, kind: str, name: str) -> bool:
        """True when a reference to `name` may not be called unknown: its definition is
        invalid, or sits in a file that could not be parsed (both already reported)."""
        return name in self.invalid[kind] or kind in self.unreadable


_SKILL_ADAPTER: TypeAdapter[Any] = TypeAdapter(SkillSpec)
_SECTIONS: dict[str, tuple[str, Any, Any]] = {
    # file stem: (top-level key, validator, name pattern)
    "tools": ("tools", TypeAdapter(ToolSpec), TOOL_NAME_RE),
    "skills": ("skills", _SKILL_ADAPTER, IDENT_RE),
    "workflows": ("workflows", TypeAdapter(WorkflowSpec), IDENT_RE),
}
_NAME_HINT = {
    "tools": "use 1-64 letters, digits, '_' or '-' (what model APIs accept)",
    "skills": "use letters, digits, '_' or '-', starting with a letter or digit",
    "workflows": "use letters, digits, '_' or '-', starting with a letter or digit",
}


def section_files(root: Path, stem: str) -> list[Path]:
    """`<stem>.yaml` (or .yml) at the root, then `<stem>/*.yaml` sorted by name."""
    files = [p for p in (root / f"{stem}.yaml", root / f"{stem}.yml") if p.is_file()]
    folder = root / stem
    if folder.is_dir():
        files += sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return files


def load_specs(root: Path, issues: IssueCollector) -> LoadedSpecs:
    root = root.resolve()
    loaded = LoadedSpecs(root=root)
    if not root.is_dir():
        issues.add(Location(str(root)), "project directory does not exist", "pass --dir with a project directory")
        return loaded
    found_any = False
    for stem, (top_key, adapter, name_re) in _SECTIONS.items():
        target: dict[str, Entry[Any]] = getattr(loaded, stem)
        for file in section_files(root, stem):
            found_any = True
            data, source = _load(file, root, issues, loaded)
            if source is None:
                loaded.unreadable.add(stem)
                continue
            entries = _entries(data, source, top_key, issues)
            if entries is None:
                loaded.unreadable.add(stem)
                continue
            for name, raw, path in entries:
                if not name_re.match(name):
                    issues.add(source.locate(path, key=True), f"invalid {stem[:-1]} name {name!r}", _NAME_HINT[stem])
                    loaded.invalid[stem].add(name)
                    continue
                if name in target:
                    first = target[name].loc(key=True)
                    issues.add(
                        source.locate(path, key=True),
                        f"duplicate {stem[:-1]} {name!r} (first defined at {first})",
                        "rename or remove one of them",
                    )
                    continue
                spec = _validate(adapter, _as_text(raw), source, path, issues)
                if spec is not None:
                    target[name] = Entry(name, spec, source, path)
                else:
                    loaded.invalid[stem].add(name)
    if not found_any:
        issues.add(
            Location(str(root)),
            "no tools.yaml, skills.yaml or workflows.yaml found",
            "run from a project directory or pass --dir",
        )
    _load_models(root, loaded, issues)
    _load_settings(root, loaded, issues)
    for file in mcp_files(root)[:1]:
        loaded.files.append(_display(file, root))
        loaded.mcp_servers = load_mcp_servers(file, _display(file, root), loaded.resolver, issues,
                                              functools.partial(report_pydantic_errors, written=loaded.resolver.written))
    return loaded


def _load(file: Path, root: Path, issues: IssueCollector, loaded: LoadedSpecs) -> tuple[Any, SourceMap | None]:
    display = _display(file, root)
    loaded.files.append(display)
    try:
        return load_yaml_file(file, display)
    except YamlLoadError as exc:
        issues.issues.append(exc.issue)
        return None, None


def _as_text(raw: Any) -> Any:
    """A tool's, skill's or workflow's fields as text (a description, a schema, a prompt reads no
    reference: `$${` is a literal `${`), but for a type's `config`, a configuration value the
    linker reads references in (stored tools have one too)."""
    if not isinstance(raw, dict):
        return raw
    fields = {key: literal(value) for key, value in raw.items() if key != "config"}
    if "config" in raw:
        fields["config"] = raw["config"]
    return fields


def _display(file: Path, root: Path) -> str:
    try:
        return str(file.relative_to(root))
    except ValueError:
        return str(file)


def _entries(data: Any, source: SourceMap, top_key: str, issues: IssueCollector) -> list[tuple[str, Any, YamlPath]] | None:
    """The file's named entries; None when the file's shape is wrong (already reported)."""
    if data is None:
        return []
    if not isinstance(data, dict):
        issues.add(source.locate(()), f"expected a mapping with a `{top_key}:` key", f"start the file with `{top_key}:`")
        return None
    shape_ok = True
    for key in data:
        if key != top_key:
            issues.add(source.locate((key,), key=True), f"unknown top-level key {key!r}", f"only `{top_key}:` is allowed here")
            shape_ok = False
    section = data.get(top_key)
    if section is None:
        return [] if shape_ok else None
    if not isinstance(section, dict):
        issues.add(source.locate((top_key,)), f"`{top_key}` must be a mapping of name → definition", f"write each {top_key[:-1]} as `name:` with its fields indented below")
        return None
    return [(str(name), raw, (top_key, name)) for name, raw in section.items()]


def _validate(adapter: TypeAdapter[Any], raw: Any, source: SourceMap, path: YamlPath, issues: IssueCollector,
              written: Written | None = None) -> Any:
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        report_pydantic_errors(exc.errors(), source, path, raw, issues, written=written)
        return None


def report_pydantic_error(error: Any, source: SourceMap, path: YamlPath, raw: Any, issues: IssueCollector,
                          written: Written | None = None) -> None:
    """Translate one pydantic error into a positioned issue with a hint."""
    report_pydantic_errors([error], source, path, raw, issues, written=written)


def report_pydantic_errors(errors: list[Any], source: SourceMap, path: YamlPath, raw: Any, issues: IssueCollector, *,
                           written: Written | None = None) -> None:
    """Translate pydantic errors into positioned issues with hints.

    A misspelt field shows up twice in pydantic (an extra `desciption`, a missing
    `description`); it is reported once, as the typo, with the fix. `written` (Resolver.written)
    tells the values `raw` read from a reference: an error about one names the reference, never
    the value.
    """
    errors = _one_union_branch(errors, raw)
    cleaned = [(error, _strip_union_tags(tuple(error["loc"]), raw)) for error in errors]
    extras: dict[YamlPath, list[str]] = {}
    missing: dict[YamlPath, list[str]] = {}
    for error, loc in cleaned:
        if error["type"] == "extra_forbidden" and loc:
            extras.setdefault(loc[:-1], []).append(str(loc[-1]))
        elif error["type"] == "missing" and loc:
            missing.setdefault(loc[:-1], []).append(str(loc[-1]))
    typo_for: dict[YamlPath, str] = {}  # extra key path -> the missing field it misspells
    for parent, names in extras.items():
        wanted = list(missing.get(parent, []))
        for name in names:
            close = difflib.get_close_matches(name, wanted, n=1, cutoff=0.6)
            if close:
                typo_for[parent + (name,)] = close[0]
                wanted.remove(close[0])
    fixed = set((loc[:-1] + (field,)) for loc, field in typo_for.items())
    for error, loc in cleaned:
        kind = error["type"]
        field_path = format_path(loc)
        if kind == "extra_forbidden" and loc:
            typo = typo_for.get(loc)
            if typo is not None:
                hint = f"did you mean {typo!r}? ({typo!r} is required)"
            else:
                close = difflib.get_close_matches(str(loc[-1]), _FIELD_NAMES, n=1, cutoff=0.75)
                if close and close[0] == str(loc[-1]):
                    hint = f"{close[0]!r} belongs to another kind of entry; remove it here"
                else:
                    hint = f"did you mean {close[0]!r}?" if close else "check the spelling; see schemas/ for the allowed fields"
            issues.add(source.locate(path + loc, key=True), f"unknown field {field_path!r}", hint)
        elif kind == "missing" and loc:
            if loc in fixed:
                continue
            issues.add(source.locate(path + loc[:-1], key=True), f"missing required field {field_path!r}", f"add `{loc[-1]}:`")
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            where = source.locate(path + loc + ("kind",)) if kind == "union_tag_invalid" else source.locate(path + loc, key=True)
            what = "skill has no `kind`" if kind == "union_tag_not_found" else f"unknown skill kind {_get(raw, loc + ('kind',))!r}"
            issues.add(where, what, "set `kind:` to prompt, python, template or tool")
        elif kind in ("model_type", "model_attributes_type", "dict_type") and not isinstance(_get(raw, loc), dict):
            got = _yaml_type(_get(raw, loc) if loc else raw)
            what = f"{field_path!r} must be a mapping" if loc else "expected a mapping of fields here"
            issues.add(source.locate(path + loc), f"{what}, not {got}", "write `key: value` lines under it, indented")
        else:
            message = error["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            last = str(loc[-1]) if loc else ""
            hint = _FIELD_HINTS.get(last) or _KIND_HINTS.get(kind) or "see schemas/ for what this field accepts"
            if written is not None:
                message = _without_read_values(message, _get(raw, loc) if loc else raw, written)
            issues.add(source.locate(path + loc), f"{field_path or 'value'}: {message}", hint)


Written = Callable[[Any], "str | None"]
_PIECE = re.compile(r"[A-Za-z0-9]{4,}")


def _without_read_values(message: str, value: Any, written: Written) -> str:
    """`message` about `value` with every string read from a reference named by the reference
    (`the value read from ${file:…} is not a size`); when a piece of one still shows (a
    validator quoted part of it, escaped or cut), the message says only that it is not valid."""
    for text in _strings_under(value):
        reference = written(text)
        if reference is None:
            continue
        named = f"the value read from `{reference}`"
        message = message.replace(repr(text), named).replace(text, named)
        if any(piece in message for piece in _PIECE.findall(text) if piece not in reference):
            return f"{named} is not valid here"
    return message


def _strings_under(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings_under(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _strings_under(item)]
    return []


_DURATION_HINT = "write a duration such as 30s, 500ms or 2m"
_FIELD_HINTS = {
    "function": "write it as package.module:function",
    "timeout": _DURATION_HINT,
    "delay": _DURATION_HINT,
    "tool_timeout": _DURATION_HINT,
    "steps": "list the steps, each with `id:` and `skill:` (or `workflow:`), or `parallel:` groups of them",
    "concurrency": "write how many items may run at once, 1 to 1000",
    "onItemError": "use fail, skip or collect",
    "id": "use letters, digits, '_' or '-', starting with a letter or digit",
    "retry": "write a number of retries, or a mapping with `times:` and `delay:`",
    "defaultHeaders": "write `Name: value` strings; a header that carries a credential needs allowedDomains",
}


def _field_names() -> list[str]:
    names: set[str] = set()
    for model in (ToolSpec, PromptSkillSpec, PythonSkillSpec, TemplateSkillSpec, WorkflowSpec, StepSpec, ParallelSpec, RetrySpec, ModelSpec, EngineSettings, RouterSettings, LimitSettings, LoggingSettings, McpServerSpec):
        names.update(model.model_fields)
    return sorted(names)


_KIND_HINTS = {
    "literal_error": "use one of the values listed",
    "bool_type": "write true or false, without quotes (a quoted \"yes\" is a string, not a boolean)",
    "bool_parsing": "write true or false",
    "string_type": "write a string (quote it if YAML reads it as something else)",
    "int_type": "write a whole number",
    "int_parsing": "write a whole number",
    "float_type": "write a number",
    "float_parsing": "write a number",
    "list_type": "write a list (`- item` lines or [a, b])",
    "too_short": "add at least one item",
}

_SKILL_TAGS = ("prompt", "python", "template", "tool")
_TYPE_LABELS = frozenset({"int", "str", "float", "bool", "none", "dict", "list"})


def _is_union_label(part: Any) -> bool:
    """Pydantic names union members in `loc` ('RetrySpec', 'int', 'list[str]', …)."""
    return isinstance(part, str) and (part in _TYPE_LABELS or part[:1].isupper() or "[" in part)


def _one_union_branch(errors: list[Any], raw: Any) -> list[Any]:
    """For `X | int` unions keep only the errors of the branch the value was meant for."""
    out = []
    for error in errors:
        loc = tuple(error["loc"])
        for index, part in enumerate(loc):
            if index == 0 and part in _SKILL_TAGS:
                continue
            if _is_union_label(part):
                value = _get(raw, _strip_union_tags(loc[:index], raw))
                is_model = part[:1].isupper()
                if isinstance(value, dict) != is_model:
                    break  # the other branch of the union explains this value better
        else:
            out.append(error)
    return out or errors


def _yaml_type(value: Any) -> str:
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def _get(raw: Any, loc: tuple[Any, ...]) -> Any:
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _strip_union_tags(loc: tuple[Any, ...], raw: Any) -> tuple[Any, ...]:
    """Drop what pydantic puts into `loc` that is not a real key: the skill kind, union labels."""
    out: list[Any] = []
    node = raw
    for index, part in enumerate(loc):
        if index == 0 and part in _SKILL_TAGS and isinstance(raw, dict) and raw.get("kind") == part:
            continue  # the discriminated union's tag
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        elif _is_union_label(part):
            continue
        elif isinstance(part, str):
            out.append(part)  # a missing or extra key: keep it so the message names it
            node = None
    return tuple(out)


def _load_models(root: Path, loaded: LoadedSpecs, issues: IssueCollector) -> None:
    files = [p for p in (root / "config" / "models.yaml", root / "config" / "models.yml") if p.is_file()]
    if not files:
        loaded.models = {}
        return
    data, source = _load(files[0], root, issues, loaded)
    if source is None:
        loaded.unreadable.add("models")
        return
    if data is None:
        return
    if not isinstance(data, dict):
        loaded.unreadable.add("models")
        issues.add(source.locate(()), "expected a mapping with `default:` and `models:`", "")
        return
    for key in data:
        if key not in ("default", "models"):
            issues.add(source.locate((key,), key=True), f"unknown top-level key {key!r}", "only `default:` and `models:` are allowed")
    if "default" in data:
        if not isinstance(data["default"], str):
            issues.add(source.locate(("default",)), "`default` must be a model name", "")
        else:
            loaded.default_model = data["default"]
            loaded.default_model_loc = source.locate(("default",))
    models = data.get("models") or {}
    if not isinstance(models, dict):
        loaded.unreadable.add("models")
        issues.add(source.locate(("models",)), "`models` must be a mapping of name → model", "")
        return
    adapter = TypeAdapter(ModelSpec)
    for name, raw in models.items():
        # a variable set nowhere is left as written: the model reads it at first use, and names it then
        raw, _ = loaded.resolver.resolve(raw, source.locate, issues, short_form=True, path=("models", name),
                                         defer=lambda _path: True)
        spec = _validate(adapter, raw, source, ("models", name), issues, loaded.resolver.written)
        if spec is not None:
            loaded.models[name] = Entry(name, spec, source, ("models", name))
        else:
            loaded.invalid["models"].add(name)


def _load_settings(root: Path, loaded: LoadedSpecs, issues: IssueCollector) -> None:
    files = [p for p in (root / "config" / "engine.yaml", root / "config" / "engine.yml") if p.is_file()]
    if not files:
        return
    data, source = _load(files[0], root, issues, loaded)
    if source is None or data is None:
        return
    # a service key's variable is read again when the service starts (it names it then)
    data, readable = loaded.resolver.resolve(data, source.locate, issues, short_form=True,
                                             defer=lambda path: path[:2] == ("server", "api_keys"))
    if not readable:
        return
    spec = _validate(TypeAdapter(EngineSettings), data, source, (), issues, loaded.resolver.written)
    if spec is not None:
        loaded.settings = spec
        loaded.settings_source = source


_FIELD_NAMES = _field_names()

__all__ = ["Entry", "LoadedSpecs", "load_specs", "report_pydantic_error", "report_pydantic_errors", "section_files"]

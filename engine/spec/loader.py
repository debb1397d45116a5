"""Find a project's YAML files, load them safely and validate their shapes.

Each tool, skill and workflow is validated on its own so that one bad entry does not hide
the problems of the others: every issue is collected, with its `file:line:col`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from ..errors import IssueCollector, Location
from .models import (
    EngineSettings,
    ModelSpec,
    SkillSpec,

    ToolSpec,
    TOOL_NAME_RE,
    IDENT_RE,
    WorkflowSpec,
)
from .yaml_source import SourceMap, YamlLoadError, YamlPath, load_yaml_file

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
                continue
            for name, raw, path in _entries(data, source, top_key, issues):
                if not name_re.match(name):
                    issues.add(source.locate(path, key=True), f"invalid {stem[:-1]} name {name!r}", _NAME_HINT[stem])
                    continue
                if name in target:
                    first = target[name].loc(key=True)
                    issues.add(
                        source.locate(path, key=True),
                        f"duplicate {stem[:-1]} {name!r} (first defined at {first})",
                        "rename or remove one of them",
                    )
                    continue
                spec = _validate(adapter, raw, source, path, issues)
                if spec is not None:
                    target[name] = Entry(name, spec, source, path)
    if not found_any:
        issues.add(
            Location(str(root)),
            "no tools.yaml, skills.yaml or workflows.yaml found",
            "run from a project directory or pass --dir",
        )
    _load_models(root, loaded, issues)
    _load_settings(root, loaded, issues)
    return loaded


def _load(file: Path, root: Path, issues: IssueCollector, loaded: LoadedSpecs) -> tuple[Any, SourceMap | None]:
    display = _display(file, root)
    loaded.files.append(display)
    try:
        return load_yaml_file(file, display)
    except YamlLoadError as exc:
        issues.issues.append(exc.issue)
        return None, None


def _display(file: Path, root: Path) -> str:
    try:
        return str(file.relative_to(root))
    except ValueError:
        return str(file)


def _entries(data: Any, source: SourceMap, top_key: str, issues: IssueCollector) -> list[tuple[str, Any, YamlPath]]:
    if data is None:
        return []
    if not isinstance(data, dict):
        issues.add(source.locate(()), f"expected a mapping with a `{top_key}:` key", f"start the file with `{top_key}:`")
        return []
    for key in data:
        if key != top_key:
            issues.add(source.locate((key,), key=True), f"unknown top-level key {key!r}", f"only `{top_key}:` is allowed here")
    section = data.get(top_key)
    if section is None:
        return []
    if not isinstance(section, dict):
        issues.add(source.locate((top_key,)), f"`{top_key}` must be a mapping of name → definition", "")
        return []
    return [(str(name), raw, (top_key, name)) for name, raw in section.items()]


def _validate(adapter: TypeAdapter[Any], raw: Any, source: SourceMap, path: YamlPath, issues: IssueCollector) -> Any:
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        for error in exc.errors():
            report_pydantic_error(error, source, path, raw, issues)
        return None


def report_pydantic_error(error: Any, source: SourceMap, path: YamlPath, raw: Any, issues: IssueCollector) -> None:
    """Translate one pydantic error into a positioned issue with a hint."""
    loc = _strip_union_tags(tuple(error["loc"]), raw)
    kind = error["type"]
    field_path = ".".join(str(p) for p in loc)
    if kind == "extra_forbidden":
        issues.add(source.locate(path + loc, key=True), f"unknown field {field_path!r}", "check the spelling; see schemas/ for the allowed fields")
    elif kind == "missing":
        issues.add(source.locate(path + loc[:-1]), f"missing required field {field_path!r}", f"add `{loc[-1]}:`")
    elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
        issues.add(source.locate(path + loc + ("kind",)), "skill `kind` must be one of prompt, python, template", "set `kind:`")
    else:
        message = error["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        issues.add(source.locate(path + loc), f"{field_path or 'value'}: {message}", "")


def _strip_union_tags(loc: tuple[Any, ...], raw: Any) -> tuple[Any, ...]:
    """Pydantic puts the union tag ('prompt') or type names into `loc`; drop what is not a real key."""
    out: list[Any] = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part not in ("prompt", "python", "template", "int", "RetrySpec"):
            out.append(part)  # a missing or extra key: keep it so the message names it
            node = None
    return tuple(out)


def _load_models(root: Path, loaded: LoadedSpecs, issues: IssueCollector) -> None:
    files = [p for p in (root / "config" / "models.yaml", root / "config" / "models.yml") if p.is_file()]
    if not files:
        loaded.models = {}
        return
    data, source = _load(files[0], root, issues, loaded)
    if source is None or data is None:
        return
    if not isinstance(data, dict):
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
        issues.add(source.locate(("models",)), "`models` must be a mapping of name → model", "")
        return
    adapter = TypeAdapter(ModelSpec)
    for name, raw in models.items():
        spec = _validate(adapter, raw, source, ("models", name), issues)
        if spec is not None:
            loaded.models[name] = Entry(name, spec, source, ("models", name))


def _load_settings(root: Path, loaded: LoadedSpecs, issues: IssueCollector) -> None:
    files = [p for p in (root / "config" / "engine.yaml", root / "config" / "engine.yml") if p.is_file()]
    if not files:
        return
    data, source = _load(files[0], root, issues, loaded)
    if source is None or data is None:
        return
    spec = _validate(TypeAdapter(EngineSettings), data, source, (), issues)
    if spec is not None:
        loaded.settings = spec
        loaded.settings_source = source


__all__ = ["Entry", "LoadedSpecs", "load_specs", "report_pydantic_error", "section_files"]

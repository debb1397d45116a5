"""The contracts the layers above implement: a tool type (and its executor), and a skill kind.

A new tool type (executors/, or a third-party package) is a `ToolType` whose `create` builds
a `ToolExecutor`; a new skill kind (skills/) is a `Skill`. Both see a running call through
`CallContext` / `SkillContext` (context.py) and nothing above this layer.

The tool-type registry: `type:` in tools.yaml → a ToolType that builds an executor.
`workflow` is linked by `engine.link.linker` itself (it needs the project's skills). Other types are
data plus small functions: a pydantic config model, the input schema and description given to
the model, and a factory for the executor. Third-party packages register types through the
`skillyard.tool_types` entry-point group; each entry point names a `ToolType` object.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Protocol

from pydantic import BaseModel

from ..lang.schema import CompiledSchema
from .context import CallContext, SkillContext


class ToolExecutor(Protocol):
    kind: str

    async def execute(self, args: dict[str, Any], run: "CallContext") -> Any:
        """Run the call with validated arguments; return JSON-able data or raise StepFailure."""
        ...


@dataclass(frozen=True)
class ToolType:
    name: str
    config_model: type[BaseModel]
    input_schema: Callable[[Any], dict[str, Any]]
    description: Callable[[Any, str], str]
    create: Callable[[Any], ToolExecutor]
    # The shape of what `execute` returns, when known: lets a workflow map paths out of a
    # `kind: tool` step with link-time checks. None: anything.
    output_schema: Callable[[Any], dict[str, Any]] | None = None
    # Whether a tool's config can make this type run code of the caller's choosing (python's
    # `function: os:system`). Such tools are refused by the admin API unless the project sets
    # `server.allow_code_tools`. True by default: a third-party type must declare itself safe.
    runs_code: bool = True
    # The private networks (CIDR text, as written) a raw config opens: an admin key may open only
    # those inside `server.admin_private_networks` (engine/tool_admin.py).
    private_networks: Callable[[Any], tuple[str, ...]] = lambda raw: ()


_TYPES: dict[str, ToolType] = {}
_entry_points_loaded = False
# Built-in types, imported on first lookup (keeps httpx off the import path of projects
# that never fetch). Registered before entry points, so a plugin cannot replace them silently.
_BUILTINS = ("engine.executors.fetch:FETCH", "engine.executors.python_tool:PYTHON")


def register_tool_type(tool_type: ToolType) -> None:
    """Add (or replace) a tool type by name; third-party packages may call this directly."""
    _TYPES[tool_type.name] = tool_type


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib import import_module

    for target in _BUILTINS:
        module, _, attribute = target.partition(":")
        builtin = getattr(import_module(module), attribute)
        _TYPES.setdefault(builtin.name, builtin)
    for ep in entry_points(group="skillyard.tool_types"):
        loaded = ep.load()
        if isinstance(loaded, ToolType):
            _TYPES.setdefault(loaded.name, loaded)


def tool_type(name: str) -> ToolType | None:
    _load_entry_points()
    return _TYPES.get(name)


def known_tool_types() -> list[str]:
    _load_entry_points()
    return sorted({"workflow", *_TYPES})


class Skill(ABC):
    """A linked skill: validated input in, output out (validated by the executor)."""

    kind: str

    def __init__(self, name: str, input_schema: dict[str, Any], output_schema: dict[str, Any] | None):
        self.name = name
        self.input_schema_raw = input_schema
        self.output_schema_raw = output_schema
        self.input_schema = CompiledSchema(input_schema)
        self.output_schema = CompiledSchema(output_schema) if output_schema is not None else None
        # Set by the Project from its redaction settings: True when the schema proves that
        # no sensitive key can appear, so events need not walk the value (see Redactor.schema_is_clean).
        self.input_clean = False
        self.output_clean = False
        # How the executor calls the skill: `call(input, ctx)` returns the output or an
        # awaitable of it. Kinds that can, point it straight at the user's function, so a
        # step costs no wrapper coroutine. `needs_context=False`: `ctx` may be None.
        self.call: Callable[[dict[str, Any], SkillContext | None], Any] = self.run  # type: ignore[assignment]  # needs_context: never None here
        self.needs_context = True

    # A skill whose calls may hold the event loop (a sync python skill, skills/python.py) sets
    # this: the executor, which times every attempt for its events anyway, hands it the duration
    # of an attempt that took longer, so timing costs the skill no wrapper of its own.
    slow_after_ms: float = float("inf")

    def took_long(self, duration_ms: float) -> None:  # noqa: B027 - a hook: by default, nothing to do
        """An attempt took more than `slow_after_ms` milliseconds (see there)."""

    @property
    def produces(self) -> dict[str, Any] | None:
        """The schema of what this skill returns, for link-time data-flow checks (None: anything)."""
        return self.output_schema_raw

    @abstractmethod
    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        """Do the work. Raise StepFailure for a failure the caller should see by code."""

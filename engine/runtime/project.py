"""Project: the linked, compiled, immutable result of loading a directory.

Hot reload builds a new Project and swaps it in; calls in flight keep the one they started on.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from ..errors import ConfigIssue, ErrorCode, StepFailure
from ..lang.schema import CompiledSchema
from ..lang.strict_schema import StrictSchema, openai_function
from ..providers.base import AnswerBudget, Provider, ProviderError
from ..providers.registry import build_provider, provider_factory
from ..safety.redaction import Redactor
from ..spec.models import EngineSettings, ModelSpec
from .contracts import Skill, ToolExecutor


@dataclass(frozen=True)
class LinkedTool:
    name: str
    description: str
    parameters: dict[str, Any]
    validator: CompiledSchema
    enabled: bool
    timeout: float
    confirm: bool
    executor: ToolExecutor
    source: str  # file:line where it is declared
    config: dict[str, Any] = field(default_factory=dict)  # the tool type's validated config
    batch_expect: tuple[Any, ...] = ()  # compiled `batch.expect` defaults (engine.batch.expect.Check)
    title: str | None = None  # display name for people; the model sees `name`
    order: int = 0  # sort position in lists, then the name
    # as declared (YAML or store), for an editor: `description` may have the type's notes added,
    # `parameters` may be the type's own schema (None here)
    declared_description: str = ""
    declared_parameters: dict[str, Any] | None = None
    # The parameters' OpenAI strict form (engine.lang.strict_schema), computed at link time;
    # None: the tool is sent non-strict (its schema does not qualify, or `strict: false`).
    strict: StrictSchema | None = None
    # Set by the Project from its redaction settings: True when closed schemas prove that the
    # (valid) arguments / the result data hold no sensitive key, so events skip the walk.
    arguments_clean: bool = field(default=False, init=False, compare=False)
    result_clean: bool = field(default=False, init=False, compare=False)

    @functools.cached_property
    def matched_progress(self) -> dict[str, Any]:
        """The router's "matched" progress payload: the same for every call, built once."""
        return {"stage": "matched", "message": f"tool {self.name!r} matched, arguments valid", "executor": self.executor.kind}

    @functools.cached_property
    def openai_definition(self) -> dict[str, Any]:
        """What an OpenAI-compatible model is sent: the strict form with `strict: true` when
        the tool has one (the same dict every time; `skillyard tools --format openai` shows it)."""
        return openai_function(self.name, self.description, self.parameters, self.strict.schema if self.strict else None)

    @functools.cached_property
    def model_spec(self) -> dict[str, Any]:
        """The provider-neutral definition a ModelRequest carries (name, description,
        parameters), with `strict`, the parameters' strict form, when the tool has one: the
        link-time form goes to the provider with the request (plain JSON, so it crosses a process)."""
        spec = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.strict is not None:
            spec["strict"] = self.strict.schema
        return spec

    def schema(self, format: Literal["openai", "anthropic", "mcp"]) -> dict[str, Any]:
        if format == "openai":
            return self.openai_definition
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": self.parameters}
        if format == "mcp":  # MCP's Tool has an optional display `title`
            titled = {"title": self.title} if self.title else {}
            return {"name": self.name, **titled, "description": self.description, "inputSchema": self.parameters}
        raise ValueError(f"unknown tool schema format {format!r}; use openai, anthropic or mcp")


# The keys the engine itself puts around arguments, inputs, outputs and results in events.
_EVENT_ENVELOPE_KEYS = ("tool", "arguments", "input", "attempt", "kind", "output", "duration_ms", "ok", "data",
                        "metadata", "usage", "input_tokens", "output_tokens", "cost_usd")


class ToolPolicy:
    """`router.allow` / `router.deny` glob patterns, compiled once."""

    def __init__(self, allow: Iterable[str], deny: Iterable[str]):
        self._allow = _glob_regex(allow)
        self._deny = _glob_regex(deny)
        self._verdicts: dict[str, bool] = {}  # per tool name; bounded below

    def permits(self, name: str) -> bool:
        verdict = self._verdicts.get(name)
        if verdict is None:
            verdict = bool(self._allow and self._allow.match(name)) and not (self._deny and self._deny.match(name))
            if len(self._verdicts) < 10_000:  # names come from callers (models): do not grow without end
                self._verdicts[name] = verdict
        return verdict


def _glob_regex(patterns: Iterable[str]) -> re.Pattern[str] | None:
    patterns = list(patterns)
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


_ENV_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")  # left by the load when set nowhere (references.py)


def interpolate_env(value: str | None, what: str) -> str | None:
    """`${NAME}` → the environment variable; a missing one is a clear error at first use."""
    if value is None:
        return None

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise StepFailure(ErrorCode.EXECUTION_ERROR, f"{what} needs the environment variable {name}, which is not set")
        return os.environ[name]

    return _ENV_VAR.sub(replace, value)


@dataclass
class Project:
    root: Path
    tools: dict[str, LinkedTool]
    skills: dict[str, Skill]
    models: dict[str, ModelSpec]
    default_model: str
    settings: EngineSettings
    policy: ToolPolicy
    files: list[str] = field(default_factory=list)
    workflows: int = 0
    # Loaded with isolate_broken_tools: every problem found, and the tools left out because
    # of one in their own parts (a call to one of them answers config_error with its problems).
    problems: list[ConfigIssue] = field(default_factory=list)
    broken: dict[str, list[ConfigIssue]] = field(default_factory=dict)
    # What loads and runs but is probably not what was meant (an unknown schema keyword, say):
    # logged once at load, printed by `skillyard validate`, listed by the admin API.
    warnings: list[ConfigIssue] = field(default_factory=list)
    isolates_broken_tools: bool = False  # how it was loaded; a reload loads the same way
    # A store whose tool settings apply though runs are not recorded there (--no-store): read
    # again on every reload. None: no such store (a recording engine reads its own).
    settings_source: str | None = None
    reference_secrets: frozenset[str] = frozenset()  # values read from `${env:…}`/`${file:…}` at load
    redactor: Redactor = field(init=False, repr=False)
    falls_back: bool = field(init=False, repr=False)  # some model has `fallback:` (its runs mark themselves)
    answer_budget: AnswerBudget = field(init=False, repr=False)  # what one model answer may hold (`limits:`)
    _providers: dict[str, Provider] = field(default_factory=dict, repr=False)  # per model name, with fallbacks
    _own: dict[str, Provider] = field(default_factory=dict, repr=False)  # each model's own provider
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def __post_init__(self) -> None:
        self.redactor = redactor = Redactor(self.settings.redaction.sensitive_keys)
        self._mark_clean(redactor)
        self.falls_back = any(spec.fallback for spec in self.models.values())
        self.answer_budget = AnswerBudget.of(self.settings.limits)

    def _mark_clean(self, redactor: Redactor) -> None:
        """Decide once which event payloads can skip redaction (see Redactor.schema_is_clean)."""
        def key_ok(key: str) -> bool:
            return not redactor.is_sensitive(key)

        if not all(map(key_ok, _EVENT_ENVELOPE_KEYS)):  # someone made "input" or "data" a sensitive word
            return
        for skill in self.skills.values():
            skill.input_clean = redactor.schema_is_clean(skill.input_schema_raw)
            produced = skill.produces  # a prompt or template skill without an output schema returns text
            skill.output_clean = produced is not None and redactor.schema_is_clean(produced)
        for tool in self.tools.values():
            arguments_clean = redactor.schema_is_clean(tool.parameters)
            output_clean = getattr(tool.executor, "output_clean", None)
            result_clean = callable(output_clean) and bool(output_clean(arguments_clean, key_ok))
            object.__setattr__(tool, "arguments_clean", arguments_clean)  # frozen: set once, before any call
            object.__setattr__(tool, "result_clean", result_clean)

    def provider(self, model_name: str) -> tuple[Provider, ModelSpec]:
        """The provider for a model name (with its `fallback:` chain), created on first use (so
        a missing key fails only then)."""
        spec = self.models.get(model_name)
        if spec is None:
            raise StepFailure(
                ErrorCode.EXECUTION_ERROR,
                f"unknown model {model_name!r}; known models: {', '.join(sorted(self.models))}",
            )
        cached = self._providers.get(model_name)
        if cached is not None:
            return cached, spec
        with self._lock:
            if model_name not in self._providers:
                try:
                    self._providers[model_name] = build_provider(model_name, self.models, self._own_provider)
                except ProviderError as exc:
                    raise StepFailure(ErrorCode.EXECUTION_ERROR, str(exc)) from None
            return self._providers[model_name], spec

    def _own_provider(self, model_name: str) -> Provider:
        """A model's own provider (no fallback), made once; a ProviderError when it cannot be."""
        with self._lock:
            made = self._own.get(model_name)
            if made is None:
                spec = self.models[model_name]
                factory = provider_factory(spec.provider)
                if factory is None:
                    raise ProviderError(f"model {model_name!r} uses unknown provider {spec.provider!r}")
                try:
                    resolved = spec.model_copy(update={"api_key": interpolate_env(spec.api_key, f"model {model_name!r}")})
                    made = self._own[model_name] = factory(resolved, self.root)
                except StepFailure as failure:
                    raise ProviderError(failure.message) from None
                except ProviderError as exc:
                    raise ProviderError(f"model {model_name!r}: {exc}") from None
            return made

    def tool_schemas(
        self, format: Literal["openai", "anthropic", "mcp"] = "openai", allowed_tools: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        return [tool.schema(format) for tool in self.callable_tools(allowed_tools)]

    def callable_tools(self, allowed_tools: Iterable[str] | None = None) -> list[LinkedTool]:
        """The tools a model may be offered: enabled, allowed by the policy, in the subset."""
        subset = set(allowed_tools) if allowed_tools is not None else None
        return [
            tool
            for name, tool in self.tools.items()
            if tool.enabled and self.policy.permits(name) and (subset is None or name in subset)
        ]

    def summary(self) -> str:
        enabled = sum(1 for t in self.tools.values() if t.enabled)
        return (
            f"{len(self.tools)} tools ({enabled} enabled), {len(self.skills)} skills, {self.workflows} workflows, "
            f"{len(self.models)} models (default: {self.default_model}) from {len(self.files)} files"
            + (f"; {len(self.broken)} broken: {', '.join(sorted(self.broken))}" if self.broken else "")
        )

"""engine/__init__.py is the public face: `__all__` is sorted and lists exactly what it exports,
an extension finds what it needs there, and names that moved still import, with a warning."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import engine

# What a tool type, a provider or an event listener is written against (docs/tool-types.md,
# docs/embedding.md): each must be importable from `engine` itself.
EXTENSION_NAMES = (
    "ToolType", "ToolExecutor", "register_tool_type", "CallContext", "SkillContext", "StepFailure", "ErrorCode",
    "register_provider", "Provider", "ModelRequest", "ModelResponse", "ChatMessage", "Usage", "Event", "EventType",
)


def test_all_is_sorted_and_importable() -> None:
    assert engine.__all__ == sorted(engine.__all__)
    for name in engine.__all__:
        assert hasattr(engine, name), name
    assert set(engine.__all__) <= set(dir(engine))


def test_nothing_public_is_left_out_of_all() -> None:
    for name in engine.__all__:  # resolve the lazy names: each becomes a plain attribute
        getattr(engine, name)
    public = {name for name in vars(engine) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(engine, name)).__name__ == "module"}
    assert public - modules == set(engine.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        engine.Nope  # noqa: B018 - the access is the test


def test_a_subpackage_is_an_attribute_as_after_importing_it() -> None:
    assert engine.store is importlib.import_module("engine.store")


def test_an_extension_finds_what_it_needs_in_engine() -> None:
    from engine.runtime.context import CallContext
    from engine.runtime.contracts import ToolType, register_tool_type

    assert set(EXTENSION_NAMES) <= set(engine.__all__)
    assert (engine.ToolType, engine.register_tool_type, engine.CallContext) == (ToolType, register_tool_type, CallContext)


@pytest.mark.parametrize(("module", "name", "now"), [
    ("engine.agent", "AgentLimits", "AgentLimits"),
    ("engine.agent", "Agent", "Agent"),
    ("engine.context", "RunContext", "CallContext"),
    ("engine.context", "SkillContext", "SkillContext"),
])
def test_a_moved_name_still_imports_with_a_deprecation_warning(module: str, name: str, now: str) -> None:
    sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} .*from engine import {now}"):
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(engine, now)


def test_the_shims_warn_at_the_line_that_imports_the_moved_name() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from engine.context import RunContext  # noqa: F401 - the import is the test
    assert [w.filename for w in caught] == [__file__]


def test_a_shim_knows_only_the_names_that_moved() -> None:
    import engine.context

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        engine.context.Nope  # noqa: B018 - the access is the test


@pytest.mark.parametrize("doc", ["docs/tool-types.md", "docs/embedding.md", "docs/agent.md"])
def test_the_extension_docs_import_only_from_engine(doc: str) -> None:
    text = (Path(__file__).resolve().parents[2] / doc).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    deeper = [line for block in blocks for line in block.splitlines() if re.match(r"\s*from engine\.|\s*import engine\.", line)]
    assert deeper == []

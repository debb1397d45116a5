"""The tool-type registry: built-ins, register_tool_type, and the entry-point group."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import ConfigError, Engine
from engine.runtime import contracts as base

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "third_party_tool_type"


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A private copy of the registry, so a test's registrations do not leak."""
    base.known_tool_types()  # built-ins and installed entry points loaded once
    types = dict(base._TYPES)
    monkeypatch.setattr(base, "_TYPES", types)
    yield types


@pytest.fixture
def clock_package(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    monkeypatch.delitem(sys.modules, "skillyard_clock", raising=False)
    import skillyard_clock

    return skillyard_clock


def test_built_in_types() -> None:
    assert {"workflow", "fetch", "python"} <= set(base.known_tool_types())
    assert base.tool_type("fetch").name == "fetch" and base.tool_type("python").name == "python"


def test_unknown_type_lists_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("tools:\n  t:\n    type: ftp\n    description: x\n")
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(tmp_path)
    (issue,) = caught.value.issues
    assert str(issue).startswith("tools.yaml:3:11: unknown tool type 'ftp' — use one of: fetch, python, workflow")


def test_the_example_package_registers_and_runs(tmp_path: Path, registry: dict[str, Any], clock_package: Any) -> None:
    base.register_tool_type(clock_package.CLOCK)
    (tmp_path / "tools.yaml").write_text((EXAMPLE / "tools.yaml").read_text())
    engine = Engine.from_dir(tmp_path)
    tool = engine.project.tools["whatTimeIsIt"]
    assert tool.executor.kind == "clock"
    assert tool.description == "Tell the current date and time. Default time zone: UTC."
    assert tool.parameters["properties"] == {"timezone": {"type": "string", "description": "IANA time zone (default UTC)."}}
    result = engine.call_tool_sync("whatTimeIsIt", {})
    assert result.ok and result.data["timezone"] == "UTC" and result.data["iso"].endswith("+00:00")
    wrong = engine.call_tool_sync("whatTimeIsIt", {"timezone": "Mars/Olympus"})
    assert wrong.error is not None and wrong.error.code == "invalid_arguments"


def test_the_example_config_is_validated_at_load(tmp_path: Path, registry: dict[str, Any], clock_package: Any) -> None:
    base.register_tool_type(clock_package.CLOCK)
    (tmp_path / "tools.yaml").write_text("tools:\n  t:\n    type: clock\n    description: x\n    config:\n      timezone: Nowhere/Land\n")
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(tmp_path)
    assert "tools.yaml:6:17: timezone: 'Nowhere/Land' is not a known IANA time zone" in str(caught.value)


def test_entry_points_are_loaded_from_the_group(monkeypatch: pytest.MonkeyPatch, registry: dict[str, Any], clock_package: Any) -> None:
    declared = EntryPoint(name="clock", value="skillyard_clock:CLOCK", group="skillyard.tool_types")
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return [declared]

    monkeypatch.setattr(base, "entry_points", fake_entry_points)
    monkeypatch.setattr(base, "_entry_points_loaded", False)
    registry.pop("clock", None)
    assert base.tool_type("clock") is clock_package.CLOCK
    assert asked == ["skillyard.tool_types"]


def test_entry_points_cannot_replace_built_ins(monkeypatch: pytest.MonkeyPatch, registry: dict[str, Any], clock_package: Any) -> None:
    from dataclasses import replace

    impostor = replace(clock_package.CLOCK, name="fetch")
    monkeypatch.setitem(sys.modules, "impostor_module", type(sys)("impostor_module"))
    sys.modules["impostor_module"].IMPOSTOR = impostor  # type: ignore[attr-defined]
    monkeypatch.setattr(base, "entry_points", lambda *, group: [EntryPoint("fetch", "impostor_module:IMPOSTOR", group)])
    monkeypatch.setattr(base, "_entry_points_loaded", False)
    registry.clear()
    assert base.tool_type("fetch").config_model.__name__ == "FetchConfig"


def test_the_example_declares_its_entry_point() -> None:
    import tomllib

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["skillyard.tool_types"] == {"clock": "skillyard_clock:CLOCK"}

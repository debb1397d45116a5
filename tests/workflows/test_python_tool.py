"""`type: python` tools: a function becomes a tool; parameters from YAML or from its type hints."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine import ConfigError, Engine

MODULE = '''
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from engine.errors import StepFailure
from engine.runtime.context import CallContext


class Point(BaseModel):
    x: float
    y: float


@dataclass
class Distance:
    meters: float
    unit: str = "m"


def convert(value: float, to: Literal["C", "F"] = "F") -> dict:
    """Convert a temperature."""
    return {"value": round(value * 9 / 5 + 32, 2) if to == "F" else round((value - 32) * 5 / 9, 2), "unit": to}


def distance(a: Point, b: Point, label: Annotated[str, Field(description="Shown with the result")] = "") -> Distance:
    return Distance(((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)


async def slow_count(n: int, run: CallContext) -> list[int]:
    for i in range(n):
        run.tool_progress("counted", f"{i + 1} of {n} counted", done=i + 1)
        await asyncio.sleep(0)
    return list(range(n))


def which_thread() -> str:
    return threading.current_thread().name


def untyped(**kwargs):
    return sorted(kwargs)


def refuse(reason: str) -> None:
    raise StepFailure("quota_exceeded", reason)


def crash() -> None:
    raise ValueError("boom")


def not_json() -> object:
    return object()


def positional_only(a: int, /) -> int:
    return a


class Opaque:
    pass


def opaque(thing: Opaque) -> None:
    return None


NOT_A_FUNCTION = 42
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    package = tmp_path / "mytools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "units.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "mytools", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "mytools.units", raising=False)

    def make(tools_yaml: str) -> Engine:
        (tmp_path / "tools.yaml").write_text("tools:\n" + textwrap.indent(textwrap.dedent(tools_yaml), "  "))
        return Engine.from_dir(tmp_path)

    return make


def test_parameters_come_from_type_hints(project: Any) -> None:
    engine = project(
        """
        convertTemperature:
          type: python
          description: Convert a temperature between Celsius and Fahrenheit.
          config: {function: "mytools.units:convert"}
        """
    )
    tool = engine.project.tools["convertTemperature"]
    assert tool.executor.kind == "python"
    assert tool.parameters == {
        "type": "object",
        "properties": {"value": {"type": "number"}, "to": {"enum": ["C", "F"], "type": "string", "default": "F"}},
        "required": ["value"],
        "additionalProperties": False,
    }
    result = engine.call_tool_sync("convertTemperature", {"value": 100})
    assert result.ok and result.data == {"value": 212.0, "unit": "F"}
    assert engine.call_tool_sync("convertTemperature", {"value": 212, "to": "C"}).data == {"value": 100.0, "unit": "C"}
    bad = engine.call_tool_sync("convertTemperature", {"value": "hot"})
    assert bad.error is not None and bad.error.code == "invalid_arguments"


def test_models_and_dataclasses_go_in_and_come_out_as_json(project: Any) -> None:
    engine = project(
        """
        distance:
          type: python
          description: Distance between two points.
          config: {function: "mytools.units:distance"}
        """
    )
    tool = engine.project.tools["distance"]
    assert tool.parameters["properties"]["label"]["description"] == "Shown with the result"
    assert tool.parameters["properties"]["a"] == {"$ref": "#/$defs/Point"}
    assert "title" not in tool.parameters["$defs"]["Point"]
    result = engine.call_tool_sync("distance", {"a": {"x": 0, "y": 0}, "b": {"x": 3, "y": 4}})
    assert result.ok and result.data == {"meters": 5.0, "unit": "m"}


def test_yaml_parameters_win_and_hints_still_convert(project: Any) -> None:
    engine = project(
        """
        convertTemperature:
          type: python
          description: Convert to Fahrenheit.
          parameters:
            type: object
            properties:
              value: {type: number, minimum: -273.15, description: Degrees Celsius}
            required: [value]
            additionalProperties: false
          config: {function: "mytools.units:convert"}
        """
    )
    tool = engine.project.tools["convertTemperature"]
    assert tool.parameters["properties"]["value"]["description"] == "Degrees Celsius"
    assert engine.call_tool_sync("convertTemperature", {"value": -300}).error.code == "invalid_arguments"
    assert engine.call_tool_sync("convertTemperature", {"value": 0}).data == {"value": 32.0, "unit": "F"}


def test_async_function_with_run_context_reports_progress(project: Any) -> None:
    engine = project(
        """
        count:
          type: python
          description: Count.
          config: {function: "mytools.units:slow_count"}
        """
    )
    assert set(engine.project.tools["count"].parameters["properties"]) == {"n"}  # the context is not an argument
    events: list[Any] = []
    result = engine.call_tool_sync("count", {"n": 3}, on_event=events.append)
    assert result.data == [0, 1, 2]
    progress = [e.data["message"] for e in events if e.type == "tool_progress_delta" and e.data["stage"] == "counted"]
    assert progress == ["1 of 3 counted", "2 of 3 counted", "3 of 3 counted"]


def test_threaded_runs_off_the_event_loop(project: Any) -> None:
    engine = project(
        """
        inline:
          type: python
          description: Which thread.
          config: {function: "mytools.units:which_thread"}
        threaded:
          type: python
          description: Which thread.
          config: {function: "mytools.units:which_thread", threaded: true}
        """
    )
    assert engine.call_tool_sync("inline").data == "MainThread"
    assert engine.call_tool_sync("threaded").data != "MainThread"


def test_var_keyword_functions_take_any_object(project: Any) -> None:
    engine = project(
        """
        untyped:
          type: python
          description: Anything goes.
          config: {function: "mytools.units:untyped"}
        """
    )
    assert engine.project.tools["untyped"].parameters == {"type": "object", "properties": {}, "additionalProperties": True}
    assert engine.call_tool_sync("untyped", {"b": 1, "a": 2}).data == ["a", "b"]


def test_failures(project: Any) -> None:
    engine = project(
        """
        refuse:
          type: python
          description: Refuse.
          config: {function: "mytools.units:refuse"}
        crash:
          type: python
          description: Crash.
          config: {function: "mytools.units:crash"}
        notJson:
          type: python
          description: Not JSON.
          config: {function: "mytools.units:not_json"}
        """
    )
    refused = engine.call_tool_sync("refuse", {"reason": "monthly quota used up"})
    assert (refused.error.code, refused.error.message) == ("quota_exceeded", "monthly quota used up")
    crashed = engine.call_tool_sync("crash")
    assert (crashed.error.code, crashed.error.message) == ("execution_error", "ValueError: boom")
    odd = engine.call_tool_sync("notJson")
    assert odd.error.code == "execution_error" and "not JSON-able" in odd.error.message


def test_bad_targets_are_config_errors_at_the_function_line(project: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        project(
            """
            a:
              type: python
              description: A.
              config: {function: "mytools.units"}
            b:
              type: python
              description: B.
              config: {function: "mytools.nope:f"}
            c:
              type: python
              description: C.
              config: {function: "mytools.units:NOT_A_FUNCTION"}
            d:
              type: python
              description: D.
              config: {function: "mytools.units:positional_only"}
            e:
              type: python
              description: E.
              config: {function: "mytools.units:opaque"}
            f:
              type: python
              description: F.
              config: {}
            """
        )
    found = [str(issue) for issue in caught.value.issues]
    assert found[0].startswith("tools.yaml:6:24: function: 'mytools.units' is not of the form package.module:function")
    assert found[1].startswith("tools.yaml:10:24: function: cannot import module 'mytools.nope': ModuleNotFoundError")
    assert found[2].startswith("tools.yaml:14:24: function: module 'mytools.units' has no function 'NOT_A_FUNCTION'")
    assert found[3].startswith("tools.yaml:18:24: function: parameter 'a' is positional-only")
    assert found[4].startswith(
        "tools.yaml:22:24: function: the type hints of opaque cannot become a JSON Schema: "
        "Unable to generate pydantic-core schema for <class 'mytools.units.Opaque'> —"
    )
    assert found[5].startswith("tools.yaml:26:5: missing required field 'function'")
    assert len(found) == 6


def test_modules_beside_the_yaml_import_when_the_linker_passes_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The config model reads `root` from the validation context (link.py passes it, see docs)."""
    import sys

    from engine.executors.python_tool import PythonToolConfig

    (tmp_path / "adder_beside_yaml.py").write_text("def add(a: int, b: int = 2) -> int:\n    return a + b\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    config = PythonToolConfig.model_validate({"function": "adder_beside_yaml:add"}, context={"root": tmp_path})
    assert config.signature.schema["required"] == ["a"]
    assert str(tmp_path) in sys.path

"""The built-in `python` tool type: expose one Python function as a tool.

```yaml
tools:
  convertTemperature:
    type: python
    description: Convert a temperature between Celsius and Fahrenheit.
    config:
      function: mytools.units:convert     # package.module:name
```

The function is called with the arguments as keywords: `convert(value=21.5, to="F")`. Its
parameters come from the tool's `parameters:` in YAML if given, otherwise from the function's
type hints through pydantic (defaults and `Annotated[..., Field(description=...)]` included).
Either way the arguments are validated by pydantic against the hints before the call, so an
`int` parameter receives an int. A parameter annotated `CallContext` receives the call's
context (for `run.tool_progress(...)`) and is not part of the schema. Sync or async; a sync
function runs in a worker thread when `threaded: true`. The return value must be JSON-able
(pydantic models and dataclasses are converted); raise `StepFailure(code, message)` to fail
with your own code.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Callable, Literal, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..errors import ErrorCode, StepFailure
from ..logging import logger
from ..runtime.context import CallContext
from ..runtime.contracts import ToolType
from ..safety.user_frames import failure_details, last_user_frame, package_root

_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class _Signature:
    """What link time learns about the function, once: its argument model and context slot."""

    def __init__(self, function: Callable[..., Any]):
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        signature = inspect.signature(function)
        try:
            hints = get_type_hints(function, include_extras=True)
        except Exception as exc:  # noqa: BLE001 - unresolvable annotations are a config problem
            raise ValueError(f"cannot read the type hints of {function.__qualname__}: {exc}") from None
        fields: dict[str, Any] = {}
        self.context_parameter: str | None = None
        self.takes_any = False
        for name, parameter in signature.parameters.items():
            hint = hints.get(name, Any)
            if hint is CallContext:
                self.context_parameter = name
                continue
            if parameter.kind is parameter.VAR_KEYWORD:
                self.takes_any = True
                continue
            if parameter.kind is parameter.VAR_POSITIONAL:
                continue
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise ValueError(f"parameter {name!r} is positional-only; tool arguments are passed by keyword")
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[name] = (hint, default)
        extra: Literal["allow", "forbid"] = "allow" if self.takes_any else "forbid"
        try:
            self.model: type[BaseModel] = create_model(
                f"{function.__name__}_arguments", __config__=ConfigDict(extra=extra, arbitrary_types_allowed=False), **fields
            )
            schema = self.model.model_json_schema()
        except Exception as exc:  # noqa: BLE001 - pydantic cannot describe some hint
            first = str(exc).split(". ")[0].rstrip(".")
            raise ValueError(f"the type hints of {function.__qualname__} cannot become a JSON Schema: {first}") from None
        self.schema = _tidy_schema(schema)

    def arguments(self, args: dict[str, Any], run: CallContext) -> dict[str, Any]:
        """The keyword arguments for the call: validated (and converted) by the hints."""
        try:
            parsed = self.model.model_validate(args)
        except ValidationError as exc:
            problems = [
                {"pointer": "/" + "/".join(str(p) for p in error["loc"]), "message": error["msg"]} for error in exc.errors()
            ]
            summary = "; ".join(f"{p['pointer']}: {p['message']}" for p in problems[:5])
            raise StepFailure(ErrorCode.INVALID_ARGUMENTS, f"{len(problems)} argument error(s): {summary}", {"errors": problems}) from None
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.takes_any and parsed.model_extra:
            kwargs.update(parsed.model_extra)
        if self.context_parameter:
            kwargs[self.context_parameter] = run
        return kwargs


def _tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated `title`s (noise for a model); keep everything else."""

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                k: walk(v, k in ("properties", "$defs"))
                for k, v in node.items()
                if not (k == "title" and not in_properties and isinstance(v, str))
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    tidy = walk(schema)
    tidy.setdefault("properties", {})
    tidy["type"] = "object"
    return tidy


class PythonToolConfig(BaseModel):
    """`config:` of a `type: python` tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    function: str = Field(description="The function to call, as package.module:name.")
    threaded: bool = Field(False, description="Run a sync function in a worker thread (for blocking I/O).")
    _signature: _Signature = PrivateAttr()

    @field_validator("function")
    @classmethod
    def _importable(cls, value: str, info: ValidationInfo) -> str:
        if not _TARGET.match(value):
            raise ValueError(f"{value!r} is not of the form package.module:function")
        root = (info.context or {}).get("root") if isinstance(info.context, dict) else None
        if root is not None and str(Path(root)) not in sys.path:
            sys.path.insert(0, str(Path(root)))  # tool modules may live beside the YAML
        module_name, _, attribute = value.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure is a config problem
            raise ValueError(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from None
        function = getattr(module, attribute, None)
        if not callable(function):
            raise ValueError(f"module {module_name!r} has no function {attribute!r}")
        _Signature(function)  # report hint problems here, at the `function:` line
        return value

    def model_post_init(self, __context: Any) -> None:
        module_name, _, attribute = self.function.partition(":")
        self._signature = _Signature(getattr(importlib.import_module(module_name), attribute))

    @property
    def signature(self) -> _Signature:
        return self._signature


class PythonToolExecutor:
    kind = "python"

    def __init__(self, config: PythonToolConfig):
        self.target = config.function
        self.signature = config.signature
        self.threaded = config.threaded and not self.signature.is_async
        root = package_root(self.signature.function)
        self.user_roots = (root,) if root else ()

    async def execute(self, args: dict[str, Any], run: CallContext) -> Any:
        kwargs = self.signature.arguments(args, run)
        function = self.signature.function
        run.tool_progress("calling", f"calling {self.target}", function=self.target)
        try:  # free unless it raises (3.11+)
            if self.signature.is_async:
                value = await function(**kwargs)
            elif self.threaded:
                value = await asyncio.to_thread(function, **kwargs)
            else:
                value = function(**kwargs)
        except (StepFailure, TimeoutError):  # the function's own code; a timeout is the router's to name
            raise
        except Exception as exc:  # noqa: BLE001 - the user's bug: an error pointing at their line, no traceback
            raise self._failure(exc, run) from None
        try:
            return to_jsonable_python(value)
        except PydanticSerializationError as exc:
            raise StepFailure(ErrorCode.EXECUTION_ERROR, f"{self.target} returned a value that is not JSON-able: {exc}") from None

    def _failure(self, exc: Exception, run: CallContext) -> StepFailure:
        details = failure_details(exc, self.user_roots, run.project.redactor)
        frame = last_user_frame(details)
        at = f"{frame['file']}:{frame['line']} in {frame['function']}" if frame else self.target
        logger.warning("tool execution failed", tool=run.tool, run_id=run.run_id, error=type(exc).__name__, at=at)
        return StepFailure(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}", details)


PYTHON = ToolType(
    name="python",
    config_model=PythonToolConfig,
    input_schema=lambda config: config.signature.schema,
    description=lambda config, text: text,
    create=PythonToolExecutor,
)

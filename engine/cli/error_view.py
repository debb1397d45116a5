"""How a failed call points at the user's code on stderr: `--verbose` and `--debug`.

The frames come from the error's details (`engine/safety/user_frames.py`), so the CLI shows exactly
what `runs show`, the HTTP body and the web timeline carry:

- by default, the innermost frame of the user's code, under the timeline's `✗` line;
- `--verbose`: the user's whole traceback (also with `--quiet`);
- `--debug`: the details keep the engine's and libraries' frames too (for a skillyard bug).
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence, TextIO

from ..runtime.result import ToolError
from ..safety.user_frames import last_user_frame, set_debug


class _Debug(argparse.Action):
    """`--debug` takes effect when parsed, before the engine runs anything."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        set_debug(True)
        setattr(namespace, self.dest, True)


def add_error_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true",
                        help="when the tool fails in your Python code, print your code's traceback")
    parser.add_argument("--debug", action=_Debug, nargs=0, default=False,
                        help="keep skillyard's and libraries' frames in error details (for reporting a skillyard bug)")


def show_error(ns: argparse.Namespace, error: ToolError | None, stream: TextIO) -> None:
    """After the result: the last user frame (unless --quiet), or the traceback (--verbose)."""
    if error is None:
        return
    if getattr(ns, "verbose", False):
        lines = traceback_lines(error.details, error.message)
    elif getattr(ns, "quiet", False):
        return
    else:
        lines = last_frame_lines(error.details)
    for line in lines:
        stream.write(line + "\n")
    stream.flush()


def last_frame_lines(details: dict[str, Any]) -> list[str]:
    """`  at file:line in function` and the source line, or nothing when no frame is the user's."""
    frame = last_user_frame(details)
    if frame is None:
        return []
    lines = [f"  at {frame.get('file')}:{frame.get('line')} in {frame.get('function')}"]
    if frame.get("source"):
        lines.append(f"      {frame['source']}")
    return lines


def traceback_lines(details: dict[str, Any], message: str) -> list[str]:
    """The frames as Python prints a traceback (the user's only, unless --debug kept the others)."""
    frames: Sequence[Any] = details.get("frames") or [] if isinstance(details, dict) else []
    if not frames:
        return []
    everything = any(isinstance(f, dict) and f.get("origin") for f in frames)  # --debug kept the others
    lines = ["Traceback (most recent call last):" if everything else "Traceback (your code, most recent call last):"]
    if details.get("frames_omitted"):
        lines.append(f"  … {details['frames_omitted']} earlier frame(s) omitted")
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        origin = f"  [{frame['origin']}]" if frame.get("origin") else ""
        lines.append(f'  File "{frame.get("file")}", line {frame.get("line")}, in {frame.get("function")}{origin}')
        if frame.get("source"):
            lines.append(f"    {frame['source']}")
    lines.append(message)
    return lines

"""Python skills of the Temporal test project. Executions are counted in files under
$SKILLYARD_TEST_COUNTS (one line per execution), so a test can tell what ran how often."""

import asyncio
import os
from pathlib import Path


def _mark(name: str, text: str) -> int:
    folder = Path(os.environ["SKILLYARD_TEST_COUNTS"])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "a", encoding="utf-8") as out:
        out.write(f"{text} {os.getpid()}\n")
    return sum(1 for line in (folder / name).read_text().splitlines() if line.startswith(text + " "))


def count(input):
    _mark("count", input["text"])
    return {"text": input["text"]}


async def sleep(input, ctx):
    _mark("sleep", input["text"])
    ctx.progress("sleeping", seconds=input["seconds"])
    try:
        await asyncio.sleep(input["seconds"])
    except asyncio.CancelledError:
        _mark("sleep-cancelled", input["text"])
        raise
    return {"text": input["text"]}


def flake(input):
    if _mark("flake", input["text"]) <= 2:
        raise RuntimeError("not yet")
    return {"ok": input["text"]}

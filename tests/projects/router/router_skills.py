"""Python skills of the router test project."""

import asyncio
from collections import Counter

ATTEMPTS: Counter[str] = Counter()


def echo(input):
    return dict(input)


async def sleep(input, ctx):
    ctx.progress("sleeping", seconds=input["seconds"])
    await asyncio.sleep(input["seconds"])
    return {"slept": input["seconds"]}


def boom(input):
    if input.get("why") == "timeout":
        raise TimeoutError("the upstream service timed out")
    raise ValueError(f"kaboom: {input.get('why')}")


def flaky(input, ctx):
    ATTEMPTS[input["key"]] += 1
    if ATTEMPTS[input["key"]] <= input["failures"]:
        raise RuntimeError(f"failure {ATTEMPTS[input['key']]} of {input['failures']}")
    return {"attempt": ctx.attempt, "calls": ATTEMPTS[input["key"]]}

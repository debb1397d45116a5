"""Python skills of the concurrency test project."""

import asyncio


async def wait(input, ctx):
    ctx.progress("waiting", seconds=input["delay"])
    await asyncio.sleep(input["delay"])
    ctx.progress("waited")
    return {"text": input["text"]}

"""Python skills of the batch test project."""

import asyncio
import os


async def measure_text(input, ctx):
    if input["delay"]:
        await asyncio.sleep(input["delay"])
    if input["text"] == "boom":
        raise ValueError("this input always fails")
    counter = os.environ.get("BATCH_COUNT_FILE")
    if counter:
        with open(counter, "a") as file:
            file.write(input["text"] + "\n")
    words = len(input["text"].split())
    return {"length": len(input["text"]), "words": words, "upper": input["text"].upper(),
            "ratio": round(len(input["text"]) / max(words, 1), 3)}


def length_judge(input):
    length = input["output"].get("length", 0)
    return {"pass": length < 20, "score": length, "reason": f"length {length} {'<' if length < 20 else '≥'} 20"}

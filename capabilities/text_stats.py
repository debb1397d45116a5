"""Text statistics for the `textReport` tool: plain Python, no model needed."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from engine import SkillContext

WORDS_PER_MINUTE = 230
_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
_STOP_WORDS = frozenset(
    "a an and are as at be but by for from has have in is it its of on or that the this to was were will with "
    "you your we our they their i he she".split()
)


def count_words(input: dict[str, Any], ctx: SkillContext) -> dict[str, Any]:
    text: str = input["text"]
    words = _WORD.findall(text)
    ctx.progress(f"{len(words):,} word{'' if len(words) == 1 else 's'} tokenised", words=len(words))
    counts = Counter(w.lower() for w in words if w.lower() not in _STOP_WORDS and len(w) > 2)
    keywords = [{"word": word, "count": count} for word, count in counts.most_common(input["topN"])]
    sentences = len(_SENTENCE_END.findall(text)) or (1 if words else 0)
    return {
        "words": len(words),
        "sentences": sentences,
        "readingMinutes": round(len(words) / WORDS_PER_MINUTE, 1),
        "keywords": keywords,
    }

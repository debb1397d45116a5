"""What a model answer cost: its usage times the prices its model's config gives.

Providers report tokens only; the prices live in config/models.yaml (`prices:`, USD per
million tokens), read at load into the model's spec. The cost is computed once, where an
answer meets its model's spec (prompt skills, agent turns), and then travels in `Usage`.
"""

from __future__ import annotations

import math
from typing import Any

from ..spec.models import PricesSpec
from .base import ModelResponse, Usage

PER = 1_000_000  # prices are per million tokens


def priced(usage: Usage, prices: PricesSpec | None) -> Usage:
    """`usage` with its cost; unchanged without prices, when the model reported no tokens
    (an answer without usage is not a free answer), or when a fallback model answered (its
    own prices apply, and the fallback provider applied them)."""
    if prices is None or not (usage.input_tokens or usage.output_tokens) or usage.model is not None:
        return usage
    cost = (usage.input_tokens * prices.input + usage.output_tokens * prices.output) / PER
    return Usage(usage.input_tokens, usage.output_tokens, cost)


def priced_response(response: ModelResponse, prices: PricesSpec | None) -> ModelResponse:
    """The answer with a priced usage (the same object when there is nothing to price)."""
    usage = priced(response.usage, prices)
    if usage is response.usage:
        return response
    return ModelResponse(response.text, usage, response.finish_reason, response.tool_calls, response.reasoning)


def format_usd(cost: float) -> str:
    """`$0.0123`, `$0.0000075`, `$12.35`: enough digits to see a small answer's cost, no more."""
    if cost <= 0:
        return "$0"
    decimals = min(9, max(2, 2 - math.floor(math.log10(cost))))
    text = f"{cost:.{decimals}f}"
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def usage_cost(usage: Any) -> float | None:
    """The `cost_usd` of a usage mapping (events, results, the store), when it carries one."""
    cost = usage.get("cost_usd") if isinstance(usage, dict) else None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None

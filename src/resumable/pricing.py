"""What LLM calls cost: a table of per-model prices and the arithmetic over `Usage`.

The built-in prices were copied from the providers' own documentation pages
(`SOURCES`) as read on `PRICES_AS_OF`. Prices change and new models appear:
pass your own prices to `PriceTable`, which win over the built-in ones. A
model missing from the table has no cost (None); it is never guessed from a
similar name.

Prices are the standard tier, in USD per million tokens. Not modelled: batch,
flex and priority tiers, long-context surcharges (Anthropic above 200K input
tokens, OpenAI's 1M-context models above 272K), regional or data-residency
surcharges, and Anthropic's 1-hour cache writes (priced here at the 5-minute
rate). When a call used any of those, state its cost in `Usage.cost_usd`, or
override the model's price.

OpenAI models whose complete price (input, cached input, output) could not be
confirmed from a stored copy of OpenAI's own pages are left out: gpt-4o,
gpt-4o-mini, gpt-4.1, gpt-4.1-mini, o3, o4-mini and gpt-5. Add them yourself::

    table = PriceTable({"gpt-4o-mini": Price(input_per_mtok=..., output_per_mtok=...)})
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from types import MappingProxyType

from resumable.usage import Usage

_PER_MTOK = 1_000_000
# A snapshot suffix after a known model name: "-2024-08-06", "-20250929",
# "-0613", "-latest", or Vertex AI's "@20250929". Anything else (e.g. "-mini",
# "-1", "-codex") names another model, which must not inherit this one's price.
_SNAPSHOT = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """A model's price in USD per million tokens.

    Raises ValueError for a negative or non-finite price.
    """

    input_per_mtok: float
    """Uncached input tokens."""
    output_per_mtok: float
    """Output tokens, reasoning tokens included."""
    cached_input_per_mtok: float | None = None
    """Input tokens read from a prompt cache; None: priced as uncached input."""
    cache_write_per_mtok: float | None = None
    """Input tokens written to a prompt cache (Anthropic's 5-minute writes); None: priced as input."""

    def __post_init__(self) -> None:
        for name in (
            "input_per_mtok",
            "output_per_mtok",
            "cached_input_per_mtok",
            "cache_write_per_mtok",
        ):
            value: object = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"Price.{name} must be a finite non-negative number, got {value!r}"
                )

    def cost(self, usage: Usage) -> float:
        """The USD cost of `usage` at this price (its model and stated cost are ignored)."""
        cached = self.input_per_mtok
        if self.cached_input_per_mtok is not None:
            cached = self.cached_input_per_mtok
        written = self.input_per_mtok
        if self.cache_write_per_mtok is not None:
            written = self.cache_write_per_mtok
        return (
            usage.input_tokens * self.input_per_mtok
            + usage.cached_input_tokens * cached
            + usage.cache_write_tokens * written
            + usage.output_tokens * self.output_per_mtok
        ) / _PER_MTOK


PRICES_AS_OF = date(2026, 11, 22)
"""The day the built-in prices were read from `SOURCES` (the pages carry no date)."""

SOURCES: tuple[str, ...] = (
    "https://developers.openai.com/api/docs/models/gpt-5-mini",
    "https://developers.openai.com/api/docs/models/gpt-5-nano",
    "https://developers.openai.com/api/docs/models/gpt-4.1-nano",
    "https://platform.claude.com/docs/en/about-claude/pricing",
)
"""Where the built-in prices come from: OpenAI's model pages, Anthropic's pricing page."""

_OPUS_4_5 = Price(
    input_per_mtok=5.0,
    output_per_mtok=25.0,
    cached_input_per_mtok=0.50,
    cache_write_per_mtok=6.25,
)
_OPUS_4 = Price(
    input_per_mtok=15.0,
    output_per_mtok=75.0,
    cached_input_per_mtok=1.50,
    cache_write_per_mtok=18.75,
)
_SONNET_4 = Price(
    input_per_mtok=3.0,
    output_per_mtok=15.0,
    cached_input_per_mtok=0.30,
    cache_write_per_mtok=3.75,
)

DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # OpenAI, standard tier, from each model's page.
        "gpt-5-mini": Price(
            input_per_mtok=0.25, output_per_mtok=2.0, cached_input_per_mtok=0.025
        ),
        "gpt-5-nano": Price(
            input_per_mtok=0.05, output_per_mtok=0.40, cached_input_per_mtok=0.005
        ),
        "gpt-4.1-nano": Price(
            input_per_mtok=0.10, output_per_mtok=0.40, cached_input_per_mtok=0.025
        ),
        # Anthropic, base input / 5-minute cache writes / cache hits / output.
        "claude-opus-4-8": _OPUS_4_5,
        "claude-opus-4-7": _OPUS_4_5,
        "claude-opus-4-6": _OPUS_4_5,
        "claude-opus-4-5": _OPUS_4_5,
        "claude-opus-4-1": _OPUS_4,
        "claude-opus-4-0": _OPUS_4,
        "claude-opus-4": _OPUS_4,  # snapshot claude-opus-4-20250514
        "claude-sonnet-4-6": _SONNET_4,
        "claude-sonnet-4-5": _SONNET_4,
        "claude-sonnet-4-0": _SONNET_4,
        "claude-sonnet-4": _SONNET_4,  # snapshot claude-sonnet-4-20250514
        "claude-haiku-4-5": Price(
            input_per_mtok=1.0,
            output_per_mtok=5.0,
            cached_input_per_mtok=0.10,
            cache_write_per_mtok=1.25,
        ),
        "claude-3-5-haiku": Price(
            input_per_mtok=0.80,
            output_per_mtok=4.0,
            cached_input_per_mtok=0.08,
            cache_write_per_mtok=1.0,
        ),
    }
)
"""Built-in prices by model name (no snapshot suffix), as of `PRICES_AS_OF`."""


class PriceTable:
    """Prices by model name: the built-in ones, overridden by the caller's.

    Names match case-insensitively. A name missing from the table still
    matches an entry when it is that entry plus a snapshot suffix
    ("gpt-4o-2024-08-06" finds "gpt-4o", "claude-sonnet-4-5-20250929" finds
    "claude-sonnet-4-5"), but never another model of the family: with only
    "gpt-4o" in the table, "gpt-4o-mini" has no price.

    Args:
        prices: your prices by model name; they win over the built-in ones.
        include_defaults: start from `DEFAULT_PRICES`; False uses only `prices`.

    Raises:
        ValueError: a name is empty or a price is not a `Price`.
    """

    __slots__ = ("_prices",)

    def __init__(
        self,
        prices: Mapping[str, Price] | None = None,
        *,
        include_defaults: bool = True,
    ) -> None:
        merged: dict[str, Price] = {}
        if include_defaults:
            merged.update(DEFAULT_PRICES)
        for name, price in (prices or {}).items():
            # Checked at runtime too: the table is often built from a config file.
            raw_name: object = name
            raw_price: object = price
            key = raw_name.strip().lower() if isinstance(raw_name, str) else ""
            if not key:
                raise ValueError(f"a model name must be a non-empty str, got {name!r}")
            if not isinstance(raw_price, Price):
                raise ValueError(
                    f"the price of {name!r} must be a Price, got {price!r}"
                )
            merged[key] = price
        self._prices: Mapping[str, Price] = MappingProxyType(merged)

    @property
    def prices(self) -> Mapping[str, Price]:
        """Every price in the table, by lower-case model name (read-only)."""
        return self._prices

    def price(self, model: str | None) -> Price | None:
        """The price of `model`, or None if the table does not know it."""
        if not isinstance(model, str):
            return None
        name = model.strip().lower()
        exact = self._prices.get(name)
        if exact is not None:
            return exact
        matches = [
            key
            for key in self._prices
            if name.startswith(key) and _SNAPSHOT.fullmatch(name, len(key))
        ]
        if not matches:
            return None
        return self._prices[max(matches, key=len)]

    def cost(self, usage: Usage) -> float | None:
        """The USD cost of one call: `usage.cost_usd` when stated, else from the table.

        None when the cost is not stated and the table has no price for the model.
        """
        if usage.cost_usd is not None:
            return usage.cost_usd
        price = self.price(usage.model)
        return None if price is None else price.cost(usage)

    def __repr__(self) -> str:
        return f"PriceTable({len(self._prices)} models)"

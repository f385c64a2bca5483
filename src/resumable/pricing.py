"""What LLM calls cost: a table of per-model prices and the arithmetic over `Usage`.

The built-in prices were copied from the pages in `SOURCES` (the providers' own,
where a stored copy held the price), each row on its own `Price.as_of`, none
later than `PRICES_AS_OF`. Prices change and new models appear:
pass your own prices to `PriceTable`, which win over the built-in ones. A
model missing from the table has no cost (None); it is never guessed from a
similar name.

Prices are the standard tier, in USD per million tokens. Not modelled: batch,
flex and priority tiers, long-context surcharges (Anthropic above 200K input
tokens, OpenAI's 1M-context models above 272K), regional or data-residency
surcharges, and Anthropic's 1-hour cache writes (priced here at the 5-minute
rate). When a call used any of those, state its cost in `Usage.cost_usd`, or
override the model's price.

Each built-in price says where it was read (`Price.source`) and when
(`Price.as_of`). Models whose complete price (input, cached input, output)
could not be confirmed are left out rather than guessed: gpt-4o, gpt-4o-mini
(retired from OpenAI's price list), gpt-4.1, gpt-4.1-mini, o3, o4-mini and
gpt-5. A model without a price is shown as "unpriced" with its token counts,
never as $0. Add or override prices in code::

    table = PriceTable({"gpt-4o": Price(input_per_mtok=2.5, output_per_mtok=10.0)})
    engine = Engine(prices=table)

or on the command line, `--price gpt-4o=2.5,10[,1.25]` (USD per million input,
output and cached input tokens) or `RESUMABLE_PRICES="gpt-4o=2.5,10;my-model=1,2"`,
both read by `parse_prices`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType

from resumable.usage import Usage

_PER_MTOK = 1_000_000
# A snapshot suffix after a known model name: "-2024-08-06", "-20250929",
# "-0613", "-latest", or Vertex AI's "@20250929". Anything else (e.g. "-mini",
# "-1", "-codex") names another model, which must not inherit this one's price.
_UNSEEN = object()
_NAMES_KEPT = 1024
"""At most this many model names remembered per table (names come from responses)."""
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
    # provenance, not part of the price: two equal prices may be read in two places
    source: str | None = field(default=None, compare=False)
    """Where the price was read (a URL); None for a price you set."""
    as_of: date | None = field(default=None, compare=False)
    """When the price was read from `source`."""

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


PRICES_AS_OF = date(2026, 11, 27)
"""The day the newest built-in prices were read; each row has its own `as_of`."""

_ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing"
_OPENAI_MODEL = "https://developers.openai.com/api/docs/models/"
# These two quote OpenAI's pricing page (developers.openai.com/api/docs/pricing),
# which no stored copy here holds; they agree with each other on every model both list.
_BENCHLM = "https://benchlm.ai/blog/posts/openai-api-pricing"
_MORPH = "https://www.morphllm.com/openai-api-pricing"

_READ_BEFORE = date(2026, 11, 22)  # the first reading of the providers' own pages

SOURCES: tuple[str, ...] = (
    _OPENAI_MODEL + "gpt-5-mini",
    _OPENAI_MODEL + "gpt-5-nano",
    _OPENAI_MODEL + "gpt-4.1-nano",
    _BENCHLM,
    _MORPH,
    _ANTHROPIC,
)
"""Every page a built-in price was read from (each `Price.source` is one of them)."""


def _openai(
    input_per_mtok: float,
    cached_input_per_mtok: float,
    output_per_mtok: float,
    source: str,
    as_of: date,
) -> Price:
    return Price(
        input_per_mtok=input_per_mtok,
        cached_input_per_mtok=cached_input_per_mtok,
        output_per_mtok=output_per_mtok,
        source=source,
        as_of=as_of,
    )


def _anthropic(
    input_per_mtok: float,
    cache_write: float,
    cache_hit: float,
    output: float,
    as_of: date = _READ_BEFORE,
) -> Price:
    return Price(
        input_per_mtok=input_per_mtok,
        output_per_mtok=output,
        cached_input_per_mtok=cache_hit,
        cache_write_per_mtok=cache_write,
        source=_ANTHROPIC,
        as_of=as_of,
    )


_BENCHLM_READ = date(2026, 4, 13)  # the post's date
_MORPH_READ = date(2026, 6, 1)  # the page says "as of June 2026"
_OPUS_4_5 = _anthropic(5.0, 6.25, 0.50, 25.0)
_OPUS_4 = _anthropic(15.0, 18.75, 1.50, 75.0)
_SONNET_4 = _anthropic(3.0, 3.75, 0.30, 15.0)

DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # OpenAI, standard tier: input, cached input, output.
        "gpt-5.5": _openai(5.0, 0.50, 30.0, _MORPH, _MORPH_READ),
        "gpt-5.4": _openai(2.50, 0.25, 15.0, _BENCHLM, _BENCHLM_READ),
        "gpt-5.4-mini": _openai(0.75, 0.075, 4.50, _BENCHLM, _BENCHLM_READ),
        "gpt-5.4-nano": _openai(0.20, 0.02, 1.25, _BENCHLM, _BENCHLM_READ),
        "gpt-5.2": _openai(1.75, 0.175, 14.0, _BENCHLM, _BENCHLM_READ),
        "gpt-5.1": _openai(1.25, 0.125, 10.0, _BENCHLM, _BENCHLM_READ),
        "gpt-5-mini": _openai(
            0.25, 0.025, 2.0, _OPENAI_MODEL + "gpt-5-mini", _READ_BEFORE
        ),
        "gpt-5-nano": _openai(
            0.05, 0.005, 0.40, _OPENAI_MODEL + "gpt-5-nano", _READ_BEFORE
        ),
        "gpt-4.1-nano": _openai(
            0.10, 0.025, 0.40, _OPENAI_MODEL + "gpt-4.1-nano", _READ_BEFORE
        ),
        # Anthropic: base input, 5-minute cache writes, cache hits, output. Fable 5.1
        # and Mythos (limited availability) are left out: their cache-hit price
        # carries a footnote the stored page does not explain.
        "claude-fable-5": _anthropic(10.0, 12.50, 1.0, 50.0, PRICES_AS_OF),
        "claude-opus-5": _anthropic(5.0, 6.25, 0.50, 25.0, PRICES_AS_OF),
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
        "claude-haiku-4-5": _anthropic(1.0, 1.25, 0.10, 5.0),
        "claude-3-5-haiku": _anthropic(0.80, 1.0, 0.08, 4.0),
    }
)
"""Built-in prices by model name (no snapshot suffix), each with its source and date."""


def parse_price(spec: str) -> tuple[str, Price]:
    """`MODEL=INPUT,OUTPUT[,CACHED_INPUT]` in USD per million tokens, as a table entry.

    Raises:
        ValueError: the text is not of that form, or a number is negative.
    """
    model, sep, numbers = spec.partition("=")
    parts = [part.strip() for part in numbers.split(",")]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if not sep or not model.strip() or len(values) not in (2, 3):
        raise ValueError(
            f"price {spec!r}: write MODEL=INPUT,OUTPUT[,CACHED_INPUT] in USD per "
            "million tokens, e.g. gpt-4o=2.5,10,1.25"
        )
    return model.strip(), Price(
        input_per_mtok=values[0],
        output_per_mtok=values[1],
        cached_input_per_mtok=values[2] if len(values) == 3 else None,
    )


def parse_prices(specs: str) -> dict[str, Price]:
    """Entries separated by `;` or whitespace (`RESUMABLE_PRICES`), each as `parse_price`."""
    return dict(parse_price(spec) for spec in re.split(r"[;\s]+", specs) if spec)


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

    __slots__ = ("_found", "_prices")

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
        # the table never changes: each model name is looked up once (every
        # metered call of a budgeted run asks, and a dated name scans the table)
        self._found: dict[str, Price | None] = {}

    @property
    def prices(self) -> Mapping[str, Price]:
        """Every price in the table, by lower-case model name (read-only)."""
        return self._prices

    def price(self, model: str | None) -> Price | None:
        """The price of `model`, or None if the table does not know it."""
        if not isinstance(model, str):
            return None
        found = self._found.get(model, _UNSEEN)
        if found is _UNSEEN:
            if len(self._found) >= _NAMES_KEPT:
                self._found.clear()
            found = self._found[model] = self._look_up(model)
        return found  # type: ignore[return-value]  # not _UNSEEN: set just above

    def _look_up(self, model: str) -> Price | None:
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

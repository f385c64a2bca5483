from __future__ import annotations

import re
import sys
from datetime import date
from types import FrameType

import pytest

from resumable.pricing import (
    DEFAULT_PRICES,
    PRICES_AS_OF,
    SOURCES,
    Price,
    PriceTable,
    parse_price,
    parse_prices,
)
from resumable.usage import Usage

GPT_4O = Price(input_per_mtok=2.5, output_per_mtok=10.0, cached_input_per_mtok=1.25)
GPT_4O_MINI = Price(
    input_per_mtok=0.15, output_per_mtok=0.6, cached_input_per_mtok=0.075
)


def usage(
    model: str | None,
    *,
    input_tokens: int = 0,
    cached_input_tokens: int = 0,
    cache_write_tokens: int = 0,
    output_tokens: int = 0,
) -> Usage:
    return Usage(
        model=model,
        provider=None,
        input_tokens=input_tokens,
        cached_input_tokens=cached_input_tokens,
        cache_write_tokens=cache_write_tokens,
        output_tokens=output_tokens,
    )


# -- lookup -----------------------------------------------------------------------


def test_exact_names_find_their_price() -> None:
    table = PriceTable()

    assert table.price("claude-haiku-4-5") == Price(
        input_per_mtok=1.0,
        output_per_mtok=5.0,
        cached_input_per_mtok=0.10,
        cache_write_per_mtok=1.25,
    )
    assert table.price("gpt-5-mini") == DEFAULT_PRICES["gpt-5-mini"]


@pytest.mark.parametrize(
    ("model", "known"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5-nano-2025-08-07", "gpt-5-nano"),
        ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
    ],
)
def test_dated_snapshots_find_their_model(model: str, known: str) -> None:
    assert PriceTable().price(model) == DEFAULT_PRICES[known]


def test_the_mini_model_is_never_priced_as_its_bigger_sibling() -> None:
    table = PriceTable(
        {"gpt-4o": GPT_4O, "gpt-4o-mini": GPT_4O_MINI}, include_defaults=False
    )

    assert table.price("gpt-4o-mini") == GPT_4O_MINI
    assert table.price("gpt-4o-mini-2024-07-18") == GPT_4O_MINI
    assert table.price("gpt-4o-2024-08-06") == GPT_4O
    only_4o = PriceTable({"gpt-4o": GPT_4O}, include_defaults=False)
    assert only_4o.price("gpt-4o-mini") is None
    assert only_4o.price("gpt-4o-mini-2024-07-18") is None


def test_a_newer_version_never_takes_an_older_versions_price() -> None:
    table = PriceTable()

    # Opus 4 costs three times Opus 4.5: a prefix match across them would be wrong.
    assert table.price("claude-opus-4-5-20251101") == DEFAULT_PRICES["claude-opus-4-5"]
    assert table.price("claude-opus-4-9") is None
    assert table.price("claude-sonnet-4-7-20270101") is None


@pytest.mark.parametrize(
    "model",
    [
        None,
        "",
        "   ",
        "gpt-5",
        "gpt-5-codex",
        "gpt-5-mini-codex",
        "o3",
        "claude-simulated",
        "claude-haiku",
        "text-embedding-3-small",
        "gpt-5-mini-preview",
    ],
)
def test_unknown_models_have_no_price(model: str | None) -> None:
    assert PriceTable().price(model) is None


def test_names_match_case_insensitively() -> None:
    table = PriceTable({"My-Model": GPT_4O}, include_defaults=False)

    assert table.price("my-model") == GPT_4O
    assert table.price(" MY-MODEL-2026-01-02 ") == GPT_4O
    assert PriceTable().price("Claude-Haiku-4-5") == DEFAULT_PRICES["claude-haiku-4-5"]


def test_your_prices_win_over_the_built_in_ones() -> None:
    cheaper = Price(input_per_mtok=0.5, output_per_mtok=2.5)

    table = PriceTable({"claude-haiku-4-5": cheaper, "gpt-4o": GPT_4O})

    assert table.price("claude-haiku-4-5") == cheaper
    assert table.price("claude-haiku-4-5-20251001") == cheaper
    assert table.price("gpt-4o") == GPT_4O
    assert table.price("claude-sonnet-4-5") == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert PriceTable().price("claude-haiku-4-5") != cheaper


def test_without_defaults_only_your_prices_are_known() -> None:
    table = PriceTable({"gpt-4o": GPT_4O}, include_defaults=False)

    assert table.price("claude-haiku-4-5") is None
    assert dict(table.prices) == {"gpt-4o": GPT_4O}
    assert PriceTable(include_defaults=False).prices == {}


@pytest.mark.parametrize(
    "prices",
    [
        {"": GPT_4O},
        {"gpt-4o": (2.5, 10.0)},
        {"gpt-4o": None},
    ],
)
def test_a_bad_entry_is_refused_when_the_table_is_built(prices: object) -> None:
    with pytest.raises(ValueError, match=r"model name|must be a Price"):
        PriceTable(prices)  # type: ignore[arg-type]  # a config file can hold anything


def test_the_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        DEFAULT_PRICES["gpt-5-mini"] = GPT_4O  # type: ignore[index]  # the mutation is the point
    with pytest.raises(TypeError):
        PriceTable().prices["gpt-4o"] = GPT_4O  # type: ignore[index]  # the mutation is the point


# -- cost -------------------------------------------------------------------------


def test_cost_sums_every_kind_of_token_at_its_own_price() -> None:
    table = PriceTable()
    call = usage(
        "claude-sonnet-4-5-20250929",
        input_tokens=1_000,
        cached_input_tokens=20_000,
        cache_write_tokens=3_000,
        output_tokens=500,
    )

    cost = table.cost(call)

    # 1k x $3 + 20k x $0.30 + 3k x $3.75 + 500 x $15, per million tokens
    assert cost == pytest.approx((3_000 + 6_000 + 11_250 + 7_500) / 1_000_000)


def test_openai_cached_input_gets_its_discount() -> None:
    call = usage(
        "gpt-5-mini", input_tokens=2_000, cached_input_tokens=8_000, output_tokens=1_000
    )

    assert PriceTable().cost(call) == pytest.approx(
        (2_000 * 0.25 + 8_000 * 0.025 + 1_000 * 2.0) / 1_000_000
    )


def test_cache_prices_default_to_the_input_price() -> None:
    flat = Price(input_per_mtok=2.0, output_per_mtok=8.0)
    table = PriceTable({"flat": flat}, include_defaults=False)
    call = usage(
        "flat",
        input_tokens=100,
        cached_input_tokens=200,
        cache_write_tokens=300,
        output_tokens=400,
    )

    assert table.cost(call) == pytest.approx((600 * 2.0 + 400 * 8.0) / 1_000_000)
    assert flat.cost(call) == table.cost(call)


def test_a_stated_cost_wins_over_the_table() -> None:
    table = PriceTable()

    assert table.cost(usage("claude-haiku-4-5", output_tokens=10**6)) == pytest.approx(
        5.0
    )
    stated = Usage(
        model="claude-haiku-4-5",
        provider="anthropic",
        output_tokens=10**6,
        cost_usd=0.42,
    )
    assert table.cost(stated) == 0.42
    free = Usage(model="unknown-model", provider=None, output_tokens=10, cost_usd=0.0)
    assert table.cost(free) == 0.0


def test_unknown_models_have_no_cost() -> None:
    assert PriceTable().cost(usage("gpt-99-ultra", input_tokens=10)) is None
    assert PriceTable().cost(usage(None, input_tokens=10)) is None


def test_a_call_without_tokens_costs_nothing() -> None:
    assert PriceTable().cost(usage("claude-opus-4-1")) == 0.0


@pytest.mark.parametrize(
    "fields",
    [
        {"input_per_mtok": -1.0, "output_per_mtok": 1.0},
        {"input_per_mtok": 1.0, "output_per_mtok": float("nan")},
        {"input_per_mtok": 1.0, "output_per_mtok": 1.0, "cached_input_per_mtok": -0.1},
        {
            "input_per_mtok": 1.0,
            "output_per_mtok": 1.0,
            "cache_write_per_mtok": float("inf"),
        },
        {"input_per_mtok": "1", "output_per_mtok": 1.0},
        {"input_per_mtok": None, "output_per_mtok": 1.0},
    ],
)
def test_a_price_must_be_finite_and_non_negative(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="Price"):
        Price(**fields)  # type: ignore[arg-type]  # the wrong values are the point


# -- provenance -------------------------------------------------------------------


def test_built_in_prices_say_when_and_where_they_were_read() -> None:
    assert isinstance(PRICES_AS_OF, date)
    assert date.today() >= PRICES_AS_OF
    assert SOURCES
    assert all(source.startswith("https://") for source in SOURCES)


def test_built_in_names_are_bare_model_names() -> None:
    snapshot = re.compile(r".*[-@](\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
    for name in DEFAULT_PRICES:
        assert name == name.lower().strip()
        assert not snapshot.match(name), name


def test_built_in_prices_cover_both_providers() -> None:
    table = PriceTable()

    for model in ("gpt-5.4", "gpt-5-mini", "gpt-5-nano", "gpt-4.1-nano"):
        assert table.price(model) is not None, model
    for model in (
        "claude-opus-4-5",
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-sonnet-4",
        "claude-haiku-4-5",
        "claude-3-5-haiku",
    ):
        assert table.price(model) is not None, model


def test_every_built_in_price_says_where_and_when_it_was_read() -> None:
    for name, price in DEFAULT_PRICES.items():
        assert price.source in SOURCES, name
        assert price.as_of is not None, name
        assert price.as_of <= PRICES_AS_OF, name


def test_current_openai_models_are_priced_and_retired_ones_are_not_guessed() -> None:
    table = PriceTable()
    for model in ("gpt-5.5", "gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5.1"):
        assert table.price(model) is not None, model
    assert table.price("gpt-5.4-2026-03-05") == DEFAULT_PRICES["gpt-5.4"]
    assert table.price("gpt-5.4-pro") is None  # another model, not a snapshot
    assert table.price("gpt-4o") is None


def test_provenance_is_not_part_of_a_price() -> None:
    read = Price(
        input_per_mtok=1, output_per_mtok=2, source="https://x", as_of=date(2026, 1, 1)
    )
    assert read == Price(input_per_mtok=1, output_per_mtok=2)


@pytest.mark.parametrize(
    ("spec", "price"),
    [
        ("gpt-4o=2.5,10", Price(input_per_mtok=2.5, output_per_mtok=10)),
        (
            " my-model = 1, 2, 0.5 ",
            Price(input_per_mtok=1, output_per_mtok=2, cached_input_per_mtok=0.5),
        ),
    ],
)
def test_a_price_reads_from_model_equals_input_output_cached(
    spec: str, price: Price
) -> None:
    assert parse_price(spec)[1] == price
    assert parse_price(spec)[0] == spec.split("=", maxsplit=1)[0].strip()


@pytest.mark.parametrize(
    "spec", ["gpt-4o", "gpt-4o=2.5", "=1,2", "gpt-4o=a,b", "x=1,2,3,4", "x=-1,2"]
)
def test_a_malformed_price_is_refused_with_its_form(spec: str) -> None:
    with pytest.raises(ValueError, match=r"gpt-4o=|must be a finite non-negative"):
        parse_price(spec)


def test_several_prices_read_from_one_line() -> None:
    prices = parse_prices("a=1,2; b=3,4,0.5\nc=5,6")
    assert sorted(prices) == ["a", "b", "c"]
    assert parse_prices("") == {}


def test_a_model_name_is_looked_up_once_and_answered_the_same_after() -> None:
    """Every metered call of a budgeted run asks its model's price; a dated name
    (what providers answer) scans the table, so each name is looked up once."""
    table = PriceTable({"my-model": Price(input_per_mtok=1.0, output_per_mtok=2.0)})
    names = [f"my-model-2025-01-{day:02d}" for day in range(1, 29)]
    names += [f"unknown-{i}" for i in range(1500)]  # past what a table remembers
    first = [table.price(name) for name in names]
    assert first[:28] == [table.price("my-model")] * 28
    assert first[28:] == [None] * 1500
    assert [table.price(name) for name in names] == first

    frames: list[str] = []

    def trace(frame: FrameType, event: str, arg: object) -> None:
        frames.append(frame.f_code.co_name)

    price = table.price("my-model-2025-02-01")
    sys.settrace(trace)
    try:
        again = table.price("my-model-2025-02-01")
    finally:
        sys.settrace(None)
    assert again is price
    assert frames == ["price"]  # no scan of the table, no regex

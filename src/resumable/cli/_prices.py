"""`--price MODEL=IN,OUT[,CACHED]` and `$RESUMABLE_PRICES`: prices the CLI prices with.

The commands that show dollars (`runs`, `show`, `export`, `ui`, `cost-model`)
and `worker` (whose runs' `budget_usd` counts with them) take the option; each
use adds a price or overrides a built-in one, after the entries of
`$RESUMABLE_PRICES` (same form, separated by `;`).
"""

from __future__ import annotations

import argparse
import os

from resumable.errors import UsageError
from resumable.pricing import PriceTable, parse_price, parse_prices

ENV = "RESUMABLE_PRICES"
HELP = (
    "price a model, USD per million input, output and cached input tokens "
    "(repeat; adds to or overrides the built-in table and $RESUMABLE_PRICES)"
)


def add_option(parser: argparse.ArgumentParser) -> None:
    """Add `--price` to a command."""
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL=IN,OUT[,CACHED]",
        help=HELP,
    )


def price_table(args: argparse.Namespace) -> PriceTable:
    """The built-in prices, then `$RESUMABLE_PRICES`, then each `--price`."""
    try:
        prices = parse_prices(os.environ.get(ENV, ""))
    except ValueError as exc:
        raise UsageError(f"${ENV}: {exc}") from None
    for spec in args.price:
        try:
            model, price = parse_price(spec)
        except ValueError as exc:
            raise UsageError(f"--price: {exc}") from None
        prices[model] = price
    return PriceTable(prices)

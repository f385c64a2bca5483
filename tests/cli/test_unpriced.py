"""An unpriced model reads "unpriced" with its token counts in every view, a
price given in code, on the command line or in $RESUMABLE_PRICES is applied,
and every count the CLI prints agrees with its number."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from resumable import Engine, Retry, WorkflowFailed, current_run, step, workflow
from resumable._engine.ledger import Spend, dollars_text, spend_text
from resumable._plural import plural
from resumable.cli import main
from resumable.pricing import Price, PriceTable
from resumable.ui.app import create_app

# 1,200 input and 34 output tokens of gpt-4o, which has no built-in price
TOKENS = "1,234 tok"


@step
async def ask(question: str) -> str:
    current_run().record_usage(
        model="gpt-4o", provider="openai", input_tokens=1200, output_tokens=34
    )
    return f"answer to {question}"


@workflow(name="tests.unpriced")
async def one_question(question: str) -> str:
    return await ask(question)


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A store holding one run of one step that made one gpt-4o call."""
    url = f"sqlite:///{tmp_path / 'unpriced.db'}"

    async def make() -> None:
        async with Engine(url) as engine:
            await engine.run(one_question, "q", run_id="u-1")

    asyncio.run(make())
    return url


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_runs_and_show_say_unpriced_with_the_token_counts(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = cli(["runs", "--store", url], capsys)
    assert status == 0
    assert f"1 call, {TOKENS}, unpriced" in out
    assert "$0.0000" not in out
    status, out = cli(["show", "u-1", "--store", url], capsys)
    assert status == 0
    assert f"incurred  1 call, {TOKENS}, unpriced" in out
    assert "unpriced  gpt-4o" in out
    assert "--price" in out
    assert "$0.0000" not in out


def test_export_leaves_the_dollars_of_an_unpriced_step_empty(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["export", "--store", url])
    assert status == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["cost_usd"] is None
    assert (record["calls"], record["unpriced_calls"]) == (1, 1)
    assert (record["input_tokens"], record["output_tokens"]) == (1200, 34)
    assert record["models"] == ["gpt-4o"]


def test_the_dashboard_run_page_says_unpriced(url: str) -> None:
    async def page() -> str:
        async with Engine(url) as engine:
            # the Host check admits loopback names only
            client = TestClient(create_app(engine), base_url="http://127.0.0.1")
            response = await asyncio.to_thread(client.get, "/run", params={"id": "u-1"})
            assert response.status_code == 200
            return response.text

    html = asyncio.run(page())
    assert f"1 call, {TOKENS}, unpriced" in html
    assert "1 · unpriced" in html
    assert "Unpriced: gpt-4o" in html
    assert "$0.0000" not in html


def test_cost_model_names_the_unpriced_model_and_only_options_help_lists(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, projected = cli(["cost-model", "--model", "gpt-4o"], capsys)
    assert status == 2
    assert "'gpt-4o' is unpriced (2000 input and 500 output tokens a step)" in projected
    status, observed = cli(["cost-model", "--from-store", url], capsys)
    assert status == 2
    assert "1 call to unpriced models (gpt-4o;" in observed
    with pytest.raises(SystemExit):
        main(["cost-model", "--help"])
    listed = set(re.findall(r"--[a-z][a-z-]+", capsys.readouterr().out))
    suggested = set(re.findall(r"--[a-z][a-z-]+", projected + observed))
    assert suggested
    assert suggested <= listed, suggested - listed


def test_a_price_given_on_the_command_line_is_applied(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dollars = (1200 * 2.5 + 34 * 10.0) / 1e6  # $0.00334
    status, out = cli(["runs", "--store", url, "--price", "gpt-4o=2.5,10"], capsys)
    assert status == 0
    assert f"1 call, {TOKENS}, ${dollars:.4f}" in out
    status, out = cli(
        ["cost-model", "--from-store", url, "--price", "gpt-4o=2.5,10,1.25"], capsys
    )
    assert status == 0
    assert "LLM $0.003340/request" in out
    monkeypatch.setenv("RESUMABLE_PRICES", "gpt-4o=2.5,10; other=1,2")
    status, out = cli(["show", "u-1", "--store", url], capsys)
    assert f"incurred  1 call, {TOKENS}, ${dollars:.4f}" in out
    assert "unpriced  gpt-4o" not in out
    status, out = cli(["runs", "--store", url, "--price", "gpt-4o=abc"], capsys)
    assert status == 2
    assert "MODEL=INPUT,OUTPUT[,CACHED_INPUT]" in out


async def test_a_price_given_in_code_is_applied_to_the_ledger(url: str) -> None:
    prices = PriceTable({"gpt-4o": Price(input_per_mtok=2.5, output_per_mtok=10.0)})
    async with Engine(url, prices=prices) as engine:
        ledger = await engine.ledger("u-1")
        (record,) = [r async for r in engine.export(["u-1"])]
    assert ledger.incurred.cost_usd == pytest.approx((1200 * 2.5 + 34 * 10) / 1e6)
    assert ledger.incurred.unpriced_calls == 0
    assert ledger.unpriced_models == ()
    assert record.cost_usd == pytest.approx(ledger.incurred.cost_usd)


# -- grammar --------------------------------------------------------------------

_WRONG_PLURAL = re.compile(
    r"(?<![\d,.])1 (calls|attempts|steps|runs|payloads|threads|chunks|inputs|"
    r"bytes|entries|checkpoints|unpriced calls|earlier attempts|LLM calls)\b"
    r"|(?<![\d,.])1 steps/request"
)


@step(retry=Retry(attempts=1))
async def fails() -> str:
    current_run().record_usage(model="gpt-5-mini", input_tokens=10, output_tokens=1)
    raise ValueError("no")


@workflow(name="tests.unpriced.fails")
async def failing() -> str:
    return await fails()


def test_no_count_the_cli_prints_says_1_in_the_plural(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fail_one() -> None:
        async with Engine(url) as engine:
            with pytest.raises(WorkflowFailed) as caught:
                await engine.run(failing, run_id="f-1")
            assert "failed after 1 attempt:" in str(caught.value.__cause__)

    asyncio.run(fail_one())
    outputs = []
    for argv in (
        ["runs", "--store", url],
        ["show", "u-1", "--store", url],
        ["show", "f-1", "--store", url],
        ["export", "u-1", "--store", url],
        ["gc", "--older-than", "0s", "--dry-run", "--store", url],
        ["cost-model", "--from-store", url, "--price", "gpt-4o=1,2"],
    ):
        status, out = cli(argv, capsys)
        assert status == 0, (argv, out)
        outputs.append(out)
    text = "\n".join(outputs)
    assert "1 call," in text
    assert _WRONG_PLURAL.search(text) is None, _WRONG_PLURAL.search(text)


def test_counts_and_dollars_read_as_english() -> None:
    assert [plural(n, "call") for n in (0, 1, 2, 1500)] == [
        "0 calls",
        "1 call",
        "2 calls",
        "1,500 calls",
    ]
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"
    assert dollars_text(0.0123, calls=2, unpriced_calls=0) == "$0.0123"
    assert dollars_text(0.0, calls=2, unpriced_calls=2) == "unpriced"
    assert (
        dollars_text(0.0123, calls=3, unpriced_calls=1) == "$0.0123 + 1 unpriced call"
    )
    spend = Spend(calls=1, input_tokens=1200, output_tokens=34, unpriced_calls=1)
    assert spend_text(spend) == f"1 call, {TOKENS}, unpriced"

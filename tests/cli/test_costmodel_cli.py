from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from resumable import Engine, current_run, step, workflow
from resumable.cli import main
from resumable.costmodel import load_overheads


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["cost-model", "--json", *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


def test_prints_every_figure_for_1k_10k_and_100k_requests_a_day(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["cost-model", "--steps", "8", "--failure-rate", "0.02"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "1K/day" in line)
    assert header.split() == ["1K/day", "10K/day", "100K/day"]
    for row in (
        "storage / day",
        "storage at steady state",
        "write ops/s",
        "added latency / step",
        "store cost / day",
        "LLM spend avoided / day",
        "ROI",
        "break-even LLM $/request",
    ):
        assert row in out
    assert "8 steps/request (gpt-5-mini 2000in/500out)" in out
    assert "steps shorter than" in out


def test_json_figures_scale_with_the_request_rate_and_use_the_measured_overhead(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = run_json(capsys, "--store-kind", "postgres", "--steps", "5")
    rates = data["rates"]
    assert isinstance(rates, list)
    assert [r["requests_per_day"] for r in rates] == [1000, 10_000, 100_000]
    assert rates[2]["storage_bytes_per_day"] == pytest.approx(
        100 * rates[0]["storage_bytes_per_day"]
    )
    measured = load_overheads()["postgres"].us_per_step
    assert rates[0]["added_latency_per_step_ms"] == pytest.approx(measured / 1000)


def test_steps_given_one_by_one_are_priced_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = run_json(
        capsys,
        "--step",
        "gpt-5-nano:1000:100",
        "--step",
        "claude-sonnet-4-5:1000:100",
        "--requests-per-day",
        "500",
    )
    inputs = data["inputs"]
    assert isinstance(inputs, dict)
    costs = [s["cost_usd"] for s in inputs["steps"]]
    assert costs == pytest.approx(
        [(1000 * 0.05 + 100 * 0.4) / 1e6, (3000 + 1500) / 1e6]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step", "gpt-5-mini:lots:1"], "MODEL:INPUT_TOKENS:OUTPUT_TOKENS"),
        (["--model", "no-such-model"], "'no-such-model' is unpriced"),
        (["--failure-rate", "1.5"], "failure rate per step must be in"),
        (["--steps", "0"], "--steps must be at least 1"),
    ],
)
def test_bad_input_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["cost-model", *args]) == 2  # a usage error
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@step
async def ask(i: int) -> str:
    current_run().record_usage(model="gpt-5-mini", input_tokens=3000, output_tokens=300)
    return f"answer {i}" * 20


@workflow(name="tests.cli.costmodel.flow")
async def ask_all(n: int) -> int:
    for i in range(n):
        await ask(i)
    return n


def test_from_store_derives_the_request_from_real_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def three_runs() -> None:
        async with Engine(url) as engine:
            for i in range(3):
                await engine.run(ask_all, 6, run_id=f"r-{i}")

    asyncio.run(three_runs())
    data = run_json(capsys, "--from-store", url, "--failure-rate", "0.05")
    observed = data["observed"]
    assert isinstance(observed, dict)
    assert observed["runs"] == 3
    assert observed["steps_per_run"] == 6
    assert observed["failure_rate"] == 0  # no interruptions in the journal
    inputs = data["inputs"]
    assert isinstance(inputs, dict)
    assert len(inputs["steps"]) == 6
    assert inputs["failure_rate"] == 0.05  # the flag wins over what was observed
    per_step = (3000 * 0.25 + 300 * 2.0) / 1e6
    assert inputs["steps"][0]["cost_usd"] == pytest.approx(per_step)
    assert main(["cost-model", "--from-store", url]) == 0
    assert "observed on 3 runs: 6.0 steps/run" in capsys.readouterr().out


def test_from_an_empty_store_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["gc", "--store", url]) == 0  # an empty store (reading makes none)
    capsys.readouterr()
    assert main(["cost-model", "--from-store", url]) == 2
    assert "no finished run with steps" in capsys.readouterr().err


def test_an_overhead_file_replaces_the_shipped_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "overhead.json"
    figures.write_text(
        json.dumps(
            {
                "sqlite": {
                    "us_per_step": 2000.0,
                    "bytes_per_step": 100,
                    "bytes_per_run": 50,
                    "writes_per_run": 3,
                    "writes_per_resume": 3,
                    "source": "a slow disk, measured by hand",
                }
            }
        )
    )
    data = run_json(capsys, "--overhead-file", str(figures), "--steps", "2")
    rates = data["rates"]
    assert isinstance(rates, list)
    assert rates[0]["added_latency_per_step_ms"] == 2.0
    assert (
        main(["cost-model", "--overhead-file", str(figures), "--store-kind", "redis"])
        == 2
    )
    assert "no measured overhead for store kind 'redis'" in capsys.readouterr().err

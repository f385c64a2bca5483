"""Workflows the test_cli_* modules run, named so the CLI (`--app`) finds them."""

from __future__ import annotations

from resumable import current_run, step, wait_for, workflow


@step
async def draft(topic: str) -> str:
    return f"a draft about {topic}"


@workflow(name="cli.quick")
async def quick(n: int) -> str:
    return await draft(f"number {n}")


@workflow(name="cli.approval")
async def approval(topic: str) -> str:
    text = await draft(topic)
    verdict = await wait_for("approval")
    return f"{text}: {verdict}"


@step
async def million_tokens(model: str) -> str:
    current_run().record_usage(
        model=model, provider="openai", input_tokens=1_000_000, output_tokens=0
    )
    return model


@workflow(name="cli.budgeted", budget_usd=1.0)
async def budgeted(model: str) -> str:
    await million_tokens(model)  # $2 at $2 a million: the next step is refused
    return await million_tokens(model)

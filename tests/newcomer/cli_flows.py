"""Workflows the test_cli_* modules run, named so the CLI (`--app`) finds them."""

from __future__ import annotations

from resumable import step, wait_for, workflow


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

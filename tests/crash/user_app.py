"""Workflows for tests/crash/test_crash_helper.py, imported by crash_test's children."""

from __future__ import annotations

import asyncio
from pathlib import Path

from resumable import current_run, step, workflow
from resumable.testing import record_effect


@step
async def charge(order: str, cents: int) -> str:
    record_effect(f"charge {order}")
    return f"charged {order} {cents}"


@step
async def email(order: str) -> str:
    record_effect("email")
    return f"mailed {order}"


@workflow(name="tests.crash.user.checkout")
async def checkout(orders: list[str]) -> list[str]:
    done = [await charge(order, 100 * (i + 1)) for i, order in enumerate(orders)]
    return [*done, await email(",".join(orders))]


@workflow(name="tests.crash.user.fan_out")
async def fan_out(n: int) -> list[str]:
    return list(await asyncio.gather(*(charge(f"o{i}", i) for i in range(n))))


@step
def sync_charge(order: str) -> str:
    record_effect("sync charge")
    return order.upper()


@workflow(name="tests.crash.user.sync")
def sync_checkout(orders: list[str]) -> list[str]:
    return [sync_charge(order) for order in orders]


@workflow(name="tests.crash.user.leaky")
async def leaky(order: str) -> str:
    record_effect("audit log")  # in the body: runs again on every resume
    return await charge(order, 1)


@step
async def idempotent_charge(order: str, marks: str) -> str:
    # the payment provider dedupes on the key: a second call with it does nothing
    marker = Path(marks) / current_run().idempotency_key.replace(":", "_")
    if not marker.exists():
        marker.write_text("charged")
        record_effect(f"charge {order}")
    return order


@workflow(name="tests.crash.user.idempotent")
async def idempotent(orders: list[str], marks: str) -> list[str]:
    return [await idempotent_charge(order, marks) for order in orders]


@step
async def note(i: int) -> int:
    return i


@workflow(name="tests.crash.user.drifting")
async def drifting(path: str) -> str:
    # a workflow that decides its step count from outside state: not deterministic
    runs = Path(path)
    seen = int(runs.read_text()) if runs.exists() else 0
    runs.write_text(str(seen + 1))
    for i in range(3 if seen == 0 else 1):
        await note(i)
    return "done"

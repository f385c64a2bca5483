"""The `fleet.job` workflow in code version $FLEET_VERSION ("1" or "2"), for worker
subprocesses (`resumable worker --app fleet --version N`).

Version 2 inserts `enrich` before the wait, so it cannot resume a version-1 run
that is waiting: only a version-1 worker may take those. Each step appends
`v<code version> <step> <n>` to $FLEET_LOG.
"""

from __future__ import annotations

import os

from resumable import step, wait_for, workflow

VERSION = os.environ.get("FLEET_VERSION", "1")
LOG = os.environ.get("FLEET_LOG", os.devnull)


def note(line: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"v{VERSION} {line}\n".encode())
    finally:
        os.close(fd)


@step(name="fleet.prepare")
async def prepare(n: int) -> int:
    note(f"prepare {n}")
    return n


@step(name="fleet.enrich")
async def enrich(n: int) -> int:
    note(f"enrich {n}")
    return n + 1000


@step(name="fleet.finish")
async def finish(n: int, go: str) -> str:
    note(f"finish {n}")
    return f"{go} {n}"


@workflow(name="fleet.job", version=VERSION)
async def job(n: int) -> str:
    value = await prepare(n)
    if VERSION == "2":
        value = await enrich(value)
    go = await wait_for("go")
    return await finish(value, go)
